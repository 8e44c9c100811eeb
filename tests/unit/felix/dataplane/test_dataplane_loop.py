"""The dataplane loop without threads or a kernel: gating on InSync and the interface monitor,
throttling, retry backoff, health and DataplaneInSync, status publication. Time is a fake clock
and the loop is driven with ``step()``."""

from __future__ import annotations

from dataplane_fakes import FakeRouteTable, FakeTable

from calico.backoff import Backoff
from calico.felix.dataplane.loop import HEALTH_NAME, DataplaneParts, InternalDataplane
from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.ipsets import IPSetsManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.dataplane.metrics import FelixMetrics
from calico.felix.messages import InSync, IPSetType, IPSetUpdate
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
    )
    dp = InternalDataplane(
        parts,
        clock=clock,
        throttle=TokenBucket(0.1, 3, clock=clock),
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
