"""Test-only stand-ins for guardian's peers: certificates, a management peer, fake targets.

``ManagementPeer`` plays Voltron: a TLS server that requires the managed cluster's client
certificate and runs a yamux *server* session on each connection. Streams guardian opens are
piped to ``upstream`` (a management-side server); ``bridge_port()`` gives a local port whose
connections become streams the peer opens towards guardian, so ordinary clients (grpcio, an
h2 client) can talk through the tunnel. Everything runs on its own event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from calico.guardian.streams import SocketStream, forward
from calico.guardian.yamux import Session, SessionConfig

# -- certificates ------------------------------------------------------------------------------


@dataclass
class Pem:
    cert: bytes
    key: bytes
    _cert_obj: Any = None
    _key_obj: Any = None

    def write(self, directory: Path, stem: str) -> tuple[str, str]:
        crt, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        crt.write_bytes(self.cert)
        key.write_bytes(self.key)
        return str(crt), str(key)


def make_cert(
    common_name: str,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    issuer: Pem | None = None,
    ca: bool = False,
) -> Pem:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer._cert_obj.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    signer = issuer._key_obj if issuer else key
    cert = builder.sign(signer, hashes.SHA256())
    return Pem(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        cert,
        key,
    )


MANAGEMENT_NAME = "voltron.test"
MANAGED_NAME = "guardian.test"


@dataclass
class CertSet:
    """Every certificate a guardian test needs, written under ``root``."""

    root: Path
    management: Pem = field(init=False)
    tunnel_ca: Pem = field(init=False)
    managed: Pem = field(init=False)
    files: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        certs = self.root / "certs"
        certs.mkdir(exist_ok=True)
        # The management cluster's certificate is both Voltron's server cert and the root
        # guardian trusts (its one DNS SAN is the expected server name).
        self.management = make_cert("voltron", dns=(MANAGEMENT_NAME,), ca=True)
        self.tunnel_ca = make_cert("tunnel-ca", ca=True)
        self.managed = make_cert("managed-cluster", dns=(MANAGED_NAME,), issuer=self.tunnel_ca)
        self.management.write(certs, "management-cluster")
        self.managed.write(certs, "managed-cluster")
        self.files["cert_path"] = str(certs)
        self.files["tunnel_ca"], _ = self.tunnel_ca.write(self.root, "tunnel-ca")

    def server_context(self) -> ssl.SSLContext:
        """The peer's side: Voltron's cert, and only the managed cluster's CA as client CA."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        crt, key = self.management.write(self.root, "peer-server")
        ctx.load_cert_chain(crt, key)
        ctx.load_verify_locations(cadata=self.tunnel_ca.cert.decode())
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def stream_client_context(self) -> ssl.SSLContext:
        """For clients of guardian's tunnelled HTTP/2 server (verifies the managed cert)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cadata=self.tunnel_ca.cert.decode())
        ctx.set_alpn_protocols(["h2"])
        return ctx


# -- the management peer -----------------------------------------------------------------------


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        """Cancel what still runs on the loop, then stop it: a coroutine left pending would be
        closed later by the collector, and its clean-up would then call into a dead loop
        ("Event loop is closed", seen once as an unraisable-exception warning)."""
        with contextlib.suppress(Exception):
            self.call(self._cancel_all(), timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    @staticmethod
    async def _cancel_all() -> None:
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class ManagementPeer:
    def __init__(
        self,
        ctx: ssl.SSLContext,
        upstream: tuple[str, int] | None = None,
        port: int = 0,
        keepalive: bool = True,
        stream_handler: Callable[[Any], Any] | None = None,
    ) -> None:
        self.ctx = ctx
        self.upstream = upstream
        self.stream_handler = stream_handler
        self.port = port
        self.keepalive = keepalive
        self.lt = LoopThread()
        self.sessions: list[Session] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.client_certs: list[dict[str, Any]] = []
        self.handshake_failures = 0
        self._server: asyncio.Server | None = None
        self._bridges: list[asyncio.Server] = []
        self._cond = threading.Condition()
        self._tasks: set[asyncio.Future[Any]] = set()

    # lifecycle
    def start(self) -> ManagementPeer:
        self.lt.call(self._start())
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(
            self._on_conn,
            "127.0.0.1",
            self.port,
            ssl=self.ctx,
            reuse_address=True,
            ssl_handshake_timeout=5,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Close the listener and drop every tunnel connection abruptly."""
        self.lt.call(self._stop())

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in self.writers:
            w.transport.abort()
        for s in self.sessions:
            await s.close("peer stopped")

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        for b in self._bridges:
            self.lt.loop.call_soon_threadsafe(b.close)
        self.lt.stop()

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_obj = writer.get_extra_info("ssl_object")
        self.client_certs.append(ssl_obj.getpeercert() if ssl_obj else {})
        session = Session(
            reader,
            writer,
            client=False,
            config=SessionConfig(enable_keepalive=self.keepalive, keepalive_interval=1.0),
            name="peer",
        )
        session.start()
        with self._cond:
            self.sessions.append(session)
            self.writers.append(writer)
            self._cond.notify_all()
        while True:
            try:
                stream = await session.accept()
            except ConnectionError:
                return
            handler = self.stream_handler or self._pipe_up
            task = asyncio.ensure_future(handler(stream))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe_up(self, stream: Any) -> None:
        if self.upstream is None:
            stream.abort()
            return
        try:
            r, w = await asyncio.open_connection(*self.upstream)
        except OSError:
            stream.abort()
            return
        await forward(stream, SocketStream(r, w))

    def wait_sessions(self, n: int, timeout: float = 20.0) -> Session:
        with self._cond:
            ok = self._cond.wait_for(lambda: len(self.sessions) >= n, timeout)
        assert ok, f"expected {n} tunnel sessions, have {len(self.sessions)}"
        return self.sessions[n - 1]

    @property
    def current(self) -> Session:
        return self.sessions[-1]

    def send_raw(self, data: bytes) -> None:
        """Write bytes straight onto the newest tunnel connection (garbage tests)."""
        w = self.writers[-1]
        self.lt.loop.call_soon_threadsafe(w.write, data)

    def bridge_port(self) -> int:
        """A local port; each connection to it is a new stream opened towards guardian."""

        async def start() -> int:
            async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                try:
                    stream = self.current.open_stream()
                except ConnectionError:
                    w.transport.abort()
                    return
                await forward(SocketStream(r, w), stream)

            server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
            self._bridges.append(server)
            return server.sockets[0].getsockname()[1]

        return self.lt.call(start())


# -- fake targets --------------------------------------------------------------------------------


class FakeKubeAPI:
    """A small HTTP/2-over-TLS server that answers every request with what it received.

    TCP_NODELAY on its connections, as Go servers (the real API server) have by default.
    """

    def __init__(self, server: Pem, root: Path) -> None:
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        crt, key = server.write(root, "kube-api")
        self.ctx.load_cert_chain(crt, key)
        self.ctx.set_alpn_protocols(["h2"])
        self.requests: list[dict[str, str]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            conn = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        h2c.initiate_connection()
        conn.sendall(h2c.data_to_send())
        headers: dict[int, dict[str, str]] = {}
        with contextlib.suppress(OSError, ssl.SSLError):
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                for ev in h2c.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        headers[ev.stream_id] = {
                            (k.decode() if isinstance(k, bytes) else k): (
                                v.decode() if isinstance(v, bytes) else v
                            )
                            for k, v in ev.headers
                        }
                    elif isinstance(ev, h2.events.DataReceived):
                        h2c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        req = headers.pop(ev.stream_id)
                        self.requests.append(req)
                        body = repr(sorted(req.items())).encode()
                        h2c.send_headers(
                            ev.stream_id,
                            [
                                (":status", "200"),
                                ("content-type", "text/plain"),
                                ("content-length", str(len(body))),
                            ],
                        )
                        h2c.send_data(ev.stream_id, body, end_stream=True)
                conn.sendall(h2c.data_to_send())

    def close(self) -> None:
        self._stop = True
        self.sock.close()


def h2_request(
    port: int,
    ctx: ssl.SSLContext,
    path: str,
    server_name: str = MANAGED_NAME,
    method: str = "GET",
    extra: list[tuple[str, str]] | None = None,
    timeout: float = 10.0,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/2 request over TLS to 127.0.0.1:port; (status, headers, body)."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    conn = ctx.wrap_socket(raw, server_hostname=server_name)
    try:
        assert conn.selected_alpn_protocol() == "h2"
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        sid = c.get_next_available_stream_id()
        c.send_headers(
            sid,
            [
                (":method", method),
                (":scheme", "https"),
                (":authority", server_name),
                (":path", path),
                *(extra or []),
            ],
            end_stream=True,
        )
        conn.sendall(c.data_to_send())
        status, headers, body = 0, {}, b""
        while True:
            data = conn.recv(65536)
            if not data:
                raise ConnectionError("connection closed before the response ended")
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    headers = {k.decode(): v.decode() for k, v in ev.headers}
                    status = int(headers[":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    body += ev.data
                    c.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded):
                    return status, headers, body
                elif isinstance(ev, h2.events.StreamReset):
                    raise ConnectionResetError(f"stream reset: {ev.error_code}")
            conn.sendall(c.data_to_send())
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
