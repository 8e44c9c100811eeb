"""The kernel accepts everything the renderer can produce, in one transaction per config."""

from __future__ import annotations

import pytest
from rules_netns import listing, program, ruleset_commands

from calico.felix.config.netparsers import ProtoPort
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
from calico.felix.nftables.model import NftSet, ipset_name
from calico.felix.rules import RenderConfig, RuleRenderer

pytestmark = pytest.mark.root

SEL, NAMED, SVC = "s:sel", "n:named", "svc:web"

RULES = (
    Rule("allow", protocol="tcp", src_net=("10.0.0.0/8", "10.1.0.0/16", "fd00::/64"),
         dst_ports=(PortRange(80, 80), PortRange(1000, 2000))),
    Rule("deny", protocol="udp", not_dst_ports=(PortRange(53, 53),), not_src_net=("192.168.0.1",)),
    Rule("log", ip_version=6, protocol="icmpv6", icmp=ICMPTypeCode(128, 0)),
    Rule("allow", protocol="icmp", not_icmp=ICMPTypeCode(8, 0)),
    Rule("allow", protocol="icmp", not_icmp=ICMPTypeCode(13)),
    Rule("next-tier", src_ip_set_ids=(SEL,), not_dst_ip_set_ids=(SEL,)),
    Rule("pass", protocol="tcp", dst_ports=(PortRange(8080, 8080),),
         dst_named_port_ip_set_ids=(NAMED,), src_named_port_ip_set_ids=(NAMED,)),
    Rule("allow", protocol="tcp", not_dst_named_port_ip_set_ids=(NAMED,)),
    Rule("allow", dst_ip_port_set_ids=(SVC,), src_ip_port_set_ids=(SEL,)),
    Rule("deny", not_protocol="sctp"),
    Rule("allow", dst_net=("::/0",)),
    Rule("allow", dst_net=("0.0.0.0/0",)),
)  # fmt: skip


def _sets(versions: tuple[int, ...]) -> list[NftSet]:
    out = []
    for v in versions:
        addr = f"ipv{v}_addr"
        out.append(NftSet(ipset_name(SEL, v), addr, True))
        out.append(NftSet(ipset_name(NAMED, v), (addr, "inet_proto", "inet_service")))
        out.append(NftSet(ipset_name(SVC, v), (addr, "inet_proto", "inet_service")))
    return out


def _everything(config: RenderConfig) -> dict:
    r = RuleRenderer(config)
    chains = r.static_chains()
    normal = PolicyID("normal", "GlobalNetworkPolicy", tier="t1")
    ns_pol = PolicyID("in-ns", "NetworkPolicy", namespace="prod", tier="default")
    staged = PolicyID("staged", "StagedGlobalNetworkPolicy", tier="t1")
    pre = PolicyID("pre", "GlobalNetworkPolicy", tier="default")
    untracked = PolicyID("untracked", "GlobalNetworkPolicy", tier="default")
    chains += r.policy_chains(normal, Policy(inbound_rules=RULES, outbound_rules=RULES))
    chains += r.policy_chains(ns_pol, Policy(namespace="prod", inbound_rules=RULES[:3]))
    chains += r.policy_chains(staged, Policy(inbound_rules=RULES, staged=True))
    chains += r.policy_chains(pre, Policy(inbound_rules=RULES, pre_dnat=True))
    chains += r.policy_chains(
        untracked, Policy(inbound_rules=RULES, outbound_rules=RULES, untracked=True)
    )
    chains += r.profile_chains("kns.prod", Profile(inbound_rules=RULES, outbound_rules=RULES))
    tiers = (
        TierInfo("t1", (staged, normal), (normal,), "Pass"),
        TierInfo("default", (ns_pol,), ()),
    )
    weps = {
        "cali0123456789a": WorkloadEndpoint("active", "x", profile_ids=("kns.prod",), tiers=tiers),
        "calidown": WorkloadEndpoint("down", "y"),
    }
    for iface, ep in weps.items():
        chains += r.workload_endpoint_chains(iface, ep)
    hep = HostEndpoint(
        "eth0",
        profile_ids=("kns.prod",),
        tiers=tiers,
        untracked_tiers=(TierInfo("default", (untracked,), (untracked,)),),
        pre_dnat_tiers=(TierInfo("default", (pre,)),),
        forward_tiers=(TierInfo("t1", (normal,), (normal,)),),
    )
    heps = {"eth0": hep, "eth1": HostEndpoint("eth1")}
    for iface, ep in heps.items():
        chains += r.host_endpoint_chains(iface, ep)
    sets = [*r.static_sets(), *_sets(config.ip_versions)]
    return ruleset_commands(chains, sets, r.dispatch_maps(weps, heps))


@pytest.mark.parametrize(
    "config",
    [
        RenderConfig(),
        RenderConfig(
            deny_action="reject",
            endpoint_to_host_action="accept",
            log_rate_limit="10/second",
            log_prefix="calico %t/%k/%n",
            nat_outgoing_address="192.0.2.1",
            failsafe_inbound=(
                ProtoPort("tcp", 22, "10.0.0.0/8"),
                ProtoPort("udp", 68, "fd00::/64"),
            ),
            workload_iface_prefixes=("cali", "tap"),
            mark_mask=0x0FF00000,
        ),
        RenderConfig(ipv6_enabled=False, endpoint_to_host_action="return"),
        # NFLOG statements everywhere, staged policies' report-only chains jumped to.
        RenderConfig(flow_logs=True),
    ],
    ids=["defaults", "tweaked", "ipv4-only", "flow-logs"],
)
def test_kernel_accepts_full_ruleset(rules_ns: str, config: RenderConfig) -> None:
    payload = _everything(config)
    program(rules_ns, payload)
    listed = listing(rules_ns)
    chains = {o["chain"]["name"] for o in listed if "chain" in o}
    expected = {
        c["add"]["chain"]["name"] for c in payload["nftables"] if "chain" in c.get("add", {})
    }
    assert chains == expected
    assert "filter-cali-tw-cali0123456789a" in chains
    assert "mangle-cali-fh-eth0" in chains and "raw-cali-th-eth0" in chains
    assert "raw-cali-fh-eth1" not in chains  # no untracked policy on eth1
    maps = {o["map"]["name"] for o in listed if "map" in o}
    assert "filter-cali-from-wl-dispatch" in maps
    n_rules = sum(1 for o in listed if "rule" in o)
    assert n_rules == sum(1 for c in payload["nftables"] if "rule" in c.get("add", {}))
