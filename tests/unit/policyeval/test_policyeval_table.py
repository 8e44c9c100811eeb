"""Table tests for the offline evaluator: every rule feature, and tier / Pass / end-of-tier /
profile / staged combinations, on datasets built from v3 resources through the real update
processors (as ``calicoctl explain`` loads them)."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from calico.model import ResourceKey
from calico.policyeval.dataset import Dataset
from calico.policyeval.evaluate import Evaluator, Packet
from calico.policyeval.report import endpoint_policies, explain_connection, policy_selection

TCP, UDP, ICMP = 6, 17, 1
A_IP, B_IP, C_IP = "10.0.0.1", "10.0.0.2", "10.0.1.3"


def wep(name: str, ip: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "kind": "WorkloadEndpoint",
        "metadata": {"name": f"node1-k8s-{name}-eth0", "namespace": "ns1", "labels": labels},
        "spec": {
            "node": "node1",
            "orchestrator": "k8s",
            "pod": name,
            "endpoint": "eth0",
            "interfaceName": f"cali{name}",
            "ipNetworks": [f"{ip}/32"],
            "profiles": spec.pop("profiles", ["kns.ns1"]),
            **spec,
        },
    }


ALLOW_PROFILE = {
    "kind": "Profile",
    "metadata": {"name": "kns.ns1"},
    "spec": {"ingress": [{"action": "Allow"}], "egress": [{"action": "Allow"}]},
}


def gnp(name: str, selector: str, ingress: list[Any] | None = None, **spec: Any) -> dict[str, Any]:
    kind = spec.pop("kind", "GlobalNetworkPolicy")
    body: dict[str, Any] = {"selector": selector, **spec}
    if ingress is not None:
        body["ingress"] = ingress
        body.setdefault("types", ["Ingress"])
    return {"kind": kind, "metadata": {"name": name}, "spec": body}


def tier(name: str, order: float | None, default_action: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if order is not None:
        spec["order"] = order
    if default_action:
        spec["defaultAction"] = default_action
    return {"kind": "Tier", "metadata": {"name": name}, "spec": spec}


def dataset(*docs: dict[str, Any], base: bool = True) -> Dataset:
    data = Dataset()
    all_docs = list(docs)
    if base:
        all_docs = [
            wep("a", A_IP, {"app": "a"}),
            wep("b", B_IP, {"app": "b"}, ports=[{"name": "http", "port": 8080, "protocol": "TCP"}]),
            wep("c", C_IP, {"app": "c"}),
            ALLOW_PROFILE,
            *all_docs,
        ]
    for doc in all_docs:
        meta = doc["metadata"]
        doc = {"apiVersion": "projectcalico.org/v3", **doc}
        ns = meta.get("namespace", "")
        if doc["kind"] == "WorkloadEndpoint":
            data.add_endpoint_text(doc["kind"], ns, meta["name"], json.dumps(doc))
        else:
            data.add_resource(ResourceKey(doc["kind"], meta["name"], ns), doc)
    return data.finish()


def pkt(proto: int = TCP, dport: int | None = 8080, src: str = A_IP, dst: str = B_IP, **kw: Any):
    if proto == ICMP:
        kw.setdefault("icmp_type", 8)
        kw.setdefault("icmp_code", 0)
        dport = None
    sport = kw.pop("sport", 40000 if proto != ICMP else None)
    return Packet(proto, ipaddress.ip_address(src), ipaddress.ip_address(dst), sport, dport, **kw)


def ingress_verdict(data: Dataset, p: Packet, staged: bool = False) -> str:
    ep = data.endpoints_at(p.dst)[0]
    return Evaluator(data).evaluate_side(ep, True, p, staged=staged).verdict


def one_rule(rule: dict[str, Any]) -> Dataset:
    return dataset(gnp("p", "app == 'b'", [rule]))


# -- rule features: (rule, packet, expected ingress verdict at b) --------------------------------

RULE_CASES = [
    ({"action": "Allow"}, pkt(), "Allow"),
    ({"action": "Deny"}, pkt(), "Deny"),
    ({"action": "Allow", "protocol": "TCP"}, pkt(), "Allow"),
    ({"action": "Allow", "protocol": "UDP"}, pkt(), "Deny"),
    ({"action": "Allow", "protocol": "UDP"}, pkt(UDP), "Allow"),
    ({"action": "Allow", "notProtocol": "TCP"}, pkt(), "Deny"),
    ({"action": "Allow", "notProtocol": "TCP"}, pkt(UDP), "Allow"),
    ({"action": "Allow", "protocol": 6}, pkt(), "Allow"),
    # ports: exact boundaries of a range
    (
        {"action": "Allow", "protocol": "TCP", "destination": {"ports": ["8000:8080"]}},
        pkt(),
        "Allow",
    ),
    (
        {"action": "Allow", "protocol": "TCP", "destination": {"ports": ["8081:9000"]}},
        pkt(),
        "Deny",
    ),
    ({"action": "Allow", "protocol": "TCP", "destination": {"ports": [8079]}}, pkt(), "Deny"),
    ({"action": "Allow", "protocol": "TCP", "destination": {"notPorts": [8080]}}, pkt(), "Deny"),
    ({"action": "Allow", "protocol": "TCP", "destination": {"notPorts": [8081]}}, pkt(), "Allow"),
    ({"action": "Allow", "protocol": "TCP", "source": {"ports": [40000]}}, pkt(), "Allow"),
    ({"action": "Allow", "protocol": "TCP", "source": {"ports": [40001]}}, pkt(), "Deny"),
    (
        {"action": "Allow", "protocol": "TCP", "source": {"notPorts": ["39000:40000"]}},
        pkt(),
        "Deny",
    ),
    # named ports: b's "http" is TCP 8080
    ({"action": "Allow", "protocol": "TCP", "destination": {"ports": ["http"]}}, pkt(), "Allow"),
    (
        {"action": "Allow", "protocol": "TCP", "destination": {"ports": ["http"]}},
        pkt(dport=8081),
        "Deny",
    ),
    ({"action": "Allow", "protocol": "UDP", "destination": {"ports": ["http"]}}, pkt(UDP), "Deny"),
    ({"action": "Allow", "protocol": "TCP", "destination": {"ports": ["nope"]}}, pkt(), "Deny"),
    (
        {"action": "Allow", "protocol": "TCP", "destination": {"ports": ["nope", 8080]}},
        pkt(),
        "Allow",
    ),
    ({"action": "Allow", "protocol": "TCP", "destination": {"notPorts": ["http"]}}, pkt(), "Deny"),
    (
        {"action": "Allow", "protocol": "TCP", "destination": {"notPorts": ["http"]}},
        pkt(dport=9),
        "Allow",
    ),
    # named port + selector: the named-port set is filtered by the side's selector
    (
        {
            "action": "Allow",
            "protocol": "TCP",
            "destination": {"selector": "app == 'b'", "ports": ["http"]},
        },
        pkt(),
        "Allow",
    ),
    (
        {
            "action": "Allow",
            "protocol": "TCP",
            "destination": {"selector": "app == 'x'", "ports": ["http"]},
        },
        pkt(),
        "Deny",
    ),
    # selectors
    ({"action": "Allow", "source": {"selector": "app == 'a'"}}, pkt(), "Allow"),
    ({"action": "Allow", "source": {"selector": "app == 'c'"}}, pkt(), "Deny"),
    ({"action": "Allow", "source": {"notSelector": "app == 'a'"}}, pkt(), "Deny"),
    ({"action": "Allow", "source": {"notSelector": "app == 'c'"}}, pkt(), "Allow"),
    ({"action": "Allow", "source": {"notSelector": "app == 'c'"}}, pkt(src="192.0.2.9"), "Allow"),
    (
        {"action": "Allow", "source": {"selector": "has(app)", "notSelector": "app == 'a'"}},
        pkt(),
        "Deny",
    ),
    ({"action": "Allow", "source": {"selector": "all()"}}, pkt(src="192.0.2.9"), "Deny"),
    ({"action": "Allow", "destination": {"selector": "app == 'b'"}}, pkt(), "Allow"),
    # nets: boundaries, negation, the other family
    ({"action": "Allow", "source": {"nets": ["10.0.0.0/31"]}}, pkt(), "Allow"),
    ({"action": "Allow", "source": {"nets": ["10.0.0.2/31"]}}, pkt(), "Deny"),
    ({"action": "Allow", "source": {"nets": ["fd00::/64"]}}, pkt(), "Deny"),
    ({"action": "Allow", "source": {"notNets": ["10.0.0.0/24"]}}, pkt(), "Deny"),
    ({"action": "Allow", "source": {"notNets": ["10.0.1.0/24"]}}, pkt(), "Allow"),
    ({"action": "Allow", "destination": {"nets": ["10.0.0.2/32"]}}, pkt(), "Allow"),
    ({"action": "Allow", "destination": {"notNets": ["10.0.0.2/32"]}}, pkt(), "Deny"),
    # ICMP type / code, negations, and the family an ICMP protocol implies
    ({"action": "Allow", "protocol": "ICMP"}, pkt(ICMP), "Allow"),
    ({"action": "Allow", "protocol": "ICMP", "icmp": {"type": 8}}, pkt(ICMP), "Allow"),
    ({"action": "Allow", "protocol": "ICMP", "icmp": {"type": 0}}, pkt(ICMP), "Deny"),
    ({"action": "Allow", "protocol": "ICMP", "icmp": {"type": 8, "code": 0}}, pkt(ICMP), "Allow"),
    ({"action": "Allow", "protocol": "ICMP", "icmp": {"type": 8, "code": 1}}, pkt(ICMP), "Deny"),
    ({"action": "Allow", "protocol": "ICMP", "notICMP": {"type": 8}}, pkt(ICMP), "Deny"),
    (
        {"action": "Allow", "protocol": "ICMP", "notICMP": {"type": 8, "code": 1}},
        pkt(ICMP),
        "Allow",
    ),
    ({"action": "Allow", "protocol": "ICMP", "notICMP": {"type": 0}}, pkt(ICMP), "Allow"),
    ({"action": "Allow", "ipVersion": 6}, pkt(), "Deny"),
    ({"action": "Allow", "ipVersion": 4}, pkt(), "Allow"),
    # a service match has no service index behind it in Felix: never matches
    (
        {"action": "Allow", "source": {"services": {"name": "svc", "namespace": "ns1"}}},
        pkt(),
        "Deny",
    ),
]


@pytest.mark.parametrize(("rule", "packet", "expected"), RULE_CASES)
def test_rule_feature(rule: dict[str, Any], packet: Packet, expected: str) -> None:
    assert ingress_verdict(one_rule(rule), packet) == expected


def test_namespace_selector_is_folded_into_the_rule() -> None:
    ns_profile = {
        "kind": "Profile",
        "metadata": {"name": "kns.ns1"},
        "spec": {
            "ingress": [{"action": "Allow"}],
            "egress": [{"action": "Allow"}],
            "labelsToApply": {"pcns.team": "blue"},
        },
    }
    rule = {"action": "Allow", "source": {"namespaceSelector": "team == 'blue'"}}
    data = dataset(gnp("p", "app == 'b'", [rule]), ns_profile)
    assert ingress_verdict(data, pkt()) == "Allow"
    rule = {"action": "Allow", "source": {"namespaceSelector": "team == 'red'"}}
    data = dataset(gnp("p", "app == 'b'", [rule]), ns_profile)
    assert ingress_verdict(data, pkt()) == "Deny"


def test_network_set_labels_match_addresses_inside_it() -> None:
    netset = {
        "kind": "GlobalNetworkSet",
        "metadata": {"name": "ext", "labels": {"zone": "ext"}},
        "spec": {"nets": ["192.0.2.0/24"]},
    }
    rule = {"action": "Allow", "source": {"selector": "zone == 'ext'"}}
    data = dataset(gnp("p", "app == 'b'", [rule]), netset)
    assert ingress_verdict(data, pkt(src="192.0.2.255")) == "Allow"
    assert ingress_verdict(data, pkt(src="192.0.3.0")) == "Deny"


# -- tiers, Pass, end-of-tier, profiles, staged ---------------------------------------------------


def t1(name: str, rules: list[Any], order: float | None = None, **spec: Any) -> dict[str, Any]:
    doc = gnp(f"t1.{name}", spec.pop("selector", "app == 'b'"), rules, tier="t1", **spec)
    if order is not None:
        doc["spec"]["order"] = order
    return doc


TIER_CASES = [
    # no policy at all: the profile decides
    ("profile allows", [], "Allow"),
    # a policy with no rules in the default tier: end of tier denies
    ("no rules -> end of tier", [gnp("p", "app == 'b'", [])], "Deny"),
    # tier t1 (order 10) before default: its Deny wins over default's Allow
    (
        "first tier decides",
        [
            tier("t1", 10),
            t1("x", [{"action": "Deny"}]),
            gnp("p", "app == 'b'", [{"action": "Allow"}]),
        ],
        "Deny",
    ),
    # Pass skips the rest of t1 (incl. a later Deny) and default allows
    (
        "pass skips tier",
        [
            tier("t1", 10),
            t1("x", [{"action": "Pass"}], order=1),
            t1("y", [{"action": "Deny"}], order=2),
            gnp("p", "app == 'b'", [{"action": "Allow"}]),
        ],
        "Allow",
    ),
    # policy order within a tier: lower order first
    (
        "order within tier",
        [
            tier("t1", 10),
            t1("x", [{"action": "Allow"}], order=2),
            t1("y", [{"action": "Deny"}], order=1),
        ],
        "Deny",
    ),
    # equal order: by name
    (
        "name breaks ties",
        [
            tier("t1", 10),
            t1("a", [{"action": "Allow"}], order=1),
            t1("b", [{"action": "Deny"}], order=1),
        ],
        "Allow",
    ),
    # no match in t1 -> end-of-tier Deny; with defaultAction Pass -> on to the profile
    (
        "end of tier deny",
        [tier("t1", 10), t1("x", [{"action": "Allow", "protocol": "UDP"}])],
        "Deny",
    ),
    (
        "end of tier pass",
        [tier("t1", 10, "Pass"), t1("x", [{"action": "Allow", "protocol": "UDP"}])],
        "Allow",
    ),
    # a policy in a tier that does not exist: invalid tier, denies at its end
    ("missing tier denies", [t1("x", [{"action": "Allow", "protocol": "UDP"}])], "Deny"),
    # tiers order: t2 (order 5) before t1 (order 10); missing order sorts last
    (
        "tier order",
        [
            tier("t1", 10),
            tier("t2", 5),
            t1("x", [{"action": "Allow"}]),
            gnp("t2.y", "app == 'b'", [{"action": "Deny"}], tier="t2"),
        ],
        "Deny",
    ),
    (
        "tier without order last",
        [
            tier("t1", None),
            tier("t2", 5),
            t1("x", [{"action": "Deny"}]),
            gnp("t2.y", "app == 'b'", [{"action": "Allow"}], tier="t2"),
        ],
        "Allow",
    ),
    # Log rules are recorded and evaluation goes on
    ("log continues", [gnp("p", "app == 'b'", [{"action": "Log"}, {"action": "Allow"}])], "Allow"),
    # an egress-only policy does not apply to ingress
    (
        "types egress",
        [gnp("p", "app == 'b'", [], types=["Egress"], egress=[{"action": "Deny"}])],
        "Allow",
    ),
    # a policy not selecting the endpoint does not apply
    ("not selected", [gnp("p", "app == 'a'", [{"action": "Deny"}])], "Allow"),
    # a staged policy alone is not enforced (and its tier does not apply)
    (
        "staged not enforced",
        [gnp("p", "app == 'b'", [{"action": "Deny"}], kind="StagedGlobalNetworkPolicy")],
        "Allow",
    ),
    # untracked / pre-DNAT policy is not part of a workload's normal chain
    (
        "preDNAT ignored",
        [gnp("p", "app == 'b'", [{"action": "Deny"}], preDNAT=True, applyOnForward=True)],
        "Allow",
    ),
]


@pytest.mark.parametrize(("label", "docs", "expected"), TIER_CASES, ids=[c[0] for c in TIER_CASES])
def test_tier_combination(label: str, docs: list[dict[str, Any]], expected: str) -> None:
    assert ingress_verdict(dataset(*docs), pkt()) == expected


def _profiles(*profiles: dict[str, Any], ids: list[str]) -> Dataset:
    return dataset(
        wep("a", A_IP, {"app": "a"}),
        wep("b", B_IP, {"app": "b"}, profiles=ids),
        *profiles,
        base=False,
    )


def _profile(name: str, ingress: list[Any]) -> dict[str, Any]:
    return {"kind": "Profile", "metadata": {"name": name}, "spec": {"ingress": ingress}}


def test_profiles_in_order_and_pass_in_a_profile_is_no_match() -> None:
    deny, allow, pass_ = [{"action": "Deny"}], [{"action": "Allow"}], [{"action": "Pass"}]
    assert (
        ingress_verdict(
            _profiles(_profile("p1", deny), _profile("p2", allow), ids=["p1", "p2"]), pkt()
        )
        == "Deny"
    )
    assert (
        ingress_verdict(
            _profiles(_profile("p1", pass_), _profile("p2", allow), ids=["p1", "p2"]), pkt()
        )
        == "Allow"
    )
    assert (
        ingress_verdict(
            _profiles(_profile("p1", []), _profile("p2", allow), ids=["p1", "p2"]), pkt()
        )
        == "Allow"
    )
    # no profile matched -> the final deny; no profiles at all -> deny
    assert ingress_verdict(_profiles(_profile("p1", []), ids=["p1"]), pkt()) == "Deny"
    assert ingress_verdict(_profiles(ids=[]), pkt()) == "Deny"
    # a missing profile denies (Felix's deny-all profile)
    assert ingress_verdict(_profiles(_profile("p2", allow), ids=["gone", "p2"]), pkt()) == "Deny"


def test_profile_labels_are_inherited_and_own_labels_win() -> None:
    prof = {
        "kind": "Profile",
        "metadata": {"name": "kns.ns1"},
        "spec": {"ingress": [{"action": "Allow"}], "labelsToApply": {"app": "z", "env": "p"}},
    }
    data = dataset(
        wep("b", B_IP, {"app": "b"}),
        prof,
        gnp("p", "env == 'p' && app == 'b'", [{"action": "Deny"}]),
        base=False,
    )
    assert ingress_verdict(data, pkt()) == "Deny"


def test_staged_view_replaces_the_policy_it_stages() -> None:
    enforced = {
        "kind": "NetworkPolicy",
        "metadata": {"name": "p", "namespace": "ns1"},
        "spec": {"selector": "app == 'b'", "ingress": [{"action": "Allow"}]},
    }
    staged = {
        "kind": "StagedNetworkPolicy",
        "metadata": {"name": "p", "namespace": "ns1"},
        "spec": {"selector": "app == 'b'", "ingress": [{"action": "Deny"}]},
    }
    data = dataset(enforced, staged)
    assert ingress_verdict(data, pkt()) == "Allow"
    assert ingress_verdict(data, pkt(), staged=True) == "Deny"
    src, dst = data.endpoints_at(ipaddress.ip_address(A_IP))[0], data.endpoints_at(pkt().dst)[0]
    report = explain_connection(data, src, dst, pkt(), "TCP")
    assert report["result"] == {"verdict": "Allow"}
    assert report["staged"]["enforced"] is False
    assert report["staged"]["result"]["verdict"] == "Deny"
    chain = report["staged"]["ingress"]["chain"]
    assert chain[-1]["policy"] == "StagedNetworkPolicy ns1/p" and chain[-1]["ruleIndex"] == 0


def test_decision_chain_records_tier_policy_rule_and_action() -> None:
    data = dataset(
        tier("t1", 10),
        t1("x", [{"action": "Allow", "protocol": "UDP"}, {"action": "Pass"}]),
        gnp("p", "app == 'b'", [{"action": "Log"}, {"action": "Deny", "protocol": "TCP"}]),
    )
    src, dst = data.endpoints_at(pkt().src)[0], data.endpoints_at(pkt().dst)[0]
    report = explain_connection(data, src, dst, pkt(), "TCP")
    steps = [
        (s["step"], s.get("tier"), s.get("ruleIndex"), s["action"])
        for s in report["ingress"]["chain"]
    ]
    assert steps == [
        ("rule", "t1", 1, "Pass"),
        ("rule", "default", 0, "Log"),
        ("rule", "default", 1, "Deny"),
    ]
    assert report["ingress"]["chain"][2]["rule"] == {"action": "Deny", "protocol": "TCP"}
    assert report["result"] == {"verdict": "Deny", "deniedAt": "ingress", "endpoint": dst.display}
    assert report["egress"]["verdict"] == "Allow"


def test_egress_of_the_source_is_evaluated() -> None:
    data = dataset(
        gnp(
            "e",
            "app == 'a'",
            None,
            types=["Egress"],
            egress=[
                {"action": "Deny", "destination": {"nets": ["10.0.0.2/32"]}},
                {"action": "Allow"},
            ],
        )
    )
    src, dst = data.endpoints_at(pkt().src)[0], data.endpoints_at(pkt().dst)[0]
    report = explain_connection(data, src, dst, pkt(), "TCP")
    assert report["result"]["deniedAt"] == "egress"
    report = explain_connection(data, src, dst, pkt(dst=C_IP), "TCP")
    assert report["result"] == {"verdict": "Allow"}


def test_non_endpoint_side_is_not_policed() -> None:
    data = dataset(
        gnp("p", "app == 'b'", [{"action": "Allow", "source": {"nets": ["192.0.2.0/24"]}}])
    )
    dst = data.endpoints_at(pkt().dst)[0]
    report = explain_connection(data, None, dst, pkt(src="192.0.2.7"), "TCP")
    assert report["egress"]["chain"][0]["step"] == "no-endpoint"
    assert report["result"] == {"verdict": "Allow"}


def test_endpoint_policies_lists_ordered_policies_with_selectors() -> None:
    data = dataset(
        tier("t1", 10),
        t1("x", [], order=5),
        gnp("p", "app == 'b'", [], types=["Ingress", "Egress"]),
        gnp("s", "app == 'b'", [], kind="StagedGlobalNetworkPolicy"),
        gnp("q", "app == 'a'", []),
    )
    ep = data.endpoints_at(pkt().dst)[0]
    report = endpoint_policies(data, ep)
    assert [(r["tier"], r["name"], r.get("staged", False)) for r in report["ingress"]] == [
        ("t1", "t1.x", False),
        ("default", "p", False),
        ("default", "s", True),
    ]
    assert [r["name"] for r in report["egress"]] == ["p"]
    assert report["ingress"][0]["selector"] == "app == 'b'"
    assert report["profiles"] == ["kns.ns1"]


def test_policy_selection_lists_endpoints_and_rule_peers() -> None:
    netset = {
        "kind": "GlobalNetworkSet",
        "metadata": {"name": "n", "labels": {"app": "a"}},
        "spec": {"nets": ["192.0.2.0/24"]},
    }
    rule = {
        "action": "Allow",
        "source": {"selector": "app == 'a'"},
        "destination": {"nets": ["10.0.0.0/8"]},
    }
    data = dataset(gnp("p", "app in {'b', 'c'}", [rule]), netset)
    from calico.model import PolicyKey

    report = policy_selection(data, PolicyKey("GlobalNetworkPolicy", "", "p"))
    assert report["selects"] == [
        "workloadendpoint ns1/node1-k8s-b-eth0",
        "workloadendpoint ns1/node1-k8s-c-eth0",
    ]
    src = report["ingress"][0]["source"]["matches"]
    assert src["endpoints"] == ["workloadendpoint ns1/node1-k8s-a-eth0"]
    assert src["nets"] == ["192.0.2.0/24"]
    assert report["ingress"][0]["destination"] == {"nets": ["10.0.0.0/8"]}


def test_inactive_or_ipless_endpoints() -> None:
    data = dataset(wep("d", "10.0.0.9", {}, ipNetworks=[]), base=False)
    assert data.endpoint("WorkloadEndpoint", "node1-k8s-d-eth0", "ns1") is None


def test_staged_delete_removes_the_policy_in_the_would_be_view() -> None:
    enforced = {
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "p"},
        "spec": {"selector": "app == 'b'", "ingress": [{"action": "Deny"}]},
    }
    staged = {
        "kind": "StagedGlobalNetworkPolicy",
        "metadata": {"name": "p"},
        "spec": {"stagedAction": "Delete"},
    }
    data = dataset(enforced, staged)
    assert ingress_verdict(data, pkt()) == "Deny"
    assert ingress_verdict(data, pkt(), staged=True) == "Allow"  # the profile decides


def test_policy_prefilter_skips_other_namespaces() -> None:
    other = {
        "kind": "NetworkPolicy",
        "metadata": {"name": "p", "namespace": "ns2"},
        "spec": {"selector": "all()", "ingress": [{"action": "Deny"}]},
    }
    data = dataset(other)
    assert ingress_verdict(data, pkt()) == "Allow"
    assert [e.key.namespace for e in data.policies.values()] == ["ns2"]


def test_address_lookup_exact_match_only_and_index_follows_additions() -> None:
    """The text search is a prefilter: 10.0.0.1 must not find 10.0.0.12 (a text prefix), an
    address in another field (a NAT's external IP) must not count, IPv6 matches however it is
    spelt, and an endpoint added after a lookup is found by the next one."""
    data = dataset(
        wep("a12", "10.0.0.12", {"app": "x"}, ipNATs=[{"internalIP": "10.0.0.12",
                                                      "externalIP": "10.0.0.1"}]),
        wep("v6", "", {"app": "v6"}, ipNetworks=["fd00:0:0::0001/128"]),
    )  # fmt: skip
    at = data.endpoints_at
    assert [e.name for e in at(ipaddress.ip_address(A_IP))] == ["node1-k8s-a-eth0"]
    assert [e.name for e in at(ipaddress.ip_address("10.0.0.12"))] == ["node1-k8s-a12-eth0"]
    assert [e.name for e in at(ipaddress.ip_address("fd00::1"))] == ["node1-k8s-v6-eth0"]
    assert at(ipaddress.ip_address("10.0.0.9")) == []
    late = {"apiVersion": "projectcalico.org/v3", **wep("late", "10.0.0.9", {"app": "late"})}
    data.add_endpoint_text("WorkloadEndpoint", "ns1", late["metadata"]["name"], json.dumps(late))
    assert [e.name for e in at(ipaddress.ip_address("10.0.0.9"))] == ["node1-k8s-late-eth0"]
    late6 = {
        "apiVersion": "projectcalico.org/v3",
        **wep("late6", "", {"app": "l6"}, ipNetworks=["FD00::2/128"]),
    }
    data.add_endpoint_text("WorkloadEndpoint", "ns1", late6["metadata"]["name"], json.dumps(late6))
    assert [e.name for e in at(ipaddress.ip_address("fd00::2"))] == ["node1-k8s-late6-eth0"]
