"""The throwaway etcd dies with the process that started it, and starting it never runs Python
between fork and exec (a ``preexec_fn`` there let a gRPC client's fork handlers abort the
restarted etcd under load: "etcd exited with -6")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from unittest import mock

from calico.datastore.etcd import server as etcd_server
from calico.datastore.etcd.server import EtcdServer

_STARTER = """
import sys, time
from calico.datastore.etcd.server import EtcdServer
s = EtcdServer()
s.start()
print(s.proc.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_etcd_is_killed_when_its_starter_is_sigkilled() -> None:
    starter = subprocess.Popen([sys.executable, "-c", _STARTER], stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        pid = int(starter.stdout.readline())
        assert _alive(pid)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert os.path.basename(f.read().split(b"\0")[0]) == b"etcd"  # setpriv exec'd it
        starter.send_signal(signal.SIGKILL)
        starter.wait(10)
        deadline = time.monotonic() + 20
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        starter.kill()
        starter.wait(10)


def test_start_runs_no_python_between_fork_and_exec() -> None:
    real_popen = subprocess.Popen
    seen: list[dict[str, object]] = []

    def popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        seen.append(kwargs)
        return real_popen(*args, **kwargs)  # type: ignore[call-overload, no-any-return]

    with EtcdServer() as s, mock.patch.object(etcd_server.subprocess, "Popen", popen):
        s.stop()
        s.start()
        assert s.running
    assert seen and all(kw.get("preexec_fn") is None for kw in seen)


def test_without_setpriv_the_preexec_fallback_is_used() -> None:
    with mock.patch.object(etcd_server.shutil, "which", return_value=None):
        assert etcd_server._pdeathsig_prefix() == []
    prefix = etcd_server._pdeathsig_prefix()
    assert prefix[1:] == ["--pdeathsig", "KILL", "--"] and prefix[0].endswith("setpriv")
