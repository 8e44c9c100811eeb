"""VXLAN manager: one per IP family, keeping ``vxlan.calico`` / ``vxlan-v6.calico``, the
per-remote-node neighbour and FDB entries and the VXLAN-pool routes in line with the calc
graph's VTEP and route messages (design/felix-dataplane.md "VXLAN").

Why a manager of its own rather than the workload RouteTable: VXLAN routes have gateways,
onlink flags, MTUs and blackholes, and the L2 entries must be written before the routes that
need them; the whole set is reconciled against a kernel readback every
``RouteRefreshInterval`` (drift repaired, entries of removed nodes deleted) and applied as
deltas in between, in one pipelined netlink batch.

Lifecycle per apply (``apply()``, called by the dataplane loop after the nftables table):
1. recompute the desired state if a message changed it (errors for bad VTEPs are logged once
   per distinct text);
2. no own VTEP yet -> nothing to program;
3. find the parent link (carries our node IP), create/repair the device;
4. on a due resync (start, refresh interval, device recreated, interface events, errors) read
   back the owned neighbours, FDB entries and routes;
5. write the differences: FDB + neighbours first, then routes, then deletions.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from calico.felix import nlbatch as nb
from calico.felix.dataplane.managers.overlap import net_text
from calico.felix.dataplane.vxlan_kernel import KernelError, Link, VXLANKernel, route_priority
from calico.felix.dataplane.vxlan_model import (
    Desired,
    RouteSpec,
    Settings,
    compute_desired,
    exclusive_proto,
)
from calico.felix.messages import (
    IPAMPool,
    IPAMPoolRemove,
    IPAMPoolUpdate,
    RouteRemove,
    RouteUpdate,
    ToDataplane,
    VXLANTunnelEndpointRemove,
    VXLANTunnelEndpointUpdate,
)
from calico.felix.nftables.model import NftSet, ipset_name
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules.static import IPSET_ALL_VXLAN

log = logging.getLogger(__name__)

RETRY_INTERVAL = 1.0


def pool_overlap_errors(pools: dict[str, IPAMPool], version: int) -> list[str]:
    """One error per pair of overlapping pools where at least one is a VXLAN pool."""
    nets = []
    for pool in pools.values():
        try:
            net = ipaddress.ip_network(pool.cidr, strict=False)
        except ValueError:
            continue
        if net.version == version:
            nets.append((net, pool.vxlan_mode not in ("", "Never")))
    nets.sort(key=lambda n: (int(n[0].network_address), n[0].prefixlen))
    out = []
    for i, (a, a_vx) in enumerate(nets):
        for b, b_vx in nets[i + 1 :]:
            if int(b.network_address) > int(a.broadcast_address):
                break
            if (a_vx or b_vx) and a.overlaps(b):
                out.append(f"VXLAN IP pool {a} overlaps IP pool {b}; routes may be ambiguous")
    return out


class VXLANManager:
    """Not thread-safe: the dataplane loop thread owns it."""

    def __init__(
        self,
        settings: Settings,
        kernel: VXLANKernel,
        *,
        refresh_interval: float = 90.0,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        table: NftablesTable | None = None,
        external_nodes: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.kernel = kernel
        self._table = table  # gets the all-vxlan-net set (the static VXLAN rules use it)
        self._external = [
            n
            for n in (ipaddress.ip_network(c, strict=False) for c in external_nodes)
            if n.version == settings.version
        ]
        self._allowed: set[str] | None = None
        self._refresh = refresh_interval
        self._clock = clock
        self._rng = rng or random.Random()
        self._exclusive = exclusive_proto(settings.device_route_protocol)
        self._priority = route_priority(settings.version)
        self._vteps: dict[str, VXLANTunnelEndpointUpdate] = {}
        self._routes: dict[str, RouteUpdate] = {}
        self._pools: dict[str, IPAMPool] = {}
        self._dirty = True
        self._pools_dirty = False
        self.desired = Desired()
        self._logged_errors: set[str] = set()
        # Kernel cache (what we believe is programmed).
        self._ifindex: int | None = None
        self._parent: Link | None = None
        self._neigh: dict[str, str] = {}
        self._fdb: dict[str, str] = {}
        self._kroutes: dict[tuple[str, int], RouteSpec] = {}
        self._resync_at: float | None = 0.0  # first apply resyncs
        self._retry_at: float | None = None
        self.last_errors: list[str] = []

    # -- messages ------------------------------------------------------------------------------

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, VXLANTunnelEndpointUpdate):
            self._vteps[msg.node] = msg
            self._dirty = True
        elif isinstance(msg, VXLANTunnelEndpointRemove):
            self._dirty |= self._vteps.pop(msg.node, None) is not None
        elif isinstance(msg, RouteUpdate):
            self._routes[msg.dst] = msg
            self._dirty = True
        elif isinstance(msg, RouteRemove):
            self._dirty |= self._routes.pop(msg.dst, None) is not None
        elif isinstance(msg, IPAMPoolUpdate):
            self._pools[msg.id] = msg.pool
            self._pools_dirty = True
        elif isinstance(msg, IPAMPoolRemove):
            self._pools_dirty |= self._pools.pop(msg.id, None) is not None

    def complete_deferred_work(self) -> None:
        if self._pools_dirty:
            self._pools_dirty = False
            self._log_errors(pool_overlap_errors(self._pools, self.settings.version), "pools")
        if self._dirty:
            self._dirty = False
            parent = self._parent.name if self._parent is not None else ""
            self.desired = compute_desired(self.settings, self._vteps, self._routes, parent)
            self._log_errors(self.desired.errors, "vteps")
        if self._table is not None:
            self._update_allowed_sources()

    def _update_allowed_sources(self) -> None:
        """``all-vxlan-net``: remote VTEPs' node IPs plus ExternalNodesCIDRList, collapsed
        (an interval set must not overlap)."""
        assert self._table is not None
        nets = [ipaddress.ip_network(ip) for ip in self.desired.remote_node_ips]
        members = {
            net_text(n)
            for n in ipaddress.collapse_addresses([*nets, *self._external])  # type: ignore[misc]
        }
        if members == self._allowed:
            return
        self._allowed = members
        version = self.settings.version
        name = ipset_name(IPSET_ALL_VXLAN, version)
        self._table.set_set(NftSet(name, f"ipv{version}_addr", True, members))

    def _log_errors(self, errors: list[str], scope: str) -> None:
        """Log each distinct bad-input error once (until it goes away and comes back)."""
        tagged = {f"{scope}:{e}" for e in errors}
        for text in sorted(tagged - self._logged_errors):
            log.error("Bad VXLAN input (IPv%d): %s", self.settings.version, text.split(":", 1)[1])
        self._logged_errors = {t for t in self._logged_errors if not t.startswith(scope + ":")}
        self._logged_errors |= tagged

    # -- interface events ----------------------------------------------------------------------

    def on_iface_state(self, name: str, state: str, index: int) -> None:
        parent = self._parent.name if self._parent is not None else None
        if name in (self.settings.device_name, parent):
            self.queue_resync()

    def on_iface_addrs(self, name: str, addrs: set[str] | None) -> None:
        device = self.desired.device
        if device is None:
            return
        if (addrs is not None and device.local_ip in addrs) or (
            self._parent is not None and name == self._parent.name
        ):
            self.queue_resync()

    def queue_resync(self) -> None:
        self._resync_at = self._clock()

    # -- scheduling ----------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        times = [t for t in (self._resync_at, self._retry_at) if t is not None]
        return min(times) if times else None

    @property
    def has_pending_work(self) -> bool:
        deadline = self.next_deadline()
        return deadline is not None and deadline <= self._clock()

    def _schedule_refresh(self) -> None:
        if self._refresh > 0:
            jitter = self._refresh * 0.1 * (2 * self._rng.random() - 1)
            self._resync_at = self._clock() + self._refresh + jitter
        else:
            self._resync_at = None

    # -- apply ---------------------------------------------------------------------------------

    def apply(self) -> list[str]:
        """Program the difference; returns errors (the loop retries after a failure)."""
        self.complete_deferred_work()
        device = self.desired.device
        if device is None:
            self._retry_at = None
            return []
        now = self._clock()
        resync = self._resync_at is not None and now >= self._resync_at
        if not resync and (self._retry_at is None or now < self._retry_at) and self._in_sync():
            return []
        errors: list[str] = []
        try:
            if resync or self._ifindex is None or self._retry_at is not None:
                resync |= self._ensure_device()
            if resync:
                self._read_back()
                self._schedule_refresh()
            errors = self._write()
        except KernelError as e:
            errors = [str(e)]
        if errors:
            self._retry_at = self._clock() + RETRY_INTERVAL
            self._resync_at = self._retry_at  # the cache may be wrong now
            log.warning("VXLAN (IPv%d) programming failed: %s", self.settings.version, errors)
        else:
            self._retry_at = None
        self.last_errors = errors
        return errors

    def _in_sync(self) -> bool:
        d = self.desired
        return (
            self._ifindex is not None
            and self._neigh == d.neighbours
            and self._fdb == d.fdb
            and self._kroutes == {(c, self._priority): r for c, r in d.routes.items()}
        )

    def _ensure_device(self) -> bool:
        """Find the parent and create/repair the device; True if the device (or parent)
        changed, so the cache must be re-read."""
        device = self.desired.device
        assert device is not None
        parent = self.kernel.link_with_address(device.local_ip)
        if parent is None:
            raise KernelError(
                f"no interface carries this node's IPv{device.version} address "
                f"{device.local_ip}; cannot create {device.name}"
            )
        old_parent = self._parent
        self._parent = parent
        if old_parent is None or old_parent.name != parent.name:
            self._dirty = True  # same-subnet routes name the parent
            self.complete_deferred_work()
        index = self.kernel.ensure_device(device, parent)
        changed = index != self._ifindex or old_parent != parent
        self._ifindex = index
        return changed

    def _read_back(self) -> None:
        index = self._ifindex
        assert index is not None
        names = {link.index: link.name for link in self.kernel.links()}
        self._neigh = self.kernel.read_neighbours(index)
        self._fdb = self.kernel.read_fdb(index)
        self._kroutes = self.kernel.read_routes(index, self._exclusive, names)

    def _oif(self, spec: RouteSpec) -> int:
        if spec.blackhole:
            return 0
        if spec.device == self.settings.device_name:
            assert self._ifindex is not None
            return self._ifindex
        if self._parent is not None and spec.device == self._parent.name:
            return self._parent.index
        raise KernelError(f"route {spec.cidr} names unknown device {spec.device}")

    def _write(self) -> list[str]:
        index = self._ifindex
        assert index is not None
        d = self.desired
        reqs: list[nb.Request] = []
        # L2 first: a route is useless until its next hop resolves.
        for mac, dst in d.fdb.items():
            if self._fdb.get(mac) != dst:
                reqs.append(nb.fdb_replace(index, mac, dst))
        for ip, mac in d.neighbours.items():
            if self._neigh.get(ip) != mac:
                reqs.append(nb.neigh_replace(index, ip, mac))
        want_routes = {(c, self._priority): r for c, r in d.routes.items()}
        for key, spec in want_routes.items():
            if self._kroutes.get(key) != spec:
                reqs.append(self._route_request(spec))
        for key in self._kroutes.keys() - want_routes.keys():
            reqs.append(nb.route_delete(key[0], key[1]))
        for ip in self._neigh.keys() - d.neighbours.keys():
            reqs.append(nb.neigh_delete(index, ip))
        for mac in self._fdb.keys() - d.fdb.keys():
            reqs.append(nb.fdb_delete(index, mac, self._fdb[mac]))
        if not reqs:
            return []
        errors = [str(f) for f in self.kernel.send(reqs) if not _gone(f)]
        # Optimistic: after any error the caller schedules a resync, which re-reads the truth.
        self._neigh = dict(d.neighbours)
        self._fdb = dict(d.fdb)
        self._kroutes = want_routes
        return errors

    def _route_request(self, spec: RouteSpec) -> nb.Request:
        return nb.route_replace(
            spec.cidr,
            rtype=nb.RTN_BLACKHOLE if spec.blackhole else nb.RTN_UNICAST,
            oif=self._oif(spec),
            gateway=spec.gateway,
            proto=spec.proto,
            scope=spec.scope,
            onlink=spec.onlink,
            mtu=spec.mtu,
            priority=self._priority,
        )

    def close(self) -> None:
        self.kernel.close()

    # -- introspection (tests, status) ---------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"neighbours": dict(self._neigh), "fdb": dict(self._fdb), "routes": self._kroutes}


def _gone(failure: nb.Failure) -> bool:
    """Deleting something already gone is success."""
    return failure.request.msg_type in (nb.RTM_DELROUTE, nb.RTM_DELNEIGH) and failure.errno in (
        errno.ENOENT,
        errno.ESRCH,
    )


__all__ = ["VXLANManager", "pool_overlap_errors"]
