"""The internal dataplane: calc-graph batches in, one nftables transaction (plus routes) out.

Named as upstream names it (``intdataplane``): the dataplane Felix runs in-process. Upstream's
"dataplane driver" is the other case, an external process Felix talks to (the
``DataplaneDriver`` parameter, used when ``UseInternalDataplaneDriver`` is false).

Why one thread: the nftables table, route table and managers are single-threaded by design, so
the calc graph and the interface monitor only *enqueue*; this loop owns all dataplane state.

Contracts (design/felix-dataplane.md, "The dataplane loop"):
- Nothing is programmed until the calc graph has sent ``InSync`` *and* the interface monitor has
  completed its first dump: a restarted Felix then replaces the previous table's contents in one
  transaction that rewrites only what differs, so established connections survive.
- Applies are throttled by a token bucket (burst 10, one token per 100 ms); a failed apply keeps
  everything dirty and is retried with exponential backoff (100 ms doubling to 10 s).
- Order per apply: managers' deferred work -> table (one transaction, including IP sets) ->
  workload sysctls -> VXLAN (device, FDB, neighbours, routes) -> workload routes (+ conntrack
  flush for moved/removed IPs); then endpoint status files, once no input is waiting (another
  workload's delta is applied first) or ``STATUS_MAX_DEFER`` after the apply at the latest.
  Routes go after policy so a new workload is never reachable before its policy exists.
- An iteration that leaves nothing to do (no input waiting, no apply due, so status files
  written) renders prepared policies (``PolicyPrepare``: no apply, nothing programmed) one at a
  time while no input arrives, then runs ``on_idle``: Felix collects garbage there
  (calico.felix.idle_gc) and asks the calc graph for more policies to prepare.
- Periodic resyncs: the table's own refresh (NftablesRefreshInterval), the route table's
  (RouteRefreshInterval), endpoint-status files every 10 s.
- Health reporter ``InternalDataplaneMainLoop`` (live+ready; timeout max(DataplaneWatchdogTimeout,
  20 s)): reported at least every 10 s; ready after the first successful apply.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from calico.backoff import Backoff
from calico.felix.dataplane.endpoint_status import EndpointStatusContent, EndpointStatusFileReporter
from calico.felix.dataplane.managers import Manager
from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.iface_config import WorkloadIfaceConfigurator
from calico.felix.dataplane.managers.ipsets import IPSetsManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.loopthread import LoopThread
from calico.felix.messages import InSync, PolicyPrepare, ToDataplane, WorkloadEndpointID
from calico.felix.nftables.table import NftablesTable
from calico.felix.throttle import TokenBucket
from calico.health import HealthAggregator

if TYPE_CHECKING:  # prometheus_client is imported only when metrics are on
    from calico.felix.dataplane.metrics import FelixMetrics

log = logging.getLogger(__name__)

HEALTH_NAME = "InternalDataplaneMainLoop"
HEALTH_INTERVAL = 10.0
MIN_HEALTH_TIMEOUT = 20.0
APPLY_INTERVAL = 0.1  # one throttle token per 100 ms ...
APPLY_BURST = 10  # ... at most 10 banked
RETRY_MIN = 0.1
RETRY_MAX = 10.0
STATUS_RESYNC_INTERVAL = 10.0
STATUS_MAX_DEFER = 0.1  # input arriving faster than this cannot hold the status files back

ConntrackFlusher = Callable[[set[str]], object]
_STOP = object()


@dataclass
class DataplaneParts:
    """Everything the loop drives; built by :func:`calico.felix.dataplane.build.build_parts`."""

    table: NftablesTable
    ipsets: IPSetsManager
    policies: PolicyManager
    endpoints: EndpointManager
    managers: Sequence[Manager]  # every manager, in message-delivery order
    route_table: Any = None  # calico.felix.routetable.RouteTable
    ifaces: WorkloadIfaceConfigurator | None = None
    status: EndpointStatusFileReporter | None = None
    flush_conntrack: ConntrackFlusher | None = None
    iface_listeners: list[Any] = field(default_factory=list)  # on_iface_state/on_iface_addrs
    # Kernel state owned outside the route table (VXLAN devices, FDB, neighbours, routes):
    # ``apply() -> list[str]`` errors and ``next_deadline() -> float | None``.
    host_appliers: list[Any] = field(default_factory=list)


class InternalDataplane:
    """Owns one thread (``start``/``stop``). ``on_messages`` and the interface callbacks may be
    called from any thread; everything else happens on the loop thread."""

    def __init__(
        self,
        parts: DataplaneParts,
        *,
        health: HealthAggregator | None = None,
        metrics: FelixMetrics | None = None,
        on_in_sync: Callable[[], None] | None = None,
        on_idle: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        throttle: TokenBucket | None = None,
        backoff: Backoff | None = None,
        health_timeout: float = 90.0,
        wait_for_ifaces: bool = True,
        iface_monitor: Any = None,
    ) -> None:
        self.parts = parts
        self._iface_monitor = iface_monitor  # started/stopped with the loop (it feeds us)
        self._health = health
        self._metrics = metrics
        self._on_in_sync = on_in_sync
        self._on_idle = on_idle
        self._clock = clock
        self._throttle = throttle or TokenBucket(APPLY_INTERVAL, APPLY_BURST, clock=clock)
        self._backoff = backoff or Backoff(RETRY_MIN, RETRY_MAX)
        self._queue: queue.Queue[object] = queue.Queue()
        self._stopping = threading.Event()
        self._thread = LoopThread(
            "dataplane",
            self._stopping,
            self._iterate,
            before=self._report_health,
            on_failure=self._failed,
            failure_message="Dataplane loop failed",
            logger=log,
        )
        self.error: BaseException | None = None
        # Loop-thread state.
        self.datastore_in_sync = False
        self.ifaces_in_sync = not wait_for_ifaces
        self.dataplane_in_sync = False
        self._dirty = True
        self._retry_at: float | None = None
        self._next_status_resync = 0.0
        self._last_health = float("-inf")
        self._reported: set[WorkloadEndpointID] = set()
        self._status_since: float | None = None  # an apply's status files are not written yet
        # wep id -> (the endpoint object its content came from, that content)
        self._status_content: dict[WorkloadEndpointID, tuple[object, EndpointStatusContent]] = {}
        self.applies = 0
        self.failed_applies = 0
        if health is not None:
            timeout = max(health_timeout, MIN_HEALTH_TIMEOUT)
            health.register_reporter(HEALTH_NAME, live=True, ready=True, timeout=timeout)

    # ---- inputs (any thread) -----------------------------------------------------------------

    def on_messages(self, batch: list[ToDataplane]) -> None:
        self._queue.put(("msgs", list(batch)))

    def on_iface_state(self, name: str, state: str, index: int) -> None:
        self._queue.put(("state", name, state, index))

    def on_iface_addrs(self, name: str, addrs: set[str] | None) -> None:
        self._queue.put(("addrs", name, None if addrs is None else set(addrs)))

    def on_ifaces_in_sync(self) -> None:
        self._queue.put(("ifaces-in-sync",))

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if self._iface_monitor is not None:
            self._iface_monitor.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and join the loop. The kernel state is left as programmed, on purpose."""
        self._stopping.set()
        self._queue.put(_STOP)
        if self._iface_monitor is not None:
            self._iface_monitor.stop(timeout)
        if not self._thread.join(timeout):
            log.error("Dataplane thread did not stop within %.1fs", timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    # ---- the loop ----------------------------------------------------------------------------

    def _iterate(self) -> None:
        self.step(self._wait_time())

    def _failed(self, exc: BaseException) -> None:
        self.error = exc
        if self._health is not None:
            self._health.report(HEALTH_NAME, live=False, ready=False, detail=repr(exc))

    def step(self, timeout: float = 0.0) -> bool:
        """One iteration: drain input (waiting up to ``timeout``), maybe apply. Returns whether
        an apply ran. Public so tests can drive the loop without a thread."""
        self._drain(0.0 if self._status_since is not None else timeout)
        applied = False
        if not self._stopping.is_set() and self._apply_due() and self._throttle.try_take():
            self._apply()
            applied = True
        if self._status_since is not None and (
            self._queue.empty() or self._clock() - self._status_since >= STATUS_MAX_DEFER
        ):
            self._status_since = None
            self._publish_status()
        if self._clock() - self._last_health >= HEALTH_INTERVAL:
            self._report_health()
        # Nothing to do now (status files are written whenever the queue is empty): prepared
        # policies are rendered, one at a time while no input arrives, then e.g. garbage
        # collection (calico.felix.idle_gc) and the next policies to prepare.
        if self._queue.empty() and not self._apply_due():
            policies = self.parts.policies
            while policies.preparing and self._queue.empty():
                policies.prepare_next()
            if self._on_idle is not None and not policies.preparing:
                self._on_idle()
        return applied

    def _drain(self, timeout: float) -> None:
        try:
            item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return
        batch = 0
        while True:
            if item is _STOP:
                return
            batch += self._handle(item)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
        if batch and self._metrics is not None:
            self._metrics.msg_batch_size.observe(batch)

    def _handle(self, item: Any) -> int:
        kind = item[0]
        if kind == "msgs":
            for msg in item[1]:
                self._on_message(msg)
            return len(item[1])
        if kind == "state":
            _, name, state, index = item
            for listener in self.parts.iface_listeners:
                listener.on_iface_state(name, state, index)
        elif kind == "addrs":
            for listener in self.parts.iface_listeners:
                on_addrs = getattr(listener, "on_iface_addrs", None)
                if on_addrs is not None:  # the route table only follows link state
                    on_addrs(item[1], item[2])
        elif kind == "ifaces-in-sync":
            log.info("Interface monitor in sync")
            self.ifaces_in_sync = True
        self._dirty = True
        return 0

    def _on_message(self, msg: ToDataplane) -> None:
        if self._metrics is not None:
            self._metrics.messages.inc(1, type(msg).__name__)
        if isinstance(msg, InSync):
            log.info("Datastore in sync; dataplane may now be programmed")
            self.datastore_in_sync = True
        for manager in self.parts.managers:
            manager.on_update(msg)
        if type(msg) is not PolicyPrepare:  # programs nothing: no apply for it
            self._dirty = True

    # ---- scheduling --------------------------------------------------------------------------

    def _deadlines(self) -> list[float]:
        p = self.parts
        out = [self._last_health + HEALTH_INTERVAL, p.table.next_refresh]
        if self._retry_at is not None:
            out.append(self._retry_at)
        for owner in (p.route_table, *p.host_appliers):
            if owner is not None and (deadline := owner.next_deadline()) is not None:
                out.append(deadline)
        if p.status is not None and self.dataplane_in_sync:
            out.append(self._next_status_resync)
        return out

    def _apply_due(self) -> bool:
        if not (self.datastore_in_sync and self.ifaces_in_sync):
            return False
        now = self._clock()
        if self._retry_at is not None:
            return now >= self._retry_at
        return self._dirty or any(d <= now for d in self._deadlines()[1:])

    def _wait_time(self) -> float:
        now = self._clock()
        if self._apply_due():
            return min(max(self._throttle.time_until_token(), 0.001), 1.0)
        deadlines = self._deadlines()
        if not (self.datastore_in_sync and self.ifaces_in_sync):
            deadlines = deadlines[:1]
        return min(max(min(deadlines) - now, 0.001), 1.0)

    # ---- apply -------------------------------------------------------------------------------

    def _apply(self) -> None:
        p = self.parts
        start = time.perf_counter()
        self._dirty = False
        for manager in p.managers:
            manager.complete_deferred_work()
        result = p.table.apply()
        host_ok = True
        if result.ok:
            host_ok = self._apply_host_side()
            if self._status_since is None:
                self._status_since = self._clock()  # written by step() (see the contracts)
        self.applies += 1
        elapsed = time.perf_counter() - start
        if self._metrics is not None:
            self._metrics.apply_time.observe(elapsed)
            self._update_gauges()
        # Upstream's line, one per apply; bench_felix_scale.py reads the apply times from it.
        log.info("Finished applying updates to dataplane. msecToApply=%.3f", elapsed * 1000.0)
        if result.ok and not self.dataplane_in_sync:
            self.dataplane_in_sync = True
            log.info("Dataplane in sync (first apply took %.3fs)", elapsed)
            log.info(
                "First nftables transaction: %d commands in %.3fs, %s",
                result.commands,
                result.seconds,
                "netlink" if result.netlink else f"libnftables ({result.fallback})",
            )
            if p.status is not None:
                p.status.mark_in_sync()
            self._report_health()
            if self._on_in_sync is not None:
                self._on_in_sync()
        if result.ok and host_ok:
            self._retry_at = None
            self._backoff.reset()
            return
        self.failed_applies += 1
        if self._metrics is not None:
            self._metrics.failures.inc()
        delay = self._backoff.next()
        self._retry_at = self._clock() + delay
        why = result.error if not result.ok else "host-side programming incomplete"
        log.warning("Dataplane apply failed (%s); retrying in %.2fs", why, delay)

    def _apply_host_side(self) -> bool:
        """Sysctls, routes and conntrack; False if anything needs a retry."""
        p = self.parts
        ok = True
        if p.ifaces is not None and not p.ifaces.apply():
            ok = False
        for applier in p.host_appliers:
            if applier.apply():  # errors are logged by the applier; retried with backoff
                ok = False
        if p.route_table is not None:
            rt = p.route_table.apply()
            if rt.errors:
                log.warning("Route programming failed (will retry): %s", rt.errors)
                ok = False
            flush = rt.conntrack_flush_ips
            if flush and p.flush_conntrack is not None:
                p.flush_conntrack(flush)
        return ok

    def _publish_status(self) -> None:
        p = self.parts
        if p.status is None:
            return
        weps = p.endpoints.weps
        current = set(weps)
        contents = self._status_content
        for wep_id in self._reported - current:
            p.status.endpoint_removed(wep_id)
            contents.pop(wep_id, None)
        for wep_id, ep in weps.items():
            if p.endpoints.wep_status(wep_id) == "up":
                cached = contents.get(wep_id)
                if cached is None or cached[0] is not ep:  # endpoints are replaced, not mutated
                    cached = contents[wep_id] = (ep, EndpointStatusContent.from_endpoint(ep))
                p.status.endpoint_up(wep_id, cached[1])
            else:
                p.status.endpoint_down(wep_id)
        self._reported = current
        now = self._clock()
        full = now >= self._next_status_resync
        if full:
            self._next_status_resync = now + STATUS_RESYNC_INTERVAL
        errors = p.status.reconcile(full_resync=full)
        if errors:
            log.warning("Endpoint status files: %s", errors)
            self._next_status_resync = now + 1.0

    def _update_gauges(self) -> None:
        m, p = self._metrics, self.parts
        assert m is not None
        m.active_local_endpoints.set(p.endpoints.num_endpoints)
        m.active_local_policies.set(p.policies.num_policies)
        m.active_local_selectors.set(sum(1 for i in p.ipsets.set_ids if i.startswith("s:")))
        m.ipsets_calico.set(p.ipsets.num_sets)

    def _report_health(self) -> None:
        self._last_health = self._clock()
        if self._health is None:
            return
        ready = self.dataplane_in_sync
        detail = "" if ready else "dataplane not yet programmed"
        self._health.report(HEALTH_NAME, live=True, ready=ready, detail=detail)


__all__ = ["HEALTH_NAME", "DataplaneParts", "InternalDataplane"]
