"""Pause the cyclic garbage collector while a process builds what it keeps to the end.

Why: importing the CLI tree, pydantic and the API models leaves ~45,000 objects the collector
tracks, nearly all alive to the end (modules, classes, schemas), and explain's read of 10,000
endpoints ~36,000 more; a collection runs every 700 net allocations, and each older-generation
one walks all of them again to free almost nothing (~600 garbage objects in all). That was
~20% of a ``calicoctl explain`` (design/performance.md "Garbage collection at start-up").
:func:`resume` freezes what was built (``gc.freeze``: never scanned again) and turns the
collector back on, so the command proper, and any daemon, runs with normal collection (Felix
resumes at its first in-sync apply, so its start-up is covered too).

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
