"""Typha's sync server on loopback: handshake, snapshot + deltas, compression, sync status,
and every kind of bad input — each disconnected with a log line and a metric while a
well-behaved client on the same server carries on."""

from __future__ import annotations

import logging
import ssl
import struct
import time
from pathlib import Path

import pytest
from typha_helpers import (
    ServerThread,
    State,
    closed_by_peer,
    eventually,
    hello,
    make_ca,
    make_cert,
    raw_socket,
    send,
)

from calico.model import GlobalConfigKey
from calico.syncer import DedupeBuffer
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.syncer.typhaclient import ClientSettings, SyncClient, framing
from calico.syncer.typhaclient import messages as m
from calico.syncer.typhaclient.tls import server_context


def cfg(name: str, value: str, rev: str = "1") -> Update:
    return Update(GlobalConfigKey(name), value, rev, UpdateType.NEW)


def client(addr: str, consumer: object, **kw: object) -> SyncClient:
    c = SyncClient(ClientSettings(addr, **kw), consumer)  # type: ignore[arg-type]
    c.start()
    return c


@pytest.mark.parametrize("compression", [True, False])
def test_snapshot_then_deltas_then_status(compression: bool) -> None:
    with ServerThread() as srv:
        srv.feed("felix", [cfg(f"k{i}", str(i)) for i in range(2500)], SyncStatus.IN_SYNC)
        eventually(lambda: srv.caches["felix"].latest().status is SyncStatus.IN_SYNC)
        st = State()
        c = client(srv.addr, st, compression=compression)
        try:
            st.wait(lambda s: s.status is SyncStatus.IN_SYNC and len(s.state) == 2500)
            assert st.statuses == [SyncStatus.RESYNC_IN_PROGRESS, SyncStatus.IN_SYNC]
            srv.feed(
                "felix",
                [cfg("k1", "changed", "2")],
                [Update(GlobalConfigKey("k2"), None, "3", UpdateType.DELETED)],
            )
            st.wait(
                lambda s: s.state.get(GlobalConfigKey("k1")) == "changed" and len(s.state) == 2499
            )
            srv.feed("felix", SyncStatus.RESYNC_IN_PROGRESS)
            st.wait(lambda s: s.status is SyncStatus.RESYNC_IN_PROGRESS)
            srv.feed("felix", SyncStatus.IN_SYNC)
            st.wait(lambda s: s.status is SyncStatus.IN_SYNC)
            srv.feed("felix", SyncStatus.IN_SYNC, [cfg("k3", "again", "4")], SyncStatus.IN_SYNC)
            st.wait(lambda s: s.state.get(GlobalConfigKey("k3")) == "again")
            time.sleep(0.2)
            # a status goes out only when it changed
            assert st.statuses[2:] == [SyncStatus.RESYNC_IN_PROGRESS, SyncStatus.IN_SYNC]
            kind = "snapshots_generated"
            assert getattr(srv.metrics, kind).value("felix") == 1
            if compression:
                assert srv.metrics.snapshot_compressed_bytes.labels("felix")._value.get() > 0
        finally:
            c.stop()


def test_clients_connecting_together_share_one_snapshot() -> None:
    with ServerThread() as srv:
        srv.feed("felix", [cfg(f"k{i}", "v") for i in range(500)], SyncStatus.IN_SYNC)
        eventually(lambda: srv.caches["felix"].latest().status is SyncStatus.IN_SYNC)
        states = [State() for _ in range(5)]
        clients = [client(srv.addr, s) for s in states]
        try:
            for s in states:
                s.wait(lambda x: x.status is SyncStatus.IN_SYNC and len(x.state) == 500)
            generated = srv.metrics.snapshots_generated.value("felix")
            reused = srv.metrics.snapshots_reused.value("felix")
            assert generated + reused == 5 and reused >= 1
        finally:
            for c in clients:
                c.stop()


def test_other_syncer_types_are_separate_pipelines() -> None:
    with ServerThread() as srv:
        srv.feed("bgp", [cfg("bgp-only", "x")], SyncStatus.IN_SYNC)
        srv.feed("felix", [cfg("felix-only", "y")], SyncStatus.IN_SYNC)
        st = State()
        c = client(srv.addr, st, syncer_type="bgp")
        try:
            st.wait(lambda s: s.status is SyncStatus.IN_SYNC)
            assert st.state == {GlobalConfigKey("bgp-only"): "x"}
        finally:
            c.stop()


@pytest.fixture
def server_with_good_client(caplog: pytest.LogCaptureFixture):  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO)
    with ServerThread(handshake_timeout=0.5, write_timeout=1.0) as srv:
        srv.feed("felix", [cfg("a", "1")], SyncStatus.IN_SYNC)
        good = State()
        c = client(srv.addr, good)
        good.wait(lambda s: s.status is SyncStatus.IN_SYNC and len(s.state) == 1)
        try:
            yield srv, good
            # the good client still gets deltas after the bad one was dropped
            srv.feed("felix", [cfg("after", "ok")])
            good.wait(lambda s: s.state.get(GlobalConfigKey("after")) == "ok")
            assert c.connections == 1
        finally:
            c.stop()


def test_garbage_bytes(server_with_good_client, caplog) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server_with_good_client
    with raw_socket(srv.addr) as s:
        s.sendall(struct.pack(">I", 6) + b"\xc1garbg")
        assert closed_by_peer(s)
    assert srv.rejected("protocol") == 1
    assert "bad message: undecodable message" in caplog.text


def test_oversized_frame(server_with_good_client, caplog) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server_with_good_client
    with raw_socket(srv.addr) as s:
        s.sendall(struct.pack(">I", (1 << 20) + 1))
        assert closed_by_peer(s)
    assert srv.rejected("oversized") == 1
    assert "exceeds the 1048576-byte limit" in caplog.text


def test_a_hello_of_exactly_the_cap_is_read(server_with_good_client) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server_with_good_client
    base = framing.frame_message(hello(info=""))[4:]
    payload = m.encode(hello(info="x" * ((1 << 20) - len(base) - 4)))
    assert len(payload) == 1 << 20
    with raw_socket(srv.addr) as s:
        s.sendall(struct.pack(">I", len(payload)) + payload)
        reader = framing.SocketFrameReader(s)
        assert isinstance(reader.read(), m.ServerHello)


@pytest.mark.parametrize(
    ("first", "log_text"),
    [
        (m.Ping(1.0), "first message was Ping, not ClientHello"),
        (hello(syncer_type="nope"), "unsupported syncer type 'nope'"),
        (hello(supports_modern_policy_keys=False), "does not support modern policy keys"),
    ],
)
def test_wrong_first_message(server_with_good_client, caplog, first, log_text) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server_with_good_client
    with raw_socket(srv.addr) as s:
        send(s, first)
        assert closed_by_peer(s)
    assert srv.rejected("handshake") == 1
    assert log_text in caplog.text


def test_handshake_timeout(server_with_good_client, caplog) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server_with_good_client
    with raw_socket(srv.addr) as s:
        start = time.monotonic()
        assert closed_by_peer(s)
        assert 0.4 < time.monotonic() - start < 5
    assert srv.rejected("handshake") == 1
    assert "timed out waiting for the client hello" in caplog.text


def test_message_other_than_pong_after_handshake(server_with_good_client, caplog) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server_with_good_client
    with raw_socket(srv.addr) as s:
        send(s, hello())
        reader = framing.SocketFrameReader(s)
        assert isinstance(reader.read(), m.ServerHello)
        send(s, hello())
        assert closed_by_peer(s)
    assert srv.rejected("protocol") == 1
    assert "unexpected ClientHello from client after handshake" in caplog.text


def test_slow_reader_is_dropped_by_the_write_timeout(server_with_good_client, caplog) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server_with_good_client
    srv.feed("felix", [cfg(f"big{i}", "x" * 100_000) for i in range(300)])
    eventually(
        lambda: srv.caches["felix"].latest().size == 302 or srv.caches["felix"].latest().size == 301
    )
    with raw_socket(srv.addr) as s:
        s.setsockopt(__import__("socket").SOL_SOCKET, __import__("socket").SO_RCVBUF, 4096)
        send(s, hello())  # no compression: a 30 MB snapshot the client never reads
        eventually(lambda: srv.rejected("slow-reader") == 1, timeout=15)
    assert "write timed out after 1.0s (slow reader)" in caplog.text


def test_pong_timeout() -> None:
    with ServerThread(ping_interval=0.1, pong_timeout=0.1) as srv:
        assert srv.config.effective_pong_timeout() == pytest.approx(0.6)
        with raw_socket(srv.addr) as s:
            send(s, hello())
            reader = framing.SocketFrameReader(s)
            assert isinstance(reader.read(), m.ServerHello)
            assert isinstance(reader.read(), m.Ping)  # pings come; we never answer
            assert closed_by_peer(s)
        assert srv.rejected("pong-timeout") == 1


def test_governor_drops_one_random_connection_per_interval() -> None:
    with ServerThread(max_conns=2, drop_interval=0.2) as srv:
        srv.feed("felix", SyncStatus.IN_SYNC)
        states = [State() for _ in range(5)]
        clients = [client(srv.addr, s) for s in states]  # not restart-aware: stay dropped
        try:
            eventually(lambda: srv.metrics.connections_accepted.value() == 5)
            eventually(lambda: srv.connections() == 2, timeout=10)
            time.sleep(0.5)  # no further drops once at the limit
            assert srv.connections() == 2
            assert srv.metrics.connections_dropped.value() == 3
            assert sum(c.finished.is_set() for c in clients) == 3
        finally:
            for c in clients:
                c.stop()


def test_graceful_shutdown_spreads_disconnects() -> None:
    srv = ServerThread(shutdown_timeout=1.0).__enter__()
    srv.feed("felix", SyncStatus.IN_SYNC)
    clients = [client(srv.addr, State()) for _ in range(4)]
    try:
        eventually(lambda: srv.metrics.connections_streaming.labels("felix")._value.get() == 4)
        start = time.monotonic()
        srv.call(srv.server.graceful_shutdown(), timeout=10)
        took = time.monotonic() - start
        assert all(c.finished.wait(5) for c in clients)
        # 4 connections over 95% of 1 s: three spaced drops (~0.23 s each), then the rest
        assert 0.5 < took < 3.0
        assert srv.metrics.connections_dropped.value() == 3
        with pytest.raises(OSError):
            raw_socket(srv.addr).__enter__()
    finally:
        for c in clients:
            c.stop()
        srv.__exit__(None, None, None)


def test_restart_aware_client_reconnects_and_synthesises_deletes() -> None:
    srv = ServerThread().__enter__()
    srv.feed("felix", [cfg("keep", "1"), cfg("gone", "1")], SyncStatus.IN_SYNC)
    st = State()
    buf = DedupeBuffer(st)
    buf.start()
    c = SyncClient(ClientSettings(srv.addr), buf)
    c.start()
    try:
        st.wait(lambda s: s.status is SyncStatus.IN_SYNC and len(s.state) == 2)
        port = srv.server.port
        srv.__exit__(None, None, None)
        srv2 = ServerThread(port=port).__enter__()
        srv2.feed("felix", [cfg("keep", "2"), cfg("new", "1")], SyncStatus.IN_SYNC)
        st.wait(lambda s: s.state == {GlobalConfigKey("keep"): "2", GlobalConfigKey("new"): "1"})
        assert c.connections == 2
        assert SyncStatus.WAIT_FOR_DATASTORE in st.statuses
        srv2.__exit__(None, None, None)
    finally:
        c.stop()
        buf.stop()


# -- TLS ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("typha-certs")
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_cert(d, "server", "typha-server", usage="serverAuth")
    make_cert(d, "felix", "typha-client", uri="spiffe://cluster/felix")
    make_cert(d, "intruder", "someone-else")
    make_cert(d, "stranger", "typha-client", ca="otherca")
    return d


def tls_server(certs: Path, **kw: object) -> ServerThread:
    ctx = server_context(
        str(certs / "server.key"), str(certs / "server.crt"), str(certs / "ca.crt")
    )
    return ServerThread(tls_context=ctx, handshake_timeout=2.0, **kw)


def tls_client(
    addr: str, certs: Path, name: str, st: State, cn: str = "typha-server"
) -> SyncClient:
    return client(
        addr,
        st,
        key_file=str(certs / f"{name}.key"),
        cert_file=str(certs / f"{name}.crt"),
        ca_file=str(certs / "ca.crt"),
        cn=cn,
    )


@pytest.mark.parametrize(
    ("need_cn", "need_uri"), [("typha-client", ""), ("", "spiffe://cluster/felix")]
)
def test_mtls_accepts_the_required_identity(certs: Path, need_cn: str, need_uri: str) -> None:
    with tls_server(certs, client_cn=need_cn, client_uri_san=need_uri) as srv:
        srv.feed("felix", [cfg("a", "1")], SyncStatus.IN_SYNC)
        st = State()
        c = tls_client(srv.addr, certs, "felix", st)
        try:
            st.wait(lambda s: s.status is SyncStatus.IN_SYNC and len(s.state) == 1)
        finally:
            c.stop()


@pytest.mark.parametrize(
    ("name", "log_text"),
    [
        ("intruder", "peer certificate does not have required CN"),
        ("stranger", "TLS handshake failed"),
    ],
)
def test_mtls_rejects_wrong_client(certs: Path, caplog, name: str, log_text: str) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO)
    with tls_server(certs, client_cn="typha-client") as srv:
        srv.feed("felix", [cfg("a", "1")], SyncStatus.IN_SYNC)
        good, bad = State(), State()
        g = tls_client(srv.addr, certs, "felix", good)
        b = tls_client(srv.addr, certs, name, bad)
        try:
            eventually(lambda: srv.rejected("tls") >= 1)
            assert b.finished.wait(5) and bad.state == {}
            good.wait(lambda s: s.status is SyncStatus.IN_SYNC and len(s.state) == 1)
            assert log_text in caplog.text
        finally:
            g.stop()
            b.stop()


def test_client_rejects_server_with_the_wrong_cn(certs: Path) -> None:
    with tls_server(certs, client_cn="typha-client") as srv:
        st = State()
        c = tls_client(srv.addr, certs, "felix", st, cn="not-typha")
        try:
            assert c.finished.wait(5)
            assert "Typha server rejected: peer certificate does not have required CN" in c.error
        finally:
            c.stop()


def test_plain_client_against_tls_server_is_rejected(certs: Path) -> None:
    with tls_server(certs, client_cn="typha-client") as srv:
        with raw_socket(srv.addr) as s:
            send(s, hello())
            assert closed_by_peer(s)
        eventually(lambda: srv.rejected("tls") == 1)
    assert ssl.TLSVersion.TLSv1_2  # the server context's minimum (tls.server_context)


def _slow_reader_under_load(srv: ServerThread, seconds: float) -> bool:
    """A client that reads ~0.8 MB/s while 10 KB updates arrive at ~2 MB/s; True if the
    server dropped it within ``seconds``. (Each delta write of up to ServerMaxMessageSize KVs
    takes ~1 s at that pace; the server checks how far behind it is between writes.)"""
    import socket
    import threading

    srv.feed("felix", SyncStatus.IN_SYNC)
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            srv.feed("felix", [cfg(f"load{i % 50}", f"{i}" + "x" * 10_000, str(i))])
            i += 1
            time.sleep(0.005)

    host, port = srv.addr.rsplit(":", 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, int(port)))
    producer = threading.Thread(target=produce, daemon=True)
    try:
        send(s, hello())
        time.sleep(0.3)  # the (tiny) snapshot is sent; the load is all deltas
        producer.start()
        s.settimeout(0.5)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if srv.rejected("fell-behind"):
                return True
            try:
                if not s.recv(16384):
                    break
            except TimeoutError:
                pass
            except ConnectionResetError:
                break
            time.sleep(0.02)
        return srv.rejected("fell-behind") > 0
    finally:
        stop.set()
        producer.join(5)
        s.close()


def test_client_that_falls_behind_is_dropped_after_its_grace(caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO)
    with ServerThread(max_fall_behind=0.3, new_client_grace=0.0) as srv:
        assert _slow_reader_under_load(srv, 20.0)
        assert srv.rejected("fell-behind") == 1
        assert "Client fell behind. Disconnecting." in caplog.text


def test_new_client_grace_period_keeps_a_lagging_client() -> None:
    with ServerThread(max_fall_behind=0.3, new_client_grace=60.0) as srv:
        assert not _slow_reader_under_load(srv, 10.0)
        assert srv.rejected("fell-behind") == 0
        assert srv.metrics.grace_used.value("felix") == 1
