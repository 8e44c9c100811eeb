"""Shared helpers for the Typha integration tests: an in-process server on its own event-loop
thread, raw protocol sockets for bad input, a recording consumer, and openssl-made certs."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from calico.model import Key
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.syncer.definitions import SYNCER_TYPES
from calico.syncer.typhaclient import framing
from calico.syncer.typhaclient import messages as m
from calico.typha.metrics import TyphaMetrics
from calico.typha.server import ServerConfig, SyncServer
from calico.typha.snapcache import SnapshotCache


def eventually(fn: Callable[[], Any], timeout: float = 10.0, pause: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(pause)
    raise AssertionError(f"condition not met after {timeout}s (last {last!r})")


class State:
    """A consumer that keeps the resulting key -> value view and the statuses seen."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.state: dict[Key, Any] = {}
        self.statuses: list[SyncStatus] = []
        self.restarts = 0
        self.errors: list[str] = []

    def on_status_updated(self, status: SyncStatus) -> None:
        with self.cond:
            self.statuses.append(status)
            self.cond.notify_all()

    def on_updates(self, updates: list[Update]) -> None:
        with self.cond:
            for u in updates:
                if u.update_type is UpdateType.DELETED:
                    self.state.pop(u.key, None)
                else:
                    self.state[u.key] = u.value
            self.cond.notify_all()

    @property
    def status(self) -> SyncStatus | None:
        return self.statuses[-1] if self.statuses else None

    def wait(self, pred: Callable[[State], bool], timeout: float = 15.0) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: pred(self), timeout)
        assert ok, f"not reached in {timeout}s: status={self.status} keys={len(self.state)}"


class ServerThread:
    """A SyncServer over hand-fed caches, on an event loop in a background thread."""

    def __init__(self, **config: Any) -> None:
        self.metrics = TyphaMetrics()
        self.caches = {t: SnapshotCache(t, 100) for t in SYNCER_TYPES}
        self.config = ServerConfig(**{"host": "127.0.0.1", "port": 0, **config})
        self.loop = asyncio.new_event_loop()
        self.server = SyncServer(self.caches, self.config, self.metrics)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(5)
        for cache in self.caches.values():
            cache.start(self.loop)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call(self.server.graceful_shutdown(), timeout=10)
        except TimeoutError:
            import sys

            for t in asyncio.all_tasks(self.loop):
                t.print_stack(file=sys.stderr)
            raise
        for cache in self.caches.values():
            cache.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def call(self, coro: Any, timeout: float = 5.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def feed(self, syncer: str, *items: list[Update] | SyncStatus) -> None:
        cache = self.caches[syncer]
        for item in items:
            if isinstance(item, SyncStatus):
                cache.on_status_updated(item)
            else:
                cache.on_updates(item)

    def rejected(self, reason: str) -> float:
        return self.metrics.connections_rejected.value(reason)

    def connections(self) -> int:
        return self.server.num_connections


@contextlib.contextmanager
def raw_socket(addr: str) -> Iterator[socket.socket]:
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    try:
        yield sock
    finally:
        sock.close()


def send(sock: socket.socket, msg: m.Message) -> None:
    sock.sendall(framing.frame_message(msg))


def hello(**kw: Any) -> m.ClientHello:
    base: dict[str, Any] = {
        "syncer_type": "felix",
        "supports_decoder_restart": False,
        "supports_modern_policy_keys": True,
    }
    return m.ClientHello(**{**base, **kw})


def closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True once the server closed the connection (reads drain whatever it sent first)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


# -- certificates ------------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_ca(d: Path, name: str = "ca") -> tuple[Path, Path]:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}", cwd=d)  # fmt: skip
    return d / f"{name}.key", d / f"{name}.crt"


def make_cert(
    d: Path, name: str, cn: str, ca: str = "ca", uri: str = "", usage: str = "clientAuth"
) -> tuple[Path, Path]:
    """A leaf signed by ``ca`` with CN ``cn`` (and a URI SAN); (key, cert)."""
    ext = d / f"{name}.ext"
    lines = [f"extendedKeyUsage={usage}"]
    if uri:
        lines.append(f"subjectAltName=URI:{uri}")
    ext.write_text("\n".join(lines) + "\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", str(ext),
             cwd=d)  # fmt: skip
    return d / f"{name}.key", d / f"{name}.crt"


# -- a real Typha process ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_HTTP_GET = """
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=2); print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
except Exception as e:
    print(0); print(e)
"""


class TyphaProcess:
    """``calico component typha`` as a child process, on fixed free ports across restarts."""

    def __init__(
        self, workdir: Path, datastore_env: dict[str, str], netns: str = "", **params: str
    ) -> None:
        import os
        import sys

        self.netns = netns  # run inside this network namespace (probes too)
        self.workdir = workdir
        self.port = free_port()
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.calico = str(Path(sys.executable).parent / "calico")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TYPHA_", "ETCD_"))}
        self.env.update(datastore_env)
        self.env.update(
            {
                "TYPHA_SERVERHOST": "127.0.0.1",
                "TYPHA_SERVERPORT": str(self.port),
                "TYPHA_HEALTHENABLED": "true",
                "TYPHA_HEALTHPORT": str(self.health_port),
                "TYPHA_PROMETHEUSMETRICSENABLED": "true",
                "TYPHA_PROMETHEUSMETRICSHOST": "127.0.0.1",
                "TYPHA_PROMETHEUSMETRICSPORT": str(self.metrics_port),
                "TYPHA_LOGSEVERITYSCREEN": "info",
                "TYPHA_SHUTDOWNTIMEOUTSECS": "2",
                **{f"TYPHA_{k.upper()}": v for k, v in params.items()},
            }
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_path(self, n: int | None = None) -> Path:
        return self.workdir / f"typha-{self.starts if n is None else n}.log"

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path(), "wb") as log:
            prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
            self.proc = subprocess.Popen(
                [*prefix, self.calico, "component", "typha", "-c", str(self.workdir / "typha.cfg")],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def http(self, port: int, path: str) -> tuple[int, str]:
        import urllib.error
        import urllib.request

        if self.netns:
            import netns_support

            out = netns_support.run_py(self.netns, _HTTP_GET, f"http://127.0.0.1:{port}{path}")
            code, _, body = out.stdout.partition("\n")
            return int(code or 0), body

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"Typha exited {self.proc.returncode}:\n{self.log()}")
            return self.http(self.health_port, "/readiness")[0] == 200

        eventually(ready, timeout=timeout, pause=0.2)

    def metrics(self) -> str:
        return self.http(self.metrics_port, "/metrics")[1]

    def metric(self, sample: str) -> float:
        for line in self.metrics().splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[-1])
        raise AssertionError(f"no metric {sample}")

    def stop(self, timeout: float = 20.0) -> int:
        import signal

        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log(self) -> str:
        try:
            return self.log_path().read_text()[-5000:]
        except OSError:
            return ""
