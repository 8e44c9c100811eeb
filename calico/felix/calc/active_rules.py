"""ActiveRulesCalculator (ARC): which policies and profiles this host needs.

* A policy is *active* while its selector matches at least one local endpoint (labels = the
  endpoint's own labels overlaid on those inherited from its profiles, endpoint labels winning),
  or while it carries the ``AssumeNeededOnEveryNode`` performance hint.
* A profile is active while some local endpoint lists it in ``profile_ids``. An active profile
  whose rules are missing (never sent, deleted, or invalid) is replaced by a deny-all profile.

The ARC holds every policy and profile (it cannot know in advance which will be needed), feeds
policy selectors and local endpoints into a ``SelectorIndex``, and reports:

* to the RuleScanner: policy/profile active (again on every change while active) / inactive;
* to match listeners (the PolicyResolver): each (policy, endpoint) match starting / stopping.

Deep-equal re-sends of a value are ignored.

It also keeps the inactive policies whose current value has not been handed out for
preparation (:meth:`ActiveRulesCalculator.take_unprepared`: parsed and rendered while Felix
is idle, so a later activation finds them cached; design/felix-calc.md "Preparing inactive
policies").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from calico.model import HostEndpointKey, PolicyKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.selector import SelectorParseError, parse

log = logging.getLogger(__name__)

ASSUME_NEEDED_HINT = "AssumeNeededOnEveryNode"

EndpointKey = WorkloadEndpointKey | HostEndpointKey
EndpointValue = v1.WorkloadEndpoint | v1.HostEndpoint


class RuleScannerSink(Protocol):
    def on_policy_active(self, key: PolicyKey, value: v1.Policy) -> None: ...
    def on_policy_inactive(self, key: PolicyKey) -> None: ...
    def on_profile_active(self, name: str, value: v1.ProfileRules | None) -> None: ...
    def on_profile_inactive(self, name: str) -> None: ...


class PolicyMatchListener(Protocol):
    def on_policy_match(self, policy_key: PolicyKey, endpoint_key: EndpointKey) -> None: ...
    def on_policy_match_stopped(self, policy_key: PolicyKey, endpoint_key: EndpointKey) -> None: ...


class LabelIndex(Protocol):
    """The SelectorIndex interface the ARC drives (see calico.felix.labelindex)."""

    def update_selector(self, sel_id: Any, selector: Any) -> None: ...
    def delete_selector(self, sel_id: Any) -> None: ...
    def update_labels(self, item_id: Any, labels: Mapping[str, str], parent_ids: Any) -> None: ...
    def delete_labels(self, item_id: Any) -> None: ...
    def update_parent_labels(self, parent_id: Any, labels: Mapping[str, str]) -> None: ...
    def delete_parent_labels(self, parent_id: Any) -> None: ...


IndexFactory = Callable[[Callable[[Any, Any], None], Callable[[Any, Any], None]], LabelIndex]


def _needed_everywhere(value: v1.Policy) -> bool:
    return ASSUME_NEEDED_HINT in value.performance_hints


class ActiveRulesCalculator:
    """See the module docstring. ``index_factory(on_match_started, on_match_stopped)`` builds
    the label index (indexed or linear)."""

    def __init__(self, scanner: RuleScannerSink, index_factory: IndexFactory) -> None:
        self._scanner = scanner
        self._index = index_factory(self._on_match_started, self._on_match_stopped)
        self._listeners: list[PolicyMatchListener] = []
        self._policies: dict[PolicyKey, v1.Policy] = {}
        self._matches: dict[PolicyKey, set[EndpointKey]] = {}
        self._active_policies: set[PolicyKey] = set()
        self._profile_rules: dict[str, v1.ProfileRules] = {}
        self._profile_labels: dict[str, Mapping[str, str]] = {}
        self._endpoint_profiles: dict[EndpointKey, tuple[str, ...]] = {}
        self._endpoint_values: dict[EndpointKey, tuple[Mapping[str, str], tuple[str, ...]]] = {}
        self._profile_refs: dict[str, int] = {}
        # Inactive policies whose value has not been handed out since it last changed, in the
        # order they arrived (a dict as an ordered set).
        self._unprepared: dict[PolicyKey, None] = {}

    def add_match_listener(self, listener: PolicyMatchListener) -> None:
        self._listeners.append(listener)

    # -- introspection (tests, status) ----------------------------------------------------------

    @property
    def active_policies(self) -> frozenset[PolicyKey]:
        return frozenset(self._active_policies)

    @property
    def active_profiles(self) -> frozenset[str]:
        return frozenset(self._profile_refs)

    # -- preparation -------------------------------------------------------------------------

    @property
    def has_unprepared(self) -> bool:
        return bool(self._unprepared)

    def take_unprepared(self, limit: int) -> list[tuple[PolicyKey, v1.Policy]]:
        """Up to ``limit`` inactive policies not handed out since they last changed, oldest
        first; each is handed out once per value."""
        out: list[tuple[PolicyKey, v1.Policy]] = []
        while self._unprepared and len(out) < limit:
            key = next(iter(self._unprepared))
            del self._unprepared[key]
            out.append((key, self._policies[key]))
        return out

    # -- fan-out handlers ------------------------------------------------------------------

    def on_policy(self, key: PolicyKey, value: v1.Policy | None) -> None:
        """Called for every policy update (all hosts' policies are relevant)."""
        old = self._policies.get(key)
        if value == old:
            return
        was_active = key in self._active_policies
        if value is None:
            del self._policies[key]
            self._unprepared.pop(key, None)
            self._index.delete_selector(key)
            for endpoint in list(self._matches.get(key, ())):
                self._on_match_stopped(key, endpoint)  # in case the index did not report it
            self._sync_policy(key, resend=False)
            return
        try:
            selector = parse(value.selector)
        except SelectorParseError:
            log.warning("Policy %s has an unparsable selector; treating as deleted", key)
            self.on_policy(key, None)
            return
        self._policies[key] = value
        if old is None or old.selector != value.selector:
            self._index.update_selector(key, selector)
        self._sync_policy(key, resend=was_active)
        if key not in self._active_policies:
            self._unprepared[key] = None

    def on_profile_rules(self, name: str, value: v1.ProfileRules | None) -> None:
        """Called for every ProfileRulesKey update; re-sends the rules if the profile is active."""
        if self._profile_rules.get(name) == value:
            return
        if value is None:
            self._profile_rules.pop(name, None)
        else:
            self._profile_rules[name] = value
        if name in self._profile_refs:
            self._scanner.on_profile_active(name, value)

    def on_profile_labels(self, name: str, labels: Mapping[str, str] | None) -> None:
        """Called for every ProfileLabelsKey update: endpoints inherit these labels."""
        if self._profile_labels.get(name) == labels:
            return
        if labels is None:
            self._profile_labels.pop(name, None)
            self._index.delete_parent_labels(name)
        else:
            self._profile_labels[name] = labels
            self._index.update_parent_labels(name, labels)

    def on_endpoint(self, key: EndpointKey, value: EndpointValue | None) -> None:
        """Called for each *local* WEP/HEP update (the local fan-out filters by hostname)."""
        if value is None:
            if key not in self._endpoint_values:
                return
            del self._endpoint_values[key]
            self._index.delete_labels(key)
            self._set_profiles(key, ())
            return
        labels, profiles = value.labels, value.profile_ids
        if self._endpoint_values.get(key) == (labels, profiles):
            return
        self._endpoint_values[key] = (labels, profiles)
        # Activate profiles before the endpoint's matches so their rules precede any use.
        self._set_profiles(key, profiles)
        self._index.update_labels(key, labels, profiles)

    # -- internals --------------------------------------------------------------------------

    def _set_profiles(self, key: EndpointKey, profiles: tuple[str, ...]) -> None:
        old = set(self._endpoint_profiles.get(key, ()))
        new = set(profiles)
        if profiles:
            self._endpoint_profiles[key] = profiles
        else:
            self._endpoint_profiles.pop(key, None)
        for name in sorted(new - old):
            count = self._profile_refs.get(name, 0)
            self._profile_refs[name] = count + 1
            if count == 0:
                self._scanner.on_profile_active(name, self._profile_rules.get(name))
        for name in sorted(old - new):
            count = self._profile_refs[name] - 1
            if count:
                self._profile_refs[name] = count
            else:
                del self._profile_refs[name]
                self._scanner.on_profile_inactive(name)

    def _sync_policy(self, key: PolicyKey, resend: bool) -> None:
        value = self._policies.get(key)
        want = value is not None and (bool(self._matches.get(key)) or _needed_everywhere(value))
        if want and value is not None:
            if key not in self._active_policies:
                self._active_policies.add(key)
                self._unprepared.pop(key, None)
                self._scanner.on_policy_active(key, value)
            elif resend:
                self._scanner.on_policy_active(key, value)
        elif key in self._active_policies:
            self._active_policies.discard(key)
            self._scanner.on_policy_inactive(key)

    def _on_match_started(self, sel_id: PolicyKey, item_id: EndpointKey) -> None:
        matches = self._matches.setdefault(sel_id, set())
        if item_id in matches:
            return
        matches.add(item_id)
        self._sync_policy(sel_id, resend=False)
        for listener in self._listeners:
            listener.on_policy_match(sel_id, item_id)

    def _on_match_stopped(self, sel_id: PolicyKey, item_id: EndpointKey) -> None:
        matches = self._matches.get(sel_id)
        if not matches or item_id not in matches:
            return
        matches.discard(item_id)
        if not matches:
            del self._matches[sel_id]
        for listener in self._listeners:
            listener.on_policy_match_stopped(sel_id, item_id)
        self._sync_policy(sel_id, resend=False)
