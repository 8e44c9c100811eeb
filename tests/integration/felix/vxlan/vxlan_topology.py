"""Two "nodes" (network namespaces) on one veth underlay, each with a pod namespace behind a
``cali*`` veth, for the VXLAN manager's kernel tests and benchmark.

Node n (1, 2): underlay ``eth0`` 10.0.0.n/24 and fd00::n/64; pod 10.244.n.5 / fd10:n::5 on
a veth whose host end has upstream's MAC ee:ee:ee:ee:ee:ee (the pod's gateways are
169.254.1.1 by proxy ARP and that MAC's link-local address), routes to the pod as the CNI
plugin makes them. VXLAN is then the manager's job.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import netns_support as nss

from calico.felix.messages import (
    IPPoolType,
    RouteType,
    RouteUpdate,
    VXLANTunnelEndpointUpdate,
)

HOST_MAC = "ee:ee:ee:ee:ee:ee"
HOST_LL = "fe80::ecee:eeff:feee:eeee"


@dataclass
class Node:
    name: str  # the Calico node name
    ns: str  # its network namespace
    pod_ns: str
    n: int

    @property
    def ip(self) -> str:
        return f"10.0.0.{self.n}"

    @property
    def ip6(self) -> str:
        return f"fd00::{self.n}"

    @property
    def pod_ip(self) -> str:
        return f"10.244.{self.n}.5"

    @property
    def pod_ip6(self) -> str:
        return f"fd10:{self.n}::5"

    @property
    def tunnel_ip(self) -> str:
        return f"10.244.{self.n}.0"

    @property
    def tunnel_ip6(self) -> str:
        return f"fd10:{self.n}::"

    @property
    def block(self) -> str:
        return f"10.244.{self.n}.0/26"

    @property
    def block6(self) -> str:
        return f"fd10:{self.n}::/122"

    def vtep(self, *, mac: str = "", mac_v6: str = "") -> VXLANTunnelEndpointUpdate:
        return VXLANTunnelEndpointUpdate(
            node=self.name,
            mac=mac or f"66:00:00:00:00:{self.n:02x}",
            ipv4_addr=self.tunnel_ip,
            parent_device_ip=self.ip,
            mac_v6=mac_v6 or f"66:00:00:00:06:{self.n:02x}",
            ipv6_addr=self.tunnel_ip6,
            parent_device_ipv6=self.ip6,
        )


def block_route(owner: Node, viewer: Node, *, v6: bool = False, same_subnet: bool = False):
    """The calc graph's route for ``owner``'s block as ``viewer`` sees it."""
    local = owner.name == viewer.name
    return RouteUpdate(
        dst=owner.block6 if v6 else owner.block,
        types=frozenset({RouteType.LOCAL_WORKLOAD if local else RouteType.REMOTE_WORKLOAD}),
        ip_pool_type=IPPoolType.VXLAN,
        dst_node_name=owner.name,
        dst_node_ip=owner.ip6 if v6 else owner.ip,
        same_subnet=same_subnet and not local,
    )


def sysctl(ns: str, *settings: str) -> None:
    nss.in_ns(ns, "sysctl", "-q", "-w", *settings)


@contextlib.contextmanager
def two_nodes(
    prefix: str = "vx", names: tuple[str, str] | None = None
) -> Iterator[tuple[Node, Node]]:
    with contextlib.ExitStack() as stack:
        nodes = []
        for n in (1, 2):
            ns = stack.enter_context(nss.netns(f"{prefix}n{n}"))
            pod = stack.enter_context(nss.netns(f"{prefix}p{n}"))
            name = names[n - 1] if names else f"node{n}-{ns[-4:]}"
            nodes.append(Node(name, ns, pod, n))
            for name in (ns, pod):  # no DAD: link-local gateways usable at once
                sysctl(name, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
        a, b = nodes
        nss.add_veth("eth0", "eth0", ns=a.ns, peer_ns=b.ns)
        for node in nodes:
            _plumb(node)
        yield a, b


def _plumb(node: Node) -> None:
    ns, pod = node.ns, node.pod_ns
    sysctl(
        ns,
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
    )
    nss.ip("addr", "add", f"{node.ip}/24", "dev", "eth0", ns=ns)
    nss.ip("addr", "add", f"{node.ip6}/64", "dev", "eth0", "nodad", ns=ns)
    nss.ip("link", "set", "eth0", "up", ns=ns)
    # As on a real node, a default route not via the pod's interface: proxy ARP answers
    # for 169.254.1.1 only then.
    nss.ip("route", "add", "default", "dev", "lo", ns=ns)
    nss.add_veth("cali0pod", "eth0", ns=ns, peer_ns=pod)
    nss.ip("link", "set", "cali0pod", "address", HOST_MAC, ns=ns)
    sysctl(ns, "net.ipv4.conf.cali0pod.proxy_arp=1", "net.ipv4.neigh.cali0pod.proxy_delay=0")
    nss.ip("link", "set", "cali0pod", "up", ns=ns)
    nss.ip("addr", "add", f"{node.pod_ip}/32", "dev", "eth0", ns=pod)
    nss.ip("addr", "add", f"{node.pod_ip6}/128", "dev", "eth0", "nodad", ns=pod)
    nss.ip("link", "set", "eth0", "up", ns=pod)
    nss.ip("route", "add", "169.254.1.1", "dev", "eth0", "scope", "link", ns=pod)
    nss.ip("route", "add", "default", "via", "169.254.1.1", "dev", "eth0", ns=pod)
    nss.ip("-6", "route", "add", "default", "via", HOST_LL, "dev", "eth0", ns=pod)
    nss.ip("route", "add", f"{node.pod_ip}/32", "dev", "cali0pod", ns=ns)
    nss.ip("-6", "route", "add", f"{node.pod_ip6}/128", "dev", "cali0pod", ns=ns)


PING = """
import os, select, socket, struct, sys, time
dst, wait = sys.argv[1], float(sys.argv[2])
v6 = ":" in dst
fam, proto, echo = (socket.AF_INET6, 58, 128) if v6 else (socket.AF_INET, 1, 8)
s = socket.socket(fam, socket.SOCK_RAW, proto)
ident = os.getpid() & 0xFFFF
body = struct.pack("!BBHHH", echo, 0, 0, ident, 1) + b"calico-vxlan"
if not v6:  # the kernel fills in the ICMPv6 checksum, not the ICMP one
    total = sum(struct.unpack("!%dH" % (len(body) // 2), body))
    total = (total >> 16) + (total & 0xFFFF)
    csum = ~(total + (total >> 16)) & 0xFFFF
    body = body[:2] + struct.pack("!H", csum) + body[4:]
deadline = time.time() + wait
next_send = 0.0
while (left := deadline - time.time()) > 0:
    if time.time() >= next_send:  # resend every 0.5 s: a first packet can die in ND/ARP
        s.sendto(body, (dst, 0))
        next_send = time.time() + 0.5
    if not select.select([s], [], [], min(left, 0.5))[0]:
        continue
    data, src = s.recvfrom(2048)
    icmp = data if v6 else data[(data[0] & 15) * 4 :]
    if icmp[0] == (129 if v6 else 0) and struct.unpack("!H", icmp[4:6])[0] == ident:
        print("ok")
        sys.exit(0)
print("timeout")
"""


def ping(ns: str, dst: str, *, wait: float = 2.0) -> bool:
    """ICMP(v6) echo from ``ns`` until a reply or ``wait`` s (there is no ping binary)."""
    return nss.probe(ns, PING, dst, wait) == "ok"


TCP_SERVER = """
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 0))
s.listen(16)
print("ready", flush=True)
print(s.getsockname()[1], flush=True)
while True:
    c, peer = s.accept()
    c.sendall(b"hi" + peer[0].encode())  # the greeting, then the source address it saw
    c.close()
"""

SOURCE_PROBE = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    data = b""
    while chunk := c.recv(64):
        data += chunk
    print(data[2:].decode() if data.startswith(b"hi") else "bad")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error", e.errno)
"""


def seen_source(ns: str, dst: str, port: int, timeout: float = 2.0) -> str:
    """The source address a :func:`tcp_server` at ``dst`` saw for a connection from ``ns``."""
    return nss.probe(ns, SOURCE_PROBE, dst, port, timeout)


@contextlib.contextmanager
def tcp_server(ns: str, addr: str) -> Iterator[int]:
    """A greeter on ``addr`` inside ``ns`` on a kernel-chosen port; yields the port."""
    with nss.py_server(ns, TCP_SERVER, addr) as proc:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
