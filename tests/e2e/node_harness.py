"""A whole ``calico node run`` inside a throwaway "host" network namespace.

Felix programs nftables and routes in whatever netns it runs in, so running the node with
``ip netns exec <host>`` keeps the real host untouched. Every path (state, logs, datastore, CNI
dirs) lives under the test's tmp dir. Workloads are made exactly as the demo makes them: the
product's ``calico.node.run.workloads`` in a child process that entered the host netns, which
runs the installed CNI plugin with ``CNI_*`` and the installed conflist.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import netns_support
import pytest
from netns_support import add_veth, delete_netns, ip, py_server

PY = sys.executable
BIN = Path(sys.executable).parent
CALICO = str(BIN / "calico")
CALICOCTL = str(BIN / "calicoctl")
NODE_IP = "10.99.0.1"


# Commands here default to a longer timeout and fail as test assertions.
_RUN_DEFAULTS: dict[str, Any] = {"timeout": 60, "error": AssertionError}


def run(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return netns_support.run(*args, **{**_RUN_DEFAULTS, **kw})


def in_ns(ns: str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return netns_support.in_ns(ns, *args, **{**_RUN_DEFAULTS, **kw})


def require_root() -> None:
    missing = [t for t in ("ip", "runsvdir", "sv", "nft") if shutil.which(t) is None]
    if os.geteuid() != 0 or missing:
        pytest.skip(f"needs root and {', '.join(missing) or 'iproute2/runit/nftables'}")


@contextlib.contextmanager
def host_netns() -> Iterator[str]:
    """A netns with an uplink and a default route: proxy-ARP answers workloads' gateway ARPs
    only when the host has a route to 169.254.1.1 elsewhere, as on a real machine."""
    with netns_support.netns("e2ehost", length=6) as name:
        add_veth("eth0", "eth0peer", ns=name)
        for cmd in (
            ("addr", "add", f"{NODE_IP}/24", "dev", "eth0"),
            ("link", "set", "eth0peer", "up"),
            ("link", "set", "eth0", "up"),
            ("route", "add", "default", "via", "10.99.0.254", "dev", "eth0"),
        ):
            ip(*cmd, ns=name)
        yield name


@dataclass
class Workload:
    namespace: str
    pod: str
    netns: str
    container_id: str
    ip: str = ""


class Node:
    """One ``calico node run`` (possibly started several times) and its files.

    By default a lone node on the local datastore at ``NODE_IP``; a cluster node passes its own
    ``run_args`` (the product's ``calico.node.cluster.nodes.run_argv``, same directory names
    under ``root``) and ``env`` (the cluster's mark and settings).
    """

    def __init__(
        self,
        host: str,
        root: Path,
        name: str = "e2enode",
        run_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.host = host
        self.root = root
        self.name = name
        self.run_args = run_args
        self.run_env = env
        self.state_dir = root / "state"
        self.log_dir = root / "log"
        self.cni_conf_dir = root / "net.d"
        self.cni_bin_dir = root / "cni-bin"
        self.datastore = root / "calico.db"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.workloads: list[Workload] = []

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DATASTORE_TYPE": "local",
            "CALICO_DATASTORE_PATH": str(self.datastore),
        }

    def output_path(self) -> Path:
        return self.root / f"node-run-{self.starts}.out"

    def start(self) -> None:
        self.starts += 1
        self.root.mkdir(parents=True, exist_ok=True)
        out = open(self.output_path(), "wb")  # noqa: SIM115 - handed to the child
        argv = self.run_args or [
            *(CALICO, "node", "run"),
            *("--name", self.name, "--ip", f"{NODE_IP}/24"),
            *("--state-dir", str(self.state_dir), "--log-dir", str(self.log_dir)),
            *("--datastore-path", str(self.datastore)),
            *("--cni-conf-dir", str(self.cni_conf_dir)),
            *("--cni-bin-dir", str(self.cni_bin_dir)),
        ]
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.host, *argv],
            env=self.run_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()

    def output(self) -> str:
        try:
            return self.output_path().read_text()
        except OSError:
            return ""

    def diagnostics(self) -> str:
        felix = self.log_dir / "felix" / "current"
        tail = felix.read_text()[-3000:] if felix.exists() else ""
        return f"--- node run output ---\n{self.output()}\n--- felix ---\n{tail}"

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"calico node run exited {self.proc.returncode}\n{self.diagnostics()}"
                )
            # Felix ready is what `calico node run` waits for; BIRD may still be restarting
            # until confd's first render lands (more so on a loaded machine), and
            # `calico node status` fails while any service is down. Ready means both.
            if "Calico node is running." in self.output() and self.services_up():
                return
            time.sleep(0.2)
        raise AssertionError(f"node not ready after {timeout}s\n{self.diagnostics()}")

    def services_up(self) -> bool:
        """`calico node status` succeeds: every runit service of the node is up."""
        return self.calico("node", "status", check=False).returncode == 0

    def calico(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return in_ns(self.host, CALICO, *args, "--state-dir", str(self.state_dir), check=check)

    def stop(self, cleanup: bool = False) -> subprocess.CompletedProcess[str]:
        res = self.calico("node", "stop", *(["--cleanup"] if cleanup else []))
        if self.proc is not None:
            self.proc.wait(timeout=30)
        return res

    def calicoctl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return run(CALICOCTL, *args, input=stdin, env=self.env)

    def marked_processes(self) -> list[int]:
        from calico.node.run.procs import marked_pids

        return marked_pids(self.state_dir.absolute())

    # -- workloads --------------------------------------------------------------------------

    def add_workload(self, namespace: str, pod: str) -> Workload:
        netns = f"e2e-{uuid.uuid4().hex[:6]}-{pod}"[:30]
        script = (
            "import json, sys\n"
            "from calico.node.run.layout import layout_for, load_settings\n"
            "from calico.node.run import workloads as wl\n"
            "wl.enter_netns(sys.argv[1])\n"
            "s = load_settings(layout_for(sys.argv[2]))\n"
            "ns, pod, netns = sys.argv[3:6]\n"
            "w = wl.add_workload(s, wl.Workload(ns, pod, netns, netns))\n"
            "print(json.dumps(w.to_json()))\n"
        )
        res = run(PY, "-c", script, self.host, str(self.state_dir), namespace, pod, netns)
        w = Workload(**json.loads(res.stdout))
        self.workloads.append(w)
        return w

    def teardown(self) -> None:
        """Whatever happened: stop with cleanup, kill leftovers, delete sandboxes."""
        from calico.node.run.procs import kill_leftovers

        with contextlib.suppress(Exception):
            self.calico("node", "stop", "--cleanup", check=False)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        kill_leftovers(self.state_dir.absolute(), grace=2.0)
        for w in self.workloads:
            pids = run("ip", "netns", "pids", w.netns, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            delete_netns(w.netns)


# --- traffic ---------------------------------------------------------------------------------

ECHO_SERVER = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1]))); s.listen(16)
print("ready", flush=True)
def echo(c):
    with c:
        while True:
            d = c.recv(100)
            if not d:
                return
            c.sendall(d)
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
"""

TCP_PROBE = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    c.sendall(b"hi"); print("ok" if c.recv(2) == b"hi" else "bad")
except OSError as e:
    print("fail", e)
"""

# One long-lived connection: a line per round trip, "dead" and exit when it breaks.
PINGER = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
n = 0
while True:
    try:
        c.sendall(b"p"); assert c.recv(1) == b"p"
    except (OSError, AssertionError) as e:
        print("dead", e, flush=True); sys.exit(1)
    n += 1
    print(n, time.time(), flush=True)
    time.sleep(0.1)
"""


def tcp_ok(client: Workload, server: Workload, port: int, timeout: float = 1.0) -> bool:
    res = in_ns(client.netns, PY, "-c", TCP_PROBE, server.ip, str(port), str(timeout), check=False)
    return res.stdout.strip() == "ok"


@contextlib.contextmanager
def echo_server(w: Workload, port: int) -> Iterator[subprocess.Popen[str]]:
    with py_server(w.netns, ECHO_SERVER, str(port), start_new_session=True) as proc:
        yield proc
