"""Run a throwaway single-member etcd on loopback (tests, benchmarks, local development)."""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ETCD_BINARY = os.environ.get("CALICO_TEST_ETCD", "etcd")


@dataclass(frozen=True)
class TLSFiles:
    """PEM files: the CA, and one cert/key pair the server presents and clients also use."""

    ca_file: str
    cert_file: str
    key_file: str


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if the process that started it dies (Linux).

    Only where ``setpriv`` is missing (:func:`_pdeathsig_prefix`): a ``preexec_fn`` makes
    ``subprocess`` fork instead of vfork and run Python in the child, where the fork handlers of
    a gRPC client in the parent (an etcd client's threads) can abort the child before exec."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _pdeathsig_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL --``: the same parent-death signal as :func:`_die_with_parent`,
    set by util-linux's ``setpriv`` after exec, so no Python runs between fork and exec."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdServer:
    """An etcd process with a fixed client/peer port and data dir across ``stop()``/``start()``.

    ``fast_leases`` shortens the raft tick (10 ms heartbeat, 100 ms election) so etcd's minimum
    lease TTL is 1 s instead of 2 s and elections after a restart take milliseconds. With ``tls``
    the client URL is https and clients must present a certificate signed by the CA.
    """

    def __init__(
        self, data_dir: str | None = None, *, fast_leases: bool = True, tls: TLSFiles | None = None
    ) -> None:
        binary = shutil.which(ETCD_BINARY)
        if binary is None:
            raise FileNotFoundError(
                f"etcd binary {ETCD_BINARY!r} not found (apt install etcd-server)"
            )
        self.binary = binary
        self._own_dir = data_dir is None
        self.base_dir = Path(data_dir or tempfile.mkdtemp(prefix="calico-etcd-"))
        self.data_dir = self.base_dir / "data"
        self.log_path = self.base_dir / "etcd.log"
        self.client_port = free_port()
        self.peer_port = free_port()
        self.tls = tls
        scheme = "https" if tls else "http"
        self.endpoints = f"{scheme}://127.0.0.1:{self.client_port}"
        self.fast_leases = fast_leases
        self.proc: subprocess.Popen[bytes] | None = None
        atexit.register(self.cleanup)

    def command(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [
            self.binary,
            "--name=calico-test",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={self.endpoints}",
            f"--advertise-client-urls={self.endpoints}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=calico-test={peer}",
            "--logger=zap",
            "--log-outputs=stderr",
            "--log-level=warn",
        ]
        if self.fast_leases:
            cmd += ["--heartbeat-interval=10", "--election-timeout=100"]
        if self.tls:
            cmd += [
                f"--cert-file={self.tls.cert_file}",
                f"--key-file={self.tls.key_file}",
                f"--trusted-ca-file={self.tls.ca_file}",
                "--client-cert-auth",
            ]
        return cmd

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 20.0) -> None:
        """Start (or restart on the same ports and data) and wait until healthy."""
        if self.running:
            return
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            # No orphaned etcd even if we are SIGKILLed: setpriv, else a preexec_fn.
            prefix = _pdeathsig_prefix()
            self.proc = subprocess.Popen(
                prefix + self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=None if prefix else _die_with_parent,
            )
        finally:
            log.close()
        self.wait_healthy(timeout)

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        context = None
        if self.tls:
            context = ssl.create_default_context(cafile=self.tls.ca_file)
            context.load_cert_chain(self.tls.cert_file, self.tls.key_file)
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                url = f"{self.endpoints}/health"
                with urllib.request.urlopen(url, timeout=1, context=context) as resp:
                    if b'"true"' in resp.read():
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(
            f"etcd at {self.endpoints} not healthy after {timeout}s: {self.log_tail()}"
        )

    def stop(self, kill: bool = False) -> None:
        """Stop the server (SIGKILL with ``kill``); the data dir survives for ``start()``."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def cleanup(self) -> None:
        """Stop for good and remove the data dir (if we made it)."""
        self.stop(kill=True)
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> EtcdServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
