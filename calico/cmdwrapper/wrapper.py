"""Self-supervising re-exec wrapper (the Python counterpart of Calico's ``cmdwrapper``).

A long-running component that wants to "restart to reload config" calls
:func:`wrap_self` first thing in ``main``.  The first (outer) process becomes a
tiny supervisor that re-runs the same command line with ``<inner_env_var>=1``;
the inner process runs the real work.  When the inner process exits with
:data:`RESTART_RETURN_CODE` the outer one starts it again after a short backoff,
so the restart needs no external supervisor (runit, the felix wrapper script).

Signal policy (see ``design/cmdwrapper.md``):

* every catchable signal except SIGCHLD and the synchronous fault signals is
  forwarded to the running child;
* a signal that arrives while the next child is being started is delivered to
  that child as soon as its pid is known;
* a *stop* signal (SIGINT, SIGTERM, SIGQUIT) disables further restarts: if the
  child then exits with 129, or the signal arrives while no child is running
  (e.g. during the backoff), the outer process exits ``128 + signum`` instead
  of restarting.  Exiting 129 there would make an outer supervisor restart us,
  which is the opposite of what the sender asked for.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import NoReturn, TypeVar

RESTART_RETURN_CODE = 129
"""Exit code by which a wrapped program asks to be restarted."""

RESTART_BACKOFF_S = 0.1

_log = logging.getLogger("calico.cmdwrapper")

# Never forwarded: SIGCHLD is about our own child; SIGKILL/SIGSTOP cannot be
# caught; the fault signals are raised synchronously by the faulting process
# itself and must keep their default (or faulthandler's) disposition.
_NOT_FORWARDED = frozenset(
    {
        signal.SIGCHLD,
        signal.SIGKILL,
        signal.SIGSTOP,
        signal.SIGSEGV,
        signal.SIGBUS,
        signal.SIGFPE,
        signal.SIGILL,
        signal.SIGTRAP,
        signal.SIGSYS,
    }
)

# Signals that mean "shut down": after one of these we never restart.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGQUIT})

_PR_SET_PDEATHSIG = 1

T = TypeVar("T")


def forwardable_signals() -> list[int]:
    """Signals the outer process catches and passes on to the child."""
    return sorted(int(s) for s in signal.valid_signals() if s not in _NOT_FORWARDED)


def exit_code_for(returncode: int) -> int:
    """Map a Popen return code to a shell-style exit status (signal N -> 128+N)."""
    if returncode < 0:
        return 128 - returncode
    return returncode


def wrap_self(inner_env_var: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a re-executed copy of this program, restarting it on exit 129.

    In the inner process (``os.environ[inner_env_var] == "1"``) this just returns
    ``fn()``.  In the outer process it supervises the inner one and never returns:
    it exits with the inner process's final status.  Call it from the main thread
    before starting any other threads (the child is set up in a ``preexec_fn``).
    """
    if not inner_env_var:
        raise ValueError("wrap_self: inner_env_var must not be empty")
    if os.environ.get(inner_env_var) == "1":
        return fn()
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("wrap_self: the outer process must run on the main thread")
    _Supervisor(inner_env_var).run()


class _Supervisor:
    """The outer process: starts, watches and restarts the inner one."""

    def __init__(self, inner_env_var: str) -> None:
        self._argv = [sys.executable, *sys.orig_argv[1:]]
        self._env = dict(os.environ)
        self._env[inner_env_var] = "1"  # replaces any inherited value
        self._prog = sys.argv[0] if sys.argv and sys.argv[0] else self._argv[0]
        self._args = sys.argv[1:]
        self._child: subprocess.Popen[bytes] | None = None
        self._pending: list[int] = []
        self._stop_signal: int | None = None
        self._libc = ctypes.CDLL(None, use_errno=True)

    # -- signals ---------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # Runs on the main thread between bytecodes, so it never races with
        # itself or with the bookkeeping in run().
        if signum in STOP_SIGNALS and self._stop_signal is None:
            self._stop_signal = signum
        if self._child is not None:
            self._forward(self._child.pid, signum)
        else:
            self._pending.append(signum)

    def _forward(self, pid: int, signum: int) -> None:
        try:
            os.kill(pid, signum)
        except OSError as exc:
            _log.debug("Failed to forward signal %d to pid %d: %s", signum, pid, exc)

    def _install_handlers(self) -> None:
        for signum in forwardable_signals():
            try:
                signal.signal(signum, self._on_signal)
            except (OSError, ValueError):  # reserved by libc on some platforms
                _log.debug("Cannot catch signal %d; not forwarding it", signum)

    # -- child lifecycle -------------------------------------------------------

    def _preexec(self, parent_pid: int) -> Callable[[], None]:
        prctl = self._libc.prctl

        def setup_child() -> None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent_pid:
                # The outer process died before PDEATHSIG was armed.
                os.kill(os.getpid(), signal.SIGKILL)

        return setup_child

    def _start(self) -> subprocess.Popen[bytes]:
        _log.info("Starting %s %s", self._prog, shlex.join(self._args))
        _log.debug("Executing %s", shlex.join(self._argv))
        try:
            child = subprocess.Popen(
                self._argv,
                env=self._env,
                preexec_fn=self._preexec(os.getpid()),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            _log.error("Failed to start %s: %s", self._prog, exc)
            _exit(1)
        # Publish the child first so new signals go straight to it, then hand
        # over whatever arrived while it was being started.
        self._child = child
        pending, self._pending = self._pending, []
        for signum in pending:
            self._forward(child.pid, signum)
        return child

    def _wait(self, child: subprocess.Popen[bytes]) -> int:
        # Wait without reaping so the pid cannot be recycled while the signal
        # handler may still target it; unpublish it; only then reap.
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        self._child = None
        return exit_code_for(child.wait())

    def run(self) -> NoReturn:
        self._install_handlers()
        while True:
            # Signals that arrived while nothing was running: stop signals end
            # the loop; anything else had no recipient and is dropped.
            self._pending.clear()
            if self._stop_signal is not None:
                self._exit_stopped(None)
            child = self._start()
            code = self._wait(child)
            if code != RESTART_RETURN_CODE:
                _log.info("Received exit status %d for %s", code, self._prog)
                _exit(code)
            if self._stop_signal is not None:
                self._exit_stopped(code)
            _log.info("Received exit status %d, restarting %s", RESTART_RETURN_CODE, self._prog)
            time.sleep(RESTART_BACKOFF_S)

    def _exit_stopped(self, code: int | None) -> NoReturn:
        assert self._stop_signal is not None
        name = signal.Signals(self._stop_signal).name
        if code is not None:
            _log.info("Received exit status %d for %s", code, self._prog)
        _log.info("Not restarting %s: %s received", self._prog, name)
        _exit(128 + self._stop_signal)


def _exit(code: int) -> NoReturn:
    """Flush logs and stdio, then leave without running the caller's cleanup."""
    # Exiting anyway: a broken handler or closed stream must not block it.
    for flushable in [*logging.getLogger().handlers, *_log.handlers, sys.stdout, sys.stderr]:
        with contextlib.suppress(Exception):
            flushable.flush()
    os._exit(code)
