"""The dataplane's host-side worker: one long-lived thread that runs an apply's workload
sysctls and routes while the loop thread commits the nftables transaction.

Why a thread: the kernel spends about a millisecond validating and committing a new workload's
transaction inside ``sendmsg``, with the GIL released, and the route and sysctl writes are
mostly syscalls too, so the two overlap (design/felix-dataplane.md, "The dataplane loop").
One job at a time, always on the same thread: the route table and the interface configurator
are single-threaded objects (the route table's netlink sockets are per thread). The thread is
started by the first ``submit`` so that it inherits the caller's network namespace; it is a
daemon and ends on ``close`` (or when its owner is collected).
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_CLOSE = None


class Job(Generic[T]):
    """One submitted call; ``wait`` returns its result or re-raises its exception."""

    __slots__ = ("_done", "_error", "_fn", "_result")

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._done = threading.Lock()
        self._done.acquire()  # released by the worker when the call has returned
        self._result: T | None = None
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._result = self._fn()
        except BaseException as exc:  # handed to the waiter, which re-raises it
            self._error = exc
        finally:
            self._done.release()

    def wait(self) -> T:
        self._done.acquire()
        self._done.release()  # idempotent: a second wait returns at once
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


def _serve(jobs: queue.SimpleQueue[Job[object] | None]) -> None:
    while (job := jobs.get()) is not _CLOSE:
        job._run()


class HostSideWorker:
    """Runs submitted calls one after another on its own thread (see the module docstring)."""

    def __init__(self, name: str = "dataplane-host") -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[Job[object] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        # The thread holds only the queue, so a dropped worker still lets it end.
        weakref.finalize(self, self._jobs.put, _CLOSE)

    def submit(self, fn: Callable[[], T]) -> Job[T]:
        if self._closed:
            raise RuntimeError(f"{self.name} worker is closed")
        if self._thread is None:
            self._thread = threading.Thread(
                target=_serve, args=(self._jobs,), name=self.name, daemon=True
            )
            self._thread.start()
        job = Job(fn)
        self._jobs.put(job)  # type: ignore[arg-type]
        return job

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def close(self) -> None:
        """Let the thread end after any queued job; later submits raise."""
        if not self._closed:
            self._closed = True
            self._jobs.put(_CLOSE)


__all__ = ["HostSideWorker", "Job"]
