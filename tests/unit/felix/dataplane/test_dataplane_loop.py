"""The dataplane loop without threads or a kernel: gating on InSync and the interface monitor,
throttling, retry backoff, health and DataplaneInSync, status publication. Time is a fake clock
and the loop is driven with ``step()``."""

from __future__ import annotations

from pathlib import Path

from dataplane_fakes import FakeRouteTable, FakeTable

from calico.backoff import Backoff
from calico.felix.dataplane.endpoint_status import (
    EndpointStatusFileReporter,
    EndpointStatusFiles,
    status_filename,
)
from calico.felix.dataplane.loop import (
    HEALTH_NAME,
    STATUS_MAX_DEFER,
    DataplaneParts,
    InternalDataplane,
)
from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.ipsets import IPSetsManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.dataplane.metrics import FelixMetrics
from calico.felix.messages import (
    InSync,
    IPSetType,
    IPSetUpdate,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)
from calico.felix.rules import RuleRenderer
from calico.felix.throttle import TokenBucket
from calico.health import HealthAggregator


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock, **kw: object) -> tuple[InternalDataplane, FakeTable, FakeRouteTable]:
    table, routes = FakeTable(), FakeRouteTable()
    renderer = RuleRenderer()
    ipsets = IPSetsManager(table)  # type: ignore[arg-type]
    policies = PolicyManager(table, renderer)  # type: ignore[arg-type]
    endpoints = EndpointManager(table, renderer, policies, routes)  # type: ignore[arg-type]
    parts = DataplaneParts(
        table=table,  # type: ignore[arg-type]
        ipsets=ipsets,
        policies=policies,
        endpoints=endpoints,
        managers=[ipsets, endpoints, policies],
        route_table=routes,
        flush_conntrack=kw.pop("flush", None),  # type: ignore[arg-type]
        status=kw.pop("status", None),  # type: ignore[arg-type]
        iface_listeners=[endpoints],
    )
    dp = InternalDataplane(
        parts,
        clock=clock,
        throttle=kw.pop("throttle", TokenBucket(0.1, 3, clock=clock)),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    return dp, table, routes


def test_nothing_is_programmed_before_in_sync_and_ifaces() -> None:
    clock = Clock()
    dp, table, _ = make(clock)
    dp.on_messages([IPSetUpdate("s:a", (), IPSetType.NET)])
    assert not dp.step()
    dp.on_messages([InSync()])
    assert not dp.step()  # interface monitor not in sync yet
    dp.on_ifaces_in_sync()
    assert dp.step() and table.applies == 1
    assert dp.dataplane_in_sync
    assert not dp.step()  # nothing dirty any more


def test_applies_are_throttled() -> None:
    clock = Clock()
    dp, table, _ = make(clock, wait_for_ifaces=False)
    dp.on_messages([InSync()])
    for i in range(5):
        dp.on_messages([IPSetUpdate(f"s:{i}", (), IPSetType.NET)])
        dp.step()
    assert table.applies == 3  # the burst
    dp.on_messages([IPSetUpdate("s:x", (), IPSetType.NET)])
    assert not dp.step()
    clock.now += 0.1
    assert dp.step() and table.applies == 4


def test_failed_apply_retries_with_backoff_and_resets() -> None:
    clock = Clock()
    in_sync: list[bool] = []
    dp, table, _ = make(
        clock,
        wait_for_ifaces=False,
        backoff=Backoff(0.5, 2.0),
        on_in_sync=lambda: in_sync.append(True),
    )
    table.fail_next = 3
    dp.on_messages([InSync()])
    assert dp.step() and table.applies == 1 and not dp.dataplane_in_sync
    clock.now += 0.4
    assert not dp.step()  # still backing off
    clock.now += 0.2
    assert dp.step() and table.applies == 2  # after 0.5 s
    clock.now += 0.9
    assert not dp.step()
    clock.now += 0.2
    assert dp.step() and table.applies == 3  # after 1.0 s
    clock.now += 2.0
    assert dp.step() and table.applies == 4  # capped at 2.0 s; this one succeeds
    assert dp.dataplane_in_sync and in_sync == [True]
    assert dp.failed_applies == 3


def test_health_metrics_and_conntrack_flush() -> None:
    clock = Clock()
    health = HealthAggregator(clock=clock)
    metrics = FelixMetrics()
    flushed: list[set[str]] = []
    dp, _, routes = make(
        clock, wait_for_ifaces=False, health=health, metrics=metrics, flush=flushed.append
    )
    dp.step()
    assert not health.summary().ready
    routes.flush = {"10.65.0.9"}
    dp.on_messages([InSync(), IPSetUpdate("s:a", ("10.0.0.1/32",), IPSetType.NET)])
    dp.step()
    assert health.summary().ready and HEALTH_NAME in health.summary().detail
    assert flushed == [{"10.65.0.9"}]
    assert metrics.messages.value("InSync") == 1
    assert metrics.ipsets_calico._value.get() == 2  # both families
    assert metrics.active_local_selectors._value.get() == 1


def _wep_update(n: int) -> WorkloadEndpointUpdate:
    ep = WorkloadEndpoint(state="active", name=f"cali{n}", ipv4_nets=(f"10.65.0.{n}/32",))
    return WorkloadEndpointUpdate(WorkloadEndpointID("k8s", f"ns/pod{n}", "eth0"), ep)


def _status_files(tmp: Path) -> set[str]:
    d = tmp / "endpoint-status"
    return {p.name for p in d.iterdir()} if d.exists() else set()


def test_status_files_wait_for_queued_input_but_not_for_ever(tmp_path: Path) -> None:
    clock = Clock()
    status = EndpointStatusFileReporter(EndpointStatusFiles(tmp_path))
    throttle = TokenBucket(0.01, 100, clock=clock)  # never the limit here
    dp, table, _ = make(clock, wait_for_ifaces=False, status=status, throttle=throttle)
    names = [status_filename(_wep_update(n).id) for n in range(3)]
    for n in range(3):
        dp.on_iface_state(f"cali{n}", "up", 10 + n)
    dp.on_messages([InSync(), _wep_update(0)])
    assert dp.step() and _status_files(tmp_path) == {names[0]}  # nothing queued: at once

    # Input queued when the apply ends: that input is applied first, then the files.
    real_apply = table.apply

    def apply_then_queue() -> object:
        table.apply = real_apply  # type: ignore[method-assign]
        dp.on_messages([_wep_update(2)])  # arrives while the transaction is in flight
        return real_apply()

    table.apply = apply_then_queue  # type: ignore[method-assign]
    dp.on_messages([_wep_update(1)])
    assert dp.step() and _status_files(tmp_path) == {names[0]}  # deferred: input is waiting
    assert dp.step() and table.applies == 3
    assert _status_files(tmp_path) == set(names)  # both, after the second apply

    # Input arriving during every apply cannot hold them back past STATUS_MAX_DEFER.
    def apply_and_queue_more() -> object:
        dp.on_messages([IPSetUpdate(f"s:{clock.now}", (), IPSetType.NET)])
        return real_apply()

    table.apply = apply_and_queue_more  # type: ignore[method-assign]
    dp.on_messages([WorkloadEndpointRemove(_wep_update(0).id)])
    deferred_from = clock.now
    while clock.now - deferred_from < STATUS_MAX_DEFER:
        assert dp.step() and _status_files(tmp_path) == set(names)  # still deferred
        clock.now += 0.03
    assert dp.step()
    assert _status_files(tmp_path) == set(names[1:])  # written although input is waiting


def test_on_idle_runs_only_when_nothing_is_left_to_do(tmp_path: Path) -> None:
    """The idle hook (Felix's garbage collection, calico.felix.idle_gc) never runs while input
    waits or an apply is due (throttled or not)."""
    clock = Clock()
    idle: list[float] = []
    status = EndpointStatusFileReporter(EndpointStatusFiles(tmp_path))
    dp, table, _ = make(
        clock,
        wait_for_ifaces=False,
        status=status,
        throttle=TokenBucket(0.1, 1, clock=clock),
        on_idle=lambda: idle.append(clock.now),
    )
    dp.on_iface_state("cali0", "up", 10)
    dp.on_messages([InSync(), _wep_update(0)])
    assert dp.step() and idle == [clock.now]  # applied, status written, nothing queued

    real_apply = table.apply

    def apply_then_queue() -> object:
        table.apply = real_apply  # type: ignore[method-assign]
        dp.on_messages([_wep_update(1)])  # arrives while the transaction is in flight
        return real_apply()

    clock.now += 0.1
    table.apply = apply_then_queue  # type: ignore[method-assign]
    dp.on_messages([IPSetUpdate("s:a", (), IPSetType.NET)])
    assert dp.step() and len(idle) == 1  # input waiting (status deferred for it too)
    assert not dp.step() and len(idle) == 1  # drained, its apply due but throttled
    clock.now += 0.1
    assert dp.step() and len(idle) == 2 and table.applies == 3
    assert not dp.step() and len(idle) == 3  # idle again on the next quiet iteration
