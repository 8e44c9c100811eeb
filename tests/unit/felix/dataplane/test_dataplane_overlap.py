"""The dataplane loop's host-side overlap: after the first successful apply, the workload
sysctls and routes run on the host-side worker thread while the table commits; the loop waits
for them, and a failure of either part fails (and retries) the apply. No timed assertions: a
fake table waits for the route apply to start, which only happens when the two overlap (a
sequential loop makes that wait time out and the test fail)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from dataplane_fakes import FakeRouteResult, FakeRouteTable, FakeTable

from calico.backoff import Backoff
from calico.felix.dataplane.host_worker import HostSideWorker
from calico.felix.dataplane.loop import DataplaneParts, InternalDataplane
from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.ipsets import IPSetsManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.messages import InSync, IPSetType, IPSetUpdate
from calico.felix.nftables.table import ApplyResult
from calico.felix.rules import RuleRenderer
from calico.felix.throttle import TokenBucket

WAIT = 5.0  # only reached when the parts do not overlap (the test then fails)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """(event, thread name) in the order they happen, from any thread."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self.routes_started = threading.Event()

    def __call__(self, event: str) -> None:
        with self._lock:
            self.events.append((event, threading.current_thread().name))

    def names(self) -> list[str]:
        return [e for e, _ in self.events]

    def thread_of(self, event: str) -> str:
        return next(t for e, t in self.events if e == event)

    def clear(self) -> None:
        self.events.clear()
        self.routes_started.clear()


class Table(FakeTable):
    def __init__(self, rec: Recorder) -> None:
        super().__init__()
        self.rec = rec
        self.wait_for_routes = False  # block until the route apply has started
        self.saw_routes: bool | None = None
        self.raise_next: BaseException | None = None

    def apply(self) -> ApplyResult:
        self.rec("table start")
        if self.wait_for_routes:
            self.saw_routes = self.rec.routes_started.wait(WAIT)
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc
        result = super().apply()
        self.rec("table end")
        return result


class Routes(FakeRouteTable):
    def __init__(self, rec: Recorder) -> None:
        super().__init__()
        self.rec = rec
        self.fail_next = 0
        self.raise_next: BaseException | None = None
        self.release = threading.Event()
        self.release.set()

    def apply(self) -> FakeRouteResult:
        self.rec("routes start")
        self.rec.routes_started.set()
        self.release.wait(WAIT)
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc
        result = super().apply()
        if self.fail_next:
            self.fail_next -= 1
            result.errors["cali1"] = "injected"
        self.rec("routes end")
        return result


class Sysctls:
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.fail_next = 0

    def apply(self) -> bool:
        self.rec("sysctls")
        if self.fail_next:
            self.fail_next -= 1
            return False
        return True


class Vxlan:
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def apply(self) -> list[str]:
        self.rec("vxlan")
        return []

    def next_deadline(self) -> float | None:
        return None


class Rig:
    def __init__(self, *, overlap: bool = True) -> None:
        self.clock = Clock()
        self.rec = Recorder()
        self.table, self.routes = Table(self.rec), Routes(self.rec)
        self.sysctls = Sysctls(self.rec)
        self.flushed: list[tuple[set[str], str]] = []
        renderer = RuleRenderer()
        ipsets = IPSetsManager(self.table)  # type: ignore[arg-type]
        policies = PolicyManager(self.table, renderer)  # type: ignore[arg-type]
        endpoints = EndpointManager(self.table, renderer, policies, self.routes)  # type: ignore[arg-type]
        parts = DataplaneParts(
            table=self.table,  # type: ignore[arg-type]
            ipsets=ipsets,
            policies=policies,
            endpoints=endpoints,
            managers=[ipsets, endpoints, policies],
            route_table=self.routes,
            ifaces=self.sysctls,  # type: ignore[arg-type]
            host_appliers=[Vxlan(self.rec)],
            flush_conntrack=self._flush,
            iface_listeners=[endpoints],
            overlap_host_side=overlap,
        )
        self.dp = InternalDataplane(
            parts,
            clock=self.clock,
            throttle=TokenBucket(0.001, 100, clock=self.clock),
            backoff=Backoff(0.5, 2.0),
            wait_for_ifaces=False,
        )
        self.n = 0

    def _flush(self, ips: set[str]) -> None:
        self.flushed.append((set(ips), threading.current_thread().name))
        self.rec("flush")

    def change(self) -> None:
        self.n += 1
        self.dp.on_messages([IPSetUpdate(f"s:{self.n}", (), IPSetType.NET)])

    def first_apply(self) -> None:
        self.dp.on_messages([InSync()])
        assert self.dp.step() and self.dp.dataplane_in_sync
        self.rec.clear()

    def retry(self) -> bool:
        self.clock.now += 2.0
        return self.dp.step()


def test_first_apply_keeps_the_sequential_order_on_two_threads() -> None:
    rig = Rig()
    rig.table.wait_for_routes = False
    rig.dp.on_messages([InSync()])
    assert rig.dp.step()
    assert rig.rec.names() == [
        "table start",
        "table end",
        "sysctls",
        "vxlan",
        "routes start",
        "routes end",
    ]
    assert rig.rec.thread_of("sysctls") == rig.rec.thread_of("routes start") == "dataplane-host"
    here = threading.current_thread().name
    assert rig.rec.thread_of("table start") == rig.rec.thread_of("vxlan") == here


def test_later_applies_overlap_routes_with_the_table_and_wait_for_them() -> None:
    rig = Rig()
    rig.first_apply()
    rig.table.wait_for_routes = True
    rig.routes.flush = {"10.65.0.9"}
    rig.change()
    assert rig.dp.step()
    assert rig.table.saw_routes  # the route apply ran while the table apply was in flight
    names = rig.rec.names()
    # The loop waited for the worker: VXLAN and the flush come after both parts, on this thread.
    assert names.index("routes end") < names.index("vxlan") < names.index("flush")
    assert names.index("table end") < names.index("vxlan")
    assert names.index("sysctls") < names.index("routes start")  # the worker's own order
    assert rig.flushed == [({"10.65.0.9"}, threading.current_thread().name)]
    assert rig.dp._retry_at is None and rig.dp.failed_applies == 0


def test_one_long_lived_worker_thread_closed_by_stop() -> None:
    rig = Rig()
    rig.first_apply()
    threads = set()
    for _ in range(3):
        rig.change()
        assert rig.dp.step()
        threads.add(rig.rec.thread_of("routes start"))
        worker = rig.dp._worker.thread
        assert worker is not None
        threads.add(worker.ident)  # type: ignore[arg-type]
        rig.rec.clear()
    assert len(threads) == 2  # one name, one ident: the same thread every time
    rig.dp.stop()
    worker.join(WAIT)
    assert not worker.is_alive()


def test_table_fails_routes_ok_retries_the_table() -> None:
    rig = Rig()
    rig.first_apply()
    rig.table.fail_next = 1
    rig.routes.flush = {"10.65.0.7"}
    rig.change()
    assert rig.dp.step()
    assert "routes end" in rig.rec.names() and "vxlan" not in rig.rec.names()
    assert rig.flushed == [({"10.65.0.7"}, threading.current_thread().name)]  # not lost
    assert rig.dp.failed_applies == 1 and rig.dp._retry_at is not None
    applies = rig.table.applies
    assert not rig.dp.step()  # backing off
    assert rig.retry() and rig.table.applies == applies + 1
    assert rig.dp._retry_at is None and rig.dp.failed_applies == 1
    assert "vxlan" in rig.rec.names()


def test_routes_fail_table_ok_retries_the_routes() -> None:
    rig = Rig()
    rig.first_apply()
    rig.routes.fail_next = 1
    rig.change()
    assert rig.dp.step()
    assert rig.dp.failed_applies == 1 and rig.dp._retry_at is not None
    routes = rig.routes.applies
    assert rig.retry() and rig.routes.applies == routes + 1
    assert rig.dp._retry_at is None and rig.dp.failed_applies == 1


def test_sysctls_fail_table_ok_retries() -> None:
    rig = Rig()
    rig.first_apply()
    rig.sysctls.fail_next = 1
    rig.change()
    assert rig.dp.step()
    assert rig.dp.failed_applies == 1 and rig.dp._retry_at is not None
    assert "routes end" in rig.rec.names()  # a failing sysctl does not hold the routes back
    assert rig.retry() and rig.dp._retry_at is None


def test_both_fail_then_both_succeed() -> None:
    rig = Rig()
    rig.first_apply()
    rig.table.fail_next = 1
    rig.routes.fail_next = 1
    rig.change()
    assert rig.dp.step()
    assert rig.dp.failed_applies == 1 and rig.dp._retry_at is not None
    rig.rec.clear()
    assert rig.retry() and rig.dp._retry_at is None
    assert {"table end", "routes end", "vxlan"} <= set(rig.rec.names())


def test_first_apply_failing_does_not_program_routes() -> None:
    rig = Rig()
    rig.table.fail_next = 1
    rig.dp.on_messages([InSync()])
    assert rig.dp.step() and not rig.dp.dataplane_in_sync
    assert rig.rec.names() == ["table start", "table end"]  # no routes before it is in once
    rig.rec.clear()
    assert rig.retry() and rig.dp.dataplane_in_sync
    assert rig.rec.names()[:2] == ["table start", "table end"]


def test_overlap_off_keeps_the_sequential_order() -> None:
    rig = Rig(overlap=False)
    rig.first_apply()
    rig.change()
    assert rig.dp.step()
    assert rig.rec.names() == [
        "table start",
        "table end",
        "sysctls",
        "vxlan",
        "routes start",
        "routes end",
    ]


def test_table_exception_waits_for_the_routes_then_propagates() -> None:
    rig = Rig()
    rig.first_apply()
    rig.routes.release.clear()  # the route apply is still running when the table raises
    rig.table.raise_next = RuntimeError("table boom")
    rig.change()

    def release_later() -> None:
        rig.rec.routes_started.wait(WAIT)
        rig.rec("release")
        rig.routes.release.set()

    helper = threading.Thread(target=release_later)
    helper.start()
    with pytest.raises(RuntimeError, match="table boom"):
        rig.dp.step()
    helper.join(WAIT)
    assert rig.rec.names()[-1] == "routes end"  # the worker finished before step() raised


def test_route_exception_propagates_to_the_loop() -> None:
    rig = Rig()
    rig.first_apply()
    rig.routes.raise_next = RuntimeError("routes boom")
    rig.change()
    with pytest.raises(RuntimeError, match="routes boom"):
        rig.dp.step()


# ---- the worker itself ---------------------------------------------------------------------


def test_worker_runs_jobs_in_order_on_one_thread_and_reraises() -> None:
    worker = HostSideWorker("test-host")
    seen: list[Any] = []
    jobs = [
        worker.submit(lambda i=i: seen.append((i, threading.get_ident())) or i) for i in range(5)
    ]
    assert [j.wait() for j in jobs] == list(range(5))
    assert [i for i, _ in seen] == list(range(5)) and len({t for _, t in seen}) == 1
    assert jobs[0].wait() == 0  # waiting twice is fine

    def boom() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError):
        worker.submit(boom).wait()
    assert worker.submit(lambda: 7).wait() == 7  # the thread survives a failing job
    thread = worker.thread
    assert thread is not None and thread.name == "test-host"
    worker.close()
    thread.join(WAIT)
    assert not thread.is_alive()
    with pytest.raises(RuntimeError):
        worker.submit(lambda: 1)


def test_worker_thread_starts_lazily_and_ends_when_dropped() -> None:
    worker = HostSideWorker("test-lazy")
    assert worker.thread is None
    worker.submit(lambda: None).wait()
    thread = worker.thread
    assert thread is not None
    del worker
    import gc

    gc.collect()
    thread.join(WAIT)
    assert not thread.is_alive()
