"""Collect exited children so none stays a zombie (standard library only: the CNI daemon and
``calico node run`` both import it, the former keeping its imports minimal)."""

from __future__ import annotations

import os


def reap_children() -> int:
    """``waitpid(-1, WNOHANG)`` until nothing more has exited; returns how many were reaped.

    Re-parented orphans count too when the caller is a child subreaper.
    """
    reaped = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped += 1
