"""Real packets through the all-interfaces (``*``) host endpoint's rendered chains.

A host namespace with an uplink ``eth9`` (10.66.0.1) to a remote namespace (10.66.0.2, TCP
3000) and one workload on ``calix9`` (10.65.0.9, TCP 4000); the host serves TCP 22 (failsafe)
and 2000. Each case programs the static chains, the endpoint chains and the dispatch chains
and maps exactly as the endpoint manager would, then probes with real connects.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from rules_netns import (
    add_veth,
    in_ns,
    link_mac,
    netns,
    program,
    ruleset_commands,
    servers,
    tcp_connect,
)

from calico.felix.hostendpoints import ALL_INTERFACES
from calico.felix.messages import (
    HostEndpoint,
    Policy,
    PolicyID,
    PortRange,
    Profile,
    Rule,
    TierInfo,
    WorkloadEndpoint,
)
from calico.felix.rules import RenderConfig, RuleRenderer

pytestmark = pytest.mark.root

HOST, REMOTE, WL = "10.66.0.1", "10.66.0.2", "10.65.0.9"
WL_IFACE = "calix9"
ALLOW_ALL = Profile(inbound_rules=(Rule("allow"),), outbound_rules=(Rule("allow"),))


def _tcp_rule(action: str, port: int) -> Rule:
    return Rule(action, protocol="tcp", dst_ports=(PortRange(port, port),))


PRE = PolicyID("pre", "GlobalNetworkPolicy")
PRE_POLICY = Policy(inbound_rules=(_tcp_rule("deny", 2000), _tcp_rule("deny", 3000)), pre_dnat=True)
FWD = PolicyID("fwd", "GlobalNetworkPolicy")
FWD_POLICY = Policy(outbound_rules=(_tcp_rule("deny", 3000), Rule("allow")))
UNT = PolicyID("unt", "GlobalNetworkPolicy")
UNT_POLICY = Policy(inbound_rules=(_tcp_rule("deny", 2000),), untracked=True)


@dataclass
class Net:
    host: str
    remote: str
    wl: str


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    with netns("calwh") as host, netns("calwr") as remote, netns("calww") as wl:
        in_ns(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        add_veth("eth9", "eth0", ns=host, peer_ns=remote)
        in_ns(host, "ip", "addr", "add", f"{HOST}/24", "dev", "eth9")
        in_ns(remote, "ip", "addr", "add", f"{REMOTE}/24", "dev", "eth0")
        add_veth(WL_IFACE, "eth0", ns=host, peer_ns=wl)
        in_ns(wl, "ip", "addr", "add", f"{WL}/32", "dev", "eth0")
        for ns, iface in ((host, "eth9"), (remote, "eth0"), (host, WL_IFACE), (wl, "eth0")):
            in_ns(ns, "ip", "link", "set", iface, "up")
        in_ns(remote, "ip", "route", "add", "10.65.0.0/24", "via", HOST)
        # A default route, so proxy ARP answers the workload's gateway (169.254.1.1).
        in_ns(host, "ip", "route", "add", "default", "via", REMOTE, "dev", "eth9")
        in_ns(wl, "ip", "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link")
        in_ns(wl, "ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
        in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{WL_IFACE}.proxy_arp=1")
        in_ns(host, "sysctl", "-qw", f"net.ipv4.neigh.{WL_IFACE}.proxy_delay=0")
        in_ns(host, "ip", "route", "add", f"{WL}/32", "dev", WL_IFACE)
        mac = link_mac(wl, "eth0")
        in_ns(
            host, "ip", "neigh", "replace", WL, "lladdr", mac, "dev", WL_IFACE, "nud", "permanent"
        )
        with servers(host, "22", "2000"), servers(remote, "3000"), servers(wl, "4000"):
            yield Net(host, remote, wl)


def _program(n: Net, wild: HostEndpoint, named: dict[str, HostEndpoint] | None = None) -> None:
    """What the endpoint manager renders for these endpoints (``*`` under ALL_INTERFACES)."""
    r = RuleRenderer(RenderConfig(ipv6_enabled=False))
    heps = {**(named or {}), ALL_INTERFACES: wild}
    chains = r.static_chains() + r.host_dispatch_chains(wild)
    for pid, pol in ((PRE, PRE_POLICY), (FWD, FWD_POLICY), (UNT, UNT_POLICY)):
        chains += r.policy_chains(pid, pol)
    chains += r.profile_chains("allow-all", ALLOW_ALL)
    for iface, hep in heps.items():
        chains += r.host_endpoint_chains(iface, hep)
    wep = WorkloadEndpoint("active", "", profile_ids=("allow-all",))
    chains += r.workload_endpoint_chains(WL_IFACE, wep)
    maps = r.dispatch_maps({WL_IFACE: wep}, heps)
    program(n.host, ruleset_commands(chains, r.static_sets(), maps))


def test_deny_all_polices_the_uplink_but_not_workloads_or_forwarded(net: Net) -> None:
    _program(net, HostEndpoint("*"))
    assert tcp_connect(net.remote, HOST, 2000) == "timeout"
    assert tcp_connect(net.remote, HOST, 22) == "ok"  # failsafe in
    assert tcp_connect(net.host, REMOTE, 3000) == "timeout"
    assert tcp_connect(net.host, WL, 4000) == "ok"  # host -> workload: not policed
    assert tcp_connect(net.wl, REMOTE, 3000) == "ok"  # forwarded, no applyOnForward policy
    assert tcp_connect(net.remote, WL, 4000) == "ok"


def test_named_endpoint_wins_over_all_interfaces(net: Net) -> None:
    _program(net, HostEndpoint("*"), {"eth9": HostEndpoint("eth9", ("allow-all",))})
    assert tcp_connect(net.remote, HOST, 2000) == "ok"
    assert tcp_connect(net.host, REMOTE, 3000) == "ok"


def test_pre_dnat_applies_to_host_interfaces_only(net: Net) -> None:
    wild = HostEndpoint("*", ("allow-all",), pre_dnat_tiers=(TierInfo("default", (PRE,)),))
    _program(net, wild)
    assert tcp_connect(net.remote, HOST, 2000) == "timeout"  # pre-DNAT deny from eth9
    assert tcp_connect(net.remote, HOST, 22) == "ok"  # mangle failsafe first
    assert tcp_connect(net.wl, REMOTE, 3000) == "ok"  # from a workload: no pre-DNAT


def test_apply_on_forward_egress_polices_forwarded_traffic(net: Net) -> None:
    wild = HostEndpoint("*", ("allow-all",), forward_tiers=(TierInfo("default", (), (FWD,)),))
    _program(net, wild)
    assert tcp_connect(net.wl, REMOTE, 3000) == "timeout"  # forwarded out of eth9
    assert tcp_connect(net.remote, WL, 4000) == "ok"  # forwarded to the workload: allowed
    assert tcp_connect(net.host, REMOTE, 3000) == "ok"  # the host's own: normal policy


def test_untracked_policy_is_ignored(net: Net) -> None:
    wild = HostEndpoint("*", ("allow-all",), untracked_tiers=(TierInfo("default", (UNT,)),))
    _program(net, wild)
    assert tcp_connect(net.remote, HOST, 2000) == "ok"  # the untracked deny is not rendered
    # The same endpoint named for eth9 does get it (so the policy would deny if rendered).
    named = HostEndpoint("eth9", ("allow-all",), untracked_tiers=wild.untracked_tiers)
    _program(net, wild, {"eth9": named})
    assert tcp_connect(net.remote, HOST, 2000) == "timeout"
