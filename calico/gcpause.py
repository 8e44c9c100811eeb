"""Pause the cyclic garbage collector while a process builds what it keeps to the end.

Why: importing the CLI tree, pydantic and the API models allocates ~10^5 long-lived objects
(modules, classes, schemas), and reading a datastore 10^4 more; every 700 allocations the
collector runs, and each older-generation run walks all of them again to free nothing. That
was ~20% of a ``calicoctl explain`` (design/performance.md "Garbage collection at start-up").
:func:`resume` freezes what was built (``gc.freeze``: never scanned again) and turns the
collector back on, so the command proper, and any daemon, runs with normal collection.

Only a pause this module started is resumed: a process (or test) that disabled the collector
itself keeps it disabled, and calls without a pause do nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_paused = False


def pause() -> None:
    """Stop automatic collection until :func:`resume` (nothing if it is already off)."""
    global _paused
    if not _paused and gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """End a :func:`pause`: freeze every object alive now, re-enable collection."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


@contextmanager
def paused() -> Iterator[None]:
    """:func:`pause` for a block that builds long-lived data; :func:`resume` after it (also on
    error). Nested in an outer pause it does nothing: the outer resume freezes it all."""
    outer = _paused
    pause()
    try:
        yield
    finally:
        if not outer:
            resume()
