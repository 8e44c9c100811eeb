"""Active policies and profiles -> ``cali-pi/po`` and ``cali-pri/pro`` chains.

Endpoint chains jump to profile chains by name, and the table has no chain refcounting: a jump
to a missing chain fails the whole transaction. A profile an endpoint names but the datastore
lacks therefore gets empty chains (no accept mark, so the endpoint's final deny applies — the
upstream "missing profile = deny" behaviour). Endpoint managers declare their references with
:meth:`PolicyManager.set_profile_refs`.

Rendered policy chains are kept per policy ID with the Policy they came from (active or not,
least recently used dropped past :data:`RENDERED_POLICY_CACHE`): a policy that is activated
again at the same revision (equal Policy; the calc graph's RuleScanner hands out the same
object) reuses its Chain objects, whose rules already carry their rule text and netlink
encoding (design/performance.md "TTFR at 1,000 policies: activations (session 6)"). (ID,
Policy, the renderer's config object) decides the chains.

Inactive policies the calc graph parsed while Felix was idle arrive as ``PolicyPrepare``: they
are queued, and rendered into the same cache (behind every entry, only while it has room) with
the table preparing their chains, one at a time from the dataplane loop's idle point
(:meth:`PolicyManager.prepare_next`). Nothing is set on the table for them; an activation at
the same revision then finds everything done (design/felix-calc.md "Preparing inactive
policies").

The manager also answers the endpoint manager's policy grouping question
(:meth:`PolicyManager.group_key`: calico.felix.rules.groups) from the active policies, and
reports the policies whose key changed, so endpoints jumping to them are regrouped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    ActiveProfileRemove,
    ActiveProfileUpdate,
    Policy,
    PolicyID,
    PolicyPrepare,
    Profile,
    ToDataplane,
)
from calico.felix.nftables.model import Chain
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules import RuleRenderer

RENDERED_POLICY_CACHE = 1024


class PolicyManager:
    def __init__(self, table: NftablesTable, renderer: RuleRenderer) -> None:
        self._table = table
        self._renderer = renderer
        self._rendered: OrderedDict[PolicyID, tuple[object, Policy, list[Chain]]] = OrderedDict()
        self._policy_chains: dict[PolicyID, list[str]] = {}
        self._active_profiles: set[str] = set()
        self._profile_chains: dict[str, list[str]] = {}  # programmed (active or stub)
        self._refs: dict[object, frozenset[str]] = {}
        self._stubs_dirty = False
        self._group_keys: dict[PolicyID, tuple[str, str]] = {}
        self._regrouped: set[PolicyID] = set()
        self._to_prepare: OrderedDict[PolicyID, Policy] = OrderedDict()

    @property
    def num_policies(self) -> int:
        return len(self._policy_chains)

    @property
    def num_profiles(self) -> int:
        return len(self._active_profiles)

    @property
    def preparing(self) -> bool:
        """Prepared policies wait to be rendered (:meth:`prepare_next`)."""
        return bool(self._to_prepare)

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, PolicyPrepare):
            if msg.id not in self._policy_chains:
                self._to_prepare[msg.id] = msg.policy
            return
        if isinstance(msg, ActivePolicyUpdate):
            self._to_prepare.pop(msg.id, None)
            chains = self._render_policy(msg.id, msg.policy)
            self._policy_chains[msg.id] = self._replace(self._policy_chains.get(msg.id), chains)
            key = (msg.policy.namespace, msg.policy.original_selector)
            old = self._group_keys.get(msg.id)
            self._group_keys[msg.id] = key
            if old is not None and old != key:
                self._regrouped.add(msg.id)
        elif isinstance(msg, ActivePolicyRemove):
            self._replace(self._policy_chains.pop(msg.id, None), [])
            if self._group_keys.pop(msg.id, None) is not None:
                self._regrouped.add(msg.id)
        elif isinstance(msg, ActiveProfileUpdate):
            name = msg.id.name
            self._active_profiles.add(name)
            chains = self._renderer.profile_chains(name, msg.profile)
            self._profile_chains[name] = self._replace(self._profile_chains.get(name), chains)
        elif isinstance(msg, ActiveProfileRemove):
            self._active_profiles.discard(msg.id.name)
            self._replace(self._profile_chains.pop(msg.id.name, None), [])
            self._stubs_dirty = True

    def group_key(self, policy_id: PolicyID) -> tuple[str, str] | None:
        """The policy's grouping key, (namespace, original selector); None if not active."""
        return self._group_keys.get(policy_id)

    def take_regrouped(self) -> set[PolicyID]:
        """The policies whose grouping key changed or went since the last call: an endpoint
        chain that jumps to one may need other groups even if its policy list is unchanged."""
        out, self._regrouped = self._regrouped, set()
        return out

    def set_profile_refs(self, owner: object, profile_ids: Iterable[str]) -> None:
        """Record the profiles ``owner`` (an endpoint) jumps to; empty to drop the owner."""
        ids = frozenset(profile_ids)
        if ids:
            if self._refs.get(owner) != ids:
                self._refs[owner] = ids
                self._stubs_dirty = True
        elif self._refs.pop(owner, None) is not None:
            self._stubs_dirty = True

    def complete_deferred_work(self) -> None:
        if not self._stubs_dirty:
            return
        self._stubs_dirty = False
        referenced: set[str] = set().union(*self._refs.values())
        for name in referenced - self._active_profiles:
            if name not in self._profile_chains:
                chains = self._renderer.profile_chains(name, Profile())
                self._profile_chains[name] = self._replace(None, chains)
        for name in set(self._profile_chains) - referenced - self._active_profiles:
            self._replace(self._profile_chains.pop(name), [])

    def _render_policy(self, policy_id: PolicyID, policy: Policy) -> list[Chain]:
        config = self._renderer.config
        cached = self._rendered.get(policy_id)
        if (
            cached is not None
            and cached[0] is config
            and (cached[1] is policy or cached[1] == policy)
        ):
            self._rendered.move_to_end(policy_id)
            return cached[2]
        chains = self._renderer.policy_chains(policy_id, policy)
        self._rendered[policy_id] = (config, policy, chains)
        self._rendered.move_to_end(policy_id)
        if len(self._rendered) > RENDERED_POLICY_CACHE:
            self._rendered.popitem(last=False)
        return chains

    def prepare_next(self) -> None:
        """Render the oldest queued prepared policy into the cache, behind every entry, and
        have the table prepare its chains; sets nothing. Skipped if it is cached already or
        the cache is full (a guess never evicts a real rendering). An activation takes the
        policy out of the queue, so it is inactive here."""
        policy_id, policy = self._to_prepare.popitem(last=False)
        config = self._renderer.config
        cached = self._rendered.get(policy_id)
        same = cached is not None and (cached[1] is policy or cached[1] == policy)
        if cached is not None and cached[0] is config and same:
            return
        if cached is None and len(self._rendered) >= RENDERED_POLICY_CACHE:
            return
        chains = self._renderer.policy_chains(policy_id, policy)
        self._rendered[policy_id] = (config, policy, chains)
        self._rendered.move_to_end(policy_id, last=False)
        for chain in chains:
            self._table.prepare_chain(chain)

    def _replace(self, old: list[str] | None, chains: list[Chain]) -> list[str]:
        names = [c.name for c in chains]
        for chain in chains:
            self._table.set_chain(chain)
        for name in set(old or ()) - set(names):
            self._table.remove_chain(name)
        return names
