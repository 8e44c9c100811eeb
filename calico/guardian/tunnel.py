"""Keep the yamux client session to the management side up, and hand out its streams.

``run`` dials, accepts the streams the peer opens (each handled by ``on_stream`` in its own
task) and, when the session ends, re-dials if ``recreate`` is set. As upstream, sessions may
be recreated at most every 2 s and at most 5 times in 30 s; past that the tunnel is closed for
good and ``run`` raises TunnelClosedError. ``open_stream`` waits for a live session, up to
``attempts`` tries ``interval`` apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from calico.guardian.dialer import DialSettings, dial
from calico.guardian.yamux import Session, SessionClosedError, SessionConfig, Stream

log = logging.getLogger(__name__)

RECREATE_MIN_INTERVAL = 2.0
RECREATE_WINDOW = 30.0
RECREATE_MAX_IN_WINDOW = 5


class TunnelClosedError(ConnectionError):
    """The tunnel is down for good (dial budget spent, or recreation not allowed)."""


class RecreateLimiter:
    """Upstream's rate limit on session recreation: spaced, and bounded per window."""

    def __init__(
        self,
        clock: Callable[[], float],
        min_interval: float = RECREATE_MIN_INTERVAL,
        window: float = RECREATE_WINDOW,
        max_calls: int = RECREATE_MAX_IN_WINDOW,
    ) -> None:
        self._clock = clock
        self._min_interval = min_interval
        self._window = window
        self._max = max_calls
        self._calls: deque[float] = deque()

    def delay(self) -> float:
        """Seconds to wait before the next recreation; TunnelClosedError if over budget."""
        now = self._clock()
        while self._calls and now - self._calls[0] > self._window:
            self._calls.popleft()
        if len(self._calls) >= self._max:
            raise TunnelClosedError(
                f"tunnel recreated {len(self._calls)} times within {self._window:g}s"
            )
        wait = 0.0
        if self._calls:
            wait = max(0.0, self._calls[-1] + self._min_interval - now)
        self._calls.append(now + wait)
        return wait


class Tunnel:
    def __init__(
        self,
        dial_settings: DialSettings,
        session_config: SessionConfig,
        on_stream: Callable[[Stream, Session], Awaitable[None]],
        *,
        recreate: bool = True,
        on_state: Callable[[bool, str], None] = lambda up, detail: None,
    ) -> None:
        self._dial = dial_settings
        self._session_config = session_config
        self._on_stream = on_stream
        self._recreate = recreate
        self._on_state = on_state
        self._session: Session | None = None
        self._up = asyncio.Event()
        self._stopping = False
        self._handlers: set[asyncio.Task[None]] = set()
        self.sessions_started = 0

    @property
    def session(self) -> Session | None:
        return self._session

    async def run(self) -> None:
        limiter = RecreateLimiter(asyncio.get_running_loop().time)
        first = True
        while not self._stopping:
            if not first:
                if not self._recreate:
                    raise TunnelClosedError(
                        "tunnel closed and TUNNEL_DIAL_RECREATE_ON_TUNNEL_CLOSE is false"
                    )
                await asyncio.sleep(limiter.delay())
            first = False
            reader, writer = await dial(self._dial)
            session = Session(
                reader, writer, client=True, config=self._session_config, name="tunnel"
            )
            session.start()
            self._session = session
            self.sessions_started += 1
            self._up.set()
            self._on_state(True, "tunnel up")
            log.info("Tunnel session established with %s:%s", self._dial.host, self._dial.port)
            await self._accept_loop(session)
            self._up.clear()
            self._on_state(False, f"tunnel down: {session.close_reason}")
            if not self._stopping:
                log.warning("Tunnel session ended (%s); will re-dial", session.close_reason)

    async def _accept_loop(self, session: Session) -> None:
        while True:
            try:
                stream = await session.accept()
            except SessionClosedError:
                return
            task = asyncio.create_task(self._on_stream(stream, session))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    async def open_stream(self, attempts: int, interval: float) -> Stream:
        """A new stream to the peer, waiting for the tunnel when it is being re-dialled."""
        tries = 0
        while True:
            tries += 1
            session = self._session
            if session is not None and self._up.is_set() and not session.is_closed:
                try:
                    return session.open_stream()
                except SessionClosedError as exc:
                    last = str(exc)
            else:
                last = "tunnel is not connected"
            if tries >= max(attempts, 1) or self._stopping:
                raise TunnelClosedError(f"failed to open a stream through the tunnel: {last}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._up.wait(), interval)

    async def close(self) -> None:
        """Close the session (Go Away first) and the stream handlers."""
        self._stopping = True
        session = self._session
        if session is not None:
            await session.close("guardian shutting down")
        for task in list(self._handlers):
            task.cancel()
        for task in list(self._handlers):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
