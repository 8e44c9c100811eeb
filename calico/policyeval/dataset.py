"""The policy-relevant part of a datastore, in Felix's v1 model, for offline evaluation.

Everything goes through the same update processors the Felix syncer uses
(``calico.model.processors``), so selectors carry the namespace/service-account folding and
endpoints carry the labels Felix sees. Endpoints are the bulk of a large cluster and an
``explain A -> B`` needs only the few that hold A's and B's addresses, so endpoint resources are
indexed by name and address from their raw JSON and only converted when asked for.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from calico.model import KINDS, HostEndpointKey, PolicyKey, ResourceKey, WorkloadEndpointKey
from calico.model import processors as p
from calico.model import values as v1
from calico.model.keys import NetworkSetKey, ProfileLabelsKey, ProfileRulesKey, TierKey
from calico.model.resources import resource_prefix
from calico.policyeval.ordering import PolicyMeta, policy_meta
from calico.policyeval.rulesem import merged_labels
from calico.selector import Selector, parse

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

POLICY_KINDS = (
    "GlobalNetworkPolicy",
    "NetworkPolicy",
    "StagedGlobalNetworkPolicy",
    "StagedNetworkPolicy",
    "StagedKubernetesNetworkPolicy",
)
ENDPOINT_KINDS = ("WorkloadEndpoint", "HostEndpoint")
OTHER_KINDS = ("Tier", "Profile", "NetworkSet", "GlobalNetworkSet")


@lru_cache(maxsize=8192)
def selector(text: str) -> Selector:
    """Parsed selectors are reused across endpoints and rules (a selector is immutable)."""
    return parse(text)


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.split("/", 1)[0].strip())
    except ValueError:
        return None


@dataclass
class Endpoint:
    """One workload or host endpoint as Felix sees it (effective labels include profiles')."""

    kind: str  # WorkloadEndpoint | HostEndpoint
    name: str  # the v3 name
    namespace: str
    key: WorkloadEndpointKey | HostEndpointKey
    value: v1.WorkloadEndpoint | v1.HostEndpoint
    labels: dict[str, str]

    @property
    def addresses(self) -> list[IPAddress]:
        if isinstance(self.value, v1.WorkloadEndpoint):
            texts = (*self.value.ipv4_nets, *self.value.ipv6_nets)
        else:
            texts = (*self.value.expected_ipv4_addrs, *self.value.expected_ipv6_addrs)
        return [a for a in (_address(t) for t in texts) if a is not None]

    @property
    def active(self) -> bool:
        """Felix programs a deny-everything chain for a workload that is not active."""
        return not isinstance(self.value, v1.WorkloadEndpoint) or (
            (self.value.state or "active") == "active"
        )

    @property
    def display(self) -> str:
        scope = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.lower()} {scope}{self.name}"


@dataclass
class PolicyEntry:
    key: PolicyKey
    value: v1.Policy
    meta: PolicyMeta
    v3_rules: Mapping[str, list[Any]]  # "ingress"/"egress" -> the v3 rules, for display

    @property
    def display(self) -> str:
        scope = f"{self.key.namespace}/" if self.key.namespace else ""
        return f"{self.key.kind} {scope}{self.key.name}"


@dataclass
class NetSet:
    name: str
    namespace: str
    nets: list[IPNetwork]
    labels: dict[str, str]


@dataclass
class _RawEndpoint:
    source: ResourceKey
    raw: dict[str, Any]
    converted: Endpoint | None = None
    failed: bool = False


@dataclass
class Dataset:
    """Tiers, policies, profiles, network sets and (lazily converted) endpoints."""

    tiers: dict[str, v1.Tier] = field(default_factory=dict)
    policies: dict[PolicyKey, PolicyEntry] = field(default_factory=dict)
    profile_rules: dict[str, v1.ProfileRules] = field(default_factory=dict)
    profile_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    profile_v3_rules: dict[str, Mapping[str, list[Any]]] = field(default_factory=dict)
    netsets: list[NetSet] = field(default_factory=list)
    _endpoints: dict[ResourceKey, _RawEndpoint] = field(default_factory=dict)
    _by_address: dict[IPAddress, list[ResourceKey]] = field(default_factory=dict)
    _pending_netsets: list[tuple[ResourceKey, v1.NetworkSet]] = field(default_factory=list)

    # -- building ------------------------------------------------------------------------------

    def add_resource(self, key: ResourceKey, raw: dict[str, Any]) -> None:
        """Add one stored v3 resource; a resource the processors reject is skipped, as Felix's
        syncer skips it (logged)."""
        if key.kind in ENDPOINT_KINDS:
            self._add_endpoint(key, raw)
            return
        try:
            out = p.process(key, raw)
        except Exception as exc:  # the syncer drops what it cannot convert; so must we
            log.warning("Ignoring %s %s: %s", key.kind, key.name, exc)
            return
        spec = raw.get("spec") or {}
        v3_rules = {"ingress": spec.get("ingress") or [], "egress": spec.get("egress") or []}
        for k, value in out.items():
            if isinstance(k, PolicyKey):
                self.policies[k] = PolicyEntry(k, value, policy_meta(k, value), v3_rules)
            elif isinstance(k, TierKey):
                self.tiers[k.name] = value
            elif isinstance(k, ProfileRulesKey):
                self.profile_rules[k.name] = value
                self.profile_v3_rules[k.name] = v3_rules
            elif isinstance(k, ProfileLabelsKey):
                self.profile_labels[k.name] = dict(value.labels)
            elif isinstance(k, NetworkSetKey):
                self._pending_netsets.append((key, value))

    def _add_endpoint(self, key: ResourceKey, raw: dict[str, Any]) -> None:
        self._endpoints[key] = _RawEndpoint(key, raw)
        spec = raw.get("spec") or {}
        texts = (
            spec.get("ipNetworks") if key.kind == "WorkloadEndpoint" else spec.get("expectedIPs")
        )
        for text in texts or ():
            if isinstance(text, str) and (addr := _address(text)) is not None:
                self._by_address.setdefault(addr, []).append(key)

    def finish(self) -> Dataset:
        """Resolve what depends on profiles (network sets' inherited labels)."""
        for key, value in self._pending_netsets:
            nets = []
            for text in value.nets:
                try:
                    nets.append(ipaddress.ip_network(text, strict=False))
                except ValueError:
                    continue
            labels = self._effective(value.labels, value.profile_ids)
            self.netsets.append(NetSet(key.name, key.namespace, nets, labels))
        self._pending_netsets.clear()
        return self

    def _effective(self, own: Mapping[str, str], profile_ids: Iterable[str]) -> dict[str, str]:
        return merged_labels(own, [self.profile_labels.get(pid) for pid in profile_ids])

    # -- endpoints -----------------------------------------------------------------------------

    def _convert(self, entry: _RawEndpoint) -> Endpoint | None:
        if entry.converted is not None or entry.failed:
            return entry.converted
        try:
            out = p.process(entry.source, entry.raw)
        except Exception as exc:
            log.warning("Ignoring %s %s: %s", entry.source.kind, entry.source.name, exc)
            entry.failed = True
            return None
        for k, value in out.items():
            if isinstance(k, WorkloadEndpointKey | HostEndpointKey):
                entry.converted = Endpoint(
                    entry.source.kind,
                    entry.source.name,
                    entry.source.namespace,
                    k,
                    value,
                    self._effective(value.labels, value.profile_ids),
                )
        entry.failed = entry.converted is None  # e.g. a WEP without IPs: Felix never sees it
        return entry.converted

    def endpoint(self, kind: str, name: str, namespace: str = "") -> Endpoint | None:
        entry = self._endpoints.get(ResourceKey(kind, name, namespace))
        return None if entry is None else self._convert(entry)

    def raw_endpoints(self, kind: str) -> Iterator[tuple[ResourceKey, dict[str, Any]]]:
        for key, entry in self._endpoints.items():
            if key.kind == kind:
                yield key, entry.raw

    def endpoints(self) -> list[Endpoint]:
        """Every endpoint, converted (for the "which endpoints does this select" questions)."""
        out = [self._convert(e) for e in self._endpoints.values()]
        return [e for e in out if e is not None]

    def endpoints_at(self, addr: IPAddress) -> list[Endpoint]:
        """The endpoints holding ``addr`` (normally one)."""
        out = []
        for key in self._by_address.get(addr, ()):
            ep = self._convert(self._endpoints[key])
            if ep is not None and addr in ep.addresses:
                out.append(ep)
        return out

    def labelled_items_at(self, addr: IPAddress) -> list[dict[str, str]]:
        """Labels of everything whose IP set membership covers ``addr``: the endpoints holding
        it and the network sets containing it (what Felix's selector IP sets are built from)."""
        out = [ep.labels for ep in self.endpoints_at(addr)]
        out += [ns.labels for ns in self.netsets if any(addr in n for n in ns.nets)]
        return out


def _source_key(kind: str, prefix: str, path: str) -> ResourceKey | None:
    rest = path[len(prefix) :] if path.startswith(prefix) else ""
    if KINDS[kind].namespaced:
        namespace, _, name = rest.partition("/")
    else:
        namespace, name = "", rest
    if not name or "/" in name or (KINDS[kind].namespaced and not namespace):
        return None
    try:
        return ResourceKey(kind, name, namespace)
    except Exception:
        return None


def load(
    backend: Any, kinds: Iterable[str] = POLICY_KINDS + ENDPOINT_KINDS + OTHER_KINDS
) -> Dataset:
    """Read every policy-relevant resource from a datastore backend (any backend: this uses
    only ``list``), as the Felix syncer would."""
    data = Dataset()
    for kind in kinds:
        prefix = resource_prefix(kind)
        for kv in backend.list(prefix).kvs:
            key = _source_key(kind, prefix, kv.key)
            if key is None:
                continue
            try:
                raw = json.loads(kv.value)
            except ValueError:
                log.warning("Ignoring unparseable %s", kv.key)
                continue
            if isinstance(raw, dict):
                data.add_resource(key, raw)
    return data.finish()
