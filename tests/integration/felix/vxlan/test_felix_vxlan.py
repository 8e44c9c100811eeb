"""Two real Felixes (``calico component felix``, one per node namespace) against one embedded
datastore: Nodes, a VXLAN pool, IPAM blocks, tunnel addresses from ``allocate-tunnel-addrs``'s
pass and WorkloadEndpoints are all the calc graph sees; everything in the kernel is Felix's."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import netns_support as nss
import pytest
from vxlan_topology import HOST_MAC, Node, ping, seen_source, tcp_server, two_nodes

from calico.api.io import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend
from calico.ipam import IPAMClient
from calico.node.tunnel_addrs import reconcile

pytestmark = pytest.mark.root

CALICO = str(Path(sys.executable).parent / "calico")
NAMES = ("vxnodea", "vxnodeb")  # no dashes: WEP names double them
OUTSIDE_IP = "192.0.2.254"
UPLINK_IP = "192.0.2.1"


def eventually(fn: Callable[[], Any], expect: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = fn()
        if value == expect:
            return value
        time.sleep(0.1)
    raise AssertionError(f"expected {expect!r}, last saw {value!r}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    a: Node
    b: Node
    client: Client
    db: str
    workdir: Path
    outside: str
    felixes: dict[str, subprocess.Popen[bytes]]

    def apply(self, doc: dict[str, Any]) -> Any:
        return self.client.apply(parse_resource({"apiVersion": "projectcalico.org/v3", **doc}))

    def log(self, node: Node) -> str:
        return (self.workdir / f"{node.name}.log").read_text(errors="replace")[-5000:]


def node_doc(node: Node) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": node.name},
        "spec": {"bgp": {"ipv4Address": f"{node.ip}/24", "ipv6Address": f"{node.ip6}/64"}},
    }


def wep_doc(node: Node, mac: str) -> dict[str, Any]:
    return {
        "kind": "WorkloadEndpoint",
        "metadata": {
            "name": f"{node.name}-k8s-pod-eth0",
            "namespace": "ns1",
            "labels": {
                "projectcalico.org/namespace": "ns1",
                "projectcalico.org/orchestrator": "k8s",
            },
        },
        "spec": {
            "orchestrator": "k8s",
            "workload": "pod",
            "pod": "pod",
            "node": node.name,
            "endpoint": "eth0",
            "interfaceName": "cali0pod",
            "ipNetworks": [f"{node.pod_ip}/32", f"{node.pod_ip6}/128"],
            "profiles": ["kns.ns1"],
            "mac": mac,
        },
    }


def start_felix(c: Cluster, node: Node) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("FELIX_")}
    env.update(
        {
            "FELIX_FELIXHOSTNAME": node.name,
            "FELIX_DATASTORETYPE": "local",
            "FELIX_CALICODATASTOREPATH": c.db,
            "FELIX_HEALTHENABLED": "true",
            "FELIX_HEALTHPORT": str(free_port()),
            "FELIX_ROUTEREFRESHINTERVAL": "2",
            "FELIX_ENDPOINTSTATUSPATHPREFIX": str(c.workdir / node.name),
            "FELIX_MTUFILEPATH": str(c.workdir / node.name / "mtu"),
            "FELIX_MTUIFACEPATTERN": "^eth0$",
            "FELIX_REPORTINGINTERVALSECS": "0",
        }
    )
    log = open(c.workdir / f"{node.name}.log", "ab")  # noqa: SIM115 - owned by the child
    c.felixes[node.name] = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            node.ns,
            CALICO,
            "component",
            "felix",
            "--config-file",
            str(c.workdir / "none.cfg"),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()


def stop_felix(c: Cluster, node: Node) -> None:
    proc = c.felixes.pop(node.name, None)
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextmanager
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    with two_nodes("vf", NAMES) as (a, b), nss.netns("vfout") as outside, ExitStack() as stack:
        # Node a's uplink to "the outside world", which has no route back to the pools.
        nss.add_veth("uplink0", "eth0", ns=a.ns, peer_ns=outside)
        nss.ip("addr", "add", f"{UPLINK_IP}/24", "dev", "uplink0", ns=a.ns)
        nss.ip("link", "set", "uplink0", "up", ns=a.ns)
        nss.ip("route", "replace", "default", "via", OUTSIDE_IP, ns=a.ns)
        nss.ip("addr", "add", f"{OUTSIDE_IP}/24", "dev", "eth0", ns=outside)
        nss.ip("link", "set", "eth0", "up", ns=outside)
        db = str(tmp_path / "calico.db")
        backend = open_backend(DatastoreConfig(local_path=db))
        stack.callback(backend.close)
        c = Cluster(a, b, Client(backend), db, tmp_path, outside, {})
        for node in (a, b):
            (tmp_path / node.name).mkdir()
        stack.callback(lambda: [stop_felix(c, n) for n in (a, b)])
        c.apply(
            {
                "kind": "Profile",
                "metadata": {"name": "kns.ns1"},
                "spec": {"ingress": [{"action": "Allow"}], "egress": [{"action": "Allow"}]},
            }
        )
        c.apply(
            {
                "kind": "IPPool",
                "metadata": {"name": "vx4"},
                "spec": {
                    "cidr": "10.244.0.0/16",
                    "blockSize": 26,
                    "vxlanMode": "Always",
                    "natOutgoing": True,
                },
            }
        )
        c.apply(
            {
                "kind": "IPPool",
                "metadata": {"name": "vx6"},
                "spec": {"cidr": "fd10::/16", "blockSize": 122, "vxlanMode": "Always"},
            }
        )
        ipam = IPAMClient(c.client)
        for node in (a, b):
            c.apply(node_doc(node))
            for ip in (node.pod_ip, node.pod_ip6):  # claims the node's blocks, as CNI would
                ipam.assign_ip(ip, f"pod-{node.name}", {"node": node.name}, node.name)
            reconcile(c.client, node.name)  # allocate-tunnel-addrs --run-once
            pod_mac = nss.link_mac(node.pod_ns, "eth0")
            c.apply(wep_doc(node, pod_mac))
            start_felix(c, node)
        yield c


@pytest.fixture
def vxc(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path) as c:
        for node in (c.a, c.b):
            eventually(
                lambda n=node: ping(c.a.pod_ns if n is c.b else c.b.pod_ns, n.pod_ip, wait=0.5),
                True,
                timeout=40,
            )
        yield c


def tunnel_ip(c: Cluster, node: Node) -> str:
    return c.client.get("Node", node.name).spec.ipv4_vxlan_tunnel_addr


def test_overlay_pod_to_pod_v4_v6_tcp_and_mtu_file(vxc):
    c = vxc
    for src, dst in ((c.a, c.b), (c.b, c.a)):
        assert ping(src.pod_ns, dst.pod_ip6)
        for addr in (dst.pod_ip, dst.pod_ip6):
            with tcp_server(dst.pod_ns, addr) as port:
                assert nss.tcp_probe(src.pod_ns, addr, port, 3.0) == "ok"
    # Pod MTU = min over the enabled encaps: VXLAN v4 1450, v6 1430 (host eth0 1500).
    assert (c.workdir / c.a.name / "mtu").read_text() == "1430"
    link = nss.ip("-d", "link", "show", "vxlan.calico", ns=c.a.ns)
    assert "vxlan id 4096" in link and "mtu 1450" in link and "dstport 4789" in link
    assert "mtu 1430" in nss.ip("link", "show", "vxlan-v6.calico", ns=c.a.ns)
    route = nss.ip("route", "show", "10.244.2.0/26", ns=c.a.ns).strip()
    assert route == f"10.244.2.0/26 via {tunnel_ip(c, c.b)} dev vxlan.calico onlink mtu 1450"
    # VXLAN is open only to the peers' node IPs (the overlay above works through that rule).
    allowed = nss.in_ns(c.a.ns, "nft", "list", "set", "inet", "calico", "cali40all-vxlan-net")
    assert c.b.ip in allowed.stdout and c.a.ip not in allowed.stdout
    allowed6 = nss.in_ns(c.a.ns, "nft", "list", "set", "inet", "calico", "cali60all-vxlan-net")
    assert c.b.ip6 in allowed6.stdout
    assert HOST_MAC  # the pods' gateway MAC is the CNI plugin's


def test_nat_outgoing_masquerades_only_traffic_leaving_the_pools(vxc):
    c = vxc
    with tcp_server(c.b.pod_ns, c.b.pod_ip) as port:
        assert seen_source(c.a.pod_ns, c.b.pod_ip, port) == c.a.pod_ip  # pod -> pod: not NATed
    with tcp_server(c.outside, OUTSIDE_IP) as port:
        assert seen_source(c.a.pod_ns, OUTSIDE_IP, port) == UPLINK_IP  # leaves the pools: NATed


def test_hand_made_drift_is_repaired_within_the_refresh_interval(vxc):
    c = vxc
    b_tunnel = tunnel_ip(c, c.b)
    b_mac = c.client.get("Node", c.b.name).spec.vxlan_tunnel_mac_addr
    nss.ip("route", "del", "10.244.2.0/26", ns=c.a.ns)
    nss.run("bridge", "-n", c.a.ns, "fdb", "del", b_mac, "dev", "vxlan.calico")
    start = time.monotonic()
    eventually(
        lambda: nss.ip("route", "show", "10.244.2.0/26", ns=c.a.ns).strip() != "", True, timeout=5
    )
    eventually(
        lambda: (
            b_mac in nss.run("bridge", "-n", c.a.ns, "fdb", "show", "dev", "vxlan.calico").stdout
        ),
        True,
        timeout=5,
    )
    assert time.monotonic() - start < 2 * 1.1 + 1.0  # RouteRefreshInterval 2 s (+10% jitter)
    assert b_tunnel in nss.ip("route", "show", "10.244.2.0/26", ns=c.a.ns)
    assert ping(c.a.pod_ns, c.b.pod_ip)


def test_deleting_a_node_removes_its_entries_on_the_other(vxc):
    c = vxc
    stop_felix(c, c.b)
    c.client.delete("Node", c.b.name)

    def b_entries() -> tuple[str, str, str]:
        return (
            nss.ip("route", "show", "10.244.2.0/26", ns=c.a.ns).strip(),
            nss.ip("neigh", "show", "dev", "vxlan.calico", ns=c.a.ns).strip(),
            nss.ip("-6", "neigh", "show", "dev", "vxlan-v6.calico", ns=c.a.ns).strip(),
        )

    eventually(b_entries, ("", "", ""))
    allowed = nss.in_ns(c.a.ns, "nft", "list", "set", "inet", "calico", "cali40all-vxlan-net")
    assert c.b.ip not in allowed.stdout
    fdb = nss.run("bridge", "-n", c.a.ns, "fdb", "show", "dev", "vxlan.calico").stdout
    assert "dst" not in fdb
    assert "blackhole 10.244.1.0/26" in nss.ip("route", ns=c.a.ns)  # own block stays


ECHO_SERVER = """
import socket, sys, threading
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 0))
s.listen(4)
print("ready", flush=True)
print(s.getsockname()[1], flush=True)
def serve(c):
    while data := c.recv(100):
        c.sendall(data)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
"""

CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
print("connected", flush=True)
for line in sys.stdin:
    try:
        c.sendall(line.strip().encode()); print(c.recv(100).decode(), flush=True)
    except OSError as e:
        print("error", e, flush=True)
"""


def test_felix_restart_keeps_established_cross_node_connections(vxc):
    c = vxc
    with nss.py_server(c.b.pod_ns, ECHO_SERVER, c.b.pod_ip) as server:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        client = subprocess.Popen(
            ["ip", "netns", "exec", c.a.pod_ns, sys.executable, "-c", CLIENT, c.b.pod_ip, port],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert client.stdout is not None and client.stdin is not None
            assert client.stdout.readline().strip() == "connected"

            def echo(text: str) -> str:
                client.stdin.write(text + "\n")
                client.stdin.flush()
                return client.stdout.readline().strip()

            assert echo("before") == "before"
            ifindex = nss.ip("-o", "link", "show", "vxlan.calico", ns=c.a.ns).split(":")[0]
            stop_felix(c, c.a)
            assert echo("while-down") == "while-down"  # the kernel state stays programmed
            start_felix(c, c.a)
            log = c.workdir / f"{c.a.name}.log"
            eventually(lambda: log.read_text().count("Dataplane in sync ("), 2, timeout=40)
            assert echo("after") == "after"
            # The device was reused, not recreated.
            assert nss.ip("-o", "link", "show", "vxlan.calico", ns=c.a.ns).split(":")[0] == ifindex
        finally:
            client.kill()
            client.wait(timeout=5)
