"""BPF endpoint manager: workload and host interfaces get the BPF programs instead of
nftables policy.

Follows the same calc-graph messages as the nftables managers (policies, profiles, IP sets,
workload and host endpoints) and the interface monitor. A workload interface is attached
(deny-all) as soon as it exists and matches a workload endpoint; a data interface
(``BPFDataIfacePattern``) as soon as it exists, allowing all until a host endpoint names it
by name or expected IPs
(``calico.felix.hostendpoints``, the nftables manager's resolution) or the all-interfaces
``*`` one applies. Policy programs are generated and loaded at
deferred-work time whenever the endpoint, one of its policies or profiles changed; removal
detaches. Failures are logged and retried at the next apply, never half-applied silently: the
interface stays attached with its previous programs (a new workload: deny-all).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import re

from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.idalloc import IDAllocator
from calico.felix.bpf.ipsets import BPFIPSets
from calico.felix.bpf.libbpf import BPFError
from calico.felix.bpf.polprog import EndpointPolicy, Generator, RuleInfo
from calico.felix.hostendpoints import all_interfaces_endpoint, resolve_host_endpoints
from calico.felix.messages import (
    ActivePolicyRemove,
    ActivePolicyUpdate,
    ActiveProfileRemove,
    ActiveProfileUpdate,
    HostEndpoint,
    HostEndpointID,
    HostEndpointRemove,
    HostEndpointUpdate,
    Policy,
    PolicyID,
    Profile,
    ToDataplane,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)

log = logging.getLogger(__name__)
_ONE = (1).to_bytes(4, "little")


def _host_ip(text: str) -> bytes | None:
    """The packed address of an interface address (either family), None if unparseable."""
    try:
        return ipaddress.ip_interface(text.strip()).ip.packed
    except ValueError:
        return None


class BPFEndpointManager:
    def __init__(
        self,
        dp: BPFDataplane,
        iface_prefixes: tuple[str, ...] = ("cali",),
        *,
        policy_debug: bool = False,
        data_ifaces: re.Pattern[str] | None = None,
        log_template: str = "calico-packet",
    ) -> None:
        self.dp = dp
        self.log_template = log_template  # LogPrefix: log rules' trace-pipe records
        self.data_ifaces = data_ifaces  # BPFDataIfacePattern; None: no host endpoints in BPF
        self.heps: dict[HostEndpointID, HostEndpoint] = {}
        self._data_present: set[str] = set()
        self.policy_debug = policy_debug  # BPFPolicyDebugEnabled: rule counters + listings
        self.ipsets = BPFIPSets(dp.maps, IDAllocator())
        self._prefixes = iface_prefixes
        self.policies: dict[PolicyID, Policy] = {}
        self.profiles: dict[str, Profile] = {}
        self.weps: dict[WorkloadEndpointID, WorkloadEndpoint] = {}
        self._iface_present: set[str] = set()
        self._host_addrs: dict[str, set[bytes]] = {}  # iface -> packed addresses
        self._iface_addrs: dict[str, set[str]] = {}  # iface -> normalised text (HEP matching)
        self._resolved: dict[str, HostEndpoint] | None = None  # None: recompute
        # A predecessor's host addresses (pinned map): those not re-reported go at first sync.
        self._inherited_hostips: set[bytes] | None = {
            *dp.maps.hostips.keys(),
            *dp.maps.hostips6.keys(),
        }
        self._attached: set[str] = set()
        self._programmed: dict[str, dict[str, str]] = {}  # iface -> hook -> source
        self._dirty: set[str] = set()
        self._rule_ctrs_pruned = False  # a predecessor's rule counters, once all programmed
        self.errors = 0

    # ---- input ------------------------------------------------------------------------------

    def on_update(self, msg: ToDataplane) -> None:
        self.ipsets.on_update(msg)
        if isinstance(msg, ActivePolicyUpdate):
            self.policies[msg.id] = msg.policy
            self._dirty_all()
        elif isinstance(msg, ActivePolicyRemove):
            self.policies.pop(msg.id, None)
            self._dirty_all()
        elif isinstance(msg, ActiveProfileUpdate):
            self.profiles[msg.id.name] = msg.profile
            self._dirty_all()
        elif isinstance(msg, ActiveProfileRemove):
            self.profiles.pop(msg.id.name, None)
            self._dirty_all()
        elif isinstance(msg, WorkloadEndpointUpdate):
            old = self.weps.get(msg.id)
            self.weps[msg.id] = msg.endpoint
            self._dirty.add(msg.endpoint.name)
            if old is not None and old.name != msg.endpoint.name:
                self._dirty.add(old.name)
        elif isinstance(msg, WorkloadEndpointRemove):
            old = self.weps.pop(msg.id, None)
            if old is not None:
                self._dirty.add(old.name)
        elif isinstance(msg, HostEndpointUpdate):
            self.heps[msg.id] = msg.endpoint
            self._heps_changed()
        elif isinstance(msg, HostEndpointRemove) and self.heps.pop(msg.id, None) is not None:
            self._heps_changed()

    def _heps_changed(self) -> None:
        self._resolved = None
        self._dirty.update(self._data_present)
        # Workload programs carry the all-interfaces endpoint's pre-DNAT / forward policy
        # (unchanged sources are not reloaded).
        self._dirty.update(ep.name for ep in self.weps.values())

    def _by_ips(self) -> bool:
        return any(not h.name for h in self.heps.values())

    def _dirty_all(self) -> None:
        # Regeneration is cheap to skip: unchanged sources are not reloaded (see _program).
        self._dirty.update(ep.name for ep in self.weps.values())
        self._dirty.update(self._data_present)

    def is_data_iface(self, name: str) -> bool:
        return (
            self.data_ifaces is not None
            and not name.startswith(self._prefixes)
            and self.data_ifaces.search(name) is not None
        )

    def on_iface_state(self, name: str, state: str, index: int) -> None:
        gone = state == "absent" and self._iface_addrs.pop(name, None) is not None
        if gone and self._by_ips():
            self._heps_changed()
        if self.is_data_iface(name):
            if state == "absent":
                self._data_present.discard(name)
            else:
                self._data_present.add(name)
            self._dirty.add(name)
            return
        if not name.startswith(self._prefixes):
            return
        if state == "absent":
            self._iface_present.discard(name)
        else:
            self._iface_present.add(name)
        self._dirty.add(name)

    def on_iface_addrs(self, name: str, addrs: set[str] | None) -> None:
        """Host interfaces' addresses -> ``cpy_v4_hostips`` / ``cpy_v6_hostips``
        (host-to-workload traffic is not policed, as in nftables); written at once, like IP
        set members."""
        if name.startswith(self._prefixes):
            return
        new = {a for a in (_host_ip(x) for x in addrs or ()) if a is not None}
        text = None if addrs is None else {str(ipaddress.ip_address(a)) for a in new}
        if text != self._iface_addrs.get(name):
            if text is None:
                self._iface_addrs.pop(name, None)
            else:
                self._iface_addrs[name] = text
            if self._by_ips():  # expected-IP endpoints may move between interfaces
                self._heps_changed()
        old = self._host_addrs.pop(name, set())
        if new:
            self._host_addrs[name] = new
        still = set().union(*self._host_addrs.values())
        for addr in old - still:
            self.dp.maps.hostip_map(addr).delete(addr)
        for addr in new - old:
            self.dp.maps.hostip_map(addr).update(addr, _ONE)

    # ---- output -----------------------------------------------------------------------------

    def _endpoint_for(self, iface: str) -> WorkloadEndpoint | None:
        for wep_id in sorted(self.weps):
            if self.weps[wep_id].name == iface:
                return self.weps[wep_id]
        return None

    def complete_deferred_work(self) -> None:
        # The loop applies only once the calc graph is in sync: a complete set of IP sets.
        removed = self.ipsets.resync()
        if removed:
            log.info("Removed %d stale IP set entries left by a previous run", removed)
        if self._inherited_hostips is not None:  # the interface monitor's first dump is in too
            wanted = set().union(*self._host_addrs.values())
            for key in self._inherited_hostips - wanted:
                self.dp.maps.hostip_map(key).delete(key)
            self._inherited_hostips = None
        self._sync_dirty()
        self._maybe_prune()

    def _maybe_prune(self) -> None:
        if not self._rule_ctrs_pruned and not self._dirty and self.policy_debug:
            removed = self.dp.prune_rule_counters()
            if removed:
                log.info("Removed %d rule counters of rules no program uses", removed)
            self._rule_ctrs_pruned = True

    def _sync_dirty(self) -> list[str]:
        retry: set[str] = set()
        errors = []
        for iface in sorted(self._dirty):
            try:
                self._sync_iface(iface)
            except BPFError as e:
                self.errors += 1
                log.error("BPF programming of %s failed (will retry): %s", iface, e)
                retry.add(iface)
                errors.append(f"{iface}: {e}")
        self._dirty = retry
        return errors

    # The loop's host-applier contract: a failure above is retried with the loop's backoff.
    def apply(self) -> list[str]:
        """Retry interfaces whose programming failed; their errors (empty: all done)."""
        if not self._dirty:
            return []
        errors = self._sync_dirty()
        self._maybe_prune()
        return errors

    def next_deadline(self) -> float | None:
        return None

    @property
    def dirty(self) -> bool:
        return bool(self._dirty)

    def hep_for(self, iface: str) -> HostEndpoint | None:
        """The host endpoint whose policy ``iface`` enforces: the one resolved to it by name
        or expected IPs as nftables resolves them, else the all-interfaces ``*`` one (lowest
        ID), else none."""
        if self._resolved is None:
            self._resolved = resolve_host_endpoints(
                self.heps, self._iface_addrs, lambda n: n.startswith(self._prefixes)
            )
        hep = self._resolved.get(iface)
        if hep is not None:
            return hep
        return self.wildcard_hep()

    def wildcard_hep(self) -> HostEndpoint | None:
        """The all-interfaces (``*``) host endpoint in force: the lowest ID's."""
        return all_interfaces_endpoint(self.heps)

    def _sync_data_iface(self, iface: str) -> None:
        if iface not in self._data_present:
            if iface in self._attached or iface in self.dp.ifaces:
                self.dp.remove_iface(iface)
                self._attached.discard(iface)
                self._programmed.pop(iface, None)
            return
        if iface not in self._attached:
            # No host endpoint (yet): the programs allow all, as upstream's.
            self.dp.attach_iface(iface, hep=True)
            self._attached.add(iface)
            self._programmed.pop(iface, None)
        hep = self.hep_for(iface)
        if hep is None:
            if iface in self._programmed or self.dp.slot(iface) is not None:
                self.dp.clear_policies(iface)
                self._programmed.pop(iface, None)
            return
        sources, rules = self.host_programs(hep)
        if self._programmed.get(iface) != sources:
            self.dp.set_policies(iface, sources, rules, hep=True)
            self._programmed[iface] = sources

    def _generator(self) -> Generator:
        """A policy-program generator over the current policies, profiles and IP set ids."""
        return Generator(
            self.policies,
            self.profiles,
            self.ipsets.ids.get_or_alloc,
            rule_counters=self.policy_debug,
            log_template=self.log_template,
        )

    def host_programs(self, hep: HostEndpoint) -> tuple[dict[str, str], dict[str, list[RuleInfo]]]:
        """hook -> C source and rules for a host endpoint: TC ingress = its ingress policy."""
        gen = self._generator()
        sources, rules = {}, {}
        for hook, inbound in (("ingress", True), ("egress", False)):
            ep = EndpointPolicy(
                hep.tiers,
                hep.profile_ids,
                inbound,
                host=True,
                untracked_tiers=hep.untracked_tiers,
                pre_dnat_tiers=hep.pre_dnat_tiers,
                forward_tiers=hep.forward_tiers,
            )
            sources[hook] = gen.source(ep)
            rules[hook] = gen.rules
        return sources, rules

    def _sync_iface(self, iface: str) -> None:
        if self.is_data_iface(iface):
            self._sync_data_iface(iface)
            return
        ep = self._endpoint_for(iface)
        if ep is None or iface not in self._iface_present:
            # (also a predecessor's interface, adopted by the dataplane, that is not wanted)
            if iface in self._attached or iface in self.dp.ifaces:
                self.dp.remove_iface(iface)
                self._attached.discard(iface)
                self._programmed.pop(iface, None)
            return
        if iface not in self._attached:
            # New: deny-all until the policy below is in. Adopted from a predecessor: keeps its
            # slot, so its old policy enforces until the new program replaces it.
            self.dp.attach_iface(iface)
            self._attached.add(iface)
            self._programmed.pop(iface, None)
        # Routes before policy: from-WEP's reverse-path check drops sources without one. The
        # calc graph passes allowSpoofedSourcePrefixes only with WorkloadSourceSpoofing=Any.
        nets = (*ep.ipv4_nets, *ep.ipv6_nets, *ep.allow_spoofed_source_prefixes)
        self.dp.set_workload_routes(iface, nets)
        sources, rules = self.programs(ep)
        if self._programmed.get(iface) != sources:
            self.dp.set_policies(iface, sources, rules)
            self._programmed[iface] = sources

    def sources(self, ep: WorkloadEndpoint) -> dict[str, str]:
        return self.programs(ep)[0]

    def programs(self, ep: WorkloadEndpoint) -> tuple[dict[str, str], dict[str, list[RuleInfo]]]:
        """hook -> C source, and hook -> the rules in it (listing and rule counters)."""
        gen = self._generator()
        down = ep.state != "active"
        wild = self.wildcard_hep() if self.data_ifaces is not None else None
        sources, rules = {}, {}
        for hook, inbound in (("ingress", False), ("egress", True)):
            pol = EndpointPolicy(ep.tiers, ep.profile_ids, inbound, down)
            if wild is not None:
                pol = dataclasses.replace(pol, wild_pre_dnat_tiers=wild.pre_dnat_tiers,
                                          wild_forward_tiers=wild.forward_tiers)  # fmt: skip
            sources[hook] = gen.source(pol)
            rules[hook] = gen.rules
        return sources, rules

    def is_programmed(self, iface: str) -> bool:
        return iface in self._programmed

    def close(self) -> None:
        """Leave programs and pins in place: a restarted Felix takes over without a gap."""
        self.dp.close()
