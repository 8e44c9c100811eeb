"""End to end with a real runtime: podman (CNI backend, runc) runs containers on the calico
network; they reach each other, and with Felix running a GlobalNetworkPolicy applied through
calicoctl blocks one of them.

Everything podman keeps (storage, run state, config, network config) lives in a temporary
directory; the containers' veths and routes are on the real host, as a node's would be.
Skipped unless podman, runc and busybox-static are installed (scripts/setup-system.sh).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from calico.cli.components import COMPONENTS
from calico.cni.install import InstallOptions, install

pytestmark = pytest.mark.root

POOL = "10.213.0.0/24"
NETWORK = "calipm"
NODE = "pmnode"
IMAGE = "localhost/calico-test-bb:latest"


def _missing() -> str:
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("podman", "runc", "nft"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    if not Path("/bin/busybox").exists():
        return "busybox-static is not installed"
    return ""


class Podman:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "containers.conf"
        self.netd = root / "net.d"
        self.bin = root / "bin"
        self.db = root / "calico.db"
        self.conf.write_text(
            "[containers]\n"
            'default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n'
            "[network]\n"
            'network_backend = "cni"\n'
            f'cni_plugin_dirs = ["{self.bin}", "/usr/lib/cni"]\n'
            f'network_config_dir = "{self.netd}"\n'
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
        )

    def __call__(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        cmd = ["podman", "--root", str(self.root / "storage"), "--runroot",
               str(self.root / "run"), "--storage-driver", "vfs", *args]  # fmt: skip
        env = dict(os.environ, CONTAINERS_CONF=str(self.conf))
        env.pop("CNI_COMMAND", None)
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {res.stdout}{res.stderr}")
        return res.stdout.strip()

    def build_image(self) -> None:
        rootfs = self.root / "rootfs"
        for d in ("bin", "etc", "tmp", "proc", "sys", "dev"):
            (rootfs / d).mkdir(parents=True, exist_ok=True)
        shutil.copy("/bin/busybox", rootfs / "bin" / "busybox")
        applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True)
        for applet in applets.stdout.split():
            if applet != "busybox":
                (rootfs / "bin" / applet).symlink_to("busybox")
        (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/:/bin/sh\n")
        (rootfs / "etc" / "group").write_text("root:x:0:\n")
        tar = self.root / "rootfs.tar"
        with tarfile.open(tar, "w") as tf:
            tf.add(rootfs, arcname=".")
        self("import", str(tar), IMAGE)

    def ip_of(self, name: str) -> str:
        fmt = '{{(index .NetworkSettings.Networks "' + NETWORK + '").IPAddress}}'
        return self("inspect", name, "--format", fmt)

    def fetch(self, client: str, ip: str) -> str:
        res = self("exec", client, "nc", "-w", "2", ip, "9000", check=False, timeout=30)
        return res


def _calico(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    calico = str(Path(sys.executable).parent / "calico")
    full = dict(os.environ, **(env or {}))
    full.pop("CNI_COMMAND", None)
    return subprocess.run([calico, *args], capture_output=True, text=True, env=full, timeout=60)


@pytest.fixture
def podman() -> Iterator[Podman]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    # podman refuses a runroot path longer than 50 characters: keep the root short.
    tmp_path = Path(tempfile.mkdtemp(prefix="cpm-", dir="/tmp"))
    pm = Podman(tmp_path)
    pm.build_image()
    from calico.api.ipam import IPPool
    from calico.datastore.client import Client
    from calico.datastore.config import DatastoreConfig
    from calico.datastore.factory import open_backend

    client = Client(open_backend(DatastoreConfig(local_path=str(pm.db))))
    client.create(IPPool.model_validate({"metadata": {"name": "pm"}, "spec": {"cidr": POOL}}))
    client.backend.close()
    install(
        InstallOptions(
            conf_dir=str(pm.netd), bin_dir=str(pm.bin), datastore_path=str(pm.db),
            nodename=NODE, network_name=NETWORK, log_file_path=str(tmp_path / "cni.log"),
            python=sys.executable,
        )
    )  # fmt: skip
    try:
        yield pm
    finally:
        pm("rm", "-f", "-a", "-t", "0", check=False)
        pm("rmi", "-a", "-f", check=False)
        shutil.rmtree(tmp_path, ignore_errors=True)


def _until(predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_podman_containers_reach_each_other_and_policy_blocks(podman: Podman) -> None:
    pm = podman
    pm("run", "-d", "--name", "pa", "--network", NETWORK, IMAGE, "sh", "-c",
       "while true; do echo hello-from-a | nc -l -p 9000; done")  # fmt: skip
    pm("run", "-d", "--name", "pb", "--network", NETWORK, IMAGE, "sleep", "600")
    ip_a, ip_b = pm.ip_of("pa"), pm.ip_of("pb")
    assert ip_a != ip_b and ip_a.startswith("10.213.0.") and ip_b.startswith("10.213.0.")
    assert _until(lambda: "hello-from-a" in pm.fetch("pb", ip_a), 10)

    ds_env = {"CALICO_DATASTORE_PATH": str(pm.db)}
    weps = _calico("ctl", "get", "workloadendpoints", "-A", "-o", "wide", env=ds_env)
    assert weps.returncode == 0 and f"{ip_a}/32" in weps.stdout and f"{ip_b}/32" in weps.stdout

    if "felix" in COMPONENTS:
        _policy_with_felix(pm, ip_a, ip_b, ds_env)

    pm("rm", "-f", "-t", "0", "pa", "pb")
    weps = _calico("ctl", "get", "workloadendpoints", "-A", env=ds_env)
    assert ip_a not in weps.stdout and ip_b not in weps.stdout
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    assert ip_a not in routes and ip_b not in routes


def _policy_with_felix(pm: Podman, ip_a: str, ip_b: str, ds_env: dict[str, str]) -> None:
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    if "inet calico" in tables:
        pytest.skip("another Felix already programs this host")
    felix_log = pm.root / "felix.log"
    env = dict(
        os.environ,
        FELIX_DATASTORETYPE="local",
        FELIX_CALICODATASTOREPATH=str(pm.db),
        FELIX_FELIXHOSTNAME=NODE,
        FELIX_ENDPOINTSTATUSPATHPREFIX=str(pm.root / "status"),
        FELIX_LOGSEVERITYSCREEN="info",
        FELIX_HEALTHENABLED="false",
    )
    env.pop("CNI_COMMAND", None)
    calico = str(Path(sys.executable).parent / "calico")
    with open(felix_log, "w") as log:
        felix = subprocess.Popen([calico, "component", "felix"], stdout=log, stderr=log, env=env,
                                 start_new_session=True)  # fmt: skip
    try:
        assert _until(lambda: "Dataplane in sync" in felix_log.read_text(), 60), (
            felix_log.read_text()[-3000:]
        )
        # Felix reports both endpoints programmed, in the files the CNI plugin waits for.
        status = pm.root / "status" / "endpoint-status"
        assert _until(lambda: status.is_dir() and len(list(status.iterdir())) == 2, 20)
        assert "hello-from-a" in pm.fetch("pb", ip_a)

        policy = pm.root / "deny-b.yaml"
        policy.write_text(
            "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\n"
            "metadata:\n  name: deny-from-b\n"
            "spec:\n  selector: all()\n  order: 10\n"
            f'  ingress:\n  - action: Deny\n    source:\n      nets: ["{ip_b}/32"]\n'
        )
        applied = _calico("ctl", "apply", "-f", str(policy), env=ds_env)
        assert applied.returncode == 0, applied.stderr
        assert _until(lambda: "hello-from-a" not in pm.fetch("pb", ip_a), 20), "not blocked"
        assert _calico("ctl", "delete", "globalnetworkpolicy", "deny-from-b",
                       env=ds_env).returncode == 0  # fmt: skip
        assert _until(lambda: "hello-from-a" in pm.fetch("pb", ip_a), 20), "not unblocked"
    finally:
        os.killpg(felix.pid, signal.SIGTERM)
        try:
            felix.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(felix.pid, signal.SIGKILL)
            felix.wait()
        subprocess.run(["nft", "delete", "table", "inet", "calico"], capture_output=True)
