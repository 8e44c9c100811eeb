"""Workload and host endpoints -> endpoint chains, dispatch maps, workload routes, statuses.

Rendering is deferred to :meth:`EndpointManager.complete_deferred_work` so a batch touching many
endpoints re-renders each once. The nine dispatch maps are rebuilt whole only at the start and
when host endpoints change; a workload interface that comes or goes changes just its own two
entries (a new workload cost one entry per local workload before: design/performance.md
"TTFR: one workload's delta"). Workload routes (``/32``/``/128``
plus a permanent neighbour entry for the MAC) go to the shared ``RouteTable``; per-interface
sysctls to :class:`WorkloadIfaceConfigurator`. Host endpoints are matched to interfaces by name,
or (name empty) by their expected IPs against the interface addresses the monitor reports; the
all-interfaces (``*``) endpoint, resolved under ``ALL_INTERFACES``, is the host dispatch chains'
fallback for every other interface.

Endpoint chains jump to policy group chains (``calico.felix.rules.groups``), which endpoints
share: the manager refcounts them by name across workload and host endpoints, programs one when
its first user appears and removes it with its last. A group's name hashes its tier and policy
chains, so equal names are equal chains and a group already programmed is not rewritten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from calico.felix.dataplane.managers.iface_config import WorkloadIfaceConfigurator
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.hostendpoints import (
    ALL_INTERFACES,
    all_interfaces_endpoint,
    normalise_addr,
    resolve_host_endpoints,
)
from calico.felix.messages import (
    HostEndpoint,
    HostEndpointID,
    HostEndpointRemove,
    HostEndpointUpdate,
    PolicyID,
    TierInfo,
    ToDataplane,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)
from calico.felix.nftables.model import Chain
from calico.felix.nftables.table import NftablesTable
from calico.felix.routetable import RouteTable, RouteTarget
from calico.felix.rules import RuleRenderer
from calico.felix.rules.groups import is_group_chain

log = logging.getLogger(__name__)


class EndpointManager:
    def __init__(
        self,
        table: NftablesTable,
        renderer: RuleRenderer,
        policies: PolicyManager,
        routes: RouteTable | None,
        ifaces: WorkloadIfaceConfigurator | None = None,
        *,
        ip_versions: tuple[int, ...] = (4, 6),
    ) -> None:
        self._table = table
        self._renderer = renderer
        self._policies = policies
        self._routes = routes
        self._ifaces = ifaces
        self._versions = ip_versions
        self.weps: dict[WorkloadEndpointID, WorkloadEndpoint] = {}
        self.heps: dict[HostEndpointID, HostEndpoint] = {}
        self._dirty_weps: set[WorkloadEndpointID] = set()
        # id -> (iface, chain names)
        self._wep_chains: dict[WorkloadEndpointID, tuple[str, list[str]]] = {}
        self._hep_chains: dict[str, list[str]] = {}  # iface -> chains
        # Policy group chains: the names each endpoint jumps to, and users per name.
        self._wep_groups: dict[WorkloadEndpointID, set[str]] = {}
        self._hep_groups: dict[str, set[str]] = {}  # iface -> group chains
        self._group_users: dict[str, int] = {}
        self._hep_by_iface: dict[str, HostEndpoint] = {}
        self._heps_dirty = True
        self._maps_dirty = True  # the maps must exist even when empty (static chains use them)
        self._iface_refs: dict[str, int] = {}  # workload iface -> endpoints using it
        self._changed_ifaces: set[str] = set()  # workload ifaces to re-check in the maps
        self.iface_up: dict[str, bool] = {}
        self._iface_addrs: dict[str, set[str]] = {}
        # (iface, resolved endpoint) -> the endpoint to render; BPF mode sets it (mode.py).
        self.hep_view: Callable[[str, HostEndpoint], HostEndpoint] | None = None
        # False where another dataplane applies the ``*`` endpoint (BPF mode: mode.py).
        self.render_all_interfaces = True
        self._warned_untracked_wild: HostEndpoint | None = None

    # ---- input ------------------------------------------------------------------------------

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, WorkloadEndpointUpdate):
            self.weps[msg.id] = msg.endpoint
            self._dirty_weps.add(msg.id)
        elif isinstance(msg, WorkloadEndpointRemove):
            if self.weps.pop(msg.id, None) is not None:
                self._dirty_weps.add(msg.id)
        elif isinstance(msg, HostEndpointUpdate):
            self.heps[msg.id] = msg.endpoint
            self._heps_dirty = True
        elif isinstance(msg, HostEndpointRemove) and self.heps.pop(msg.id, None) is not None:
            self._heps_dirty = True

    def on_iface_state(self, name: str, state: str, index: int) -> None:
        if state == "absent":
            self.iface_up.pop(name, None)
            self._iface_addrs.pop(name, None)
        else:
            self.iface_up[name] = state == "up"
        if self._ifaces is not None and self._is_workload_iface(name):
            self._ifaces.on_iface_state(name, state)
        if any(not h.name for h in self.heps.values()):
            self._heps_dirty = True

    def on_iface_addrs(self, name: str, addrs: set[str] | None) -> None:
        if addrs is None:
            self._iface_addrs.pop(name, None)
        else:
            self._iface_addrs[name] = {normalise_addr(a) for a in addrs}
        if any(not h.name for h in self.heps.values()):
            self._heps_dirty = True

    def _is_workload_iface(self, name: str) -> bool:
        return name.startswith(self._renderer.config.workload_iface_prefixes)

    # ---- output -----------------------------------------------------------------------------

    def complete_deferred_work(self) -> None:
        regrouped = self._policies.take_regrouped()
        if regrouped:
            self._dirty_weps.update(
                wep_id for wep_id, ep in self.weps.items() if _jumps_to_any(ep.tiers, regrouped)
            )
            if self.heps:
                self._heps_dirty = True
        for wep_id in sorted(self._dirty_weps):
            self._render_wep(wep_id)
        self._dirty_weps.clear()
        if self._heps_dirty:
            self._render_heps()
            self._heps_dirty = False
            self._maps_dirty = True
        if self._maps_dirty:
            workload_ifaces = {iface for iface, _ in self._wep_chains.values()}
            for vmap in self._renderer.dispatch_maps(workload_ifaces, self._hep_by_iface):
                self._table.set_map(vmap)
            self._maps_dirty = False
        else:
            for iface in sorted(self._changed_ifaces):
                present = iface in self._iface_refs
                for map_name, verdict in self._renderer.workload_dispatch_entries(iface):
                    if present:
                        self._table.set_map_element(map_name, iface, verdict)
                    else:
                        self._table.remove_map_element(map_name, iface)
        self._changed_ifaces.clear()

    def _render_wep(self, wep_id: WorkloadEndpointID) -> None:
        ep = self.weps.get(wep_id)
        old_iface, old_chains = self._wep_chains.pop(wep_id, ("", []))
        names: list[str] = []
        groups: list[Chain] = []
        if ep is not None:
            chains = self._renderer.workload_endpoint_chains(
                ep.name, ep, group_key=self._policies.group_key
            )
            for chain in chains:
                if is_group_chain(chain.name):
                    groups.append(chain)
                else:
                    self._table.set_chain(chain)
                    names.append(chain.name)
            self._wep_chains[wep_id] = (ep.name, names)
        self._set_groups(self._wep_groups, wep_id, groups)
        if ep is not None:
            self._policies.set_profile_refs(wep_id, ep.profile_ids)
        else:
            self._policies.set_profile_refs(wep_id, ())
        for name in set(old_chains) - set(names):
            self._table.remove_chain(name)
        if ep is None or old_iface != ep.name:
            if old_iface:
                self._unref_iface(old_iface)
            if ep is not None:
                self._iface_refs[ep.name] = self._iface_refs.get(ep.name, 0) + 1
                self._changed_ifaces.add(ep.name)
        if self._routes is not None:
            if old_iface and (ep is None or old_iface != ep.name):
                self._routes.remove_iface(old_iface)
            if ep is not None:
                self._routes.set_routes(ep.name, self._route_targets(ep))
        if self._ifaces is not None:
            if old_iface and (ep is None or old_iface != ep.name):
                self._ifaces.forget(old_iface)
            if ep is not None:
                self._ifaces.want(ep.name, ipv4=bool(ep.ipv4_nets), ipv6=bool(ep.ipv6_nets))

    def _set_groups(self, users: dict[Any, set[str]], owner: object, groups: list[Chain]) -> None:
        """Record the group chains ``owner`` jumps to (in ``users``): program the newly used
        ones, remove the ones nobody jumps to any more."""
        new = {g.name for g in groups}
        old = users.pop(owner, set())
        if new:
            users[owner] = new
        for chain in groups:
            if chain.name not in old:
                count = self._group_users.get(chain.name, 0)
                self._group_users[chain.name] = count + 1
                if not count:
                    self._table.set_chain(chain)
        for name in old - new:
            left = self._group_users.pop(name) - 1
            if left:
                self._group_users[name] = left
            else:
                self._table.remove_chain(name)

    @property
    def num_group_chains(self) -> int:
        return len(self._group_users)

    def _unref_iface(self, iface: str) -> None:
        left = self._iface_refs.pop(iface) - 1
        if left:
            self._iface_refs[iface] = left
        self._changed_ifaces.add(iface)

    def _route_targets(self, ep: WorkloadEndpoint) -> list[RouteTarget]:
        nets = list(ep.ipv4_nets) if 4 in self._versions else []
        nets += list(ep.ipv6_nets) if 6 in self._versions else []
        return [RouteTarget(n, ep.mac or None) for n in nets]

    def _resolve_heps(self) -> dict[str, HostEndpoint]:
        """Interface -> host endpoint (``calico.felix.hostendpoints.resolve_host_endpoints``),
        each seen through ``hep_view`` (BPF mode: allow-only where BPF polices), plus the
        ``*`` endpoint under ``ALL_INTERFACES`` unless ``render_all_interfaces`` is off."""
        out = resolve_host_endpoints(self.heps, self._iface_addrs, self._is_workload_iface)
        if self.hep_view is not None:
            out = {iface: self.hep_view(iface, hep) for iface, hep in out.items()}
        wild = all_interfaces_endpoint(self.heps) if self.render_all_interfaces else None
        if wild is not None:
            out[ALL_INTERFACES] = wild
            if wild.untracked_tiers and wild != self._warned_untracked_wild:
                log.warning(
                    "DoNotTrack policy is not supported on a host endpoint with "
                    'interfaceName "*"; ignoring it'
                )
                self._warned_untracked_wild = wild
        return out

    def _render_heps(self) -> None:
        self._hep_by_iface = self._resolve_heps()
        old = self._hep_chains
        self._hep_chains = {}
        for iface, hep in self._hep_by_iface.items():
            names = []
            groups = []
            for chain in self._renderer.host_endpoint_chains(
                iface, hep, group_key=self._policies.group_key
            ):
                if is_group_chain(chain.name):
                    groups.append(chain)
                else:
                    self._table.set_chain(chain)
                    names.append(chain.name)
            self._hep_chains[iface] = names
            self._set_groups(self._hep_groups, iface, groups)
            self._policies.set_profile_refs(("hep", iface), hep.profile_ids)
        # The table orders the rewrite of these ahead of removing a gone `*` endpoint's chains.
        for chain in self._renderer.host_dispatch_chains(self._hep_by_iface.get(ALL_INTERFACES)):
            self._table.set_chain(chain)
        keep = {n for names in self._hep_chains.values() for n in names}
        for iface, names in old.items():
            for name in set(names) - keep:
                self._table.remove_chain(name)
            if iface not in self._hep_chains:
                self._policies.set_profile_refs(("hep", iface), ())
                self._set_groups(self._hep_groups, iface, [])

    # ---- status -----------------------------------------------------------------------------

    def wep_status(self, wep_id: WorkloadEndpointID) -> str:
        """``up`` if admin-active, oper-up and its interface configured; else ``down``."""
        ep = self.weps.get(wep_id)
        if ep is None:
            return ""
        if ep.state != "active" or not self.iface_up.get(ep.name, False):
            return "down"
        if self._ifaces is not None and self._ifaces.failing(ep.name):
            return "down"
        return "up"

    @property
    def num_endpoints(self) -> int:
        return len(self.weps) + len(self.heps)


def _jumps_to_any(tiers: tuple[TierInfo, ...], policies: set[PolicyID]) -> bool:
    return any(p in policies for t in tiers for p in (*t.ingress_policies, *t.egress_policies))
