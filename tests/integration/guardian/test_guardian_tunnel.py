"""Guardian end to end on loopback: a real ``calico component guardian`` against a test peer."""

from __future__ import annotations

import base64
import contextlib
import socket
import threading
import time
from pathlib import Path

import grpc
import requests
from guardian_peer import (
    MANAGED_NAME,
    CertSet,
    LoopThread,
    ManagementPeer,
    Pem,
    h2_request,
    make_cert,
    wait_for,
)

pytestmark = __import__("pytest").mark.timeout(120)


def _echo_server() -> tuple[socket.socket, list[bytes]]:
    """Management-side server: answers each line with ``echo:<line>``."""
    srv = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve(conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    seen.append(line)
                    conn.sendall(b"echo:" + line + b"\n")

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv, seen


def _recv_line(sock: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        data = sock.recv(4096)
        if not data:
            raise ConnectionError(f"closed after {buf!r}")
        buf += data
    return buf


def _listen(env: dict[str, str]) -> socket.socket:
    return socket.create_connection(("127.0.0.1", int(env["GUARDIAN_LISTEN_PORT"])), timeout=10)


def test_tunnel_comes_up_with_the_right_certificates(certs, guardian_env, start_guardian):
    peer = ManagementPeer(certs.server_context()).start()
    try:
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{peer.port}"
        g = start_guardian(guardian_env)
        peer.wait_sessions(1)
        subject = dict(x[0] for x in peer.client_certs[0]["subject"])
        assert subject["commonName"] == "managed-cluster"
        url = f"http://127.0.0.1:{guardian_env['HEALTH_PORT']}"
        wait_for(lambda: _status(url + "/readiness") == 200, what="readiness")
        body = requests.get(url + "/liveness", timeout=5).text
        assert "guardian" in body and "reporting live" in body
        g.wait_log("Tunnel session established")
        # Keepalives flow (100 ms default): the peer's view stays open and pings are answered.
        rtt = peer.lt.call(peer.current.ping())
        assert rtt < 5
        wait_for(lambda: peer.current.pings_received >= 5, what="guardian keepalive pings")
        assert g.stop() == 0
        log = g.log()
        assert "Waiting for tunnel to close..." in log and "Tunnel is closed." in log
    finally:
        peer.shutdown()


def _status(url: str) -> int:
    try:
        return requests.get(url, timeout=2).status_code
    except requests.RequestException:
        return 0


def test_tunnel_is_refused_with_the_wrong_client_certificate(certs, guardian_env, start_guardian):
    rogue_ca = make_cert("rogue-ca", ca=True)
    rogue = make_cert("managed-cluster", dns=(MANAGED_NAME,), issuer=rogue_ca)
    rogue.write(Path(certs.files["cert_path"]), "managed-cluster")
    peer = ManagementPeer(certs.server_context()).start()
    try:
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{peer.port}"
        g = start_guardian(guardian_env)
        # TLS 1.3: the peer's rejection arrives just after the client's handshake, so each
        # attempt ends as a closed session; after 5 recreations in 30 s guardian gives up.
        g.wait_log("Tunnel session ended (connection closed by peer)")
        assert g.proc.wait(30) == 1
        assert "tunnel recreated 5 times within 30s" in g.log()
        assert peer.sessions == []
    finally:
        peer.shutdown()


def test_tunnel_refuses_a_server_that_is_not_the_management_cluster(
    certs, guardian_env, start_guardian
):
    # Guardian trusts management-cluster.crt only; this peer presents another certificate.
    impostor = make_cert("voltron", dns=("voltron.test",), ca=True)
    impostor.write(Path(certs.files["cert_path"]), "management-cluster")
    peer = ManagementPeer(CertSet(certs.root / "other").server_context()).start()
    try:
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{peer.port}"
        g = start_guardian(guardian_env)
        g.wait_log("CERTIFICATE_VERIFY_FAILED")
        assert peer.sessions == []
    finally:
        peer.shutdown()


def test_requests_through_the_tunnel_reach_the_kube_api(
    certs, guardian_env, start_guardian, kube_api
):
    peer = ManagementPeer(certs.server_context()).start()
    try:
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{peer.port}"
        start_guardian(guardian_env)
        peer.wait_sessions(1)
        port = peer.bridge_port()
        ctx = certs.stream_client_context()
        status, headers, body = h2_request(port, ctx, "/api/v1/namespaces?limit=1")
        assert status == 200, body
        assert headers["strict-transport-security"] == "max-age=31536000; includeSubDomains"
        req = kube_api.requests[-1]
        assert req[":path"] == "/api/v1/namespaces?limit=1"
        assert req["authorization"] == "Bearer tok-123"
        assert req["x-forwarded-host"] == MANAGED_NAME
        assert req["x-forwarded-for"] == "127.0.0.1"
        status, _, _ = h2_request(
            port,
            ctx,
            "/apis/projectcalico.org/v3/ippools",
            extra=[("authorization", "Bearer from-voltron")],
        )
        assert status == 200
        # The pod's token replaces whatever the management side sent.
        assert kube_api.requests[-1]["authorization"] == "Bearer tok-123"
        status, headers, body = h2_request(port, ctx, "/healthz")
        assert (status, body) == (404, b"404 page not found\n")
        assert "strict-transport-security" in headers
        assert len(kube_api.requests) == 2
        # A token that cannot be read is a 500, and nothing reaches the API.
        Path(guardian_env["GUARDIAN_K8S_TOKEN_FILE"]).unlink()
        status, _, body = h2_request(port, ctx, "/api/v1/pods")
        assert status == 500 and b"token read failure" in body
        assert len(kube_api.requests) == 2
    finally:
        peer.shutdown()


class _Goldmane:
    """A gRPC server standing in for Goldmane: mTLS, one server-streaming method."""

    def __init__(self, ca: Pem, root: Path) -> None:
        server_pem = make_cert("goldmane", dns=("localhost",), issuer=ca)
        self.calls: list[dict] = []
        self.cancelled = threading.Event()
        self.first_seen = threading.Event()
        self.streamed_before_end = False
        creds = grpc.ssl_server_credentials(
            [(server_pem.key, server_pem.cert)],
            root_certificates=ca.cert,
            require_client_auth=True,
        )

        def stats_list(request: bytes, context: grpc.ServicerContext):
            if request == b"hang":
                # Streams until the caller goes away; records that the cancel reached us.
                yield b"started"
                deadline = time.monotonic() + 15
                while context.is_active() and time.monotonic() < deadline:
                    time.sleep(0.05)
                if not context.is_active():
                    self.cancelled.set()
                return
            auth = context.auth_context()
            self.calls.append(
                {
                    "request": request,
                    "metadata": dict(context.invocation_metadata()),
                    "peer_cn": [c.decode() for c in auth.get("x509_common_name", [])],
                }
            )
            yield b"first"
            # Only sent once the client has the first message: a proxy that buffered the
            # response until the stream ended would deadlock here.
            self.streamed_before_end = self.first_seen.wait(10)
            yield b"second"

        handler = grpc.method_handlers_generic_handler(
            "goldmane.Statistics",
            {"List": grpc.unary_stream_rpc_method_handler(stats_list)},
        )
        self.server = grpc.server(__import__("concurrent.futures").futures.ThreadPoolExecutor(4))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_secure_port("127.0.0.1:0", creds)
        self.server.start()


def test_grpc_through_the_tunnel_reaches_goldmane_with_the_client_cert(
    certs, guardian_env, start_guardian, tmp_path
):
    ca = Pem(guardian_env["_GM_CA_CERT"].encode(), guardian_env["_GM_CA_KEY"].encode())
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    ca._cert_obj = x509.load_pem_x509_certificate(ca.cert)
    ca._key_obj = load_pem_private_key(ca.key, None)
    goldmane = _Goldmane(ca, tmp_path)
    client = make_cert("guardian-goldmane-client", issuer=ca)
    crt, key = client.write(tmp_path, "gm-client")
    peer = ManagementPeer(certs.server_context()).start()
    try:
        guardian_env.update(
            GUARDIAN_VOLTRON_URL=f"127.0.0.1:{peer.port}",
            GUARDIAN_GOLDMANE_ENDPOINT=f"https://localhost:{goldmane.port}",
            GUARDIAN_GOLDMANE_CLIENT_CERT=crt,
            GUARDIAN_GOLDMANE_CLIENT_KEY=key,
        )
        start_guardian(guardian_env)
        peer.wait_sessions(1)
        port = peer.bridge_port()
        creds = grpc.ssl_channel_credentials(root_certificates=certs.tunnel_ca.cert)
        with grpc.secure_channel(
            f"127.0.0.1:{port}",
            creds,
            options=[("grpc.ssl_target_name_override", MANAGED_NAME)],
        ) as channel:
            call = channel.unary_stream("/goldmane.Statistics/List")(
                b"\x18\x01", metadata=[("x-test", "1")], timeout=20
            )
            got = []
            for msg in call:
                got.append(msg)
                goldmane.first_seen.set()
            assert got == [b"first", b"second"]
            assert call.code() == grpc.StatusCode.OK
        assert goldmane.streamed_before_end
        assert goldmane.calls[0]["request"] == b"\x18\x01"
        assert goldmane.calls[0]["metadata"]["x-test"] == "1"
        assert goldmane.calls[0]["peer_cn"] == ["guardian-goldmane-client"]

        # A call the management side cancels is cancelled at Goldmane too.
        with grpc.secure_channel(
            f"127.0.0.1:{port}",
            creds,
            options=[("grpc.ssl_target_name_override", MANAGED_NAME)],
        ) as channel:
            call = channel.unary_stream("/goldmane.Statistics/List")(b"hang", timeout=20)
            assert next(call) == b"started"
            call.cancel()
            assert goldmane.cancelled.wait(10)

        # An in-flight call whose tunnel drops is cancelled upstream, and guardian re-dials.
        goldmane.cancelled.clear()
        channel = grpc.secure_channel(
            f"127.0.0.1:{port}",
            creds,
            options=[("grpc.ssl_target_name_override", MANAGED_NAME)],
        )
        call = channel.unary_stream("/goldmane.Statistics/List")(b"hang", timeout=20)
        assert next(call) == b"started"
        peer.stop()
        assert goldmane.cancelled.wait(10)
        with __import__("pytest").raises(grpc.RpcError):
            next(call)
        channel.close()
    finally:
        peer.shutdown()
        goldmane.server.stop(0)


def test_listen_port_reaches_the_management_side(certs, guardian_env, start_guardian):
    srv, seen = _echo_server()
    peer = ManagementPeer(certs.server_context(), upstream=srv.getsockname()).start()
    try:
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{peer.port}"
        g = start_guardian(guardian_env)
        peer.wait_sessions(1)
        g.wait_log("Listening on 127.0.0.1:")
        with _listen(guardian_env) as s:
            s.sendall(b"hello\n")
            assert _recv_line(s) == b"echo:hello\n"
            big = b"x" * 3_000_000 + b"\n"
            s.sendall(big)
            got = b""
            while not got.endswith(b"\n"):
                got += s.recv(1 << 20)
            assert got == b"echo:" + big
        assert seen[0] == b"hello"
    finally:
        peer.shutdown()
        srv.close()


def test_redial_after_the_peer_restarts_and_in_flight_streams_fail(
    certs, guardian_env, start_guardian
):
    srv, _ = _echo_server()
    peer = ManagementPeer(certs.server_context(), upstream=srv.getsockname()).start()
    port = peer.port
    try:
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{port}"
        g = start_guardian(guardian_env)
        peer.wait_sessions(1)
        g.wait_log("Listening on")
        inflight = _listen(guardian_env)
        inflight.sendall(b"before\n")
        assert _recv_line(inflight) == b"echo:before\n"
        peer.shutdown()
        # The in-flight connection ends promptly (reset or EOF), it does not hang.
        start = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            assert inflight.recv(100) == b""
        assert time.monotonic() - start < 5
        inflight.close()
        peer = ManagementPeer(certs.server_context(), upstream=srv.getsockname(), port=port)
        peer.start()
        peer.wait_sessions(1)
        g.wait_log("will re-dial")
        with _listen(guardian_env) as s:
            s.sendall(b"after\n")
            assert _recv_line(s) == b"echo:after\n"
        assert g.proc.poll() is None
    finally:
        peer.shutdown()
        srv.close()


class _ConnectProxy:
    """A test-only HTTP CONNECT proxy with Basic auth; resolves voltron.test to loopback."""

    def __init__(self, user: str, password: str) -> None:
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.requests: list[tuple[str, str]] = []
        self.lt = LoopThread()
        self.port = self.lt.call(self._start())

    async def _start(self) -> int:
        import asyncio

        async def handle(r, w):
            head = await r.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            target = lines[0].split()[1]
            hdrs = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            self.requests.append((lines[0], hdrs.get("Proxy-Authorization", "")))
            if hdrs.get("Proxy-Authorization") != self.expected:
                w.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                await w.drain()
                w.close()
                return
            host, _, port = target.rpartition(":")
            host = "127.0.0.1" if host == "voltron.test" else host
            ur, uw = await asyncio.open_connection(host, int(port))
            w.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await w.drain()

            async def pipe(a, b):
                try:
                    while data := await a.read(65536):
                        b.write(data)
                        await b.drain()
                finally:
                    b.close()

            await asyncio.gather(pipe(r, uw), pipe(ur, w), return_exceptions=True)

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        self.srv = srv
        return srv.sockets[0].getsockname()[1]


def test_tunnel_through_an_http_connect_proxy(certs, guardian_env, start_guardian):
    proxy = _ConnectProxy("user", "s3cret")
    peer = ManagementPeer(certs.server_context()).start()
    try:
        # voltron.test does not resolve here: only the proxy can reach it.
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"voltron.test:{peer.port}"
        guardian_env["HTTPS_PROXY"] = f"http://user:s3cret@127.0.0.1:{proxy.port}"
        guardian_env["NO_PROXY"] = "example.com"
        g = start_guardian(guardian_env)
        peer.wait_sessions(1)
        assert proxy.requests[0][0] == f"CONNECT voltron.test:{peer.port} HTTP/1.1"
        assert proxy.requests[0][1] == proxy.expected
        assert "via HTTP proxy at http://user:xxxxx@127.0.0.1" in g.log()
        g.stop()
        # Wrong credentials: the proxy's 407 is reported and retried, no session.
        guardian_env["HTTPS_PROXY"] = f"http://user:wrong@127.0.0.1:{proxy.port}"
        g2 = start_guardian(guardian_env)
        g2.wait_log("407 Proxy Authentication Required")
        assert len(peer.sessions) == 1
    finally:
        peer.shutdown()
        proxy.lt.stop()


def test_garbage_from_the_peer_closes_the_session_and_guardian_redials(
    certs, guardian_env, start_guardian
):
    peer = ManagementPeer(certs.server_context()).start()
    try:
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{peer.port}"
        g = start_guardian(guardian_env)
        peer.wait_sessions(1)
        peer.send_raw(b"GET / HTTP/1.1\r\n\r\n")
        g.wait_log("yamux: invalid protocol version 71")
        assert "closing session tunnel" in g.log()
        peer.wait_sessions(2)
        assert g.proc.poll() is None
        assert "Traceback" not in g.log()
    finally:
        peer.shutdown()


def test_an_unreachable_target_is_a_502(certs, guardian_env, start_guardian):
    peer = ManagementPeer(certs.server_context()).start()
    try:
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{peer.port}"
        g = start_guardian(guardian_env)  # GOLDMANE_ENDPOINT points at a closed port
        peer.wait_sessions(1)
        port = peer.bridge_port()
        status, headers, body = h2_request(
            port, certs.stream_client_context(), "/goldmane.Statistics/List", method="POST"
        )
        assert (status, body) == (502, b"")
        assert "strict-transport-security" in headers
        g.wait_log("http: proxy error: dial https://localhost:1")
    finally:
        peer.shutdown()


def test_bad_configuration_is_one_error_line(calico_bin, guardian_env, tmp_path):
    import subprocess

    env = {k: v for k, v in guardian_env.items() if not k.startswith("_GM_")}
    res = subprocess.run(
        [calico_bin, "component", "guardian"], env=env, capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 1
    assert res.stderr == "Error: required key GUARDIAN_VOLTRON_URL missing value\n"
    env["GUARDIAN_VOLTRON_URL"] = "127.0.0.1:1"
    env["GUARDIAN_CERT_PATH"] = str(tmp_path / "nowhere")
    res = subprocess.run(
        [calico_bin, "component", "guardian"], env=env, capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1].startswith("Error: failed to load tunnel cert from path ")
    assert "Traceback" not in res.stderr + res.stdout
    env["GUARDIAN_CERT_PATH"] = guardian_env["GUARDIAN_CERT_PATH"]
    env["GUARDIAN_CA_FILE"] = str(tmp_path / "missing-ca.pem")
    res = subprocess.run(
        [calico_bin, "component", "guardian"], env=env, capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1].startswith("Error: could not read cert from file")
    res = subprocess.run(
        [calico_bin, "component", "guardian", "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0 and res.stdout.startswith("Version:")
