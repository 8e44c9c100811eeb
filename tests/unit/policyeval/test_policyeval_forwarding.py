"""Table tests for forwarded traffic through host endpoints, as ``cali-FORWARD`` runs it
(``calico.felix.rules.static.filter_chains``): the from-HEP forward chain of the interface in
(skipped after an untracked / pre-DNAT allow), the workload chains, the to-HEP forward chain of
the interface out; applyOnForward policy only, no failsafe, end-of-tier and final deny when any
policy applies, nothing when none does; the ``*`` endpoint's chains on workload interfaces;
which endpoint's interface a packet crosses (one uplink, ``*``, ``via``, ambiguous)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from typing import Any

import pytest

from calico.model import ResourceKey
from calico.policyeval.dataset import Dataset
from calico.policyeval.evaluate import Packet
from calico.policyeval.forwarding import NodeEndpoints
from calico.policyeval.hostconfig import FelixConfigs
from calico.policyeval.hostendpoints import CrossingUnknown
from calico.policyeval.report import HostAddress, enforcing_endpoint, explain_connection

TCP = 6
HOST_IP, EXT_IP, WL_IP, WL2_IP, REMOTE_IP = (
    "192.168.0.1",
    "203.0.113.9",
    "10.0.0.5",
    "10.0.0.6",
    "10.0.1.7",
)
PROFILE = {
    "kind": "Profile",
    "metadata": {"name": "kns.ns1"},
    "spec": {"ingress": [{"action": "Allow"}], "egress": [{"action": "Allow"}]},
}


def hep(name: str, iface: str, labels: dict[str, str], node: str = "node1", ips=()) -> dict:
    spec: dict[str, Any] = {"node": node, "interfaceName": iface, "expectedIPs": list(ips)}
    return {"kind": "HostEndpoint", "metadata": {"name": name, "labels": labels}, "spec": spec}


def wep(name: str, ip: str, node: str = "node1") -> dict[str, Any]:
    return {
        "kind": "WorkloadEndpoint",
        "metadata": {
            "name": f"{node}-k8s-{name}-eth0",
            "namespace": "ns1",
            "labels": {"app": name},
        },
        "spec": {
            "node": node,
            "orchestrator": "k8s",
            "pod": name,
            "endpoint": "eth0",
            "interfaceName": f"cali{name}",
            "ipNetworks": [f"{ip}/32"],
            "profiles": ["kns.ns1"],
        },
    }


def gnp(name: str, selector: str, direction: str, rules: list[Any], **spec: Any) -> dict:
    body = {"selector": selector, "types": [direction.capitalize()], direction: rules, **spec}
    return {"kind": "GlobalNetworkPolicy", "metadata": {"name": name}, "spec": body}


def fwd(name: str, role: str, direction: str, rules: list[Any], **spec: Any) -> dict:
    return gnp(name, f"role == '{role}'", direction, rules, applyOnForward=True, **spec)


def tcp(action: str, port: int = 8080) -> dict[str, Any]:
    return {"action": action, "protocol": "TCP", "destination": {"ports": [port]}}


def tier(name: str, order: int, default_action: str = "Deny") -> dict[str, Any]:
    spec = {"order": order, "defaultAction": default_action}
    return {"kind": "Tier", "metadata": {"name": name}, "spec": spec}


UPLINK = hep("node1-eth0", "eth0", {"role": "up"}, ips=[HOST_IP])
WILD = hep("auto-node1", "*", {"role": "wild"}, ips=[HOST_IP])
WL_CLOSED = {
    "kind": "NetworkPolicy",
    "metadata": {"name": "w-closed", "namespace": "ns1"},
    "spec": {"selector": "app == 'w'", "ingress": [{"action": "Deny"}],
             "egress": [{"action": "Deny"}]},
}  # fmt: skip


def dataset(*docs: dict[str, Any]) -> Dataset:
    data = Dataset()
    for doc in [PROFILE, *docs]:
        meta = doc["metadata"]
        doc = {"apiVersion": "projectcalico.org/v3", **doc}
        ns = meta.get("namespace", "")
        if doc["kind"] in ("WorkloadEndpoint", "HostEndpoint"):
            data.add_endpoint_text(doc["kind"], ns, meta["name"], json.dumps(doc))
        else:
            data.add_resource(ResourceKey(doc["kind"], meta["name"], ns), doc)
    return data.finish()


def explain(
    data: Dataset, src: str, dst: str, dport: int = 8080, sport: int = 40000, **kw: Any
) -> dict[str, Any]:
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    src_ep = (enforcing_endpoint(data.endpoints_at(s), s) or [None])[0]
    dst_ep = (enforcing_endpoint(data.endpoints_at(d), d) or [None])[0]
    return explain_connection(data, src_ep, dst_ep, Packet(TCP, s, d, sport, dport), "TCP", **kw)


def chain(side: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(s["step"], s.get("layer"), s.get("hostEndpoint"), s["action"]) for s in side["chain"]]


UP, AUTO = "hostendpoint node1-eth0", "hostendpoint auto-node1"

# -- forward policy outcome x workload policy, in and out, named and `*` --------------------------

# forward policy rules -> (policy docs, does the forward chain let it on?)
OUTCOMES = {
    "allow": ([tcp("Allow")], True),
    "deny": ([tcp("Deny")], False),
    "pass": ([tcp("Pass")], False),  # Pass in the last tier: no profiles, the final deny
    "no-match": ([tcp("Allow", 9090)], False),  # end-of-tier deny
    "none": (None, True),  # no applyOnForward policy: the chain is empty
}


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
@pytest.mark.parametrize("workload_allows", [True, False])
@pytest.mark.parametrize(("crossing", "role", "shown"), [(UPLINK, "up", UP), (WILD, "wild", AUTO)])
@pytest.mark.parametrize("inbound", [True, False])
def test_forward_policy_times_workload_policy(
    outcome: str, workload_allows: bool, crossing: dict, role: str, shown: str, inbound: bool
) -> None:
    rules, lets_on = OUTCOMES[outcome]
    docs: list[dict[str, Any]] = [crossing, wep("w", WL_IP)]
    direction = "ingress" if inbound else "egress"  # the endpoint's side of the uplink
    if rules is not None:
        docs.append(fwd("f", role, direction, rules))
    if not workload_allows:
        docs.append(WL_CLOSED)
    src, dst = (EXT_IP, WL_IP) if inbound else (WL_IP, EXT_IP)
    report = explain(dataset(*docs), src, dst)
    side = report["ingress" if inbound else "egress"]
    expect = "Allow" if lets_on and workload_allows else "Deny"
    assert side["verdict"] == expect
    assert report["result"]["verdict"] == expect
    steps = chain(side)
    forward = [s for s in steps if s[1] == "forward"]
    assert all(s[2] == shown for s in forward)
    # out through a named uplink, a denying workload is all there is
    assert bool(forward) is (inbound or workload_allows or crossing is WILD)
    if inbound:
        # the forward chain in comes first; a deny there ends the side before the workload's
        assert steps[0][1] == "forward"
        if not lets_on:
            assert report["result"]["hostEndpoint"] == shown
            assert all(s[1] == "forward" for s in steps)
    else:
        # the workload's egress first: a denying workload never reaches the chain out
        assert steps[-1][1] == ("forward" if workload_allows else None)
        if workload_allows and not lets_on:
            assert report["result"]["hostEndpoint"] == shown
    if outcome == "none" and forward:
        assert ("forward-none", "forward", shown, None) in steps


def test_forward_chain_steps_exactly() -> None:
    """Pass goes to the next tier; a tier's Pass default action skips its end-of-tier deny."""
    docs = [
        UPLINK,
        wep("w", WL_IP),
        tier("first", 10),
        tier("second", 20, "Pass"),
        fwd("a-pass", "up", "ingress", [tcp("Pass")], tier="first"),
        fwd("b-nomatch", "up", "ingress", [tcp("Allow", 1)], tier="second"),
        fwd("c-allow", "up", "ingress", [tcp("Allow")]),  # the default tier, last
    ]
    report = explain(dataset(*docs), EXT_IP, WL_IP)
    assert [
        (s["step"], s.get("tier"), s.get("policy"), s["action"]) for s in report["ingress"]["chain"]
    ] == [
        ("forward-chain", None, None, None),
        ("rule", "first", "GlobalNetworkPolicy a-pass", "Pass"),
        ("no-match", "second", "GlobalNetworkPolicy b-nomatch", None),
        ("end-of-tier", "second", None, "Pass"),
        ("rule", "default", "GlobalNetworkPolicy c-allow", "Allow"),
        ("rule", None, "Profile kns.ns1", "Allow"),
    ]
    assert report["result"] == {"verdict": "Allow"}
    # The same tier ending with no match and a Deny default: the final word.
    docs[3] = tier("second", 20)
    report = explain(dataset(*docs), EXT_IP, WL_IP)
    assert report["ingress"]["chain"][-1]["step"] == "end-of-tier"
    assert report["result"] == {
        "verdict": "Deny",
        "deniedAt": "ingress",
        "endpoint": "workloadendpoint ns1/node1-k8s-w-eth0",
        "hostEndpoint": UP,
    }


def test_only_apply_on_forward_policy_is_in_the_forward_chains() -> None:
    plain = gnp("plain", "role == 'up'", "ingress", [tcp("Deny")])  # INPUT only
    report = explain(dataset(UPLINK, wep("w", WL_IP), plain), EXT_IP, WL_IP)
    assert report["result"] == {"verdict": "Allow"}
    assert chain(report["ingress"])[0] == ("forward-none", "forward", UP, None)


def test_named_uplink_and_wild_on_the_workload_interface() -> None:
    """Out of the uplink: the named endpoint's chain (not ``*``'s); on the workload's interface
    ``*``'s, in the opposite direction (the workload interface is its ingress when leaving it)."""
    docs = [
        UPLINK,
        WILD,
        wep("w", WL_IP),
        fwd("wild-in", "wild", "ingress", [tcp("Deny", 7000), {"action": "Allow"}]),
        fwd("wild-out", "wild", "egress", [tcp("Deny", 7001), {"action": "Allow"}]),
        fwd("up-in", "up", "ingress", [tcp("Deny", 7002), {"action": "Allow"}]),
        fwd("up-out", "up", "egress", [tcp("Deny", 7003), {"action": "Allow"}]),
    ]
    data = dataset(*docs)
    # workload -> outside: `*` ingress on caliw, then up-out on eth0.
    verdicts = {port: explain(data, WL_IP, EXT_IP, port)["result"] for port in range(7000, 7004)}
    assert verdicts[7000] == {
        "verdict": "Deny",
        "deniedAt": "egress",
        "endpoint": "workloadendpoint ns1/node1-k8s-w-eth0",
        "hostEndpoint": AUTO,
    }
    assert verdicts[7001] == {"verdict": "Allow"}  # wild-out is not on this path
    assert verdicts[7002] == {"verdict": "Allow"}
    assert verdicts[7003]["hostEndpoint"] == UP
    # outside -> workload: up-in on eth0, then `*` egress on caliw.
    verdicts = {port: explain(data, EXT_IP, WL_IP, port)["result"] for port in range(7000, 7004)}
    assert [v["verdict"] for v in verdicts.values()] == ["Allow", "Deny", "Deny", "Allow"]
    assert verdicts[7001]["hostEndpoint"] == AUTO and verdicts[7002]["hostEndpoint"] == UP
    steps = chain(explain(data, EXT_IP, WL_IP, 7000)["ingress"])
    assert [s[2] for s in steps if s[1] == "forward"] == [UP, UP, AUTO, AUTO]
    assert [s[0] for s in steps] == ["forward-chain", "rule", "rule", "forward-chain", "rule"]


def test_workload_to_workload_same_node_crosses_only_wild() -> None:
    docs = [
        UPLINK,
        WILD,
        wep("w", WL_IP),
        wep("v", WL2_IP),
        fwd("up-deny", "up", "ingress", [{"action": "Deny"}]),
        fwd("up-deny-out", "up", "egress", [{"action": "Deny"}]),
        fwd("wild-in", "wild", "ingress", [tcp("Deny", 7000), {"action": "Allow"}]),
        fwd("wild-out", "wild", "egress", [tcp("Deny", 7001), {"action": "Allow"}]),
    ]
    data = dataset(*docs)
    assert explain(data, WL_IP, WL2_IP, 8080)["result"] == {"verdict": "Allow"}
    r7000 = explain(data, WL_IP, WL2_IP, 7000)["result"]
    assert (r7000["deniedAt"], r7000["hostEndpoint"]) == ("egress", AUTO)
    r7001 = explain(data, WL_IP, WL2_IP, 7001)["result"]
    assert (r7001["deniedAt"], r7001["hostEndpoint"]) == ("ingress", AUTO)
    # Without a `*` endpoint nothing of the host endpoints is on that path.
    plain = dataset(*[d for d in docs if d is not WILD])
    assert chain(explain(plain, WL_IP, WL2_IP, 7000)["egress"]) == [("rule", None, None, "Allow")]


def test_workload_to_workload_across_nodes_crosses_both_uplinks() -> None:
    docs = [
        UPLINK,
        hep("node2-eth0", "eth0", {"role": "up2"}, node="node2"),
        wep("w", WL_IP),
        wep("r", REMOTE_IP, node="node2"),
        fwd("out1", "up", "egress", [tcp("Deny", 7000), {"action": "Allow"}]),
        fwd("in2", "up2", "ingress", [tcp("Deny", 7001), {"action": "Allow"}]),
    ]
    data = dataset(*docs)
    assert explain(data, WL_IP, REMOTE_IP, 8080)["result"] == {"verdict": "Allow"}
    r = explain(data, WL_IP, REMOTE_IP, 7000)["result"]
    assert (r["deniedAt"], r["hostEndpoint"]) == ("egress", UP)
    r = explain(data, WL_IP, REMOTE_IP, 7001)["result"]
    assert (r["deniedAt"], r["hostEndpoint"]) == ("ingress", "hostendpoint node2-eth0")
    # the other way: node2's uplink out (no policy), node1's in (none either)
    assert explain(data, REMOTE_IP, WL_IP, 7000)["result"] == {"verdict": "Allow"}


# -- pre-DNAT, untracked, failsafe on forwarded traffic ------------------------------------------

PREDNAT_ALLOW = fwd("p-allow", "up", "ingress", [tcp("Allow")], preDNAT=True)
PREDNAT_DENY = fwd("p-deny", "up", "ingress", [tcp("Deny")], preDNAT=True)
PREDNAT_NOMATCH = fwd("p-nomatch", "up", "ingress", [tcp("Allow", 1)], preDNAT=True)
UNTRACKED_ALLOW = fwd("u-allow", "up", "ingress", [tcp("Allow")], doNotTrack=True)
UNTRACKED_DENY = fwd("u-deny", "up", "ingress", [tcp("Deny")], doNotTrack=True)
FWD_DENY = fwd("f-deny", "up", "ingress", [{"action": "Deny"}])
FWD_ALLOW = fwd("f-allow", "up", "ingress", [{"action": "Allow"}])


@pytest.mark.parametrize(
    ("docs", "workload_allows", "verdict", "first_steps"),
    [
        # a pre-DNAT allow sets the accept mark: the forward chain in is skipped...
        ([PREDNAT_ALLOW, FWD_DENY], True, "Allow", ["rule", "forward-skipped"]),
        # ...but not the workload's own policy
        ([PREDNAT_ALLOW, FWD_DENY], False, "Deny", ["rule", "forward-skipped"]),
        ([PREDNAT_DENY, FWD_ALLOW], True, "Deny", ["rule"]),
        ([PREDNAT_NOMATCH, FWD_ALLOW], True, "Allow", ["no-match", "layer-end", "forward-chain"]),
        ([PREDNAT_NOMATCH, FWD_DENY], True, "Deny", ["no-match", "layer-end", "forward-chain"]),
        # untracked first: its allow skips pre-DNAT and the forward chain in
        ([UNTRACKED_ALLOW, PREDNAT_DENY, FWD_DENY], True, "Allow", ["rule", "forward-skipped"]),
        ([UNTRACKED_DENY, PREDNAT_ALLOW], True, "Deny", ["rule"]),
    ],
)
def test_pre_dnat_and_untracked_before_the_forward_chain(
    docs: list[dict], workload_allows: bool, verdict: str, first_steps: list[str]
) -> None:
    extra = [] if workload_allows else [WL_CLOSED]
    report = explain(dataset(UPLINK, wep("w", WL_IP), *docs, *extra), EXT_IP, WL_IP)
    assert report["result"]["verdict"] == verdict
    steps = report["ingress"]["chain"]
    assert [s["step"] for s in steps[: len(first_steps)]] == first_steps
    assert all(s["hostEndpoint"] == UP for s in steps[: len(first_steps)])


def test_wild_crossing_has_no_untracked_layer_but_pre_dnat() -> None:
    u = fwd("u-deny", "wild", "ingress", [tcp("Deny")], doNotTrack=True)
    p = fwd("p-allow", "wild", "ingress", [tcp("Allow")], preDNAT=True)
    f = fwd("f-deny", "wild", "ingress", [{"action": "Deny"}])
    report = explain(dataset(WILD, wep("w", WL_IP), u, p, f), EXT_IP, WL_IP)
    assert report["result"] == {"verdict": "Allow"}
    assert [(s["step"], s.get("layer")) for s in report["ingress"]["chain"]][:2] == [
        ("rule", "preDNAT"),
        ("forward-skipped", "forward"),
    ]


@pytest.mark.parametrize(
    ("port", "forward_docs", "verdict"),
    [
        (22, [], "Allow"),  # failsafe skips the pre-DNAT deny; no forward policy
        (22, [FWD_DENY], "Deny"),  # ...but the forward chain has no failsafe
        (21, [], "Deny"),  # not a failsafe port: the pre-DNAT deny
        (23, [], "Deny"),
    ],
)
def test_failsafe_only_skips_a_layer_for_forwarded_traffic(
    port: int, forward_docs: list[dict], verdict: str
) -> None:
    p_deny = fwd("p-deny", "up", "ingress", [{"action": "Deny"}], preDNAT=True)
    data = dataset(UPLINK, wep("w", WL_IP), p_deny, *forward_docs)
    report = explain(data, EXT_IP, WL_IP, port)
    assert report["result"]["verdict"] == verdict
    if port == 22:
        assert chain(report["ingress"])[0] == ("failsafe", "preDNAT", UP, None)
    # the raw layer also lets replies of outbound failsafes (source port 53 UDP is one; TCP
    # 179 here) skip the untracked policy
    u_deny = fwd("u-deny", "up", "ingress", [{"action": "Deny"}], doNotTrack=True)
    reply = explain(dataset(UPLINK, wep("w", WL_IP), u_deny), EXT_IP, WL_IP, 8080, sport=179)
    assert reply["result"] == {"verdict": "Allow"}
    assert chain(reply["ingress"])[0] == ("failsafe", "untracked", UP, None)


# -- which endpoint's interface is crossed ------------------------------------------------------


def test_crossing_needs_one_uplink_or_via() -> None:
    eth1 = hep("node1-eth1", "eth1", {"role": "up1"})
    deny1 = fwd("deny1", "up1", "ingress", [{"action": "Deny"}])
    data = dataset(UPLINK, eth1, WILD, wep("w", WL_IP), deny1)
    with pytest.raises(CrossingUnknown) as err:
        explain(data, EXT_IP, WL_IP)
    assert err.value.interfaces == ["eth0", "eth1"]
    assert explain(data, EXT_IP, WL_IP, via="eth0")["result"] == {"verdict": "Allow"}
    assert explain(data, EXT_IP, WL_IP, via="eth1")["result"]["hostEndpoint"] == (
        "hostendpoint node1-eth1"
    )
    # an interface no named endpoint claims gets `*`'s chains; so does the default with no
    # named endpoint at all
    steps = chain(explain(data, EXT_IP, WL_IP, via="tunl0")["ingress"])
    assert steps[0] == ("forward-none", "forward", AUTO, None)
    # an expected-IP (unnamed) endpoint is an uplink too
    unnamed = hep("node1-ip", "", {"role": "up"}, ips=[HOST_IP])
    del unnamed["spec"]["interfaceName"]
    only = dataset(unnamed, wep("w", WL_IP), fwd("d", "up", "ingress", [{"action": "Deny"}]))
    assert explain(only, EXT_IP, WL_IP)["result"]["hostEndpoint"] == "hostendpoint node1-ip"
    # another node's endpoints do not count
    other = dataset(hep("n2", "eth0", {"role": "up"}, node="node2"), wep("w", WL_IP), FWD_DENY)
    assert chain(explain(other, EXT_IP, WL_IP)["ingress"]) == [("rule", None, None, "Allow")]


def test_staged_forward_policy_in_the_staged_view_only() -> None:
    staged = fwd("f-allow", "up", "ingress", [{"action": "Deny"}])  # stands in for f-allow
    staged["kind"] = "StagedGlobalNetworkPolicy"
    report = explain(dataset(UPLINK, wep("w", WL_IP), FWD_ALLOW, staged), EXT_IP, WL_IP)
    assert report["result"] == {"verdict": "Allow"}
    assert report["staged"]["result"]["verdict"] == "Deny"
    assert report["staged"]["result"]["hostEndpoint"] == UP


# -- a host address only a Node lists -----------------------------------------------------------


def test_node_address_is_policed_by_the_crossed_endpoint() -> None:
    tunnel = ipaddress.ip_address("10.0.0.129")
    host = HostAddress("node1", "spec.ipv4VXLANTunnelAddr")
    in_deny = gnp("in", "role == 'up'", "ingress", [tcp("Deny", 7000), {"action": "Allow"}])
    data = dataset(UPLINK, wep("w", WL_IP), in_deny)
    ext = ipaddress.ip_address(EXT_IP)

    def run(src: Any, dst: Any, port: int, hosts: tuple) -> dict[str, Any]:
        s = data.endpoints_at(src)
        d = data.endpoints_at(dst)
        pkt = Packet(TCP, src, dst, 40000, port)
        return explain_connection(
            data, s[0] if s else None, d[0] if d else None, pkt, "TCP", hosts=hosts
        )

    r = run(ext, tunnel, 7000, (None, host))
    assert r["result"]["verdict"] == "Deny" and r["ingress"]["endpoint"] == UP
    assert r["ingress"]["chain"][0]["note"] == (
        "10.0.0.129 is node node1's (spec.ipv4VXLANTunnelAddr), listed by no host endpoint: "
        f"{UP} polices the interface it crosses"
    )
    assert run(ext, tunnel, 7001, (None, host))["result"] == {"verdict": "Allow"}
    # its own workload -> that address: DefaultEndpointToHostAction (Drop by default)
    r = run(ipaddress.ip_address(WL_IP), tunnel, 7001, (None, host))
    assert r["ingress"]["chain"][0]["step"] == "workload-to-host"
    assert r["result"]["verdict"] == "Deny"
    # the host -> its own workload: not policed
    r = run(tunnel, ipaddress.ip_address(WL_IP), 7000, (host, None))
    assert r["egress"]["chain"][0]["step"] == "host-to-workload"
    # a node with no host endpoints: not policed, says which node
    bare = HostAddress("node9", "spec.bgp.ipv4Address")
    r = run(ext, tunnel, 7000, (None, bare))
    assert r["result"] == {"verdict": "Allow"}
    assert r["ingress"]["endpoint"] == "host of node node9"
    assert r["ingress"]["chain"][0]["step"] == "host-address"


def test_each_forward_step_names_its_chain_and_direction() -> None:
    """The nft chain (``--live`` reads it) and the note of every host endpoint step, both ways:
    in by the uplink (its pre-DNAT layer, then ``cali-fhfw-``) and on to the workload through
    ``*``'s ``cali-thfw-``; out from the workload through ``*``'s ``cali-fhfw-``, then the
    uplink's ``cali-thfw-``."""
    f_in = fwd("f", "up", "ingress", [tcp("Allow")])
    data = dataset(UPLINK, WILD, wep("w", WL_IP), f_in, PREDNAT_NOMATCH)
    steps = explain(data, EXT_IP, WL_IP)["ingress"]["chain"]
    seen = [(s["step"], s.get("layer"), s.get("endpointChain"), s.get("note")) for s in steps]
    assert seen == [
        ("no-match", "preDNAT", "mangle-cali-fh-eth0", "no rule matched"),
        ("layer-end", "preDNAT", "mangle-cali-fh-eth0",
         "no preDNAT policy allowed or denied: on to the next layer"),
        ("forward-chain", "forward", "filter-cali-fhfw-eth0",
         f"forwarded in through {UP} of node node1 (cali-fhfw-)"),
        ("rule", "forward", "filter-cali-fhfw-eth0", None),
        ("rule", None, None, None),  # the workload's profile: no host endpoint chain
        ("forward-none", "forward", "filter-cali-thfw-any-interface-at-all",
         f"forwarded to the workload's interface: {AUTO} (cali-thfw-): no applyOnForward "
         "egress policy, forwarded on"),
    ]  # fmt: skip
    steps = explain(dataset(UPLINK, WILD, wep("w", WL_IP)), WL_IP, EXT_IP)["egress"]["chain"]
    seen = [(s["step"], s.get("endpointChain"), s.get("note")) for s in steps]
    assert seen == [
        ("forward-none", "filter-cali-fhfw-any-interface-at-all",
         f"forwarded from the workload's interface: {AUTO} (cali-fhfw-): no applyOnForward "
         "ingress policy, forwarded on"),
        ("rule", None, None),
        ("forward-none", "filter-cali-thfw-eth0",
         f"forwarded out through {UP} of node node1 (cali-thfw-): no applyOnForward egress "
         "policy, forwarded on"),
    ]  # fmt: skip


def test_failsafe_reply_ports_only_in_the_raw_layer_and_inbound_ports_in_both() -> None:
    """An inbound failsafe port skips the untracked layer as it does pre-DNAT (the reply check
    must not replace it), and a reply from an outbound failsafe port (source 179) skips only
    the untracked layer: pre-DNAT has no such exemption."""
    u_deny = fwd("u-deny", "up", "ingress", [{"action": "Deny"}], doNotTrack=True)
    report = explain(dataset(UPLINK, wep("w", WL_IP), u_deny), EXT_IP, WL_IP, 22)
    assert report["result"] == {"verdict": "Allow"}
    assert chain(report["ingress"])[0] == ("failsafe", "untracked", UP, None)
    assert report["ingress"]["chain"][0]["note"] == (
        "failsafe port tcp:22: untracked policy skipped (forwarded traffic gets no failsafe in"
        " the forward chains)"
    )
    p_deny = fwd("p-deny", "up", "ingress", [{"action": "Deny"}], preDNAT=True)
    reply = explain(dataset(UPLINK, wep("w", WL_IP), p_deny), EXT_IP, WL_IP, 8080, sport=179)
    assert reply["result"]["verdict"] == "Deny"
    assert chain(reply["ingress"]) == [("rule", "preDNAT", UP, "Deny")]


def test_node_endpoints_are_scanned_once_per_node() -> None:
    """``NodeEndpoints.of`` converts a node's endpoints once: a second ask reads no text."""
    data = dataset(UPLINK, WILD, hep("n2", "eth0", {"role": "up"}, node="node2"))
    scans: list[str] = []
    real = data.raw_endpoints

    def counted(kind: str, namespace: str, containing: str) -> Iterator[tuple[str, dict]]:
        scans.append(containing)
        return real(kind, namespace, containing)

    data.raw_endpoints = counted  # type: ignore[method-assign]
    heps = NodeEndpoints(data)
    first = heps.of("node1")
    assert sorted(first) == ["auto-node1", "node1-eth0"]
    assert heps.of("node1") is first and heps.wild("node1") is first["auto-node1"]
    assert sorted(heps.of("node2")) == ["n2"]
    assert scans == ['"node1"', '"node2"']


def test_node_endpoints_skip_other_nodes_text_matches_and_bad_endpoints() -> None:
    """The substring scan finds ``"node1"`` in a node2 endpoint's label and in a node1
    endpoint too malformed to convert: neither is node1's, and neither breaks the walk."""
    decoy = hep("n2-eth0", "eth0", {"role": "up", "host": "node1"}, node="node2")
    broken = hep("node1-bad", "eth1", {"role": "up"})
    broken["spec"]["expectedIPs"] = ["not-an-ip"]
    data = dataset(decoy, broken, wep("w", WL_IP), FWD_DENY)
    heps = NodeEndpoints(data)
    assert heps.of("node1") == {} and heps.wild("node1") is None
    assert heps.crossed("node1", None) is None
    assert sorted(heps.of("node2")) == ["n2-eth0"]
    assert chain(explain(data, EXT_IP, WL_IP)["ingress"]) == [("rule", None, None, "Allow")]


def test_only_ingress_untracked_policy_polices_traffic_forwarded_in() -> None:
    """The raw layer of the interface in holds the endpoint's ingress policy: an untracked
    egress deny there is for traffic leaving by it, not for this."""
    u_out = fwd("u-out", "up", "egress", [{"action": "Deny"}], doNotTrack=True)
    report = explain(dataset(UPLINK, wep("w", WL_IP), u_out), EXT_IP, WL_IP)
    assert report["result"] == {"verdict": "Allow"}
    assert chain(report["ingress"])[0] == ("forward-none", "forward", UP, None)


def test_a_failsafe_net_is_matched_against_the_source_of_traffic_forwarded_in() -> None:
    """A failsafe's net names the peer outside, the source of what comes in: for an inbound
    port (pre-DNAT here) and for a reply from an outbound one (untracked), not the workload."""
    cfg = FelixConfigs()
    net = EXT_IP + "/32"
    spec = {
        "failsafeInboundHostPorts": [{"protocol": "TCP", "port": 22, "net": net}],
        "failsafeOutboundHostPorts": [{"protocol": "TCP", "port": 179, "net": net}],
    }
    cfg.raw["default"] = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "FelixConfiguration",
        "metadata": {"name": "default"},
        "spec": spec,
    }
    p_deny = fwd("p-deny", "up", "ingress", [{"action": "Deny"}], preDNAT=True)
    data = dataset(UPLINK, wep("w", WL_IP), p_deny)
    assert explain(data, EXT_IP, WL_IP, 22, configs=cfg)["result"] == {"verdict": "Allow"}
    other = explain(data, "203.0.113.10", WL_IP, 22, configs=cfg)
    assert other["result"]["verdict"] == "Deny"
    u_deny = fwd("u-deny", "up", "ingress", [{"action": "Deny"}], doNotTrack=True)
    data = dataset(UPLINK, wep("w", WL_IP), u_deny)
    reply = explain(data, EXT_IP, WL_IP, 8080, sport=179, configs=cfg)
    assert reply["result"] == {"verdict": "Allow"}
    assert chain(reply["ingress"])[0] == ("failsafe", "untracked", UP, None)
    other = explain(data, "203.0.113.10", WL_IP, 8080, sport=179, configs=cfg)
    assert other["result"]["verdict"] == "Deny"


def test_a_pre_dnat_deny_is_taken_in_the_chain_in() -> None:
    steps = explain(dataset(UPLINK, wep("w", WL_IP), PREDNAT_DENY), EXT_IP, WL_IP)["ingress"]
    assert [(s["step"], s.get("endpointChain")) for s in steps["chain"]] == [
        ("rule", "mangle-cali-fh-eth0")
    ]


def test_a_pass_out_of_the_last_tier_meets_the_forward_chains_final_deny() -> None:
    """No profiles in a forward chain: a Pass from the last tier ends at its final deny, a
    step of its own (not an end-of-tier deny)."""
    report = explain(dataset(UPLINK, wep("w", WL_IP), fwd("f", "up", "ingress", [tcp("Pass")])),
                     EXT_IP, WL_IP)  # fmt: skip
    steps = report["ingress"]["chain"]
    assert [(s["step"], s.get("endpointChain"), s["action"]) for s in steps] == [
        ("forward-chain", "filter-cali-fhfw-eth0", None),
        ("rule", "filter-cali-fhfw-eth0", "Pass"),
        ("default", "filter-cali-fhfw-eth0", "Deny"),
    ]
    assert steps[-1]["note"] == "no applyOnForward policy allowed the traffic"
    assert report["result"]["hostEndpoint"] == UP
