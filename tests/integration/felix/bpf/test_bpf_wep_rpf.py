"""Workload reverse-path checks with real packets, IPv4 and IPv6 (from-WEP, always strict).

A host namespace with two workloads, ``caliwr1`` (w1: 10.72.0.1, fd72::1) and ``caliwr2``
(w2: 10.72.0.2, fd72::2), each allowed all egress, sending UDP to an address on the host's
``lo``. The kernel's own rp_filter is off, so without the BPF check every spoofed datagram
would be delivered. New flows: a source that is not one of the sending workload's addresses
is dropped and counted (``dropped_rpf``, exactly +1 each). Established flows: a flow from a
third address M, first in w1's endpoint, whose packets start arriving from w2 is re-checked
on the conntrack fast path: dropped while M's route says caliwr1, passed once the endpoint
update moved M to w2 (the conntrack entry then records caliwr2), after which M's packets
from w1 are dropped. A Felix restart keeps the routes of adopted interfaces and deletes the
others.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import netns_support as ns
import pytest
from bpf_support import dataplane, need_bpf

from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.endpoints import BPFEndpointManager
from calico.felix.bpf.maps import ROUTE_VALUE, ct_key, decode_ct, route_key, workload_route
from calico.felix.messages import (
    ActiveProfileUpdate,
    Profile,
    ProfileID,
    Rule,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointUpdate,
)

pytestmark = pytest.mark.root

# Two sockets (one per family) so each datagram's source is reported as sent.
UDP_SINK = """
import select, socket, sys
socks = []
for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, int(sys.argv[2])))
    socks.append(s)
print("ready", flush=True)
with open(sys.argv[1], "a") as out:
    while True:
        for s in select.select(socks, [], [])[0]:
            data, peer = s.recvfrom(100)
            out.write(f"{peer[0]} {peer[1]} {data.decode()}\\n"); out.flush()
"""

SEND = """
import socket, sys
src, sport, dst, dport, tag = sys.argv[1:6]
s = socket.socket(socket.AF_INET6 if ":" in src else socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((src, int(sport)))
s.sendto(tag.encode(), (dst, int(dport)))
print("ok")
"""

PORT = 5300
SINK = {4: "10.72.9.1", 6: "fd72:9::1"}
OWN = {4: ("10.72.0.1", "10.72.0.2"), 6: ("fd72::1", "fd72::2")}
UNKNOWN = {4: "10.72.5.5", 6: "fd72::5:5"}
MOVING = {4: "10.72.0.7", 6: "fd72::7"}
IFACES = ("caliwr1", "caliwr2")
WEP_IDS = tuple(WorkloadEndpointID("k8s", f"ns/w{i}", "eth0") for i in (1, 2))


@dataclass
class Topo:
    host: str
    wls: tuple[str, str]
    mgr: BPFEndpointManager
    sink: Path
    tmp: Path
    sent: int = 0


def _net(addr: str) -> str:
    return f"{addr}/{32 if ipaddress.ip_address(addr).version == 4 else 128}"


def set_weps(
    topo: Topo, extra: tuple[tuple[str, ...], tuple[str, ...]], spoof: tuple[str, ...] = ()
) -> None:
    """Both endpoints: their own addresses plus ``extra[i]`` (w1 may also send from the
    ``spoof`` prefixes: allowSpoofedSourcePrefixes); programmed at once."""
    for i, (wep_id, iface) in enumerate(zip(WEP_IDS, IFACES, strict=True)):
        addrs = (OWN[4][i], OWN[6][i], *extra[i])
        v4 = tuple(_net(a) for a in addrs if ":" not in a)
        v6 = tuple(_net(a) for a in addrs if ":" in a)
        wep = WorkloadEndpoint(
            "active",
            iface,
            profile_ids=("allow",),
            ipv4_nets=v4,
            ipv6_nets=v6,
            allow_spoofed_source_prefixes=spoof if i == 0 else (),
        )
        topo.mgr.on_update(WorkloadEndpointUpdate(wep_id, wep))
    topo.mgr.complete_deferred_work()
    assert topo.mgr.apply() == []


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topo]:
    need_bpf()
    tmp = tmp_path_factory.mktemp("bpfweprpf")
    with contextlib.ExitStack() as stack:
        host = stack.enter_context(ns.netns("calwrpfh"))
        wls = (stack.enter_context(ns.netns("calwrpf1")), stack.enter_context(ns.netns("calwrpf2")))
        for key in ("all", "default"):
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0")
        for v in (4, 6):
            ns.in_ns(host, "ip", f"-{v}", "addr", "add", _net(SINK[v]), "dev", "lo")
        for i, (wl, iface) in enumerate(zip(wls, IFACES, strict=True)):
            ns.add_veth(iface, "eth0", ns=host, peer_ns=wl)
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{iface}.rp_filter=0")
            ns.in_ns(host, "ip", "link", "set", iface, "up")
            ns.in_ns(wl, "ip", "link", "set", "eth0", "up")
            host_mac = ns.link_mac(host, iface)
            spoofs = (OWN[4][1 - i], OWN[6][1 - i], UNKNOWN[4], UNKNOWN[6])
            for addr in (OWN[4][i], OWN[6][i], MOVING[4], MOVING[6], *spoofs):
                ns.in_ns(wl, "ip", "addr", "add", _net(addr), "dev", "eth0", *(
                    ("nodad",) if ":" in addr else ()))  # fmt: skip
            for v in (4, 6):
                ns.in_ns(wl, "ip", f"-{v}", "route", "add", "default", "dev", "eth0")
                ns.in_ns(wl, "ip", f"-{v}", "neigh", "replace", SINK[v], "lladdr", host_mac,
                         "dev", "eth0", "nud", "permanent")  # fmt: skip
        sink = tmp / "received"
        sink.touch()
        stack.enter_context(ns.py_server(host, UDP_SINK, str(sink), str(PORT)))
        dp = stack.enter_context(dataplane(str(tmp), host))
        mgr = BPFEndpointManager(dp, ("caliwr",))
        both = (Rule(action="allow"),)
        allow = Profile(inbound_rules=both, outbound_rules=both)
        mgr.on_update(ActiveProfileUpdate(ProfileID("allow"), allow))
        for iface in IFACES:
            mgr.on_iface_state(iface, "up", 0)
        t = Topo(host, wls, mgr, sink, tmp)
        set_weps(t, ((), ()))
        yield t


def counters(topo: Topo, i: int) -> dict[str, int]:
    idx = topo.mgr.dp.ifindex(IFACES[i])
    assert idx is not None
    got = topo.mgr.dp.maps.read_counters(idx)
    assert got is not None
    return got["ingress"]


def received(topo: Topo) -> set[str]:
    return set(topo.sink.read_text().splitlines())


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def send(topo: Topo, i: int, src: str, sport: int, tag: str) -> None:
    dst = SINK[ipaddress.ip_address(src).version]
    assert ns.probe(topo.wls[i], SEND, src, sport, dst, PORT, tag) == "ok"


def verdict(topo: Topo, i: int, src: str, sport: int = 0) -> str:
    """w``i`` sends one datagram from ``src``: "pass" (delivered, nothing counted) or "drop"
    (counted once as dropped_rpf, never delivered), decided once a legit marker of the same
    family from w``i``'s own address arrived behind it and the datagram's fate is visible."""
    topo.sent += 1
    tag, marker = f"probe{topo.sent}", f"marker{topo.sent}"
    version = ipaddress.ip_address(src).version
    own = OWN[version][i]
    before = counters(topo, i)["dropped_rpf"]
    send(topo, i, src, sport, tag)
    send(topo, i, own, 0, marker)

    def probe_seen() -> bool:
        rx = received(topo)
        return any(line.startswith(f"{src} ") and line.endswith(f" {tag}") for line in rx)

    def settled() -> bool:
        marker_in = any(line.endswith(f" {marker}") for line in received(topo))
        return marker_in and (probe_seen() or counters(topo, i)["dropped_rpf"] > before)

    wait_for(settled, f"{tag} from {src} via {IFACES[i]}")
    passed, dropped = probe_seen(), counters(topo, i)["dropped_rpf"] - before
    assert dropped == (0 if passed else 1), (src, passed, dropped)  # each drop counted once
    return "pass" if passed else "drop"


@pytest.mark.parametrize("version", [4, 6])
def test_new_flows_from_a_workload_need_its_own_source(topo: Topo, version: int) -> None:
    own, other = OWN[version]
    got = {
        "own": verdict(topo, 0, own),
        "neighbour's": verdict(topo, 0, other),  # w2's address, sent by w1
        "unknown": verdict(topo, 0, UNKNOWN[version]),
        "w2 own": verdict(topo, 1, other),
        "w2 spoofing w1": verdict(topo, 1, own),
    }
    assert got == {
        "own": "pass",
        "neighbour's": "drop",
        "unknown": "drop",
        "w2 own": "pass",
        "w2 spoofing w1": "drop",
    }
    assert verdict(topo, 0, UNKNOWN[version]) == "drop"  # a dropped flow left no entry


@pytest.mark.parametrize("version", [4, 6])
def test_established_flow_arriving_elsewhere_is_rechecked(topo: Topo, version: int) -> None:
    m, sport = MOVING[version], 4000 + version
    idx = [topo.mgr.dp.ifindex(i) for i in IFACES]
    key = ct_key(17, m, SINK[version], sport, PORT)
    ct = topo.mgr.dp.maps.ct6 if version == 6 else topo.mgr.dp.maps.ct

    def recorded() -> tuple[int, int]:
        raw = ct.lookup(key)
        assert raw is not None
        e = decode_ct(key, raw)
        return e.ifindex_a, e.ifindex_b

    set_weps(topo, ((m,), ()))  # M is w1's
    try:
        assert verdict(topo, 0, m, sport) == "pass"  # new flow: policy, entry created
        assert idx[0] in recorded() and 0 in recorded()  # M's side: caliwr1; the sink's: none
        fast = counters(topo, 1)["accepted_by_conntrack"]
        assert verdict(topo, 1, m, sport) == "drop"  # same flow from w2: route says caliwr1
        assert counters(topo, 1)["accepted_by_conntrack"] == fast
        assert idx[0] in recorded()  # a failed re-check records nothing
        set_weps(topo, ((), (m,)))  # the endpoint update moves M to w2
        assert verdict(topo, 1, m, sport) == "pass"
        assert counters(topo, 1)["accepted_by_conntrack"] == fast + 1  # via conntrack
        assert idx[1] in recorded() and idx[0] not in recorded()
        assert verdict(topo, 0, m, sport) == "drop"  # and now w1's copy fails the re-check
    finally:
        set_weps(topo, ((), ()))


def test_allowed_spoofed_prefixes_pass_from_their_workload_only(topo: Topo) -> None:
    """allowSpoofedSourcePrefixes (the calc graph passes them only with
    WorkloadSourceSpoofing=Any) become routes of the workload's interface."""
    set_weps(topo, ((), ()), spoof=("10.72.5.0/24", "fd72::5:0/112"))
    try:
        for v in (4, 6):
            assert verdict(topo, 0, UNKNOWN[v]) == "pass"
            assert verdict(topo, 1, UNKNOWN[v]) == "drop"  # w2 may not
            assert verdict(topo, 0, OWN[v][1]) == "drop"  # w2's own /32 is more specific
    finally:
        set_weps(topo, ((), ()))
    assert verdict(topo, 0, UNKNOWN[4]) == "drop"  # the prefixes' routes went with them


def test_an_address_claimed_twice_keeps_its_latest_owner(
    topo: Topo, caplog: pytest.LogCaptureFixture
) -> None:
    """An address moving between endpoints, whichever interface is restated first; an
    unparseable address is logged and skipped, the others still written."""
    dp = topo.mgr.dp
    idx = [dp.ifindex(i) or 0 for i in IFACES]
    own = [(_net(OWN[4][i]), _net(OWN[6][i])) for i in (0, 1)]
    k = route_key("10.72.0.9/32")
    try:
        dp.set_workload_routes(IFACES[1], (*own[1], "10.72.0.9/32"))
        assert dp.maps.routes.lookup(k) == workload_route(idx[1])
        dp.set_workload_routes(IFACES[0], (*own[0], "10.72.0.9/32"))  # the new owner first
        assert dp.maps.routes.lookup(k) == workload_route(idx[0])
        dp.set_workload_routes(IFACES[1], own[1])  # the old owner lets go: not deleted
        assert dp.maps.routes.lookup(k) == workload_route(idx[0])
        dp.set_workload_routes(IFACES[0], (*own[0], "10.72.0.300/32"))
        assert dp.maps.routes.lookup(k) is None
        assert "ignoring unparseable workload address '10.72.0.300/32'" in caplog.text
        assert dp.maps.routes.lookup(route_key(own[0][0])) == workload_route(idx[0])
    finally:
        set_weps(topo, ((), ()))


def test_restart_keeps_adopted_routes_and_drops_others(topo: Topo) -> None:
    dp = topo.mgr.dp
    stale = route_key("10.72.8.0/24")
    dp.maps.routes.update(stale, workload_route(999999))  # an interface that is gone
    own = route_key(_net(OWN[6][0]))
    assert dp.maps.routes6.lookup(own) == workload_route(dp.ifindex(IFACES[0]) or 0)
    new = BPFDataplane(dp.pin_dir, str(topo.tmp / "cache2"), netns=topo.host)
    try:
        assert new.adopted == sorted(IFACES)
        assert new.maps.routes.lookup(stale) is None
        assert new.maps.routes6.lookup(own) is not None
        flags, ifindex = ROUTE_VALUE.unpack(new.maps.routes6.lookup(own) or bytes(8))
        assert (flags, ifindex) == (0xC, dp.ifindex(IFACES[0]))
        # still enforced by the routes the predecessor wrote, before any restatement
        assert verdict(topo, 0, OWN[4][0]) == "pass"
        assert verdict(topo, 0, OWN[4][1]) == "drop"
        # a restatement without the v6 address deletes its route
        new.set_workload_routes(IFACES[0], (_net(OWN[4][0]),))
        assert new.maps.routes6.lookup(own) is None
        new.set_workload_routes(IFACES[0], (_net(OWN[4][0]), _net(OWN[6][0])))
    finally:
        new.close()
