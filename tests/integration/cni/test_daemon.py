"""The resident CNI helper: calls served by forked workers, and every fail-open path.

Whether a call ran in the daemon is told by the pid on its log lines: the launcher keeps its
pid through ``ip netns exec`` and ``exec python``, so a log line with any other pid came from a
daemon worker.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cni_fixtures import CNIWorld, Plugin

pytestmark = pytest.mark.root

CID = "dmn0123456789abcdef"


def _start_daemon(sock: Path, netns: str | None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-c", "from calico.cli.main import main; main()"]
    cmd += ["component", "cni", "daemon", "--socket", str(sock)]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not sock.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "daemon did not start"
        time.sleep(0.05)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def daemon(world: CNIWorld) -> Iterator[Path]:
    sock = world.tmp / "cni-daemon.sock"
    proc = _start_daemon(sock, world.host_ns)
    try:
        yield sock
    finally:
        _stop(proc)
    assert not sock.exists()  # removed on a clean stop


def _run(
    world: CNIWorld, command: str, ns: str | None, sock: Path, log: Path
) -> tuple[Plugin, int]:
    conf = world.netconf(log_file_path=str(log))
    env = world.env(command, CID, ns, CALICO_CNI_DAEMON_SOCKET=str(sock))
    proc = subprocess.Popen(
        ["ip", "netns", "exec", world.host_ns, str(world.bin_dir / "calico")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err = proc.communicate(json.dumps(conf).encode(), timeout=60)
    return Plugin(proc.returncode, out.decode(), err.decode()), proc.pid


def _log_pids(log: Path) -> set[int]:
    return {int(m) for m in re.findall(r"\]\[(\d+)\]", log.read_text())}


def test_add_check_del_through_daemon(world: CNIWorld, daemon: Path) -> None:
    ns = world.workload_ns()
    log = world.tmp / "plugin.log"
    res, pid = _run(world, "ADD", ns, daemon, log)
    assert res.returncode == 0, res.stdout + res.stderr
    [ip] = res.doc["ips"]
    assert ip["address"].startswith("10.77.0.")
    pids = _log_pids(log)
    assert pids and pid not in pids  # served by a worker, not the launcher
    host_if = "cali" + CID[:11]
    assert "UP" in json.loads(world.host_ip("-j", "link", "show", host_if))[0]["flags"]
    assert world.ns_ip(ns, "addr", "show", "eth0").count(ip["address"].split("/")[0]) == 1
    assert len(world.weps()) == 1

    res, _ = _run(world, "CHECK", ns, daemon, log)
    assert res.returncode == 0, res.stdout + res.stderr

    log.unlink()
    res, pid = _run(world, "DEL", ns, daemon, log)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == ""
    assert pid not in _log_pids(log)
    assert world.weps() == [] and world.in_use() == 0
    assert host_if not in world.host_ip("link", "show")


def test_errors_come_back_through_daemon(world: CNIWorld, daemon: Path) -> None:
    log = world.tmp / "plugin.log"
    res, pid = _run(world, "ADD", "no-such-netns", daemon, log)
    assert res.returncode == 1
    assert res.doc["code"] == 3 and "does not exist" in res.doc["msg"]
    assert pid not in _log_pids(log)
    assert world.in_use() == 0  # addresses released again


def test_daemon_absent_runs_in_process(world: CNIWorld) -> None:
    ns = world.workload_ns()
    log = world.tmp / "plugin.log"
    res, pid = _run(world, "ADD", ns, world.tmp / "missing.sock", log)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _log_pids(log) == {pid}
    res, _ = _run(world, "DEL", ns, world.tmp / "missing.sock", log)
    assert res.returncode == 0, res.stdout + res.stderr


def test_daemon_in_other_netns_is_refused(world: CNIWorld) -> None:
    """A daemon outside the caller's netns would plumb the wrong host: the call stays local."""
    sock = world.tmp / "outside.sock"
    proc = _start_daemon(sock, None)
    try:
        ns = world.workload_ns()
        log = world.tmp / "plugin.log"
        res, pid = _run(world, "ADD", ns, sock, log)
        assert res.returncode == 0, res.stdout + res.stderr
        assert _log_pids(log) == {pid}
        assert "cali" + CID[:11] in world.host_ip("link", "show")
    finally:
        _stop(proc)


class FakeDaemon:
    """A socket that misbehaves: ``close_before_ack`` or dies after GO (a crashed worker)."""

    def __init__(self, path: Path, close_before_ack: bool) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.close_before_ack = close_before_ack
        self.served = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                buf = b""
                while b"\n" not in buf:
                    buf += conn.recv(65536)
                self.served += 1
                if self.close_before_ack:
                    continue
                conn.sendall(b"A")
                if conn.recv(1) != b"G":  # the client gave up first: it falls back by itself
                    continue
                conn.sendall(b'{"status": "ok", "co')  # then the worker "crashes"

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("close_before_ack", [False, True])
def test_daemon_dying_mid_call_falls_back(world: CNIWorld, close_before_ack: bool) -> None:
    sock = world.tmp / "fake.sock"
    fake = FakeDaemon(sock, close_before_ack)
    try:
        ns = world.workload_ns()
        log = world.tmp / "plugin.log"
        res, pid = _run(world, "ADD", ns, sock, log)
        assert res.returncode == 0, res.stdout + res.stderr
        assert fake.served == 1
        assert _log_pids(log) == {pid}
        assert len(world.weps()) == 1
    finally:
        fake.close()
