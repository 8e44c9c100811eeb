"""The owned thread of each of Felix's long-running loops (calculation graph, internal dataplane).

Both loops share one lifecycle: a named daemon thread, started at most once; ``before()`` (the
first health report), then ``iterate()`` over and over until ``stopping`` is set. An exception
escaping either ends the thread: it is logged with its traceback and handed to ``on_failure``,
where the owner records it and reports its health reporter not live, so the daemon's supervisor
(which polls ``is_alive``) and the health endpoint both see the death. What one iteration does
(wait for input, apply, throttle, report health) stays with the owner.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class LoopThread:
    """``start()`` once, ``stopping.set()`` then ``join(timeout)`` to stop."""

    def __init__(
        self,
        name: str,
        stopping: threading.Event,
        iterate: Callable[[], None],
        *,
        on_failure: Callable[[BaseException], None],
        before: Callable[[], None] | None = None,
        failure_message: str = "loop failed",
        logger: logging.Logger = log,
    ) -> None:
        self.name = name
        self.stopping = stopping
        self._iterate = iterate
        self._before = before
        self._on_failure = on_failure
        self._failure_message = failure_message
        self._log = logger
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} thread already started")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` for the thread to end; whether it has (True if never started)."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        try:
            if self._before is not None:
                self._before()
            while not self.stopping.is_set():
                self._iterate()
        except BaseException as exc:  # anything that kills the loop must be recorded
            self._log.exception(self._failure_message)
            self._on_failure(exc)


__all__ = ["LoopThread"]
