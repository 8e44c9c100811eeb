"""Real packets through rendered rules: workload namespaces routed by a "host" namespace.

w1 (10.65.0.1) and w3 (10.65.0.3) are clients, w2 (10.65.0.2) serves TCP 8080 and 9090. Each test
programs the host namespace with the renderer's static chains plus one scenario's policy,
profile and endpoint chains, then probes with real connects (a drop shows up as a timeout).
"""

from __future__ import annotations

import pytest
from rules_netns import (
    Topology,
    add_veth,
    icmp_probe,
    in_ns,
    netns,
    program,
    ruleset_commands,
    servers,
    tcp_connect,
)

from calico.felix.messages import (
    HostEndpoint,
    ICMPTypeCode,
    Policy,
    PolicyID,
    PortRange,
    Profile,
    Rule,
    TierInfo,
    WorkloadEndpoint,
)
from calico.felix.nftables.model import Chain, NftSet, ipset_name
from calico.felix.rules import RenderConfig, RuleRenderer
from calico.felix.rules.groups import RETURN_STRIDE, GroupKey, is_group_chain

pytestmark = pytest.mark.root

ALLOW_ALL = Profile(inbound_rules=(Rule("allow"),), outbound_rules=(Rule("allow"),))
CLIENT_SET = "s:clients"  # "selector" set holding w1 only


def _program(
    topo: Topology,
    *,
    server: WorkloadEndpoint,
    policies: dict[PolicyID, Policy] | None = None,
    profiles: dict[str, Profile] | None = None,
    group_key: GroupKey | None = None,
) -> list[Chain]:
    r = RuleRenderer(RenderConfig(ipv6_enabled=False))
    chains = r.static_chains()
    for pid, pol in (policies or {}).items():
        chains += r.policy_chains(pid, pol)
    for name, prof in {"allow-all": ALLOW_ALL, **(profiles or {})}.items():
        chains += r.profile_chains(name, prof)
    client = WorkloadEndpoint("active", "", profile_ids=("allow-all",))
    eps = {topo.ifaces[0]: client, topo.ifaces[1]: server, topo.ifaces[2]: client}
    for iface, ep in eps.items():
        chains += r.workload_endpoint_chains(iface, ep, group_key=group_key)
    chains = list({c.name: c for c in chains}.values())  # endpoints share group chains
    sets = [
        *r.static_sets(),
        NftSet(ipset_name(CLIENT_SET, 4), "ipv4_addr", True, {f"{topo.ips[0]}/32"}),
    ]
    program(topo.host, ruleset_commands(chains, sets, r.dispatch_maps(eps)))
    return chains


def _server(*tiers: TierInfo, profiles: tuple[str, ...] = ("allow-all",), state: str = "active"):
    return WorkloadEndpoint(state, "", profile_ids=profiles, tiers=tiers)


def _reach(topo: Topology, client: int, port: int) -> str:
    return tcp_connect(topo.workloads[client], topo.ips[1], port)


def test_selector_policy_allows_port_from_set_and_drops_the_rest(topology: Topology) -> None:
    pid = PolicyID("allow-8080", "GlobalNetworkPolicy", tier="default")
    pol = Policy(
        inbound_rules=(
            Rule(
                "allow",
                protocol="tcp",
                src_ip_set_ids=(CLIENT_SET,),
                dst_ports=(PortRange(8080, 8080),),
            ),
        )
    )
    _program(topology, server=_server(TierInfo("default", (pid,))), policies={pid: pol})
    assert _reach(topology, 0, 8080) == "ok"
    assert _reach(topology, 0, 9090) == "timeout"  # end-of-tier deny
    assert _reach(topology, 2, 8080) == "timeout"  # w3 is not in the selector set


def test_policy_group_passes_past_the_return_stride_and_reaches_its_last_policy(
    topology: Topology,
) -> None:
    """One group of seven policies (past the return-on-verdict check before the sixth): a
    pass from the first skips the five denies after it, across the check, to the next tier;
    a port no policy decides walks the whole group to the allow in its last policy."""
    tcp = {"protocol": "tcp"}
    first = [PolicyID(f"f{i}", "GlobalNetworkPolicy", tier="first") for i in range(7)]
    pols = {
        first[0]: Policy(inbound_rules=(Rule("pass", **tcp, dst_ports=(PortRange(9090, 9090),)),))
    }
    for p in first[1:-1]:
        pols[p] = Policy(inbound_rules=(Rule("deny", **tcp, dst_ports=(PortRange(9090, 9090),)),))
    pols[first[-1]] = Policy(
        inbound_rules=(
            Rule("allow", **tcp, src_ip_set_ids=(CLIENT_SET,), dst_ports=(PortRange(8080, 8080),)),
        )
    )
    second = PolicyID("s0", "GlobalNetworkPolicy", tier="second")
    pols[second] = Policy(inbound_rules=(Rule("allow", **tcp, dst_ports=(PortRange(9090, 9090),)),))
    server = _server(TierInfo("first", tuple(first)), TierInfo("second", (second,)))
    assert len(first) > RETURN_STRIDE + 1
    chains = _program(topology, server=server, policies=pols, group_key=lambda p: "same")
    groups = [c for c in chains if is_group_chain(c.name)]
    assert len(groups) == 1 and len(groups[0].rules) == len(first) + 1
    assert _reach(topology, 0, 9090) == "ok"  # passed by f0, allowed by the next tier
    assert _reach(topology, 0, 8080) == "ok"  # the group's last policy
    assert _reach(topology, 2, 8080) == "timeout"  # not a client: end of tier "first"


def test_icmp_allowed_by_type(topology: Topology) -> None:
    pid = PolicyID("ping", "GlobalNetworkPolicy", tier="default")
    pol = Policy(inbound_rules=(Rule("allow", protocol="icmp", icmp=ICMPTypeCode(8)),))
    _program(topology, server=_server(TierInfo("default", (pid,))), policies={pid: pol})
    w1, dst = topology.workloads[0], topology.ips[1]
    assert icmp_probe(w1, dst, 8) == "ok"
    assert icmp_probe(w1, dst, 13) == "timeout"  # timestamp request: other type, denied
    # And the reverse: deny echo explicitly, allow the rest of ICMP.
    pol = Policy(
        inbound_rules=(
            Rule("deny", protocol="icmp", icmp=ICMPTypeCode(8, 0)),
            Rule("allow", protocol="icmp"),
        )
    )
    _program(topology, server=_server(TierInfo("default", (pid,))), policies={pid: pol})
    assert icmp_probe(w1, dst, 8) == "timeout"
    assert icmp_probe(w1, dst, 13) == "ok"


def test_profile_allows_then_final_deny(topology: Topology) -> None:
    prof = Profile(
        inbound_rules=(Rule("allow", protocol=6, dst_ports=(PortRange(8000, 8100),)),),
        outbound_rules=(Rule("allow"),),
    )
    _program(topology, server=_server(profiles=("web",)), profiles={"web": prof})
    assert _reach(topology, 0, 8080) == "ok"
    assert _reach(topology, 2, 8080) == "ok"
    assert _reach(topology, 0, 9090) == "timeout"  # no profile allowed it


def test_tier_pass_and_end_of_tier_deny(topology: Topology) -> None:
    gate = PolicyID("gate", "GlobalNetworkPolicy", tier="security")
    app = PolicyID("app", "GlobalNetworkPolicy", tier="default")
    policies = {
        # Tier "security": pass 8080 on to the next tier; nothing else matches -> tier drop.
        gate: Policy(
            inbound_rules=(Rule("pass", protocol="tcp", dst_ports=(PortRange(8080, 8080),)),)
        ),
        # Tier "default" would allow both ports.
        app: Policy(
            inbound_rules=(
                Rule(
                    "allow",
                    protocol="tcp",
                    dst_ports=(PortRange(8080, 8080), PortRange(9090, 9090)),
                ),
            )
        ),
    }
    server = _server(TierInfo("security", (gate,)), TierInfo("default", (app,)))
    _program(topology, server=server, policies=policies)
    assert _reach(topology, 0, 8080) == "ok"
    assert _reach(topology, 0, 9090) == "timeout"

    # With default action Pass the first tier no longer drops what it does not match.
    server = _server(
        TierInfo("security", (gate,), default_action="Pass"), TierInfo("default", (app,))
    )
    _program(topology, server=server, policies=policies)
    assert _reach(topology, 0, 9090) == "ok"


def test_admin_down_endpoint_denies_everything(topology: Topology) -> None:
    _program(topology, server=_server(state="down"))
    assert _reach(topology, 0, 8080) == "timeout"
    _program(topology, server=_server())
    assert _reach(topology, 0, 8080) == "ok"


def test_egress_policy_on_client_and_unknown_workload_iface(topology: Topology) -> None:
    pid = PolicyID("no-9090-out", "GlobalNetworkPolicy", tier="default")
    pol = Policy(
        outbound_rules=(
            Rule("deny", protocol="tcp", dst_ports=(PortRange(9090, 9090),)),
            Rule("allow", dst_net=("10.65.0.0/24",)),
        )
    )
    r = RuleRenderer(RenderConfig(ipv6_enabled=False))
    client = WorkloadEndpoint("active", "", tiers=(TierInfo("default", (), (pid,)),))
    server = _server()
    eps = {topology.ifaces[0]: client, topology.ifaces[1]: server}  # w3's iface is unknown
    chains = [
        *r.static_chains(),
        *r.policy_chains(pid, pol),
        *r.profile_chains("allow-all", ALLOW_ALL),
    ]
    for iface, ep in eps.items():
        chains += r.workload_endpoint_chains(iface, ep)
    program(topology.host, ruleset_commands(chains, r.static_sets(), r.dispatch_maps(eps)))
    assert _reach(topology, 0, 8080) == "ok"
    assert _reach(topology, 0, 9090) == "timeout"
    assert _reach(topology, 2, 8080) == "timeout"  # unknown cali* interface -> deny


def test_host_endpoint_failsafe_and_default_deny() -> None:
    """A HEP with no policy or profile denies traffic to the host except failsafe ports."""
    with netns("calhep") as host, netns("calremote") as remote:
        add_veth("eth9", "eth0", ns=host, peer_ns=remote)
        for ns, ip in ((host, "10.66.0.1/24"), (remote, "10.66.0.2/24")):
            iface = "eth9" if ns == host else "eth0"
            in_ns(ns, "ip", "addr", "add", ip, "dev", iface)
            in_ns(ns, "ip", "link", "set", iface, "up")
        with servers(host, "22", "2000"):
            r = RuleRenderer(RenderConfig(ipv6_enabled=False))
            for hep, profiles in (
                (HostEndpoint("eth9"), {}),
                (HostEndpoint("eth9", ("allow-all",)), {"allow-all": ALLOW_ALL}),
            ):
                chains = [*r.static_chains(), *r.host_endpoint_chains("eth9", hep)]
                for name, prof in profiles.items():
                    chains += r.profile_chains(name, prof)
                maps = r.dispatch_maps([], {"eth9": hep})
                program(host, ruleset_commands(chains, r.static_sets(), maps))
                assert tcp_connect(remote, "10.66.0.1", 22) == "ok"  # failsafe
                expected = "ok" if profiles else "timeout"
                assert tcp_connect(remote, "10.66.0.1", 2000) == expected
