"""Host endpoints in BPF mode with real traffic: an "external" namespace reaches a host
namespace over a data interface ``eth0`` (BPFDataIfacePattern), and a workload behind the
host. Driven through the endpoint manager with calc-graph messages: programs on data
interfaces only, no host endpoint = allow, a host endpoint's ingress/egress policy for
traffic to/from the host, failsafe ports ahead of a deny-all policy (counted), replies of
allowed flows, applyOnForward for forwarded traffic, the ``*`` endpoint and a named one
overriding it, removal back to allow-all, detach when the interface goes, and an endpoint
matched by expected IP following the interface's addresses; once with tc filters, once with
TCX links."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

import netns_support as ns
import pytest
from bpf_support import dataplane, need_bpf

from calico.felix.bpf import attach, failsafes, tcx
from calico.felix.bpf.endpoints import BPFEndpointManager
from calico.felix.config import PARAMS
from calico.felix.messages import (
    ActivePolicyUpdate,
    ActiveProfileUpdate,
    HostEndpoint,
    HostEndpointID,
    HostEndpointRemove,
    HostEndpointUpdate,
    Policy,
    PolicyID,
    PortRange,
    Profile,
    ProfileID,
    Rule,
    TierInfo,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointUpdate,
)

pytestmark = pytest.mark.root

SERVER = """
import socket, sys, threading
def tcp(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(b"hi"); c.close()
for p in sys.argv[1:]:
    threading.Thread(target=tcp, args=(int(p),), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

HOST_IP, EXT_IP, WL_IP = "10.67.0.1", "10.67.0.2", "10.66.2.1"
ALLOW_ALL = Profile(inbound_rules=(Rule(action="allow"),), outbound_rules=(Rule(action="allow"),))


@dataclass
class Topo:
    host: str
    ext: str
    wl: str
    mgr: BPFEndpointManager


@pytest.fixture(scope="module", params=["tc", "tcx"])
def topo(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Topo]:
    """The whole module once per attach mechanism."""
    need_bpf()
    if request.param == "tcx" and not tcx.supported():
        pytest.skip("kernel without TCX")
    with contextlib.ExitStack() as stack:
        host = stack.enter_context(ns.netns("calheph"))
        ext = stack.enter_context(ns.netns("calhepe"))
        wl = stack.enter_context(ns.netns("calhepw"))
        ns.in_ns(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        ns.add_veth("eth0", "eth0", ns=host, peer_ns=ext)
        ns.in_ns(host, "ip", "addr", "add", f"{HOST_IP}/24", "dev", "eth0")
        ns.in_ns(host, "ip", "link", "set", "eth0", "up")
        ns.in_ns(ext, "ip", "addr", "add", f"{EXT_IP}/24", "dev", "eth0")
        ns.in_ns(ext, "ip", "link", "set", "eth0", "up")
        ns.in_ns(ext, "ip", "route", "add", "default", "via", HOST_IP)
        ns.add_veth("calihep1", "eth0", ns=host, peer_ns=wl)
        ns.in_ns(wl, "ip", "link", "set", "eth0", "up")
        ns.in_ns(wl, "ip", "addr", "add", f"{WL_IP}/32", "dev", "eth0")
        ns.in_ns(wl, "ip", "route", "add", "default", "dev", "eth0")
        ns.in_ns(host, "ip", "link", "set", "calihep1", "up")
        ns.in_ns(host, "sysctl", "-qw", "net.ipv4.conf.calihep1.proxy_arp=1")
        ns.in_ns(host, "sysctl", "-qw", "net.ipv4.neigh.calihep1.proxy_delay=0")
        ns.in_ns(host, "ip", "route", "add", f"{WL_IP}/32", "dev", "calihep1")
        mac = ns.link_mac(wl, "eth0")
        ns.in_ns(host, "ip", "neigh", "replace", WL_IP, "lladdr", mac, "dev", "calihep1",
                 "nud", "permanent")  # fmt: skip
        ns.add_veth("vethq0", "vethq1", ns=host)  # not a data interface: never attached
        stack.enter_context(ns.py_server(host, SERVER, "8080", "9090", "22"))
        stack.enter_context(ns.py_server(ext, SERVER, "8080", "179"))
        stack.enter_context(ns.py_server(wl, SERVER, "8080", "9090"))
        dp = stack.enter_context(dataplane(str(tmp_path_factory.mktemp("bpfhep")), host))
        dp.attach_type = request.param
        keys = failsafes.failsafe_keys(  # upstream's default failsafe ports
            PARAMS["FailsafeInboundHostPorts"].default, PARAMS["FailsafeOutboundHostPorts"].default
        )
        failsafes.sync(dp.maps, keys)
        pattern = PARAMS["BPFDataIfacePattern"].default
        assert isinstance(pattern, re.Pattern)
        mgr = BPFEndpointManager(dp, ("calihep",), data_ifaces=pattern, policy_debug=True)
        mgr.on_update(ActiveProfileUpdate(ProfileID("allow"), ALLOW_ALL))
        mgr.on_update(
            WorkloadEndpointUpdate(
                WorkloadEndpointID("k8s", "ns/wl", "eth0"),
                WorkloadEndpoint(
                    "active", "calihep1", profile_ids=("allow",), ipv4_nets=(f"{WL_IP}/32",)
                ),
            )
        )
        for i, name in enumerate(("eth0", "calihep1", "vethq0", "lo"), start=2):
            mgr.on_iface_state(name, "up", i)
        mgr.on_iface_addrs("eth0", {f"{HOST_IP}/24"})
        mgr.on_iface_addrs("lo", {"127.0.0.1/8"})
        mgr.complete_deferred_work()
        assert mgr.apply() == []
        yield Topo(host, ext, wl, mgr)


def probe(src: str, dst: str, port: int) -> str:
    return ns.tcp_probe(src, dst, port, 0.7)


def sync(topo: Topo, *msgs: object) -> None:
    for msg in msgs:
        topo.mgr.on_update(msg)  # type: ignore[arg-type]
    topo.mgr.complete_deferred_work()
    assert topo.mgr.apply() == []


def counters(topo: Topo, iface: str) -> dict[str, dict[str, int]]:
    idx = topo.mgr.dp.ifindex(iface)
    assert idx is not None
    out = topo.mgr.dp.maps.read_counters(idx)
    assert out is not None
    return out


HEP_ID = HostEndpointID("eth0-hep")
WILD_ID = HostEndpointID("all-ifaces")
WEB = PolicyID("web", tier="default")
FWD = PolicyID("fwd-9090", tier="default")


def port_rule(port: int) -> Rule:
    return Rule(action="allow", protocol="tcp", dst_ports=(PortRange(port, port),))


def test_data_ifaces_get_programs_and_allow_without_hep(topo: Topo) -> None:
    mode = topo.mgr.dp.attach_type
    assert attach.attach_mode("eth0", topo.host) == {"ingress": mode, "egress": mode}
    assert attach.attached_programs("eth0", topo.host) == {
        "ingress": "calico_from_hep",
        "egress": "calico_to_hep",
    }
    assert attach.attached_programs("calihep1", topo.host) == {
        "ingress": "calico_from_wep",
        "egress": "calico_to_wep",
    }
    assert attach.attached_programs("vethq0", topo.host) == {}  # BPFDataIfacePattern
    assert not topo.mgr.is_programmed("eth0")
    before = counters(topo, "eth0")["ingress"]["accepted_no_host_endpoint"]
    assert probe(topo.ext, HOST_IP, 8080) == "ok"
    assert probe(topo.host, EXT_IP, 8080) == "ok"
    assert probe(topo.ext, WL_IP, 8080) == "ok"
    assert counters(topo, "eth0")["ingress"]["accepted_no_host_endpoint"] > before


def test_hep_policy_failsafes_forward_and_removal(topo: Topo) -> None:
    """Named HEP with an ingress policy allowing 8080 to the host and no egress policy."""
    tiers = (TierInfo("default", ingress_policies=(WEB,)),)
    sync(
        topo,
        ActivePolicyUpdate(WEB, Policy(inbound_rules=(port_rule(8080),))),
        HostEndpointUpdate(HEP_ID, HostEndpoint("eth0", tiers=tiers)),
    )
    assert topo.mgr.is_programmed("eth0")
    assert probe(topo.ext, HOST_IP, 8080) == "ok"  # ingress policy; replies pass to-HEP
    assert probe(topo.ext, HOST_IP, 9090) == "timeout"  # end of tier
    fs = counters(topo, "eth0")["ingress"]["accepted_failsafe"]
    assert probe(topo.ext, HOST_IP, 22) == "ok"  # inbound failsafe tcp:22
    assert counters(topo, "eth0")["ingress"]["accepted_failsafe"] == fs + 1  # the SYN only
    assert probe(topo.host, EXT_IP, 8080) == "timeout"  # no egress policy, no profile
    assert probe(topo.host, EXT_IP, 179) == "ok"  # outbound failsafe tcp:179
    # forwarded traffic: no applyOnForward policy = allowed; then only 9090 is
    assert probe(topo.ext, WL_IP, 8080) == "ok"
    assert probe(topo.wl, EXT_IP, 8080) == "ok"
    fwd = (TierInfo("default", ingress_policies=(FWD,)),)
    sync(
        topo,
        ActivePolicyUpdate(FWD, Policy(inbound_rules=(port_rule(9090),))),
        HostEndpointUpdate(HEP_ID, HostEndpoint("eth0", tiers=tiers, forward_tiers=fwd)),
    )
    assert probe(topo.ext, WL_IP, 8080) == "timeout"
    assert probe(topo.ext, WL_IP, 9090) == "ok"
    assert probe(topo.wl, EXT_IP, 8080) == "ok"  # egress: no forward policy
    assert probe(topo.ext, HOST_IP, 8080) == "ok"  # to the host: the normal policy still
    # the all-interfaces endpoint applies to eth0 once the named one goes
    sync(
        topo,
        HostEndpointRemove(HEP_ID),
        HostEndpointUpdate(WILD_ID, HostEndpoint("*", profile_ids=("allow",))),
    )
    assert probe(topo.ext, HOST_IP, 9090) == "ok"
    assert probe(topo.host, EXT_IP, 8080) == "ok"
    assert attach.attached_programs("vethq0", topo.host) == {}
    # a named endpoint overrides "*"
    sync(topo, HostEndpointUpdate(HEP_ID, HostEndpoint("eth0", tiers=tiers)))
    assert probe(topo.ext, HOST_IP, 9090) == "timeout"
    # no endpoint at all: allow-all again, programs stay attached, slot freed
    sync(topo, HostEndpointRemove(HEP_ID), HostEndpointRemove(WILD_ID))
    assert not topo.mgr.is_programmed("eth0")
    assert topo.mgr.dp.slot("eth0") is None
    assert probe(topo.ext, HOST_IP, 9090) == "ok"
    assert probe(topo.host, EXT_IP, 8080) == "ok"
    assert attach.attached_programs("eth0", topo.host)["ingress"] == "calico_from_hep"


def test_all_interfaces_hep_on_host_workload_traffic(topo: Topo) -> None:
    """A deny-all ``*`` endpoint (no normal policy, no profile) with a pre-DNAT deny of 9090
    and an applyOnForward ingress allow of 8080, as upstream's BPF mode applies it: its
    normal policy never touches traffic between the host and its own workload (either way),
    while it denies outside -> host; its pre-DNAT policy polices everything leaving the
    workload (host-bound too), its forward policy the workload's forwarded traffic; the
    workload programs follow the endpoint's arrival and removal."""
    pd, fw = PolicyID("pd-9090", tier="default"), PolicyID("fw-8080", tier="default")
    deny9090 = Rule(action="deny", protocol="tcp", dst_ports=(PortRange(9090, 9090),))
    wild = HostEndpoint(
        "*",
        pre_dnat_tiers=(TierInfo("default", ingress_policies=(pd,)),),
        forward_tiers=(TierInfo("default", ingress_policies=(fw,)),),
    )
    sync(
        topo,
        ActivePolicyUpdate(pd, Policy(inbound_rules=(deny9090,), pre_dnat=True)),
        ActivePolicyUpdate(fw, Policy(inbound_rules=(port_rule(8080),), apply_on_forward=True)),
        HostEndpointUpdate(WILD_ID, wild),
    )
    try:
        assert probe(topo.ext, HOST_IP, 8080) == "timeout"  # "*" on eth0: deny-all
        assert probe(topo.ext, HOST_IP, 22) == "ok"  # failsafe
        assert probe(topo.host, WL_IP, 8080) == "ok"  # host -> own workload: not policed
        assert probe(topo.wl, HOST_IP, 8080) == "ok"  # workload -> host: no normal policy
        assert probe(topo.wl, HOST_IP, 9090) == "timeout"  # ... but pre-DNAT applies
        assert probe(topo.wl, EXT_IP, 8080) == "ok"  # forwarded: the forward policy allows
        assert probe(topo.wl, EXT_IP, 179) == "timeout"  # ... nothing else (end of tier)
        assert probe(topo.ext, WL_IP, 8080) == "ok"  # eth0's forward ingress allows it
    finally:
        sync(topo, HostEndpointRemove(WILD_ID))
    assert probe(topo.wl, HOST_IP, 9090) == "ok"
    assert probe(topo.wl, EXT_IP, 179) == "ok"
    assert probe(topo.ext, HOST_IP, 8080) == "ok"


def test_data_iface_removal_detaches(topo: Topo) -> None:
    sync(topo, HostEndpointUpdate(HEP_ID, HostEndpoint("eth0")))
    assert probe(topo.ext, HOST_IP, 8080) == "timeout"
    topo.mgr.on_iface_state("eth0", "absent", 0)
    topo.mgr.complete_deferred_work()
    assert "eth0" not in topo.mgr.dp.ifaces
    assert attach.attached_programs("eth0", topo.host) == {}
    assert probe(topo.ext, HOST_IP, 8080) == "ok"  # nftables-free netns: plain routing
    topo.mgr.on_iface_state("eth0", "up", 2)
    sync(topo, HostEndpointRemove(HEP_ID))
    assert attach.attached_programs("eth0", topo.host)["egress"] == "calico_to_hep"


def test_expected_ip_hep_follows_the_interface_address(topo: Topo) -> None:
    """No interfaceName: eth0 enforces the endpoint while it holds one of its expected IPs
    (the monitor's addresses), and stops when the address goes."""
    by_ip = HostEndpointID("by-ip")
    tiers = (TierInfo("default", ingress_policies=(WEB,)),)
    hep = HostEndpoint("", tiers=tiers, expected_ipv4_addrs=("10.67.0.50",))
    sync(topo, ActivePolicyUpdate(WEB, Policy(inbound_rules=(port_rule(8080),))),
         HostEndpointUpdate(by_ip, hep))  # fmt: skip
    assert topo.mgr.hep_for("eth0") is None and not topo.mgr.is_programmed("eth0")
    assert probe(topo.ext, HOST_IP, 9090) == "ok"
    topo.mgr.on_iface_addrs("eth0", {f"{HOST_IP}/24", "10.67.0.50/24"})
    sync(topo)
    assert topo.mgr.hep_for("eth0") == hep and topo.mgr.is_programmed("eth0")
    assert probe(topo.ext, HOST_IP, 9090) == "timeout"
    assert probe(topo.ext, HOST_IP, 8080) == "ok"
    topo.mgr.on_iface_addrs("eth0", {f"{HOST_IP}/24"})
    sync(topo)
    assert not topo.mgr.is_programmed("eth0")
    assert probe(topo.ext, HOST_IP, 9090) == "ok"
    sync(topo, HostEndpointRemove(by_ip))
