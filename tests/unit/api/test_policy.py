"""Policy kinds: upstream examples, defaulting at load, names, tiers and GNP-only rules."""

from __future__ import annotations

import pytest
from apihelpers import MANIFESTS, decode_error, issues, load_one

from calico.api import dump_resources, load_documents, load_file
from calico.api.policy import (
    GlobalNetworkPolicy,
    NetworkPolicy,
    StagedKubernetesNetworkPolicy,
    Tier,
    default_policy_types,
    policy_base_name,
)

HEAD = "apiVersion: projectcalico.org/v3\n"


def doc(kind: str, name: str, spec: str = "{}", namespace: str | None = None) -> str:
    meta = f"  name: {name}\n" + (f"  namespace: {namespace}\n" if namespace else "")
    return f"{HEAD}kind: {kind}\nmetadata:\n{meta}spec: {spec}\n"


def test_upstream_examples_load_and_round_trip() -> None:
    resources = load_file(MANIFESTS / "policy-examples.yaml")
    assert [r.kind for r in resources] == [
        "NetworkPolicy",
        "GlobalNetworkPolicy",
        "Tier",
        "NetworkPolicy",
        "GlobalNetworkPolicy",
        "GlobalNetworkPolicy",
        "StagedGlobalNetworkPolicy",
        "StagedNetworkPolicy",
        "StagedKubernetesNetworkPolicy",
    ]
    for fmt in ("yaml", "json"):
        assert load_documents(dump_resources(resources, fmt)) == resources
    sknp = resources[-1]
    assert isinstance(sknp, StagedKubernetesNetworkPolicy)
    assert sknp.spec.ingress[0].from_[0].ip_block.except_ == ["172.17.1.0/24"]
    assert sknp.spec.staged_action == "Set"


@pytest.mark.parametrize(
    ("rules", "types"),
    [
        ("{}", ["Ingress"]),
        ("{ingress: [{action: Allow}]}", ["Ingress"]),
        ("{egress: [{action: Allow}]}", ["Egress"]),
        ("{ingress: [{action: Deny}], egress: [{action: Allow}]}", ["Ingress", "Egress"]),
        ("{egress: [{action: Allow}], types: [Ingress]}", ["Ingress"]),
    ],
)
def test_types_and_tier_defaulted_at_load(rules: str, types: list[str]) -> None:
    for kind in ("NetworkPolicy", "GlobalNetworkPolicy", "StagedGlobalNetworkPolicy"):
        res = load_one(doc(kind, "p", rules))
        assert res.spec.types == types
        assert res.spec.tier == "default"
        dumped = dump_resources([res])
        assert "tier: default" in dumped
        assert "types:" in dumped


def test_defaulting_helpers() -> None:
    assert default_policy_types(None, []) == ["Ingress"]
    assert policy_base_name("sec.allow", "sec") == "allow"
    assert policy_base_name("allow", "sec") == "allow"
    assert policy_base_name("default.allow", "default") == "default.allow"


def test_programmatic_construction_defaults() -> None:
    gnp = GlobalNetworkPolicy(metadata={"name": "x"}, spec={"egress": [{"action": "Allow"}]})
    assert gnp.kind == "GlobalNetworkPolicy"
    assert gnp.spec.types == ["Egress"]
    assert NetworkPolicy().spec.tier == "default"


def test_tiered_policy_name_with_or_without_prefix() -> None:
    for name in ("sec.allow-dns", "allow-dns"):
        res = load_one(doc("GlobalNetworkPolicy", name, "{tier: sec}"))
        assert res.spec.tier == "sec"
    load_one(doc("NetworkPolicy", "knp.default.allow.all", namespace="ns"))


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("NetworkPolicy", "a.b.c"),
        ("NetworkPolicy", "Upper"),
        ("GlobalNetworkPolicy", "a.b.c"),
        ("GlobalNetworkPolicy", "under_score"),
        ("StagedGlobalNetworkPolicy", "-x"),
    ],
)
def test_bad_policy_names(kind: str, name: str) -> None:
    what = "global policy" if "Global" in kind else "policy"
    assert issues(doc(kind, name)) == [
        f"metadata.name: name {name!r} is invalid: {what} names must be a DNS-1123 label "
        "(lower-case alphanumeric characters or '-'), optionally prefixed with '<tier>.'"
    ]


def test_name_required_and_too_long() -> None:
    assert issues(f"{HEAD}kind: NetworkPolicy\nmetadata: {{namespace: a}}\n") == [
        "metadata.name: name is required"
    ]
    assert issues(doc("GlobalNetworkPolicy", "a" * 254)) == [
        "metadata.name: name is too long by 1 characters (maximum 253)"
    ]


def test_tier_rules() -> None:
    tier = load_one(doc("Tier", "security", "{order: 200, defaultAction: Pass}"))
    assert isinstance(tier, Tier) and tier.spec.order == 200.0
    assert tier.spec.default_action == "Pass"
    assert load_one(doc("Tier", "plain")).spec.effective_default_action == "Deny"
    assert issues(doc("Tier", "a.b")) == [
        "metadata.name: tier name 'a.b' must be a DNS-1123 label: at most 63 lower-case "
        "alphanumeric characters or '-', starting and ending with an alphanumeric character"
    ]
    assert issues(doc("Tier", "t", "{defaultAction: Allow}")) == [
        "spec.defaultAction: invalid value 'Allow': expected 'Deny' or 'Pass'"
    ]
    assert issues(doc("Tier", "default", "{order: 5}")) == [
        "spec.order: default tier order must be 1000000"
    ]
    load_one(doc("Tier", "default", "{order: 1000000}"))
    load_one(doc("Tier", "default"))  # unset order/action: the default tier's own
    load_one(doc("Tier", "kube-admin", "{order: 1000, defaultAction: Pass}"))
    load_one(doc("Tier", "kube-baseline", "{order: 10000000, defaultAction: Pass}"))
    assert issues(doc("Tier", "default", "{order: 1000000, defaultAction: Pass}")) == [
        "spec.defaultAction: The 'default' tier must have default action 'Deny'"
    ]
    assert issues(doc("Tier", "kube-admin", "{order: 1000}")) == [
        "spec.defaultAction: The 'kube-admin' tier must have default action 'Pass'"
    ]
    assert issues(doc("Tier", "kube-baseline", "{defaultAction: Pass}")) == [
        "spec.order: kube-baseline tier order must be 10000000"
    ]
    assert issues(doc("Tier", "kube-admin", "{order: 1000.5, defaultAction: Deny}")) == [
        "spec.defaultAction: The 'kube-admin' tier must have default action 'Pass'",
        "spec.order: kube-admin tier order must be 1000",
    ]
    assert issues(doc("GlobalNetworkPolicy", "p", "{tier: my.tier}")) == [
        "spec.tier: tier name 'my.tier' must be a DNS-1123 label: at most 63 lower-case "
        "alphanumeric characters or '-', starting and ending with an alphanumeric character"
    ]


def test_order_is_a_float() -> None:
    res = load_one(doc("GlobalNetworkPolicy", "p", "{order: 100}"))
    assert res.spec.order == 100.0 and isinstance(res.spec.order, float)
    assert "order: 100\n" in dump_resources([res])
    assert issues(doc("GlobalNetworkPolicy", "p", "{order: .nan}")) == [
        "spec.order: order must be a finite number"
    ]
    assert decode_error(doc("GlobalNetworkPolicy", "p", "{order: high}")) == (
        "cannot unmarshal string into Go struct field GlobalNetworkPolicySpec.spec.order "
        "of type float64"
    )


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("Tier", ""),
        ("GlobalNetworkPolicy", ""),
        ("NetworkPolicy", ""),
        ("QoSPolicy", ", egress: [{action: {dscp: EF}}]"),
    ],
)
def test_every_order_must_be_finite(kind: str, extra: str) -> None:
    """One validator serves tiers, policies and QoS policies: every non-finite value is
    refused with the same text, the largest finite float is accepted."""
    ns = "ns" if kind == "NetworkPolicy" else None
    for bad in (".nan", ".inf", "-.inf"):
        spec = f"{{order: {bad}{extra}}}"
        assert issues(doc(kind, "p", spec, ns) if ns else doc(kind, "p", spec)) == [
            "spec.order: order must be a finite number"
        ], (kind, bad)
    spec = f"{{order: 1.7976931348623157e+308{extra}}}"
    res = load_one(doc(kind, "p", spec, ns) if ns else doc(kind, "p", spec))
    assert res.spec.order == 1.7976931348623157e308


def test_policy_selectors_validated() -> None:
    (msg,) = issues(doc("NetworkPolicy", "p", "{selector: 'a =='}", "ns"))
    assert msg.startswith("spec.selector: invalid selector")
    (msg,) = issues(doc("GlobalNetworkPolicy", "p", "{namespaceSelector: '!!('}"))
    assert msg.startswith("spec.namespaceSelector: invalid selector")
    (msg,) = issues(doc("GlobalNetworkPolicy", "p", "{serviceAccountSelector: 'x in'}"))
    assert msg.startswith("spec.serviceAccountSelector: invalid selector")
    assert issues(doc("GlobalNetworkPolicy", "p", "{selector: global()}")) == [
        "spec.selector: global() can only be used in an EntityRule namespaceSelector"
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "{preDNAT: true, doNotTrack: true, applyOnForward: true}",
            ["spec.preDNAT: preDNAT and doNotTrack cannot both be true"],
        ),
        (
            "{preDNAT: true, applyOnForward: true, egress: [{action: Allow}]}",
            [
                "spec.egress: preDNAT policy cannot have any egress rules",
                "spec.types: preDNAT policy cannot have 'Egress' type",
            ],
        ),
        (
            "{preDNAT: true, applyOnForward: true, types: [Ingress, Egress]}",
            ["spec.types: preDNAT policy cannot have 'Egress' type"],
        ),
        (
            "{doNotTrack: true}",
            [
                "spec.applyOnForward: applyOnForward must be true if either preDNAT or doNotTrack "
                "is true"
            ],
        ),
        ("{types: [Ingress, Ingress]}", ["spec.types: 'Ingress' type specified more than once"]),
        (
            "{types: [Forward]}",
            ["spec.types[0]: invalid value 'Forward': expected 'Ingress' or 'Egress'"],
        ),
    ],
)
def test_gnp_spec_rules(spec: str, expected: list[str]) -> None:
    assert issues(doc("GlobalNetworkPolicy", "p", spec)) == expected


def test_namespaced_policy_has_no_gnp_fields() -> None:
    assert decode_error(doc("NetworkPolicy", "p", "{doNotTrack: true}", "ns")) == (
        "field in document is not recognized or is in the wrong location: doNotTrack"
    )


def test_direction_specific_rule_checks() -> None:
    spec = "{egress: [{action: Allow, http: {methods: [GET]}, source: {services: {name: s}}}]}"
    assert issues(doc("NetworkPolicy", "p", spec, "ns")) == [
        "spec.egress[0].source.services: services are not allowed in the source of an egress rule",
        "spec.egress[0].http: http match is not allowed in egress rules",
    ]
    spec = "{ingress: [{action: Allow, destination: {services: {name: s}}}]}"
    assert issues(doc("NetworkPolicy", "p", spec, "ns")) == [
        "spec.ingress[0].destination.services: services are not allowed in the destination of "
        "an ingress rule"
    ]
    spec = "{egress: [{action: Allow, destination: {services: {name: s}}}]}"
    load_one(doc("NetworkPolicy", "p", spec, "ns"))
    assert issues(doc("GlobalNetworkPolicy", "p", spec)) == [
        "spec.egress[0].destination.services.namespace: a service in a global policy must "
        "specify a namespace"
    ]


def test_scope() -> None:
    assert issues(doc("GlobalNetworkPolicy", "p", namespace="ns")) == [
        "metadata.namespace: namespace should not be specified for a non-namespaced resource "
        "(GlobalNetworkPolicy is cluster-scoped)"
    ]
    np = load_one(doc("NetworkPolicy", "p"))
    assert np.metadata.namespace is None
    assert issues(doc("NetworkPolicy", "p", namespace="Bad_NS")) == [
        "metadata.namespace: namespace 'Bad_NS' must be a DNS-1123 label: at most 63 lower-case "
        "alphanumeric characters or '-', starting and ending with an alphanumeric character"
    ]


def test_staged_actions() -> None:
    res = load_one(doc("StagedNetworkPolicy", "p", "{stagedAction: Delete}", "ns"))
    assert res.spec.staged_action == "Delete" and res.spec.types is None
    assert res.spec.tier == "default"
    assert issues(doc("StagedGlobalNetworkPolicy", "p", "{stagedAction: Delete, order: 1}")) == [
        "spec.order: must not be set when stagedAction is Delete"
    ]
    assert issues(doc("StagedNetworkPolicy", "p", "{stagedAction: Remove}", "ns")) == [
        "spec.stagedAction: invalid value 'Remove': expected 'Set', 'Delete', 'Learn' or 'Ignore'"
    ]
    spec = "{stagedAction: Delete, podSelector: {matchLabels: {a: b}}}"
    assert issues(doc("StagedKubernetesNetworkPolicy", "p", spec, "ns")) == [
        "spec.podSelector: must not be set when stagedAction is Delete"
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "{podSelector: {matchExpressions: [{key: a, operator: In}]}}",
            "spec.podSelector.matchExpressions[0].values: values must be non-empty for operator In",
        ),
        (
            "{ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8, except: [11.0.0.0/24]}}]}]}",
            "spec.ingress[0].from[0].ipBlock.except[0]: '11.0.0.0/24' must be within cidr "
            "'10.0.0.0/8'",
        ),
        (
            "{ingress: [{ports: [{protocol: ICMP}]}]}",
            "spec.ingress[0].ports[0].protocol: invalid value 'ICMP': expected 'TCP', 'UDP' or "
            "'SCTP'",
        ),
        (
            "{egress: [{ports: [{port: http, endPort: 90}]}]}",
            "spec.egress[0].ports[0].endPort: endPort requires a numeric port",
        ),
        (
            "{egress: [{to: [{}]}]}",
            "spec.egress[0].to[0]: one of podSelector, namespaceSelector or ipBlock must be set",
        ),
        (
            "{policyTypes: [Egress, Egress]}",
            "spec.policyTypes: 'Egress' type specified more than once",
        ),
    ],
)
def test_staged_kubernetes_policy_validation(spec: str, expected: str) -> None:
    assert issues(doc("StagedKubernetesNetworkPolicy", "p", spec, "ns")) == [expected]


def test_staged_kubernetes_policy_has_no_calico_fields() -> None:
    assert decode_error(doc("StagedKubernetesNetworkPolicy", "p", "{selector: all()}", "ns")) == (
        "field in document is not recognized or is in the wrong location: selector"
    )


def test_policy_and_endpoint_kinds_do_not_load_the_bgp_models() -> None:
    """explain and get pay only for the kinds they read: the policy and endpoint modules share
    the int-or-string schema marker through calico.api.validators, not through calico.api.bgp
    (whose 20 models cost ~20 ms to define), and their dscp fields keep the marker."""
    import subprocess
    import sys

    code = (
        "import sys; from calico.api.policy import QoSAction as A; "
        "from calico.api.endpoints import QoSControls as C; "
        "print('calico.api.bgp' in sys.modules, *(m.model_json_schema()['properties']['dscp']"
        "['anyOf'][0] == {'x-kubernetes-int-or-string': True} for m in (A, C)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.split() == ["False", "True", "True"]
