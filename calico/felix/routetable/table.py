"""``RouteTable``: per-interface workload routes in the main routing table.

Callers say which routes each interface should carry (:meth:`set_routes`, :meth:`remove_iface`)
and call :meth:`apply` from their dataplane loop. Between resyncs the table trusts its cache of
kernel routes and only touches interfaces whose desired state or link state changed; a full
resync (first apply, every ``refresh_interval`` +/-10%, or after any netlink failure) re-reads
links and routes and repairs drift. Unwanted routes on interfaces with an owned prefix are removed
only after the grace period (see :mod:`calico.felix.routetable.grace`). Not thread-safe: use it
from one thread (interface-monitor callbacks should be handed over to that thread).
"""

from __future__ import annotations

import errno
import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence

from calico.felix.routetable.diff import IfacePlan, RouteSpec, plan_iface
from calico.felix.routetable.grace import GraceTracker
from calico.felix.routetable.model import (
    DEFAULT_METRIC,
    RT_SCOPE_LINK,
    RT_SCOPE_UNIVERSE,
    RTPROT_BOOT,
    ApplyResult,
    KernelRoute,
    LinkInfo,
    RouteTarget,
    cidr_addr,
    cidr_ip_version,
)
from calico.felix.routetable.netlink import PyRoute2Netlink, RouteNetlink, RouteNetlinkError

log = logging.getLogger(__name__)

DEFAULT_GRACE_PERIOD = 10.0
DEFAULT_REFRESH_INTERVAL = 90.0  # RouteRefreshInterval
REFRESH_JITTER = 0.1

# Errors that mean "the interface isn't ready yet", not "something is wrong".
_IFACE_NOT_READY = {errno.ENODEV, errno.ENETDOWN, errno.ENXIO}


class RouteTable:
    def __init__(
        self,
        *,
        netns: str | None = None,
        iface_prefixes: Sequence[str] = ("cali",),
        ip_versions: Sequence[int] = (4, 6),
        device_route_protocol: int = RTPROT_BOOT,
        metric: int = DEFAULT_METRIC,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        refresh_interval: float = DEFAULT_REFRESH_INTERVAL,
        remove_external_routes: bool = True,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        netlink: RouteNetlink | None = None,
    ) -> None:
        self._nl: RouteNetlink = netlink if netlink is not None else PyRoute2Netlink(netns)
        self._prefixes = tuple(iface_prefixes)
        self._ip_versions = tuple(ip_versions)
        self._spec = RouteSpec(proto=device_route_protocol, metric=metric)
        self._refresh_interval = refresh_interval
        self._remove_external = remove_external_routes
        self._clock = clock
        self._rng = rng or random.Random()
        self._grace = GraceTracker(grace_period)

        self._desired: dict[str, dict[str, RouteTarget]] = {}
        self._claims: dict[str, list[str]] = {}  # cidr -> ifaces wanting it; last one wins
        self._applied_owner: dict[str, str] = {}  # cidr -> iface at the last apply
        self._owner_changed: set[str] = set()  # cidrs whose owner may differ from _applied_owner
        self._dirty: set[str] = set()

        self._links: dict[str, LinkInfo] = {}
        self._kernel: dict[int, dict[tuple[str, int], KernelRoute]] = {}  # ifindex -> routes
        self._neigh: dict[tuple[str, str], str] = {}  # (iface, ip) -> mac we programmed

        self._resync_needed = True
        self._next_resync = 0.0
        self._wait_deadlines: dict[str, float] = {}  # iface -> earliest grace expiry

    # --- desired state ----------------------------------------------------------------------

    def set_routes(self, iface: str, targets: Iterable[RouteTarget]) -> None:
        """Replace the full set of routes wanted on ``iface``."""
        now = self._clock()
        new = {t.cidr: t for t in targets if t.ip_version in self._ip_versions}
        old = self._desired.get(iface, {})
        if new == old:
            return
        for cidr in old.keys() - new.keys():
            self._unclaim(cidr, iface)
            self._grace.route_undesired(iface, cidr, now)
        for cidr in new.keys() - old.keys():
            self._claim(cidr, iface)
            self._grace.route_desired(iface, cidr)
        if new:
            self._desired[iface] = new
        else:
            self._desired.pop(iface, None)
        self._dirty.add(iface)

    def remove_iface(self, iface: str) -> None:
        """Forget everything wanted on ``iface`` (its routes become unwanted, subject to grace)."""
        self.set_routes(iface, [])

    def routes_for(self, iface: str) -> list[RouteTarget]:
        return sorted(self._desired.get(iface, {}).values(), key=lambda t: t.cidr)

    def _claim(self, cidr: str, iface: str) -> None:
        claims = self._claims.setdefault(cidr, [])
        if iface in claims:
            claims.remove(iface)
        if claims:
            self._dirty.add(claims[-1])  # the previous owner must stop programming it
        claims.append(iface)
        self._owner_changed.add(cidr)

    def _unclaim(self, cidr: str, iface: str) -> None:
        claims = self._claims.get(cidr, [])
        if iface in claims:
            was_owner = claims[-1] == iface
            claims.remove(iface)
            if was_owner and claims:
                self._dirty.add(claims[-1])  # a remaining claimant takes over
        if not claims:
            self._claims.pop(cidr, None)
        self._owner_changed.add(cidr)

    def _owner(self, cidr: str) -> str | None:
        claims = self._claims.get(cidr)
        return claims[-1] if claims else None

    # --- link state (from the interface monitor) ---------------------------------------------

    def on_iface_state(self, name: str, state: str, index: int) -> None:
        """Feed from :class:`~calico.felix.ifacemonitor.monitor.InterfaceMonitor`: ``state`` is
        "up", "down" or "absent"."""
        if state == "absent":
            link = self._links.pop(name, None)
            if link is not None:
                self._kernel.pop(link.index, None)  # the kernel dropped its routes with it
            self._grace.iface_gone(name)
            self._drop_neigh_cache(name)
        else:
            old = self._links.get(name)
            if old is not None and old.index != index:
                self._kernel.pop(old.index, None)
            self._links[name] = LinkInfo(name=name, index=index, admin_up=True)
            self._grace.iface_seen(name, self._clock())
            if old is None or state != "up":
                # A (re)appearing or downed link may have lost routes/neighbours: re-read it.
                self._resync_needed = True
        if name in self._desired or self._is_owned(name):
            self._dirty.add(name)

    def queue_resync(self) -> None:
        """Force a full re-read of kernel state at the next apply."""
        self._resync_needed = True

    def next_deadline(self) -> float | None:
        """Clock time by which :meth:`apply` should next be called (resync or grace expiry)."""
        deadlines = [*self._wait_deadlines.values()]
        deadlines.append(self._clock() if self._resync_needed else self._next_resync)
        return min(deadlines) if deadlines else None

    @property
    def has_pending_work(self) -> bool:
        """Something is dirty, waiting for an interface, or a resync is queued."""
        return bool(self._dirty) or self._resync_needed

    def close(self) -> None:
        self._nl.close()

    # --- apply ---------------------------------------------------------------------------------

    def apply(self) -> ApplyResult:
        now = self._clock()
        result = ApplyResult()
        if self._resync_needed or now >= self._next_resync:
            try:
                self._full_resync(now)
            except RouteNetlinkError as e:
                log.warning("route resync failed, will retry: %s", e)
                result.errors["*"] = str(e)
                self._resync_needed = True
                return result
            result.resynced = True
        else:
            for iface, deadline in self._wait_deadlines.items():
                if now >= deadline:
                    self._dirty.add(iface)

        for iface in sorted(self._dirty):
            done = self._apply_iface(iface, now, result)
            if done:
                self._dirty.discard(iface)

        self._report_owner_changes(result)
        return result

    def _full_resync(self, now: float) -> None:
        links = self._nl.list_links()
        routes: list[KernelRoute] = []
        for version in self._ip_versions:
            routes.extend(self._nl.list_routes(version))

        previously_known = set(self._links) | set(self._desired)
        self._links = {link.name: link for link in links}
        for link in links:
            self._grace.iface_seen(link.name, now)
        for gone in previously_known - set(self._links):
            self._grace.iface_gone(gone)

        self._kernel = {}
        for route in routes:
            self._kernel.setdefault(route.ifindex, {})[(route.cidr, route.metric)] = route
        self._neigh.clear()  # re-assert every neighbour entry: cheap and idempotent

        by_index = {link.index: link.name for link in links}
        self._dirty |= set(self._desired)
        with_routes = {by_index[i] for i in self._kernel if i in by_index}
        self._dirty |= {n for n in with_routes if self._is_owned(n) or self._has_our_old_routes(n)}
        self._resync_needed = False
        jitter = 1.0 + self._rng.uniform(-REFRESH_JITTER, REFRESH_JITTER)
        self._next_resync = now + self._refresh_interval * jitter

    def _apply_iface(self, iface: str, now: float, result: ApplyResult) -> bool:
        """Bring one interface in line; True when nothing further is pending for it."""
        self._wait_deadlines.pop(iface, None)
        link = self._links.get(iface)
        if link is None and iface in self._desired:
            try:
                link = self._nl.lookup_link(iface)
            except RouteNetlinkError as e:
                result.errors[iface] = str(e)
                return False
            if link is not None:
                self._links[iface] = link
                self._grace.iface_seen(iface, now)
                self._kernel.setdefault(link.index, {})
        if link is None:
            if iface in self._desired:
                result.pending_ifaces.add(iface)
                return False
            return True

        mine = self._desired.get(iface, {})
        wanted = {cidr: t for cidr, t in mine.items() if self._owner(cidr) == iface}
        kernel = self._kernel.get(link.index, {})
        plan = plan_iface(
            wanted,
            kernel.values(),
            self._spec,
            deletable=lambda r: self._deletable(iface, r),
            deletion_time=lambda cidr: self._grace.deletion_time(iface, cidr, now),
            now=now,
        )
        try:
            self._program(iface, link, plan, result)
            self._sync_neighbours(iface, link, wanted)
        except RouteNetlinkError as e:
            if e.errno in _IFACE_NOT_READY:
                log.info("interface %s not ready (%s); will retry", iface, e)
                result.pending_ifaces.add(iface)
                if e.errno in (errno.ENODEV, errno.ENXIO):
                    self._links.pop(iface, None)
                    self._kernel.pop(link.index, None)
            else:
                log.warning("failed to program routes on %s: %s", iface, e)
                result.errors[iface] = str(e)
                self._resync_needed = True  # our cache may be wrong now
            return False
        if plan.wait:
            self._wait_deadlines[iface] = min(plan.wait.values())
            return False
        return True

    def _program(self, iface: str, link: LinkInfo, plan: IfacePlan, result: ApplyResult) -> None:
        cache = self._kernel.setdefault(link.index, {})
        for target in plan.program:
            version = cidr_ip_version(target.cidr)
            scope = RT_SCOPE_LINK if version == 4 else RT_SCOPE_UNIVERSE
            self._nl.replace_route(
                target.cidr,
                link.index,
                proto=self._spec.proto,
                scope=scope,
                metric=self._spec.metric,
            )
            key = (target.cidr, self._spec.metric)
            for other_index, other in self._kernel.items():
                # Replace moves a same-metric route off any other device.
                if other_index != link.index and other.pop(key, None) is not None:
                    result.moved_ips.add(cidr_addr(target.cidr))
            cache[key] = KernelRoute(
                cidr=target.cidr,
                ifindex=link.index,
                proto=self._spec.proto,
                scope=scope,
                metric=self._spec.metric,
            )
        for route in plan.delete:
            try:
                self._nl.delete_route(route)
            except RouteNetlinkError as e:
                if e.errno not in (errno.ESRCH, errno.ENOENT):
                    raise
                self._resync_needed = True  # already gone, or our cache is off: re-read
            cache.pop((route.cidr, route.metric), None)
            self._grace.route_deleted(iface, route.cidr)
            if self._owner(route.cidr) is None:
                result.removed_ips.add(cidr_addr(route.cidr))

    def _sync_neighbours(self, iface: str, link: LinkInfo, wanted: dict[str, RouteTarget]) -> None:
        want = {
            cidr_addr(cidr): t.dest_mac
            for cidr, t in wanted.items()
            if t.dest_mac and cidr.endswith(("/32", "/128"))
        }
        for ip, mac in sorted(want.items()):
            if self._neigh.get((iface, ip)) != mac:
                self._nl.set_neighbour(ip, mac, link.index)
                self._neigh[(iface, ip)] = mac
        for key in [k for k in self._neigh if k[0] == iface and k[1] not in want]:
            try:
                self._nl.delete_neighbour(key[1], link.index)
            except RouteNetlinkError as e:
                if e.errno not in (errno.ENOENT, errno.ESRCH):
                    raise
            del self._neigh[key]

    def _drop_neigh_cache(self, iface: str) -> None:
        for key in [k for k in self._neigh if k[0] == iface]:
            del self._neigh[key]

    def _report_owner_changes(self, result: ApplyResult) -> None:
        for cidr in self._owner_changed:
            prev = self._applied_owner.get(cidr)
            cur = self._owner(cidr)
            if prev is not None and cur is None:
                result.removed_ips.add(cidr_addr(cidr))
            elif prev is not None and cur != prev:
                result.moved_ips.add(cidr_addr(cidr))
            if cur is None:
                self._applied_owner.pop(cidr, None)
            else:
                self._applied_owner[cidr] = cur
        self._owner_changed.clear()
        if result.removed_ips:  # an IP still claimed elsewhere was not removed (O(claims))
            result.removed_ips -= {cidr_addr(c) for c in self._claims}

    # --- ownership ----------------------------------------------------------------------------

    def _is_owned(self, iface: str) -> bool:
        return iface.startswith(self._prefixes)

    def _has_our_old_routes(self, iface: str) -> bool:
        link = self._links.get(iface)
        if link is None:
            return False
        return any(self._grace.was_desired(iface, c) for c, _ in self._kernel.get(link.index, {}))

    def _deletable(self, iface: str, route: KernelRoute) -> bool:
        if self._is_owned(iface):
            return self._remove_external or route.proto == self._spec.proto
        # Off-prefix interfaces: only routes we programmed ourselves and no longer want.
        return route.proto == self._spec.proto and self._grace.was_desired(iface, route.cidr)
