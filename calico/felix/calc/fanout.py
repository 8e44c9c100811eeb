"""Fan-out of typed updates to calculation nodes, by key type (upstream's calc "dispatcher").

Contract for every handler: ``handler(key, value)`` where ``key`` is a ``calico.model`` key object
and ``value`` its typed value (``calico.model.values``; a string for config keys, the v3
resource for a ``ResourceKey``), or None for a delete. Handlers of one key type run in
registration order; a handler returning True filters the update out for the handlers registered
after it *on this fan-out* (used by the local/remote endpoint split). Status changes go to every
status handler.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from calico.syncer.api import SyncStatus

Handler = Callable[[Any, Any], bool | None]
StatusHandler = Callable[[SyncStatus], None]


class TypeFanout:
    def __init__(self) -> None:
        self._handlers: dict[type, list[Handler]] = defaultdict(list)
        self._status_handlers: list[StatusHandler] = []

    def register(self, key_type: type, handler: Handler) -> None:
        self._handlers[key_type].append(handler)

    def register_status_handler(self, handler: StatusHandler) -> None:
        self._status_handlers.append(handler)

    def on_update(self, key: Any, value: Any) -> bool:
        """Deliver one update; returns True if some handler filtered it out (the later
        handlers then do not see it). A loop, not ``any()`` over a generator: every update
        passes two fan-outs, most of them to a handler or two."""
        for handler in self._handlers.get(type(key), ()):  # noqa: SIM110 (no generator)
            if handler(key, value):
                return True
        return False

    def on_status(self, status: SyncStatus) -> None:
        for handler in self._status_handlers:
            handler(status)

    def handles(self, key_type: type) -> bool:
        return key_type in self._handlers
