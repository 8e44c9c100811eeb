"""Defer the cyclic garbage collector while a backend builds a list's KVPairs.

Why: ``KVPair`` is a tuple subclass, and CPython untracks only exact tuples of atomic values,
so every KVPair of a list stays tracked by the collector. Building 100,000 of them set off
~280 young and 2 full collections, each full one walking every tracked object in the process
(~0.03 s): a third of a local list, and the reason its ratio to a raw SELECT (whose rows are
exact tuples) swung between runs (design/performance.md "Datastore listing"). Deferred, the
young collections merge into one after the build and no full one runs in the middle of it.
Nothing is frozen: the process collects as usual afterwards.

Thread-safe and nestable (lists on several threads overlap); collection is turned back on only
by the last deferral to end, and only if a deferral turned it off, so a process that had disabled
the collector before (``calico.gcpause``, a test) keeps it disabled.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_disabled_here = False


@contextmanager
def deferred() -> Iterator[None]:
    """No automatic collection inside the block (a no-op if collection is already off)."""
    global _depth, _disabled_here
    with _lock:
        if _depth == 0 and gc.isenabled():
            gc.disable()
            _disabled_here = True
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _disabled_here:
                _disabled_here = False
                gc.enable()
