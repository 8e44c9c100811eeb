"""LoopThread: before-then-iterate until stopped, one start, join semantics, and a death that is
logged and handed to the owner."""

from __future__ import annotations

import logging
import threading

import pytest

from calico.felix.loopthread import LoopThread


class Owner:
    """Records what the loop calls; ``iterate`` stops the loop after ``rounds`` iterations."""

    def __init__(self, rounds: int = 3) -> None:
        self.stopping = threading.Event()
        self.events: list[str] = []
        self.failures: list[BaseException] = []
        self.rounds = rounds
        self.fail_in: str | None = None
        self.block = threading.Event()
        self.blocked = threading.Event()
        self.thread_names: set[str] = set()

    def before(self) -> None:
        self.events.append("before")
        if self.fail_in == "before":
            raise ValueError("before boom")

    def iterate(self) -> None:
        self.thread_names.add(threading.current_thread().name)
        self.events.append("iterate")
        if self.fail_in == "iterate":
            raise ValueError("iterate boom")
        if self.fail_in == "block":
            self.blocked.set()
            self.block.wait(5)
        if self.events.count("iterate") >= self.rounds:
            self.stopping.set()

    def loop(self, **kw: object) -> LoopThread:
        return LoopThread(
            "test-loop",
            self.stopping,
            self.iterate,
            before=self.before,
            on_failure=self.failures.append,
            failure_message="test loop failed",
            **kw,  # type: ignore[arg-type]
        )


def test_runs_before_then_iterates_until_stopping_is_set() -> None:
    owner = Owner(rounds=3)
    loop = owner.loop()
    assert not loop.is_alive() and loop.join(0) is True  # not started: nothing to wait for
    loop.start()
    assert loop.join(5)
    assert owner.events == ["before", "iterate", "iterate", "iterate"]
    assert owner.thread_names == {"test-loop"}
    assert not loop.is_alive() and owner.failures == []


def test_no_before_and_already_stopped_means_no_iteration() -> None:
    owner = Owner()
    owner.stopping.set()
    loop = LoopThread("t", owner.stopping, owner.iterate, on_failure=owner.failures.append)
    loop.start()
    assert loop.join(5) and owner.events == []


@pytest.mark.parametrize("where", ["before", "iterate"])
def test_an_escaping_exception_is_logged_handed_over_and_ends_the_thread(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    owner = Owner(rounds=100)
    owner.fail_in = where
    logger = logging.getLogger("calico.test.loopthread")
    loop = owner.loop(logger=logger)
    with caplog.at_level(logging.ERROR, logger="calico.test.loopthread"):
        loop.start()
        assert loop.join(5)
    assert [str(e) for e in owner.failures] == [f"{where} boom"]
    assert owner.events == (["before"] if where == "before" else ["before", "iterate"])
    record = next(r for r in caplog.records if r.name == "calico.test.loopthread")
    assert record.getMessage() == "test loop failed" and record.exc_info is not None
    assert not loop.is_alive()


def test_start_twice_is_an_error() -> None:
    owner = Owner(rounds=1)
    loop = owner.loop()
    loop.start()
    with pytest.raises(RuntimeError, match="test-loop thread already started"):
        loop.start()
    assert loop.join(5)


def test_join_reports_a_thread_that_has_not_ended() -> None:
    owner = Owner(rounds=1)
    owner.fail_in = "block"
    loop = owner.loop()
    loop.start()
    assert owner.blocked.wait(5)
    assert loop.join(0.01) is False and loop.is_alive()
    owner.block.set()
    assert loop.join(5) is True and not loop.is_alive()
