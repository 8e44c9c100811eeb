"""The policy-relevant part of a datastore, in Felix's v1 model, for offline evaluation.

Everything goes through the same update processors the Felix syncer uses
(``calico.model.processors``), so selectors carry the namespace/service-account folding and
endpoints carry the labels Felix sees. Endpoints are the bulk of a large cluster and an
``explain A -> B`` needs only the few that hold A's and B's addresses, so endpoint resources are
indexed by name and address from their raw JSON and only converted when asked for. A
resource read with its stored text converts through ``calico.policyeval.convcache``, which
keeps the processors' output across processes (a hit needs neither pydantic nor the v3 models).
"""

from __future__ import annotations

import bisect
import ipaddress
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from typing import Any

from calico.model import KINDS, HostEndpointKey, PolicyKey, ResourceKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.model.keys import NetworkSetKey, ProfileLabelsKey, ProfileRulesKey, TierKey
from calico.model.resources import resource_prefix
from calico.policyeval import convcache
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


def _address_text(text: str) -> str:
    """The canonical text of an address (or CIDR's address), cheaply: stored IPv4 is already
    canonical; IPv6 may be spelt many ways."""
    head = text.split("/", 1)[0].strip()
    if ":" in head:
        addr = _address(head)
        return str(addr) if addr is not None else head
    return head


def _process(key: ResourceKey, raw: dict[str, Any], text: str | None, keep: bool = True) -> Any:
    """The processors' output for a stored resource: through the conversion cache when its
    stored text is known (kept there unless ``keep`` is false), else straight through the
    processors."""
    if text is not None:
        return convcache.default().process(key, text, raw, keep=keep)
    from calico.model import processors

    return processors.process(key, raw)


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


_EndpointId = tuple[str, str, str]  # (kind, namespace, name)
_ADDRESSES = re.compile(r'"(?:ipNetworks|expectedIPs)"\s*:\s*\[([^\]]*)\]')
_STRING = re.compile(r'"([^"\\]*)"')


@dataclass(slots=True)
class _RawEndpoint:
    """A stored endpoint, parsed and converted only when a question needs it."""

    kind: str
    namespace: str
    name: str
    text: str
    _raw: dict[str, Any] | None = None
    converted: Endpoint | None = None
    failed: bool = False

    @property
    def raw(self) -> dict[str, Any]:
        if self._raw is None:
            try:
                raw = json.loads(self.text)
            except ValueError:
                raw = None
            self._raw = raw if isinstance(raw, dict) else {}
        return self._raw


@dataclass
class Dataset:
    """Tiers, policies, profiles, network sets and (lazily converted) endpoints."""

    tiers: dict[str, v1.Tier] = field(default_factory=dict)
    profile_rules: dict[str, v1.ProfileRules] = field(default_factory=dict)
    profile_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    profile_v3_rules: dict[str, Mapping[str, list[Any]]] = field(default_factory=dict)
    netsets: list[NetSet] = field(default_factory=list)
    # Stored endpoint text by id; a _RawEndpoint is made only for one a question touches
    # (~10^4 stored, an explain touches a handful: design/performance.md "Conversion cache").
    _endpoints: dict[_EndpointId, str] = field(default_factory=dict)
    _entries: dict[_EndpointId, _RawEndpoint] = field(default_factory=dict)
    _raw_policies: dict[ResourceKey, dict[str, Any]] = field(default_factory=dict)
    _policy_texts: dict[ResourceKey, str] = field(default_factory=dict)
    _converted: dict[ResourceKey, list[PolicyEntry]] = field(default_factory=dict)
    _by_address: dict[str, list[int]] | None = None  # IPv6 text -> index in _endpoints
    _blob: tuple[str, list[int]] | None = None  # every endpoint text, NUL-joined; starts
    _pending_netsets: list[tuple[ResourceKey, v1.NetworkSet]] = field(default_factory=list)

    # -- building ------------------------------------------------------------------------------

    def add_resource(self, key: ResourceKey, raw: dict[str, Any], text: str | None = None) -> None:
        """Add one stored v3 resource (``text``: its stored JSON, which makes its conversion
        cacheable); a resource the processors reject is skipped, as Felix's syncer skips it
        (logged)."""
        if key.kind in POLICY_KINDS:
            self._raw_policies[key] = raw
            if text is not None:
                self._policy_texts[key] = text
            return
        try:
            out = _process(key, raw, text)
        except Exception as exc:  # the syncer drops what it cannot convert; so must we
            log.warning("Ignoring %s %s: %s", key.kind, key.name, exc)
            return
        spec = raw.get("spec") or {}
        v3_rules = {"ingress": spec.get("ingress") or [], "egress": spec.get("egress") or []}
        for k, value in out.items():
            if isinstance(k, TierKey):
                self.tiers[k.name] = value
            elif isinstance(k, ProfileRulesKey):
                self.profile_rules[k.name] = value
                self.profile_v3_rules[k.name] = v3_rules
            elif isinstance(k, ProfileLabelsKey):
                self.profile_labels[k.name] = dict(value.labels)
            elif isinstance(k, NetworkSetKey):
                self._pending_netsets.append((key, value))

    def add_endpoint_text(self, kind: str, namespace: str, name: str, text: str) -> None:
        """Add a stored endpoint by its JSON text; nothing is parsed until a question needs it
        (the address index is built on first use, see ``_candidates_at``)."""
        self._endpoints[(kind, namespace, name)] = text
        self._entries.pop((kind, namespace, name), None)
        self._blob = None
        self._by_address = None

    def add_endpoint_kvs(
        self, kind: str, prefix: str, namespaced: bool, kvs: Iterable[Any]
    ) -> None:
        """:meth:`add_endpoint_text` for every listed key under ``prefix`` that names an
        endpoint (``[namespace/]name``, as ``_split_path`` reads it; others are skipped), in
        one loop: a datastore holds ~10^4 of them and a call per key was ~40% of the read."""
        start, entries, made = len(prefix), self._endpoints, self._entries
        for kv in kvs:
            path = kv.key
            if not path.startswith(prefix):
                continue
            if namespaced:
                namespace, _, name = path[start:].partition("/")
                if not namespace:
                    continue
            else:
                namespace, name = "", path[start:]
            if name and "/" not in name:
                entries[(kind, namespace, name)] = kv.value
                if made:
                    made.pop((kind, namespace, name), None)
        self._blob = None
        self._by_address = None

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

    # -- policies ------------------------------------------------------------------------------

    def _policy(self, key: ResourceKey) -> list[PolicyEntry]:
        """The v1 policy a stored policy becomes (none for a staged Delete or a bad one)."""
        done = self._converted.get(key)
        if done is not None:
            return done
        raw = self._raw_policies[key]
        out: list[PolicyEntry] = []
        try:
            converted = _process(key, raw, self._policy_texts.get(key))
        except Exception as exc:  # the syncer drops what it cannot convert; so must we
            log.warning("Ignoring %s %s: %s", key.kind, key.name, exc)
            converted = {}
        spec = raw.get("spec") or {}
        v3_rules = {"ingress": spec.get("ingress") or [], "egress": spec.get("egress") or []}
        for k, value in converted.items():
            if isinstance(k, PolicyKey):
                out.append(PolicyEntry(k, value, policy_meta(k, value), v3_rules))
        self._converted[key] = out
        return out

    @property
    def policies(self) -> dict[PolicyKey, PolicyEntry]:
        """Every policy, converted."""
        return {e.key: e for key in self._raw_policies for e in self._policy(key)}

    def policy_sources(self) -> list[ResourceKey]:
        """The stored policies' keys (staged ones included, staged Deletes too)."""
        return list(self._raw_policies)

    def candidate_policies(self, ep: Endpoint) -> list[PolicyEntry]:
        """The converted policies that may select ``ep``: a policy is converted only if its own
        selector (and namespace, for a namespaced kind) matches, which the converted selector
        requires too (the processors only AND more terms on); the caller still evaluates the
        converted selector. Kubernetes-shaped kinds are always converted."""
        out: list[PolicyEntry] = []
        for key, raw in self._raw_policies.items():
            if key.kind != "StagedKubernetesNetworkPolicy":
                if key.namespace and key.namespace != ep.namespace:
                    continue
                text = (raw.get("spec") or {}).get("selector") or "all()"
                try:
                    if isinstance(text, str) and not selector(text).evaluate(ep.labels):
                        continue
                except ValueError:
                    pass  # unparseable: let the processor reject it
            out.extend(self._policy(key))
        return out

    # -- endpoints -----------------------------------------------------------------------------

    def _convert(self, entry: _RawEndpoint, keep: bool = True) -> Endpoint | None:
        """The endpoint as Felix sees it (None if the processors reject it or it yields none);
        ``keep=False`` for bulk conversions, which the conversion cache does not store."""
        if entry.converted is not None or entry.failed:
            return entry.converted
        try:
            source = ResourceKey(entry.kind, entry.name, entry.namespace)
            raw = entry.raw
            # Text that is no JSON object is converted uncached, as the processors see it ({}).
            out = _process(source, raw, entry.text if raw else None, keep)
        except Exception as exc:
            log.warning("Ignoring %s %s: %s", entry.kind, entry.name, exc)
            entry.failed = True
            return None
        for k, value in out.items():
            if isinstance(k, WorkloadEndpointKey | HostEndpointKey):
                entry.converted = Endpoint(
                    entry.kind,
                    entry.name,
                    entry.namespace,
                    k,
                    value,
                    self._effective(value.labels, value.profile_ids),
                )
        entry.failed = entry.converted is None  # e.g. a WEP without IPs: Felix never sees it
        return entry.converted

    def _entry(self, ident: _EndpointId) -> _RawEndpoint:
        entry = self._entries.get(ident)
        if entry is None:
            entry = self._entries[ident] = _RawEndpoint(*ident, self._endpoints[ident])
        return entry

    def endpoint(self, kind: str, name: str, namespace: str = "") -> Endpoint | None:
        ident = (kind, namespace, name)
        return self._convert(self._entry(ident)) if ident in self._endpoints else None

    def raw_endpoints(
        self, kind: str, namespace: str, containing: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(name, stored JSON) of ``kind`` endpoints in ``namespace`` whose text contains the
        string ``containing`` (a cheap pre-filter before parsing)."""
        for ident, text in self._endpoints.items():
            if ident[0] == kind and ident[1] == namespace and containing in text:
                yield ident[2], self._entry(ident).raw

    def endpoints(self) -> list[Endpoint]:
        """Every endpoint, converted (for the "which endpoints does this select" questions)."""
        out = [self._convert(self._entry(i), keep=False) for i in self._endpoints]
        return [e for e in out if e is not None]

    def endpoints_at(self, addr: IPAddress) -> list[Endpoint]:
        """The endpoints holding ``addr`` (normally one)."""
        out = []
        for entry in self._candidates_at(addr):
            ep = self._convert(entry)
            if ep is not None and addr in ep.addresses:
                out.append(ep)
        return out

    def _candidates_at(self, addr: IPAddress) -> list[_RawEndpoint]:
        """A superset of the endpoints holding ``addr``, from their text (a hit is converted and
        its real addresses checked by the caller). IPv4 text in a valid endpoint is canonical,
        so a search of every stored text for the quoted address (``"a/`` or ``"a"``) finds
        them without parsing 10,000 endpoints; IPv6 may be spelt many ways, so an IPv6 query
        uses an index of every address string in ``ipNetworks``/``expectedIPs``, canonicalised
        (built once)."""
        ids = list(self._endpoints)
        if addr.version == 6:
            if self._by_address is None:
                self._by_address = {}
                for i, stored in enumerate(self._endpoints.values()):
                    for group in _ADDRESSES.findall(stored):
                        for text in _STRING.findall(group):
                            self._by_address.setdefault(_address_text(text), []).append(i)
            return [self._entry(ids[i]) for i in self._by_address.get(str(addr), ())]
        if self._blob is None:
            texts = list(self._endpoints.values())
            # starts[i]: where text i begins in the NUL-joined blob (each text + 1 separator)
            starts = [0, *accumulate(len(t) + 1 for t in texts)][: len(texts)]
            self._blob = ("\x00".join(texts), starts)
        blob, starts = self._blob
        # One scan for the quoted address, then its next character: ``"a/`` or ``"a"``.
        hits: set[int] = set()
        needle = f'"{addr}'
        at = blob.find(needle)
        while at >= 0:
            end = at + len(needle)
            if blob[end : end + 1] in ("/", '"'):
                hits.add(bisect.bisect_right(starts, at) - 1)
            at = blob.find(needle, end)
        return [self._entry(ids[i]) for i in sorted(hits)]

    def labelled_items_at(self, addr: IPAddress) -> list[dict[str, str]]:
        """Labels of everything whose IP set membership covers ``addr``: the endpoints holding
        it and the network sets containing it (what Felix's selector IP sets are built from)."""
        out = [ep.labels for ep in self.endpoints_at(addr)]
        out += [ns.labels for ns in self.netsets if any(addr in n for n in ns.nets)]
        return out


def _split_path(prefix: str, path: str, namespaced: bool) -> tuple[str, str]:
    """(namespace, name) of a stored resource path; name "" for anything malformed."""
    rest = path[len(prefix) :] if path.startswith(prefix) else ""
    namespace, _, name = rest.partition("/") if namespaced else ("", "", rest)
    if not name or "/" in name or (namespaced and not namespace):
        return "", ""
    return namespace, name


def _source_key(kind: str, prefix: str, path: str) -> ResourceKey | None:
    namespace, name = _split_path(prefix, path, KINDS[kind].namespaced)
    if not name:
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
        namespaced = KINDS[kind].namespaced
        kvs = backend.list(prefix).kvs
        if kind in ENDPOINT_KINDS:
            data.add_endpoint_kvs(kind, prefix, namespaced, kvs)
            continue
        for kv in kvs:
            key = _source_key(kind, prefix, kv.key)
            if key is None:
                continue
            try:
                raw = json.loads(kv.value)
            except ValueError:
                log.warning("Ignoring unparseable %s", kv.key)
                continue
            if isinstance(raw, dict):
                data.add_resource(key, raw, kv.value)
    return data.finish()
