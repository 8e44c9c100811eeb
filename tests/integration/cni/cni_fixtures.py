"""Fixtures for running the CNI plugins as a runtime does: CNI_* env + netconf on stdin.

Each test gets its own "host" network namespace (the plugin runs inside it through
``ip netns exec``), so veths, routes and sysctls never touch the real host, plus workload
namespaces and a fresh local datastore with one IP pool.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from netns_support import add_netns, delete_netns, in_ns, unique_name
from netns_support import ip as _ip

from calico.cni.install import InstallOptions, install

POOL_V4 = "10.77.0.0/24"
POOL_V6 = "fd77::/120"


@dataclass
class Plugin:
    """One result of running a plugin binary."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        return json.loads(self.stdout)


@dataclass
class CNIWorld:
    tmp: Path
    host_ns: str
    bin_dir: Path
    datastore: Path
    node: str = "node1"
    namespaces: list[str] = field(default_factory=list)

    # -- namespaces ------------------------------------------------------------------------

    def workload_ns(self) -> str:
        name = unique_name("cniwl", 10)
        add_netns(name)
        self.namespaces.append(name)
        return name

    def host_ip(self, *args: str, check: bool = True) -> str:
        return _ip(*args, ns=self.host_ns, check=check)

    def ns_ip(self, ns: str, *args: str, check: bool = True) -> str:
        return _ip(*args, ns=ns, check=check)

    def host_sysctl(self, path: str) -> str:
        return self.in_ns(self.host_ns, ["cat", f"/proc/sys/{path}"]).strip()

    def in_ns(self, ns: str, argv: list[str], timeout: float = 10) -> str:
        res = in_ns(ns, *argv, timeout=timeout, check=False)
        assert res.returncode == 0, res.stderr
        return res.stdout

    # -- netconf and invocation ------------------------------------------------------------

    def netconf(self, **overrides: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "cniVersion": "1.0.0",
            "name": "testnet",
            "type": "calico",
            "nodename": self.node,
            "datastore_type": "local",
            "datastore_path": str(self.datastore),
            "ipam_lock_file": str(self.tmp / "ipam.lock"),
            "log_level": "debug",
            "ipam": {"type": "calico-ipam"},
        }
        conf.update(overrides)
        return conf

    def env(self, command: str, container_id: str, netns: str | None, **extra: str) -> dict:
        env = {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": container_id,
            "CNI_NETNS": f"/run/netns/{netns}" if netns else "",
            "CNI_IFNAME": "eth0",
            "CNI_PATH": str(self.bin_dir),
            "CNI_ARGS": "IgnoreUnknown=1",
        }
        env.update(extra)
        return env

    def run(
        self,
        binary: str,
        env: dict[str, str],
        stdin: str | bytes | dict[str, Any],
        timeout: float = 60,
    ) -> Plugin:
        data = json.dumps(stdin) if isinstance(stdin, dict) else stdin
        res = subprocess.run(
            ["ip", "netns", "exec", self.host_ns, str(self.bin_dir / binary)],
            input=data.encode() if isinstance(data, str) else data,
            capture_output=True,
            env=env,
            timeout=timeout,
        )
        return Plugin(res.returncode, res.stdout.decode(), res.stderr.decode())

    def add(self, cid: str, ns: str, conf: dict | None = None, **extra: str) -> Plugin:
        return self.run("calico", self.env("ADD", cid, ns, **extra), conf or self.netconf())

    def delete(self, cid: str, ns: str | None, conf: dict | None = None, **extra: str) -> Plugin:
        return self.run("calico", self.env("DEL", cid, ns, **extra), conf or self.netconf())

    def check(self, cid: str, ns: str, conf: dict | None = None, **extra: str) -> Plugin:
        return self.run("calico", self.env("CHECK", cid, ns, **extra), conf or self.netconf())

    # -- datastore -------------------------------------------------------------------------

    def client(self) -> Any:
        from calico.datastore.client import Client
        from calico.datastore.config import DatastoreConfig
        from calico.datastore.factory import open_backend

        return Client(open_backend(DatastoreConfig(local_path=str(self.datastore))))

    def with_client(self, fn: Callable[[Any], Any]) -> Any:
        client = self.client()
        try:
            return fn(client)
        finally:
            client.backend.close()

    def add_pool(self, name: str, cidr: str, block_size: int | None = None) -> None:
        from calico.api.ipam import IPPool

        spec: dict[str, Any] = {"cidr": cidr}
        if block_size:
            spec["blockSize"] = block_size
        pool = IPPool.model_validate({"metadata": {"name": name}, "spec": spec})
        self.with_client(lambda c: c.create(pool))

    def handle_ips(self, handle: str) -> list[str]:
        from calico.datastore.errors import ResourceDoesNotExistError
        from calico.ipam import IPAMClient

        def get(c: Any) -> list[str]:
            try:
                return IPAMClient(c).ips_by_handle(handle)
            except ResourceDoesNotExistError:
                return []

        return self.with_client(get)

    def in_use(self) -> int:
        """How many addresses are allocated across all blocks."""
        from calico.ipam import get_utilization

        return self.with_client(lambda c: sum(p.in_use for p in get_utilization(c)))

    def weps(self) -> list[Any]:
        return self.with_client(lambda c: list(c.list("WorkloadEndpoint").items))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[CNIWorld]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    host_ns = unique_name("cnihost", 10)
    w = CNIWorld(tmp_path, host_ns, tmp_path / "bin", tmp_path / "calico.db")
    add_netns(host_ns)
    try:
        _ip("link", "set", "lo", "up", ns=host_ns)
        # A node has a default route; proxy ARP needs a route for 169.254.1.1 elsewhere.
        _ip("route", "add", "default", "dev", "lo", ns=host_ns)
        install(
            InstallOptions(
                conf_dir=str(tmp_path / "net.d"),
                bin_dir=str(w.bin_dir),
                python=sys.executable,
                nodename=w.node,
            )
        )
        w.add_pool("pool4", POOL_V4)
        yield w
    finally:
        for ns in w.namespaces:
            delete_netns(ns)
        delete_netns(host_ns)
