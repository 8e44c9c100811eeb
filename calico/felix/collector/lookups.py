"""What the collector knows about policies and endpoints, fed the dataplane's message stream.

Why its own copy: NFLOG gives a prefix and addresses, Goldmane wants policy names, kinds, tiers
and endpoint names. The prefix -> rule map is built with the same functions that rendered the
rules (``calico.felix.rules.nflog``), so hashed prefixes resolve without parsing. Endpoint
names and labels, local and remote, come straight from the calc graph's endpoint updates
(``on_endpoint``, as upstream's lookups cache): the dataplane messages carry neither labels nor
other nodes' endpoints, and widening them would cost every dataplane batch. Updates arrive on
the calc thread and reads on the collector's threads: one lock guards both.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    ActiveProfileRemove,
    ActiveProfileUpdate,
    HostEndpointRemove,
    HostEndpointUpdate,
    PolicyID,
    ServiceRemove,
    ServiceUpdate,
    TierInfo,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)
from calico.felix.rules.nflog import (
    OWNER_POLICY,
    OWNER_PROFILE,
    end_of_tier_prefix,
    no_profile_prefix,
    rule_prefix,
)
from calico.felix.rules.policy import policy_chain_id
from calico.model import HostEndpointKey, NetworkSetKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.proto.goldmane import api_pb2 as pb

PROFILE_TIER = "__PROFILE__"
STAGED_KINDS = frozenset(
    (pb.StagedNetworkPolicy, pb.StagedGlobalNetworkPolicy, pb.StagedKubernetesNetworkPolicy)
)
ACTIONS = {"allow": pb.Allow, "deny": pb.Deny, "pass": pb.Pass, "next-tier": pb.Pass}
_KINDS = {
    "NetworkPolicy": pb.CalicoNetworkPolicy,
    "GlobalNetworkPolicy": pb.GlobalNetworkPolicy,
    "StagedNetworkPolicy": pb.StagedNetworkPolicy,
    "StagedGlobalNetworkPolicy": pb.StagedGlobalNetworkPolicy,
    "StagedKubernetesNetworkPolicy": pb.StagedKubernetesNetworkPolicy,
    "KubernetesNetworkPolicy": pb.NetworkPolicy,
    "ClusterNetworkPolicy": pb.ClusterNetworkPolicy,
    "KubernetesClusterNetworkPolicy": pb.ClusterNetworkPolicy,
}


def policy_kind(pid: PolicyID) -> int:
    if not pid.kind:
        return pb.CalicoNetworkPolicy if pid.namespace else pb.GlobalNetworkPolicy
    return _KINDS.get(pid.kind, pb.KindUnspecified)


@dataclass(frozen=True)
class Service:
    """A flow's destination service (FlowKey ``dest_service_*``)."""

    name: str = ""
    namespace: str = ""
    port_name: str = ""
    port: int = 0


@dataclass(frozen=True)
class Hit:
    """One verdict a packet met; ``end_of_tier`` hits get their trigger from the endpoint."""

    kind: int
    namespace: str
    name: str
    tier: str
    action: int
    rule_index: int
    end_of_tier: bool = False
    inbound: bool = True

    @property
    def staged(self) -> bool:
        return self.kind in STAGED_KINDS

    @property
    def terminal(self) -> bool:
        """An enforced allow or deny: the packet's evaluation ends here."""
        return self.action != pb.Pass and not self.staged


@dataclass(frozen=True)
class Endpoint:
    name: str
    namespace: str
    type: int
    labels: tuple[str, ...] = ()


def label_strings(labels: Mapping[str, str] | None) -> tuple[str, ...]:
    """Goldmane's form of labels: sorted ``key=value`` strings."""
    return tuple(sorted(f"{k}={v}" for k, v in (labels or {}).items()))


def endpoint_from_calc(
    key: WorkloadEndpointKey | HostEndpointKey, value: v1.WorkloadEndpoint | v1.HostEndpoint
) -> tuple[Endpoint, list[str]]:
    """A calc-graph endpoint as the collector names it, and the addresses it owns."""
    if isinstance(key, WorkloadEndpointKey):
        assert isinstance(value, v1.WorkloadEndpoint)
        namespace, sep, pod = key.workload_id.partition("/")
        if not sep:
            namespace, pod = "", key.workload_id
        ep = Endpoint(pod, namespace, pb.WorkloadEndpoint, label_strings(value.labels))
        nets = (*value.ipv4_nets, *value.ipv6_nets)
    else:
        assert isinstance(value, v1.HostEndpoint)
        ep = Endpoint(key.endpoint_id, "", pb.HostEndpoint, label_strings(value.labels))
        nets = (*value.expected_ipv4_addrs, *value.expected_ipv6_addrs)
    ips = []
    for net in nets:
        addr = net.split("/", 1)[0]
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        try:  # inet_ntop's form is the NFLOG reader's; 5x cheaper than ipaddress
            ips.append(socket.inet_ntop(family, socket.inet_pton(family, addr)))
        except OSError:
            continue  # never let one bad address stop the calc thread
    return ep, ips


def netset_endpoint(key: NetworkSetKey, value: v1.NetworkSet) -> Endpoint:
    """A network set as a flow endpoint: ``<ns>/<name>`` keys are namespaced sets."""
    namespace, sep, name = key.name.partition("/")
    if not sep:
        namespace, name = "", key.name
    return Endpoint(name, namespace, pb.NetworkSet, label_strings(value.labels))


Cidr = tuple[int, int, int]  # (IP version, prefix length, network as an integer)


def parse_cidrs(nets: Iterable[str]) -> list[Cidr]:
    out = []
    for net in nets:
        try:
            n = ipaddress.ip_network(net, strict=False)
        except ValueError:
            continue
        out.append((n.version, n.prefixlen, int(n.network_address)))
    return out


def network_endpoint(ip: str) -> Endpoint:
    """Goldmane's name for an address no endpoint owns: private or public network."""
    private = ipaddress.ip_address(ip).is_private
    return Endpoint("pvt" if private else "pub", "", pb.Network)


class Lookups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._policy_prefixes: dict[PolicyID, list[str]] = {}
        self._profile_prefixes: dict[str, list[str]] = {}
        self._rules: dict[str, Hit] = {}
        self._endpoints: dict[str, Endpoint] = {}
        self._tiers: dict[str, tuple[TierInfo, ...]] = {}  # endpoint IP -> its tiers
        self._wep_ips: dict[object, list[str]] = {}
        self._cluster: dict[str, tuple[object, Endpoint]] = {}  # IP -> (key, endpoint), any node
        self._cluster_ips: dict[object, list[str]] = {}
        # Network sets by (version, prefix length) -> network -> (key, endpoint): longest match.
        self._netsets: dict[tuple[int, int], dict[int, tuple[object, Endpoint]]] = {}
        self._netset_cidrs: dict[object, list[Cidr]] = {}
        self._pending: dict[object, Any] = {}  # calc-graph endpoint updates not applied yet
        # (cluster IP, protocol, port) -> the service behind it, from ServiceUpdate messages.
        self._services: dict[tuple[str, str, int], Service] = {}
        self._service_keys: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
        self.generation = 0
        for inbound in (True, False):
            self._rules[no_profile_prefix(inbound)] = Hit(
                pb.Profile, "", "", PROFILE_TIER, pb.Deny, -1, inbound=inbound
            )

    # --- updates (calc thread) -------------------------------------------------------------

    def on_messages(self, batch: Iterable[object]) -> None:
        with self._lock:
            self.generation += 1  # readers' caches of derived values are now stale
            for msg in batch:
                if isinstance(msg, ActivePolicyUpdate):
                    self._set_policy(msg)
                elif isinstance(msg, ActivePolicyRemove):
                    self._drop(self._policy_prefixes.pop(msg.id, []))
                elif isinstance(msg, ActiveProfileUpdate):
                    self._set_profile(msg)
                elif isinstance(msg, ActiveProfileRemove):
                    self._drop(self._profile_prefixes.pop(msg.id.name, []))
                elif isinstance(msg, WorkloadEndpointUpdate):
                    self._set_wep(msg)
                elif isinstance(msg, HostEndpointUpdate):
                    ep = msg.endpoint
                    ips = (*ep.expected_ipv4_addrs, *ep.expected_ipv6_addrs)
                    self._set_endpoint(
                        msg.id,
                        Endpoint(msg.id.endpoint_id, "", pb.HostEndpoint),
                        [str(ipaddress.ip_address(ip)) for ip in ips],
                        ep.tiers,
                    )
                elif isinstance(msg, WorkloadEndpointRemove | HostEndpointRemove):
                    self._forget(msg.id)
                elif isinstance(msg, ServiceUpdate):
                    self._set_service(msg)
                elif isinstance(msg, ServiceRemove):
                    self._drop_service(msg.namespace, msg.name)

    def _drop_service(self, namespace: str, name: str) -> None:
        for k in self._service_keys.pop((namespace, name), []):
            svc = self._services.get(k)
            if svc is not None and (svc.namespace, svc.name) == (namespace, name):
                del self._services[k]

    def _set_service(self, msg: ServiceUpdate) -> None:
        """Every (cluster IP, protocol, port) of the service: a connection opened to one of
        them and DNATed to a backend is a flow to that service."""
        self._drop_service(msg.namespace, msg.name)
        keys = []
        for addr in msg.cluster_ips:
            family = socket.AF_INET6 if ":" in addr else socket.AF_INET
            try:
                ip = socket.inet_ntop(family, socket.inet_pton(family, addr))
            except OSError:
                continue
            for port in msg.ports:
                k = (ip, port.protocol.lower(), port.port)
                self._services[k] = Service(msg.name, msg.namespace, port.name, port.port)
                keys.append(k)
        self._service_keys[msg.namespace, msg.name] = keys

    def on_endpoint(self, key: object, value: Any) -> None:
        """A calc-graph endpoint update (any node); ``value`` None removes it.

        The calc thread only queues it (latest value per key, in update order): converting is
        left to the collector's first lookup, so the calc graph - and the dataplane updates
        behind it - pay a dict assignment per endpoint update, not the conversion."""
        if not isinstance(key, WorkloadEndpointKey | HostEndpointKey | NetworkSetKey):
            return
        with self._lock:
            self.generation += 1
            self._pending.pop(key, None)  # re-queue at the end: update order decides IP reuse
            self._pending[key] = value

    def sizes(self) -> tuple[int, int, int]:
        """(endpoints of any node, network sets, active policies) known, queued updates
        included: what the ``felix_collector_lookup*`` gauges report, without converting."""
        with self._lock:
            endpoints, netsets = set(self._cluster_ips), set(self._netset_cidrs)
            for key, value in self._pending.items():
                known = netsets if isinstance(key, NetworkSetKey) else endpoints
                if value is None:
                    known.discard(key)
                else:
                    known.add(key)
            return len(endpoints), len(netsets), len(self._policy_prefixes)

    def _apply_pending(self) -> None:
        """Apply queued endpoint updates (lock held). An address two endpoints claim (a reused
        pod IP) stays with the later update until that endpoint goes."""
        pending, self._pending = self._pending, {}
        for key, value in pending.items():
            if isinstance(key, NetworkSetKey):
                self._apply_netset(key, value)
                continue
            for ip in self._cluster_ips.pop(key, []):
                if self._cluster.get(ip, (None,))[0] == key:
                    del self._cluster[ip]
            if value is None:
                continue
            ep, ips = endpoint_from_calc(key, value)
            for ip in ips:
                self._cluster[ip] = (key, ep)
            self._cluster_ips[key] = ips

    def _apply_netset(self, key: NetworkSetKey, value: v1.NetworkSet | None) -> None:
        for version, plen, net in self._netset_cidrs.pop(key, []):
            by_net = self._netsets.get((version, plen), {})
            if by_net.get(net, (None,))[0] == key:
                del by_net[net]
                if not by_net:
                    del self._netsets[version, plen]
        if value is None:
            return
        ep = netset_endpoint(key, value)
        cidrs = parse_cidrs(value.nets)
        for version, plen, net in cidrs:
            self._netsets.setdefault((version, plen), {})[net] = (key, ep)
        self._netset_cidrs[key] = cidrs

    def _netset_for(self, ip: str) -> Endpoint | None:
        """The network set with the longest prefix holding ``ip`` (lock held)."""
        if not self._netsets:
            return None
        addr = ipaddress.ip_address(ip)
        value, bits = int(addr), addr.max_prefixlen
        for version, plen in sorted(self._netsets, key=lambda vp: -vp[1]):
            if version != addr.version:
                continue
            shift = bits - plen
            hit = self._netsets[version, plen].get(value >> shift << shift)
            if hit is not None:
                return hit[1]
        return None

    def _drop(self, prefixes: list[str]) -> None:
        for prefix in prefixes:
            self._rules.pop(prefix, None)

    def _set_policy(self, msg: ActivePolicyUpdate) -> None:
        pid, policy = msg.id, msg.policy
        self._drop(self._policy_prefixes.pop(pid, []))
        kind, name = policy_kind(pid), policy_chain_id(pid)
        tier = pid.tier or policy.tier or "default"
        prefixes = []
        for inbound, rules in ((True, policy.inbound_rules), (False, policy.outbound_rules)):
            for index, rule in enumerate(rules):
                if rule.action not in ACTIONS:
                    continue
                prefix = rule_prefix(rule.action, OWNER_POLICY, inbound, index, name)
                hit = Hit(kind, pid.namespace, pid.name, tier, ACTIONS[rule.action], index)
                self._rules[prefix] = hit
                prefixes.append(prefix)
        self._policy_prefixes[pid] = prefixes

    def _set_profile(self, msg: ActiveProfileUpdate) -> None:
        name = msg.id.name
        self._drop(self._profile_prefixes.pop(name, []))
        prefixes = []
        for inbound, rules in (
            (True, msg.profile.inbound_rules),
            (False, msg.profile.outbound_rules),
        ):
            for index, rule in enumerate(rules):
                if rule.action not in ACTIONS:
                    continue
                prefix = rule_prefix(rule.action, OWNER_PROFILE, inbound, index, name)
                self._rules[prefix] = Hit(
                    pb.Profile, "", name, PROFILE_TIER, ACTIONS[rule.action], index
                )
                prefixes.append(prefix)
        self._profile_prefixes[name] = prefixes

    def _forget(self, owner: object) -> None:
        for ip in self._wep_ips.pop(owner, []):
            self._endpoints.pop(ip, None)
            self._tiers.pop(ip, None)

    def _set_wep(self, msg: WorkloadEndpointUpdate) -> None:
        namespace, sep, pod = msg.id.workload_id.partition("/")
        if not sep:
            namespace, pod = "", msg.id.workload_id
        nets = (*msg.endpoint.ipv4_nets, *msg.endpoint.ipv6_nets)
        ips = [str(ipaddress.ip_address(n.split("/", 1)[0])) for n in nets]
        ep = Endpoint(pod, namespace, pb.WorkloadEndpoint)
        self._set_endpoint(msg.id, ep, ips, msg.endpoint.tiers)

    def _set_endpoint(
        self, owner: object, ep: Endpoint, ips: list[str], tiers: tuple[TierInfo, ...]
    ) -> None:
        self._forget(owner)
        for ip in ips:
            self._endpoints[ip] = ep
            self._tiers[ip] = tiers
        self._wep_ips[owner] = ips
        for tier in tiers:
            for inbound in (True, False):
                # Both forms: "pass" also ends a tier that holds only staged policies.
                for default, action in (("Deny", pb.Deny), ("Pass", pb.Pass)):
                    prefix = end_of_tier_prefix(inbound, tier.name, default)
                    self._rules[prefix] = Hit(
                        pb.EndOfTier, "", "", tier.name, action, -1, True, inbound
                    )

    # --- queries (collector threads) -------------------------------------------------------

    def rule(self, prefix: str) -> Hit | None:
        with self._lock:
            return self._rules.get(prefix)

    def endpoint(self, ip: str) -> Endpoint:
        with self._lock:
            if self._pending:
                self._apply_pending()
            known = self._cluster.get(ip)
            if known is not None:
                return known[1]
            return self._endpoints.get(ip) or self._netset_for(ip) or network_endpoint(ip)

    def service(self, proto: str, ip: str, port: int) -> Service | None:
        """The service whose cluster IP and port (``proto`` as in flow keys: "tcp") is
        ``ip``:``port``, if any."""
        with self._lock:
            return self._services.get((ip, proto, port))

    def tier_info(self, ip: str, tier: str) -> TierInfo | None:
        with self._lock:
            for info in self._tiers.get(ip, ()):
                if info.name == tier:
                    return info
        return None

    def trigger(
        self, ip: str, tier: str, inbound: bool, *, include_staged: bool = False
    ) -> Hit | None:
        """The last (enforced, or any when ``include_staged``) policy of ``tier`` for the
        endpoint at ``ip``: an end-of-tier hit's trigger."""
        with self._lock:
            for info in self._tiers.get(ip, ()):
                if info.name != tier:
                    continue
                ids = [
                    p
                    for p in (info.ingress_policies if inbound else info.egress_policies)
                    if include_staged or not p.kind.startswith("Staged")
                ]
                if ids:
                    pid = ids[-1]
                    return Hit(policy_kind(pid), pid.namespace, pid.name, tier, pb.Deny, -1)
        return None
