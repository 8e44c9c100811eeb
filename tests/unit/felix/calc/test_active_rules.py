"""ActiveRulesCalculator against both label index implementations."""

from __future__ import annotations

from typing import Any

import pytest

from calico.felix.calc.active_rules import ActiveRulesCalculator
from calico.felix.labelindex import LinearSelectorIndex, SelectorIndex
from calico.model import HostEndpointKey, PolicyKey, WorkloadEndpointKey
from calico.model import values as v1

P1 = PolicyKey("GlobalNetworkPolicy", "", "p1")
EP1 = WorkloadEndpointKey("h1", "k8s", "ns/pod1", "eth0")
EP2 = WorkloadEndpointKey("h1", "k8s", "ns/pod2", "eth0")
HEP = HostEndpointKey("h1", "eth0")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, *args))

    def take(self) -> list[tuple[Any, ...]]:
        out, self.calls = self.calls, []
        return out


@pytest.fixture(params=[SelectorIndex, LinearSelectorIndex], ids=["indexed", "linear"])
def arc(request: pytest.FixtureRequest) -> tuple[ActiveRulesCalculator, Recorder, Recorder]:
    scanner, listener = Recorder(), Recorder()
    calc = ActiveRulesCalculator(scanner, request.param)
    calc.add_match_listener(listener)
    return calc, scanner, listener


def ep(labels: dict[str, str], profiles: list[str] | None = None) -> v1.WorkloadEndpoint:
    return v1.WorkloadEndpoint.from_json(
        {"name": "cali1", "labels": labels, "profile_ids": profiles}
    )


def pol(data: dict[str, Any]) -> v1.Policy:
    return v1.Policy.from_json(data)


def test_policy_active_only_while_it_matches_a_local_endpoint(arc) -> None:
    calc, scanner, listener = arc
    p1 = pol({"selector": "app == 'web'", "inbound_rules": []})
    calc.on_policy(P1, p1)
    assert scanner.take() == [] and calc.active_policies == frozenset()
    calc.on_endpoint(EP1, ep({"app": "web"}))
    assert scanner.take() == [("on_policy_active", P1, p1)]
    assert listener.take() == [("on_policy_match", P1, EP1)]
    calc.on_endpoint(EP2, ep({"app": "web"}))
    assert scanner.take() == []  # already active
    calc.on_endpoint(EP1, ep({"app": "db"}))
    calc.on_endpoint(EP2, None)
    assert scanner.take() == [("on_policy_inactive", P1)]
    assert listener.take() == [
        ("on_policy_match", P1, EP2),
        ("on_policy_match_stopped", P1, EP1),
        ("on_policy_match_stopped", P1, EP2),
    ]


def test_active_policy_is_resent_on_change_but_not_on_no_op(arc) -> None:
    calc, scanner, _ = arc
    calc.on_endpoint(HEP, ep({"app": "web"}))
    calc.on_policy(P1, pol({"selector": "all()"}))
    scanner.take()
    calc.on_policy(P1, pol({"selector": "all()"}))
    assert scanner.take() == []
    new = pol({"selector": "all()", "inbound_rules": [{"action": "deny"}]})
    calc.on_policy(P1, new)
    assert scanner.take() == [("on_policy_active", P1, new)]
    calc.on_policy(P1, None)
    assert scanner.take() == [("on_policy_inactive", P1)]


def test_inherited_profile_labels_make_a_policy_active(arc) -> None:
    calc, scanner, _ = arc
    calc.on_policy(P1, pol({"selector": "pcns.team == 'a'"}))
    calc.on_endpoint(EP1, ep({}, ["kns.ns"]))
    assert [c[0] for c in scanner.take()] == ["on_profile_active"]
    calc.on_profile_labels("kns.ns", {"pcns.team": "a"})
    assert scanner.take() == [("on_policy_active", P1, pol({"selector": "pcns.team == 'a'"}))]
    calc.on_endpoint(EP1, ep({"pcns.team": "b"}, ["kns.ns"]))  # own labels win
    assert scanner.take() == [("on_policy_inactive", P1)]


def test_performance_hint_keeps_policy_active(arc) -> None:
    calc, scanner, listener = arc
    hinted = pol(
        {"selector": "nothing == 'matches'", "performance_hints": ["AssumeNeededOnEveryNode"]}
    )
    calc.on_policy(P1, hinted)
    assert scanner.take() == [("on_policy_active", P1, hinted)]
    assert listener.take() == []


def test_profiles_are_reference_counted_and_missing_ones_sent_as_none(arc) -> None:
    calc, scanner, _ = arc
    calc.on_endpoint(EP1, ep({}, ["a", "b"]))
    assert scanner.take() == [("on_profile_active", "a", None), ("on_profile_active", "b", None)]
    calc.on_endpoint(EP2, ep({}, ["a"]))
    rules = v1.ProfileRules.from_json({"inbound_rules": [{"action": "allow"}]})
    calc.on_profile_rules("a", rules)
    calc.on_profile_rules("zzz", rules)  # not active: nothing
    assert scanner.take() == [("on_profile_active", "a", rules)]
    calc.on_endpoint(EP1, None)
    assert scanner.take() == [("on_profile_inactive", "b")]
    calc.on_profile_rules("a", None)
    assert scanner.take() == [("on_profile_active", "a", None)]
    calc.on_endpoint(EP2, ep({}, []))
    assert scanner.take() == [("on_profile_inactive", "a")]
    assert calc.active_profiles == frozenset()


def test_inactive_policies_are_handed_out_for_preparation_once_per_value(arc) -> None:
    """take_unprepared (design/felix-calc.md "Preparing inactive policies"): inactive policies
    oldest first, each once per value; an activation or a deletion withdraws one."""
    calc, scanner, _ = arc
    p2, p3 = (PolicyKey("GlobalNetworkPolicy", "", n) for n in ("p2", "p3"))
    web = pol({"selector": "app == 'web'", "inbound_rules": []})
    db = pol({"selector": "app == 'db'", "inbound_rules": []})
    assert not calc.has_unprepared
    calc.on_policy(P1, web)
    calc.on_policy(p2, db)
    calc.on_policy(p3, db)
    assert calc.has_unprepared
    assert calc.take_unprepared(2) == [(P1, web), (p2, db)]  # oldest first, at most the limit
    assert calc.take_unprepared(5) == [(p3, db)]
    assert calc.take_unprepared(5) == [] and not calc.has_unprepared
    calc.on_policy(p2, db)  # an equal re-send is not a change
    assert calc.take_unprepared(5) == []
    db2 = pol({"selector": "app == 'db'", "inbound_rules": [{"action": "allow"}]})
    calc.on_policy(p2, db2)  # a new value is handed out again
    assert calc.take_unprepared(5) == [(p2, db2)]

    calc.on_policy(p3, web)
    calc.on_endpoint(EP1, ep({"app": "web"}))  # activates P1 and p3: p3 withdrawn
    assert [c[0] for c in scanner.take()] == ["on_policy_active", "on_policy_active"]
    assert calc.take_unprepared(5) == []
    calc.on_policy(p3, pol({"selector": "app == 'web'", "inbound_rules": [{"action": "deny"}]}))
    assert calc.take_unprepared(5) == []  # active: the RuleScanner parses it anyway
    calc.on_endpoint(EP1, None)  # deactivated: parsed while active, not handed out
    assert calc.take_unprepared(5) == []

    calc.on_policy(p2, db)
    calc.on_policy(p2, None)  # deleted before it was handed out
    assert calc.take_unprepared(5) == [] and not calc.has_unprepared
