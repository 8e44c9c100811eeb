"""RuleScanner: selector/named-port IP set extraction and reference counting."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.calc import rule_scanner
from calico.felix.calc.rule_convert import with_rule_ids
from calico.felix.calc.rule_scanner import IPSetData, RuleScanner, named_port_protocol
from calico.felix.messages import IPSetType, PolicyID, ProfileID
from calico.model import PolicyKey
from calico.model import values as v1
from calico.selector import make_unique_id, parse


def scan_rule(data: dict[str, Any]) -> Any:
    """The scanner on a rule written in upstream's v1 JSON."""
    return rule_scanner.scan_rule(v1.Rule.from_json(data))


def parse_profile(name: str, data: dict[str, Any] | None) -> Any:
    return rule_scanner.parse_profile(
        name, None if data is None else v1.ProfileRules.from_json(data)
    )


RULE_A = {"action": "allow", "src_selector": "has(a)"}


def sid(text: str) -> str:
    return parse(text).unique_id


def test_positive_and_negated_selectors_are_combined() -> None:
    rule, sets = scan_rule(
        {"action": "allow", "src_selector": "a == 'x'", "!src_selector": "has(b)"}
    )
    combined = "(a == 'x') && (!(has(b)))"
    assert rule.src_ip_set_ids == (sid(combined),)
    assert rule.not_src_ip_set_ids == ()
    assert [s.type for s in sets] == [IPSetType.NET]


def test_negated_selector_alone_gets_its_own_set() -> None:
    rule, _ = scan_rule({"action": "deny", "!dst_selector": "has(b)"})
    assert rule.not_dst_ip_set_ids == (sid("has(b)"),) and rule.dst_ip_set_ids == ()


def test_named_ports_only_skip_the_selector_set() -> None:
    rule, sets = scan_rule(
        {"action": "allow", "protocol": "udp", "dst_selector": "app == 'dns'", "dst_ports": ["dns"]}
    )
    canon = parse("app == 'dns'").canonical
    want = make_unique_id("n", f"{sid(canon)},udp,dns")
    assert rule.dst_named_port_ip_set_ids == (want,)
    assert rule.dst_ip_set_ids == ()
    assert sets == [IPSetData(canon, "udp", "dns")] and sets[0].type is IPSetType.IP_AND_PORT


def test_named_not_ports_use_the_positive_selector_or_all() -> None:
    rule, _ = scan_rule({"action": "allow", "protocol": "tcp", "!src_ports": ["http"]})
    assert rule.not_src_named_port_ip_set_ids == (IPSetData("all()", "tcp", "http").id,)
    rule, _ = scan_rule(
        {"action": "allow", "protocol": 6, "src_selector": "has(a)", "src_ports": [80, "http"]}
    )
    assert rule.src_ip_set_ids == (sid("has(a)"),)  # numeric ports keep the selector set
    assert rule.src_named_port_ip_set_ids == (IPSetData("has(a)", "tcp", "http").id,)


def test_named_port_protocol() -> None:
    assert [named_port_protocol(p) for p in (None, "tcp", "udp", 17, "sctp", 132, 1)] == [
        "tcp",
        "tcp",
        "udp",
        "udp",
        "sctp",
        "sctp",
        "tcp",
    ]


def test_service_sets() -> None:
    rule, sets = scan_rule(
        {
            "action": "allow",
            "dst_service": "web",
            "dst_service_ns": "ns",
            "src_service": "c",
            "src_service_ns": "ns",
        }
    )
    assert rule.dst_ip_port_set_ids == (make_unique_id("svc", "ns/web"),)
    assert rule.src_ip_set_ids == (make_unique_id("svcnoport", "ns/c"),)
    assert {s.type for s in sets} == {IPSetType.IP_AND_PORT, IPSetType.NET}


def test_missing_profile_is_deny_all() -> None:
    profile, sets = parse_profile("p", None)
    assert [r.action for r in profile.inbound_rules + profile.outbound_rules] == ["deny", "deny"]
    assert sets == []


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, *args))


def test_ip_sets_are_reference_counted_and_ordered() -> None:
    rec = Recorder()
    scanner = RuleScanner(rec, rec)
    k1 = PolicyKey("GlobalNetworkPolicy", "", "p1")
    k2 = PolicyKey("GlobalNetworkPolicy", "", "p2")
    pol = v1.Policy.from_json(
        {"selector": "all()", "inbound_rules": [{"action": "allow", "src_selector": "has(a)"}]}
    )
    scanner.on_policy_active(k1, pol)
    names = [c[0] for c in rec.calls]
    assert names == ["on_ipset_added", "update_ip_set", "on_policy_active"]
    assert rec.calls[2][1] == PolicyID("p1", "GlobalNetworkPolicy")
    rec.calls.clear()
    scanner.on_policy_active(k2, pol)
    scanner.on_profile_active(
        "prof",
        v1.ProfileRules.from_json(
            {"inbound_rules": [{"action": "allow", "src_selector": "has(a)"}]}
        ),
    )
    assert [c[0] for c in rec.calls] == ["on_policy_active", "on_profile_active"]
    rec.calls.clear()
    scanner.on_policy_inactive(k1)
    scanner.on_policy_inactive(k2)
    assert [c[0] for c in rec.calls] == ["on_policy_inactive", "on_policy_inactive"]
    rec.calls.clear()
    scanner.on_profile_inactive("prof")
    assert [c[0] for c in rec.calls] == ["on_profile_inactive", "delete_ip_set", "on_ipset_removed"]
    assert rec.calls[0][1] == ProfileID("prof")
    assert scanner.active_ip_sets == {}


def test_rule_change_swaps_sets() -> None:
    rec = Recorder()
    scanner = RuleScanner(rec, rec)
    key = PolicyKey("GlobalNetworkPolicy", "", "p")
    scanner.on_policy_active(
        key, v1.Policy.from_json({"inbound_rules": [{"action": "allow", "src_selector": "has(a)"}]})
    )
    rec.calls.clear()
    scanner.on_policy_active(
        key, v1.Policy.from_json({"inbound_rules": [{"action": "allow", "src_selector": "has(b)"}]})
    )
    got = [(c[0], c[1]) for c in rec.calls if "ipset" in c[0] or "ip_set" in c[0]]
    assert got == [
        ("on_ipset_added", sid("has(b)")),
        ("update_ip_set", sid("has(b)")),
        ("delete_ip_set", sid("has(a)")),
        ("on_ipset_removed", sid("has(a)")),
    ]


# -- scan_rules builds each Rule once; the reference is with_rule_ids of scan_rule ------------

_sel = st.sampled_from(["", "a == 'x'", "has(b)", "a == 'y' || c == 'z'"])
_ports = st.lists(st.sampled_from([80, "443", "1000:2000", "http", "dns"]), max_size=3)
_v1_rules = st.fixed_dictionaries(
    {"action": st.sampled_from(["allow", "deny", "log", "pass"])},
    optional={
        "protocol": st.sampled_from(["tcp", "udp", "icmp", 6]),
        "src_selector": _sel,
        "!dst_selector": _sel,
        "dst_ports": _ports,
        "!src_ports": _ports,
        "src_nets": st.just(["10.0.0.0/8"]),
        "dst_service": st.just("svc"),
        "dst_service_ns": st.just("ns"),
        "metadata": st.just({"annotations": {"b": "1", "a": "2"}}),
    },
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_v1_rules, max_size=4), st.sampled_from(["pol-in-default/p", "prof-out-x"]))
def test_scan_rules_equals_the_reference(data: list[dict[str, Any]], seed: str) -> None:
    parsed = [v1.Rule.from_json(d) for d in data]
    fast, fast_sets = rule_scanner.scan_rules(parsed, seed)
    ref = [rule_scanner.scan_rule(r) for r in parsed]
    assert fast == with_rule_ids([r for r, _ in ref], seed)
    assert fast_sets == [s for _, sets in ref for s in sets]


# -- the parsed-policy cache ------------------------------------------------------------------

_K1 = PolicyKey("NetworkPolicy", "ns", "p1")
_K2 = PolicyKey("GlobalNetworkPolicy", "", "p2")


def _policy(src: str = "has(a)", port: int = 80, tier: str = "") -> v1.Policy:
    rule = {"action": "allow", "protocol": "tcp", "src_selector": src, "dst_ports": [port]}
    return v1.Policy.from_json({"selector": "all()", "tier": tier, "inbound_rules": [rule]})


def _counting_parse(monkeypatch: Any) -> list[PolicyKey]:
    calls: list[PolicyKey] = []
    real = rule_scanner.parse_policy

    def parse(key: PolicyKey, value: v1.Policy) -> Any:
        calls.append(key)
        return real(key, value)

    monkeypatch.setattr(rule_scanner, "parse_policy", parse)
    return calls


def test_reactivation_at_the_same_revision_reuses_the_parsed_policy(monkeypatch: Any) -> None:
    calls = _counting_parse(monkeypatch)
    rec = Recorder()
    scanner = RuleScanner(rec, rec)
    value = _policy()
    scanner.on_policy_active(_K1, value)
    first = rec.calls[-1][2]
    scanner.on_policy_inactive(_K1)
    rec.calls.clear()
    scanner.on_policy_active(_K1, _policy())  # an equal value, another object
    assert calls == [_K1]
    assert rec.calls[-1][2] is first
    # the IP set came back with the policy, as without the cache
    assert [c[0] for c in rec.calls] == ["on_ipset_added", "update_ip_set", "on_policy_active"]


def test_a_changed_policy_is_parsed_again(monkeypatch: Any) -> None:
    calls = _counting_parse(monkeypatch)
    rec = Recorder()
    scanner = RuleScanner(rec, rec)
    scanner.on_policy_active(_K1, _policy())
    before = rec.calls[-1][2]
    scanner.on_policy_active(_K1, _policy(port=81))  # rule change while active
    after = rec.calls[-1][2]
    assert calls == [_K1, _K1]
    assert after.inbound_rules[0].dst_ports != before.inbound_rules[0].dst_ports
    assert after.inbound_rules[0].rule_id != before.inbound_rules[0].rule_id
    scanner.on_policy_inactive(_K1)
    scanner.on_policy_active(_K1, _policy(src="has(b)", tier="t1"))  # changed while inactive
    last = rec.calls[-1][2]
    assert len(calls) == 3 and last.tier == "t1"
    assert last == rule_scanner.parse_policy(_K1, _policy(src="has(b)", tier="t1"))[0]
    # the same value under another key is that key's own parse (rule IDs seed on the name)
    scanner.on_policy_active(_K2, _policy(src="has(b)", tier="t1"))
    assert rec.calls[-1][2].inbound_rules[0].rule_id != last.inbound_rules[0].rule_id


_values = st.sampled_from(
    [_policy(), _policy(port=81), _policy(src="has(b)"), _policy(tier="t1"), _policy()]
)
_ops = st.lists(
    st.tuples(st.sampled_from([_K1, _K2]), st.none() | _values), min_size=1, max_size=12
)


@settings(max_examples=150, deadline=None)
@given(_ops, st.sampled_from([1, 1024]))
def test_cached_scanner_equals_uncached(ops: list[Any], size: int) -> None:
    """Any sequence of activations (None: inactive) gives the same callbacks with the cache
    (evicting at ``size``) as with none: deletion and re-add, updates, other keys."""
    recs = []
    for cache in (size, 0):
        rec = Recorder()
        scanner = RuleScanner(rec, rec)
        old = rule_scanner.PARSED_POLICY_CACHE
        rule_scanner.PARSED_POLICY_CACHE = cache
        try:
            active: set[PolicyKey] = set()
            for key, value in ops:
                if value is None:
                    if key in active:
                        scanner.on_policy_inactive(key)
                        active.discard(key)
                else:
                    scanner.on_policy_active(key, value)
                    active.add(key)
        finally:
            rule_scanner.PARSED_POLICY_CACHE = old
        recs.append(rec.calls)
    assert recs[0] == recs[1]


def test_prepare_parses_into_the_cache_without_references_or_callbacks(monkeypatch: Any) -> None:
    calls = _counting_parse(monkeypatch)
    rec = Recorder()
    scanner = RuleScanner(rec, rec)
    room = scanner.prepare_room
    prepared = scanner.prepare(_K1, _policy())
    assert prepared is not None and prepared[0] == rule_scanner.policy_id(_K1)
    assert prepared[1] == rule_scanner.parse_policy(_K1, _policy())[0]
    del calls[1:]  # that comparison's own parse
    assert rec.calls == [] and scanner.active_ip_sets == {}  # nothing referenced, no callback
    assert scanner.prepare_room == room - 1
    assert scanner.prepare(_K1, _policy()) is None  # cached at this value already
    scanner.on_policy_active(_K1, _policy())  # the activation parses nothing
    assert calls == [_K1]
    assert rec.calls[-1][2] is prepared[1]  # and hands the prepared object on
    assert [c[0] for c in rec.calls] == ["on_ipset_added", "update_ip_set", "on_policy_active"]
    again = scanner.prepare(_K1, _policy(port=81))  # changed (here while active: still safe)
    assert again is not None and again[1] != prepared[1] and calls == [_K1, _K1]


def test_prepare_never_evicts_and_its_entries_go_first(monkeypatch: Any) -> None:
    monkeypatch.setattr(rule_scanner, "PARSED_POLICY_CACHE", 2)
    calls = _counting_parse(monkeypatch)
    rec = Recorder()
    scanner = RuleScanner(rec, rec)
    k3 = PolicyKey("NetworkPolicy", "ns", "p3")
    assert scanner.prepare(_K1, _policy()) is not None
    scanner.on_policy_active(_K2, _policy())
    assert scanner.prepare_room == 0
    assert scanner.prepare(k3, _policy()) is None  # full: a guess evicts nothing
    assert scanner.prepare(_K1, _policy(port=99)) is not None  # a cached key may be replaced
    scanner.on_policy_active(k3, _policy())  # a real parse evicts the prepared entry first
    calls.clear()
    scanner.on_policy_active(_K2, _policy(src="has(a)"))  # equal value: still cached
    scanner.on_policy_active(_K1, _policy(port=99))  # the prepared one was dropped
    assert calls == [_K1]
