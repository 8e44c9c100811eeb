"""In-process tests of calico.cmdwrapper (only paths that never fork or exit)."""

from __future__ import annotations

import signal
import threading

import pytest

from calico.cmdwrapper import RESTART_RETURN_CODE, wrap_self
from calico.cmdwrapper.wrapper import exit_code_for, forwardable_signals


def test_restart_code_is_129() -> None:
    assert RESTART_RETURN_CODE == 129


def test_empty_inner_env_var_is_rejected() -> None:
    with pytest.raises(ValueError):
        wrap_self("", lambda: 0)


def test_inner_process_runs_fn_and_returns_its_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNIT_WRAP_INNER", "1")
    calls: list[int] = []

    def fn() -> int:
        calls.append(1)
        return 42

    assert wrap_self("UNIT_WRAP_INNER", fn) == 42
    assert calls == [1]


def test_outer_refuses_non_main_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # Signal handlers can only be installed on the main thread, so the outer
    # role fails fast elsewhere instead of half-working.
    monkeypatch.delenv("UNIT_WRAP_INNER", raising=False)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            wrap_self("UNIT_WRAP_INNER", lambda: 0)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=target)
    t.start()
    t.join(5)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)


def test_forwarded_signal_set() -> None:
    sigs = set(forwardable_signals())
    for never in (
        signal.SIGCHLD,
        signal.SIGKILL,
        signal.SIGSTOP,
        signal.SIGSEGV,
        signal.SIGBUS,
        signal.SIGFPE,
        signal.SIGILL,
    ):
        assert never not in sigs
    for forwarded in (
        signal.SIGTERM,
        signal.SIGINT,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGWINCH,
        signal.SIGRTMIN,
    ):
        assert forwarded in sigs


@pytest.mark.parametrize(
    ("returncode", "expected"), [(0, 0), (3, 3), (129, 129), (-9, 137), (-15, 143)]
)
def test_exit_code_mapping(returncode: int, expected: int) -> None:
    assert exit_code_for(returncode) == expected
