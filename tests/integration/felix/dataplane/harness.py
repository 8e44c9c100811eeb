"""Real-kernel harness for Felix: a "host" network namespace running ``calico component felix``
as a subprocess, workload namespaces wired to it by veths named ``cali<hash>``, and the
WorkloadEndpoint/Profile resources written to the same local datastore with the Client, as the
CNI plugin does. Traffic is real TCP/UDP/ICMP from python sockets run via ``ip netns exec``.

Everything created is torn down by the context managers' finally blocks (Felix killed,
namespaces deleted), also when a test fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import netns_support
from netns_support import PY, add_veth, in_ns, link_mac, probe, py_server, run, tcp_probe

from calico.api.io import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend

# re-exported for the tests, fixtures and the Felix benchmark
__all__ = ["PY", "in_ns", "run"]

CALICO = str(Path(sys.executable).parent / "calico")
HOSTNAME = "fxnode"  # no dashes: WEP names double them
POOL = "10.65.0.0/16"
POOL6 = "fd65::/64"


@contextlib.contextmanager
def netns(prefix: str) -> Iterator[str]:
    with netns_support.netns(prefix, length=6) as name:
        yield name


def free_port() -> int:
    """A port number that is free (ports are per netns; any unused number works there too)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(
    fn: Callable[[], Any], expect: Any, timeout: float = 15.0, pause: float = 0.2
) -> Any:
    """Poll ``fn`` until it returns ``expect``; raise with the last value otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last == expect:
            return last
        time.sleep(pause)
    raise AssertionError(f"expected {expect!r}, last got {last!r} after {timeout}s")


# --- datastore --------------------------------------------------------------------------------


class Datastore:
    """The same SQLite datastore Felix reads, written through the Client like the CNI plugin."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.backend = open_backend(DatastoreConfig(local_path=path))
        self.client = Client(self.backend)

    def apply(self, doc: dict[str, Any]) -> Any:
        doc = {"apiVersion": "projectcalico.org/v3", **doc}
        return self.client.apply(parse_resource(doc))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        with contextlib.suppress(Exception):
            self.client.delete(kind, name, namespace)

    def close(self) -> None:
        self.backend.close()


def namespace_profile(ds: Datastore, namespace: str) -> None:
    """What the k8s namespace controller writes: allow all, namespace label applied."""
    ds.apply(
        {
            "kind": "Profile",
            "metadata": {"name": f"kns.{namespace}"},
            "spec": {
                "ingress": [{"action": "Allow"}],
                "egress": [{"action": "Allow"}],
                "labelsToApply": {"projectcalico.org/name": namespace},
            },
        }
    )


# --- felix --------------------------------------------------------------------------------------


HTTP_GET = """
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=2)
    print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
except Exception as e:
    print(0); print(e)
"""


@dataclass
class Felix:
    host: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def log_path(self) -> Path:
        return self.workdir / f"felix-{self.starts}.log"

    def full_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("FELIX_")}
        env.update(
            {
                "FELIX_FELIXHOSTNAME": HOSTNAME,
                "FELIX_DATASTORETYPE": "local",
                "FELIX_CALICODATASTOREPATH": str(self.workdir / "calico.db"),
                "FELIX_HEALTHENABLED": "true",
                "FELIX_HEALTHPORT": str(self.health_port),
                "FELIX_PROMETHEUSMETRICSENABLED": "true",
                "FELIX_PROMETHEUSMETRICSPORT": str(self.metrics_port),
                "FELIX_NFTABLESREFRESHINTERVAL": "2",
                "FELIX_ROUTEREFRESHINTERVAL": "5",
                "FELIX_ENDPOINTSTATUSPATHPREFIX": str(self.workdir),
                "FELIX_MTUFILEPATH": str(self.workdir / "mtu"),  # not the host's file
                "FELIX_BPFPOLICYDEBUGDIR": str(self.workdir / "bpf-policy"),  # nor these
                "FELIX_LOGSEVERITYSCREEN": "info",
                "FELIX_REPORTINGINTERVALSECS": "2",
            }
        )
        env.update(self.env)
        return env

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        self.starts += 1
        log = open(self.log_path, "wb")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.host,
                CALICO,
                "component",
                "felix",
                "--config-file",
                str(self.workdir / "felix.cfg"),
            ],
            env=self.full_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        url = f"http://localhost:{port or self.health_port}{path}"
        out = netns_support.run_py(self.host, HTTP_GET, url, check=False).stdout
        code, _, body = out.partition("\n")
        return int(code or 0), body

    def ready(self) -> bool:
        return self.get("/readiness")[0] == 200

    def wait_ready(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"Felix exited rc={self.proc.returncode}:\n{self.log()}")
            if self.ready():
                return
            time.sleep(0.2)
        raise AssertionError(f"Felix not ready after {timeout}s:\n{self.log()}")

    def metrics(self) -> str:
        return self.get("/metrics", self.metrics_port)[1]

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait; returns the exit code (raises if it takes longer than ``timeout``)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            # ``ip netns exec`` execs the command, so the pid is Felix itself.
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-6000:]
        except OSError:
            return ""


# --- workloads ----------------------------------------------------------------------------------


@dataclass
class Workload:
    name: str
    ns: str  # its network namespace
    namespace: str  # the Kubernetes-style namespace
    iface: str  # host-side interface
    ip: str
    mac: str
    labels: dict[str, str]
    ip6: str = ""

    @property
    def wep_name(self) -> str:
        return f"{HOSTNAME}-k8s-{self.name}-eth0"


def iface_name(namespace: str, pod: str) -> str:
    """As the CNI plugin names it: ``cali`` + 11 hex chars of a hash of namespace.pod."""
    return "cali" + hashlib.sha1(f"{namespace}.{pod}".encode()).hexdigest()[:11]


def wep_doc(w: Workload, ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    labels = {
        **w.labels,
        "projectcalico.org/namespace": w.namespace,
        "projectcalico.org/orchestrator": "k8s",
    }
    nets = [f"{w.ip}/32"] + ([f"{w.ip6}/128"] if w.ip6 else [])
    spec: dict[str, Any] = {
        "orchestrator": "k8s",
        "workload": w.name,
        "pod": w.name,
        "node": HOSTNAME,
        "endpoint": "eth0",
        "interfaceName": w.iface,
        "ipNetworks": nets,
        "profiles": [f"kns.{w.namespace}"],
        "mac": w.mac,
    }
    if ports:
        spec["ports"] = ports
    return {
        "kind": "WorkloadEndpoint",
        "metadata": {"name": w.wep_name, "namespace": w.namespace, "labels": labels},
        "spec": spec,
    }


@contextlib.contextmanager
def workload(
    host: str,
    ds: Datastore | None,
    name: str,
    ip: str,
    *,
    namespace: str = "ns1",
    labels: dict[str, str] | None = None,
    ports: list[dict[str, Any]] | None = None,
    ip6: str = "",
) -> Iterator[Workload]:
    """A workload netns with eth0 <-> ``cali...`` in ``host``; its WEP written when ``ds``."""
    with netns(f"fxw-{name}") as ns:
        iface = iface_name(namespace, name)
        add_veth(iface, "eth0", ns=host, peer_ns=ns)
        in_ns(ns, "ip", "link", "set", "eth0", "up")
        in_ns(ns, "ip", "addr", "add", f"{ip}/32", "dev", "eth0")
        in_ns(ns, "ip", "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link")
        in_ns(ns, "ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
        if ip6:
            in_ns(ns, "ip", "-6", "addr", "add", f"{ip6}/128", "dev", "eth0", "nodad")
            in_ns(ns, "ip", "-6", "route", "add", "default", "dev", "eth0")
        in_ns(host, "ip", "link", "set", iface, "up")
        mac = link_mac(ns, "eth0")
        w = Workload(name, ns, namespace, iface, ip, mac, dict(labels or {}), ip6)
        if ds is not None:
            ds.apply(wep_doc(w, ports))
        try:
            yield w
        finally:
            if ds is not None:
                ds.delete("WorkloadEndpoint", w.wep_name, namespace)


EXTERNAL_IP = "192.0.2.254"  # "the internet": an outside netns behind the host's uplink
HOST_UPLINK_IP = "192.0.2.1"


def host_netns_setup(host: str, outside: str) -> None:
    """Uplink ``host`` <-> ``outside`` with a default route, so proxy-ARP answers workloads'
    gateway ARPs and NAT-outgoing can be observed from outside. ``outside`` has no route back
    to the pool: un-NATed workload traffic gets no replies, as on a real uplink."""
    add_veth("uplink0", "eth0", ns=host, peer_ns=outside)
    in_ns(host, "ip", "addr", "add", f"{HOST_UPLINK_IP}/24", "dev", "uplink0")
    in_ns(host, "ip", "link", "set", "uplink0", "up")
    in_ns(host, "ip", "route", "add", "default", "via", EXTERNAL_IP, "dev", "uplink0")
    in_ns(outside, "ip", "addr", "add", f"{EXTERNAL_IP}/24", "dev", "eth0")
    in_ns(outside, "ip", "link", "set", "eth0", "up")


# --- traffic ------------------------------------------------------------------------------------

SERVER = """
import socket, sys, threading
def tcp(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port)); s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=echo, args=(c,), daemon=True).start()
def echo(c):
    c.sendall(b"hi")
    if PEER: c.sendall(c.getpeername()[0].encode())
    try:
        while True:
            d = c.recv(100)
            if not d: break
            c.sendall(d)
    except OSError: pass
    c.close()
def udp(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("", port))
    while True:
        d, a = s.recvfrom(100); s.sendto(d, a)
PEER = "peer" in sys.argv
for p in sys.argv[1:]:
    if p == "peer": continue
    kind, port = p.split(":")
    threading.Thread(target=tcp if kind == "tcp" else udp, args=(int(port),), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

UDP_PROBE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(float(sys.argv[3]))
try:
    s.sendto(b"ping", (sys.argv[1], int(sys.argv[2])))
    print("ok" if s.recvfrom(100)[0] == b"ping" else "bad")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error", e.errno)
"""

ICMP_PROBE = """
import socket, struct, sys, time
dst, icmp_type, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def csum(b):
    if len(b) % 2: b += b"\\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(timeout)
hdr = struct.pack("!BBHHH", icmp_type, 0, 0, 0x1234, 1) + b"probe"
s.sendto(struct.pack("!BBHHH", icmp_type, 0, csum(hdr), 0x1234, 1) + b"probe", (dst, 0))
want = 0 if icmp_type == 8 else 14 if icmp_type == 13 else None
end = time.time() + timeout
try:
    while time.time() < end:
        data, addr = s.recvfrom(2048)
        t = data[(data[0] & 0xf) * 4]
        if addr[0] == dst and t == want:
            print("ok"); break
    else:
        print("timeout")
except socket.timeout:
    print("timeout")
"""


@contextlib.contextmanager
def servers(w: Workload | str, *specs: str) -> Iterator[None]:
    """Echo servers in ``w`` (or a netns): specs like ``tcp:8080``, ``udp:5353``; ``peer``
    makes TCP servers also send the client's address after the greeting."""
    with py_server(w if isinstance(w, str) else w.ns, SERVER, *specs):
        yield


def tcp(src: Workload | str, dst: str, port: int, timeout: float = 0.6) -> str:
    return tcp_probe(src if isinstance(src, str) else src.ns, dst, port, timeout)


def udp(src: Workload, dst: str, port: int, timeout: float = 0.6) -> str:
    return probe(src.ns, UDP_PROBE, dst, port, timeout)


def icmp(src: Workload, dst: str, icmp_type: int = 8, timeout: float = 0.6) -> str:
    return probe(src.ns, ICMP_PROBE, dst, icmp_type, timeout)


SOURCE_PROBE = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    c.recv(2); print(c.recv(64).decode())
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error", e.errno)
"""


def seen_source(src: Workload, dst: str, port: int, timeout: float = 0.6) -> str:
    """The source address a ``peer`` server at ``dst`` saw (or timeout/error)."""
    return probe(src.ns, SOURCE_PROBE, dst, port, timeout)


PERSISTENT_CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
assert c.recv(2) == b"hi"
print("connected", flush=True)
for line in sys.stdin:
    try:
        c.sendall(line.strip().encode()); print(c.recv(100).decode(), flush=True)
    except OSError as e:
        print("error", e, flush=True)
"""


class PersistentConnection:
    """One long-lived TCP connection from ``src``; ``echo(x)`` round-trips over it."""

    def __init__(self, src: Workload, dst: str, port: int) -> None:
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", src.ns, PY, "-c", PERSISTENT_CLIENT, dst, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "connected":
            raise AssertionError(f"persistent connection failed: {line!r}")

    def echo(self, text: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def nft_table(host: str) -> list[dict[str, Any]]:
    proc = in_ns(host, "nft", "-j", "list", "table", "inet", "calico", check=False)
    if proc.returncode != 0:
        return []
    return [o for o in json.loads(proc.stdout)["nftables"] if "metainfo" not in o]
