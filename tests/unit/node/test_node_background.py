"""The node-services runner: first failure exits 1, a stop request exits 0."""

from __future__ import annotations

import threading

import pytest

from calico.node.background import node_services, poll_interval, run_services
from calico.node.errors import NodeError


def test_first_failure_stops_everything() -> None:
    stopped = threading.Event()

    def waits(stop: threading.Event) -> None:
        stop.wait()
        stopped.set()

    def fails(_stop: threading.Event) -> None:
        raise RuntimeError("boom")

    with pytest.raises(NodeError, match="fails: boom"):
        run_services({"waits": waits, "fails": fails})
    assert stopped.is_set()


def test_stop_request_exits_cleanly() -> None:
    stop = threading.Event()

    def svc(ev: threading.Event) -> None:
        ev.wait()

    threading.Timer(0.2, stop.set).start()
    assert run_services({"svc": svc}, stop) == 0


def test_poll_interval_parsing() -> None:
    assert poll_interval({}) == 60.0
    assert poll_interval({"AUTODETECT_POLL_INTERVAL": "1m30s"}) == 90.0
    assert poll_interval({"AUTODETECT_POLL_INTERVAL": "soon"}) == 60.0


def test_backend_none_runs_nothing() -> None:
    assert list(node_services({"CALICO_NETWORKING_BACKEND": "none"})) == ["allocate-tunnel-addrs"]
    assert list(node_services({})) == ["monitor-addresses", "allocate-tunnel-addrs"]
