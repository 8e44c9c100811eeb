"""Real traffic between workload namespaces with the BPF programs attached to the host-side
``cali*`` veths: deny until policy, allow/deny by IP set, port and protocol, conntrack replies,
policy changes, detach."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import netns_support as ns
import pytest
from bpf_support import PolicyState, dataplane, need_bpf, set_members

from calico.felix.bpf import attach, tcx
from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.messages import Policy, PolicyID, PortRange, Profile, Rule, TierInfo

pytestmark = pytest.mark.root

SERVER = """
import socket, sys, threading
def tcp(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(b"hi"); c.close()
def udp(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", port))
    while True:
        data, addr = s.recvfrom(64); s.sendto(b"hi", addr)
for p in sys.argv[1:]:
    threading.Thread(target=tcp, args=(int(p),), daemon=True).start()
    threading.Thread(target=udp, args=(int(p),), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

UDP_PROBE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(float(sys.argv[3]))
s.sendto(b"x", (sys.argv[1], int(sys.argv[2])))
try:
    print("ok" if s.recv(2) == b"hi" else "bad")
except socket.timeout:
    print("timeout")
"""

PORTS = (8080, 9090)


@dataclass
class Topo:
    host: str
    dp: BPFDataplane
    wls: list[str] = field(default_factory=list)
    ips: list[str] = field(default_factory=list)
    ifaces: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topo]:
    need_bpf()
    with contextlib.ExitStack() as stack:
        host = stack.enter_context(ns.netns("calbpfh"))
        wls = [stack.enter_context(ns.netns("calbpfw")) for _ in range(3)]
        ns.in_ns(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        ips, ifaces = [], []
        for i, wl in enumerate(wls, start=1):
            iface, ip = f"calibpf{i}", f"10.66.0.{i}"
            ns.add_veth(iface, "eth0", ns=host, peer_ns=wl)
            ns.in_ns(wl, "ip", "link", "set", "eth0", "up")
            ns.in_ns(wl, "ip", "addr", "add", f"{ip}/32", "dev", "eth0")
            ns.in_ns(wl, "ip", "route", "add", "10.66.0.0/24", "dev", "eth0")
            ns.in_ns(host, "ip", "link", "set", iface, "up")
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{iface}.proxy_arp=1")
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.neigh.{iface}.proxy_delay=0")
            ns.in_ns(host, "ip", "route", "add", f"{ip}/32", "dev", iface)
            mac = ns.link_mac(wl, "eth0")
            ns.in_ns(
                host, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", iface, "nud", "permanent"
            )
            ips.append(ip)
            ifaces.append(iface)
        for wl in wls:
            stack.enter_context(ns.py_server(wl, SERVER, *map(str, PORTS)))
        dp = stack.enter_context(dataplane(str(tmp_path_factory.mktemp("bpftraffic")), host))
        yield Topo(host, dp, wls, ips, ifaces)


def tcp(topo: Topo, src: int, dst: int, port: int = 8080) -> str:
    return ns.tcp_probe(topo.wls[src], topo.ips[dst], port, 0.7)


def udp(topo: Topo, src: int, dst: int, port: int = 8080) -> str:
    return ns.probe(topo.wls[src], UDP_PROBE, topo.ips[dst], port, 0.7)


ALLOW_ALL = Profile(inbound_rules=(Rule(action="allow"),), outbound_rules=(Rule(action="allow"),))


def add_routes(topo: Topo) -> None:
    """Each workload's address as its route (what the endpoint manager writes from the WEP):
    from-WEP's reverse-path check drops sources without one."""
    for iface, ip in zip(topo.ifaces, topo.ips, strict=True):
        topo.dp.set_workload_routes(iface, (f"{ip}/32",))


def program_all(
    topo: Topo, state: PolicyState, ingress_for: dict[int, tuple[PolicyID, ...]]
) -> None:
    """Every workload: egress allowed by profile; ingress by the given policies (else allowed)."""
    state.profiles["allow"] = ALLOW_ALL
    add_routes(topo)
    for i, iface in enumerate(topo.ifaces):
        pols = ingress_for.get(i)
        tiers = (TierInfo("default", ingress_policies=pols),) if pols else ()
        topo.dp.set_policies(iface, state.sources(tiers=tiers, profile_ids=("allow",)))


def test_attached_interface_drops_until_policy(topo: Topo) -> None:
    assert tcp(topo, 0, 1) == "ok"  # nothing attached yet: plain routing works
    for iface in topo.ifaces:
        topo.dp.attach_iface(iface)
    assert attach.attached_programs(topo.ifaces[0], topo.host) == {
        "ingress": "calico_from_wep",
        "egress": "calico_to_wep",
    }
    assert tcp(topo, 0, 1) == "timeout"
    assert udp(topo, 0, 1) == "timeout"
    program_all(topo, PolicyState(), {})
    assert tcp(topo, 0, 1) == "ok"
    assert udp(topo, 0, 1) == "ok"


def test_selector_ports_protocol_and_policy_change(topo: Topo) -> None:
    state = PolicyState()
    pid = PolicyID("web", tier="default")
    state.policies[pid] = Policy(
        inbound_rules=(
            Rule(
                action="allow",
                protocol="tcp",
                src_ip_set_ids=("s:clients",),
                dst_ports=(PortRange(8080, 8080),),
            ),
        )
    )
    set_members(topo.dp, state, "s:clients", {f"{topo.ips[0]}/32": True})
    program_all(topo, state, {1: (pid,)})
    assert tcp(topo, 0, 1, 8080) == "ok"  # in the set, right port
    assert tcp(topo, 0, 1, 9090) == "timeout"  # wrong port
    assert tcp(topo, 2, 1, 8080) == "timeout"  # not in the set
    assert udp(topo, 0, 1, 8080) == "timeout"  # wrong protocol
    compiles = topo.dp.compiler.compiles
    set_members(topo.dp, state, "s:clients", {f"{topo.ips[2]}/32": True})
    assert tcp(topo, 2, 1, 8080) == "ok"  # membership change only: no recompile
    assert topo.dp.compiler.compiles == compiles
    # policy change: UDP now allowed too, TCP no longer
    state.policies[pid] = Policy(inbound_rules=(Rule(action="allow", protocol="udp"),))
    program_all(topo, state, {1: (pid,)})
    assert udp(topo, 0, 1, 8080) == "ok"
    assert tcp(topo, 0, 1, 8080) == "timeout"


def test_established_replies_pass_both_ways(topo: Topo) -> None:
    """w0 -> w1 allowed; both deny everything else in both directions, yet the replies of the
    allowed flow pass (conntrack), and w1 -> w0 new connections do not."""
    for key in list(topo.dp.maps.ct.keys()):  # earlier tests' half-approved (denied) flows
        topo.dp.maps.ct.delete(key)
    state = PolicyState()
    state.profiles["none"] = Profile()
    p_in, p_out = PolicyID("in", tier="default"), PolicyID("out", tier="default")
    state.policies[p_in] = Policy(
        inbound_rules=(Rule(action="allow", src_net=(f"{topo.ips[0]}/32",)),)
    )
    state.policies[p_out] = Policy(
        outbound_rules=(Rule(action="allow", dst_net=(f"{topo.ips[1]}/32",)),)
    )
    # w0: egress only to w1, no ingress at all; w1: ingress only from w0, no egress at all.
    add_routes(topo)
    topo.dp.set_policies(
        topo.ifaces[0],
        state.sources(
            tiers=(TierInfo("default", egress_policies=(p_out,)),), profile_ids=("none",)
        ),
    )
    topo.dp.set_policies(
        topo.ifaces[1],
        state.sources(
            tiers=(TierInfo("default", ingress_policies=(p_in,)),), profile_ids=("none",)
        ),
    )
    assert tcp(topo, 0, 1) == "ok"
    assert udp(topo, 0, 1) == "ok"
    assert tcp(topo, 1, 0) == "timeout"
    assert udp(topo, 1, 0, 9090) == "timeout"
    entries = [e for e in topo.dp.maps.conntrack() if e.proto == 6 and e.port_b == 8080]
    assert entries and all(e.legs & 0x3 == 0x3 for e in entries)


def test_remove_iface_detaches(topo: Topo) -> None:
    program_all(topo, PolicyState(), {})
    topo.dp.remove_iface(topo.ifaces[2])
    assert attach.attached_programs(topo.ifaces[2], topo.host) == {}
    assert tcp(topo, 0, 2) == "ok"  # ordinary routing again (no BPF on w2's interface)
    topo.dp.attach_iface(topo.ifaces[2])
    assert tcp(topo, 0, 2) == "timeout"


def test_restart_adopts_pinned_state(topo: Topo, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A new dataplane object on the same pins (a Felix restart) takes over: interfaces keep
    their slots and old policy (no gap, nothing reprogrammed), conntrack survives, and entries
    of vanished interfaces are dropped."""
    dp = topo.dp
    state = PolicyState()
    pid = PolicyID("only0", tier="default")
    state.policies[pid] = Policy(
        inbound_rules=(Rule(action="allow", src_net=(f"{topo.ips[0]}/32",)),)
    )
    for iface in topo.ifaces:
        dp.attach_iface(iface)
    program_all(topo, state, {1: (pid,)})
    assert tcp(topo, 0, 1) == "ok"
    assert tcp(topo, 2, 1) == "timeout"
    before = {(e.addr_a, e.port_a, e.addr_b, e.port_b) for e in dp.maps.conntrack()}
    slots = {iface: dp.slot(iface) for iface in topo.ifaces}
    stale = (999999).to_bytes(4, "little")
    dp.maps.iface.update(stale, dp.maps.iface.lookup(stale) or bytes(12))
    cache = str(tmp_path_factory.mktemp("bpfcache2"))
    new = BPFDataplane(dp.pin_dir, cache, netns=topo.host)
    try:
        assert new.adopted == sorted(topo.ifaces)
        assert {iface: new.slot(iface) for iface in topo.ifaces} == slots
        assert new.maps.iface.lookup(stale) is None
        assert before <= {(e.addr_a, e.port_a, e.addr_b, e.port_b) for e in new.maps.conntrack()}
        # still policed by the predecessor's programs
        assert tcp(topo, 0, 1) == "ok"
        assert tcp(topo, 2, 1) == "timeout"
        # the new owner re-attaches (replace) and reprograms in place
        new.attach_iface(topo.ifaces[1])
        assert tcp(topo, 2, 1) == "timeout"  # old policy still in the slot meanwhile
        new.set_policies(topo.ifaces[1], state.sources(profile_ids=("allow",)))
        assert tcp(topo, 2, 1) == "ok"
    finally:
        new.close()


def test_endpoint_manager_follows_calc_graph_messages(topo: Topo) -> None:
    """The manager Felix uses: WEP + iface -> attached and programmed; a policy update
    regenerates; an IP set delta changes only the map; failures are reported for retry;
    WEP removal detaches."""
    from calico.felix.bpf.endpoints import BPFEndpointManager
    from calico.felix.messages import (
        ActivePolicyUpdate,
        ActiveProfileUpdate,
        IPSetDeltaUpdate,
        IPSetType,
        IPSetUpdate,
        ProfileID,
        WorkloadEndpoint,
        WorkloadEndpointID,
        WorkloadEndpointRemove,
        WorkloadEndpointUpdate,
    )

    stale = bytes([192, 0, 2, 77])  # a host address a previous run wrote, gone since
    topo.dp.maps.hostips.update(stale, (1).to_bytes(4, "little"))
    mgr = BPFEndpointManager(topo.dp, ("calibpf",))
    server = WorkloadEndpointID("k8s", "ns/server", "eth0")
    pid = PolicyID("from-set", tier="default")
    tiers = (TierInfo("default", ingress_policies=(pid,)),)
    for msg in (
        IPSetUpdate("s:c", (f"{topo.ips[0]}/32",), IPSetType.NET),
        ActivePolicyUpdate(
            pid, Policy(inbound_rules=(Rule(action="allow", src_ip_set_ids=("s:c",)),))
        ),
        ActiveProfileUpdate(ProfileID("allow"), ALLOW_ALL),
        WorkloadEndpointUpdate(
            server,
            WorkloadEndpoint(
                "active",
                topo.ifaces[1],
                profile_ids=("allow",),
                tiers=tiers,
                ipv4_nets=(f"{topo.ips[1]}/32",),
            ),
        ),
        WorkloadEndpointUpdate(
            WorkloadEndpointID("k8s", "ns/ghost", "eth0"), WorkloadEndpoint("active", "calibpfx")
        ),
    ):
        mgr.on_update(msg)
    for i, iface in enumerate(topo.ifaces):
        mgr.on_iface_state(iface, "up", i)
    mgr.on_iface_state("calibpfx", "up", 99)  # reported, but gone before we attach
    mgr.on_iface_state("eth9", "up", 98)  # not a workload interface: ignored
    mgr.complete_deferred_work()
    assert mgr.is_programmed(topo.ifaces[1])
    assert topo.dp.maps.hostips.lookup(stale) is None  # resynced at the first deferred work
    errors = mgr.apply()
    assert errors and errors[0].startswith("calibpfx: interface calibpfx not found")
    # w0 and w2 have no endpoint: the programs left on them by earlier tests were detached
    assert attach.attached_programs(topo.ifaces[0], topo.host) == {}
    assert tcp(topo, 0, 1) == "ok"
    assert tcp(topo, 2, 1) == "timeout"
    compiles = topo.dp.compiler.compiles
    mgr.on_update(IPSetDeltaUpdate("s:c", added_members=(f"{topo.ips[2]}/32",)))
    mgr.complete_deferred_work()
    assert tcp(topo, 2, 1) == "ok"
    assert topo.dp.compiler.compiles == compiles  # a membership change recompiles nothing
    mgr.on_update(ActivePolicyUpdate(pid, Policy()))  # now matches nothing: end-of-tier deny
    mgr.complete_deferred_work()
    assert tcp(topo, 0, 1) == "timeout"
    # host -> workload is not policed (nftables: "Host to workload: not policed"), once the
    # manager has learnt the host's addresses from the interface monitor
    ns.in_ns(topo.host, "ip", "addr", "add", "10.66.0.250/32", "dev", "lo")
    assert ns.tcp_probe(topo.host, topo.ips[1], 8080, 0.7) == "timeout"
    mgr.on_iface_addrs("lo", {"127.0.0.1/8", "10.66.0.250/32", "::1/128"})
    mgr.on_iface_addrs(topo.ifaces[0], {"10.66.0.254/32"})  # workload side: ignored
    assert ns.tcp_probe(topo.host, topo.ips[1], 8080, 0.7) == "ok"
    assert topo.dp.maps.hostips.lookup(bytes([10, 66, 0, 254])) is None
    mgr.on_iface_addrs("lo", None)
    assert ns.tcp_probe(topo.host, topo.ips[1], 8080, 0.7) == "timeout"
    mgr.on_update(WorkloadEndpointRemove(server))
    mgr.on_update(WorkloadEndpointRemove(WorkloadEndpointID("k8s", "ns/ghost", "eth0")))
    mgr.complete_deferred_work()
    assert mgr.apply() == []
    assert attach.attached_programs(topo.ifaces[1], topo.host) == {}
    assert tcp(topo, 0, 1) == "ok"  # plain routing again


def test_detach_all_cleans_prefixed_interfaces_carrying_our_programs(topo: Topo) -> None:
    """BPF mode off: only interfaces with our filters and a matching prefix are detached; a
    clsact qdisc with no filter of ours is left alone, and so is an unmatched prefix."""
    w0, w1, w2 = topo.ifaces
    topo.dp.attach_iface(w0)
    topo.dp.attach_iface(w1)
    topo.dp.remove_iface(w2)
    ns.in_ns(topo.host, "tc", "qdisc", "add", "dev", w2, "clsact")  # someone else's hook
    try:
        assert attach.detach_all(("eth", "calibpf2"), topo.host) == [w1]
        assert attach.attached_programs(w1, topo.host) == {}
        assert set(attach.attached_programs(w0, topo.host).values()) == {
            "calico_from_wep",
            "calico_to_wep",
        }
        assert attach.detach_all(("calibpf",), topo.host) == [w0]
        assert attach.attached_programs(w0, topo.host) == {}
        assert "clsact" in ns.in_ns(topo.host, "tc", "qdisc", "show", "dev", w2).stdout
        assert attach.detach_all(("calibpf",), topo.host) == []
        if tcx.supported():  # TCX links need no clsact qdisc: found by the bpf() query
            topo.dp.attach_type = "tcx"
            topo.dp.attach_iface(w0)
            assert "clsact" not in ns.in_ns(topo.host, "tc", "qdisc", "show", "dev", w0).stdout
            assert set(attach.attach_mode(w0, topo.host).values()) == {"tcx"}
            assert attach.detach_all(("calibpf1",), topo.host, link_dir=topo.dp.link_dir) == [w0]
            assert attach.attached_programs(w0, topo.host) == {}
    finally:
        topo.dp.attach_type = "tc"
        for iface in topo.ifaces:
            topo.dp.attach_iface(iface)
