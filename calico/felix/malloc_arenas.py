"""Cap glibc's malloc arenas in the Felix process (design/performance.md "Full-Felix memory").

glibc gives each thread that allocates its own arena (up to 8 per core). Felix has a syncer
thread per resource kind, the calc graph and the dataplane threads; objects made in one
thread and freed in another leave their arena fragmented, and a freed arena is rarely given
back. At 250,000 remote endpoints this alone cost ~150 MB of peak RSS. Two arenas is what
``MALLOC_ARENA_MAX=2`` would give; the call has to run before the threads start. An explicit
``MALLOC_ARENA_MAX`` in the environment wins (glibc read it at start), and a libc without
``mallopt`` (musl) is left alone. ``mallopt`` is looked up in the process's own symbols
(``CDLL(None)``: the C library the interpreter runs on), not by ``ctypes.util.find_library``,
which runs ``ldconfig -p`` in a subprocess (~12 ms of every start).
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc malloc.h
FELIX_ARENAS = 2


def cap_arenas(arenas: int = FELIX_ARENAS) -> bool:
    """``mallopt(M_ARENA_MAX, arenas)``; True if glibc took it."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(M_ARENA_MAX, arenas) == 1
    log.debug("malloc arenas capped at %d: %s", arenas, ok)
    return ok
