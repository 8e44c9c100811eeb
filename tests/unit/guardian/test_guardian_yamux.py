"""yamux framing and session behaviour (in-process, over a socketpair)."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.guardian.yamux import (
    FLAG_ACK,
    FLAG_FIN,
    FLAG_RST,
    FLAG_SYN,
    INITIAL_WINDOW,
    TYPE_DATA,
    TYPE_GO_AWAY,
    TYPE_PING,
    TYPE_WINDOW_UPDATE,
    FrameError,
    Header,
    Session,
    SessionConfig,
    StreamResetError,
    decode_header,
    encode_header,
)

u8 = st.integers(0, 3)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)


@given(u8, u16, u32, u32)
def test_header_round_trips(type_, flags, stream_id, length):
    raw = encode_header(type_, flags, stream_id, length)
    assert len(raw) == 12
    assert decode_header(raw) == Header(type_, flags, stream_id, length)


@given(st.binary(min_size=12, max_size=12))
def test_decode_accepts_exactly_version_0_and_known_types(raw):
    if raw[0] != 0 or raw[1] > 3:
        with pytest.raises(FrameError):
            decode_header(raw)
    else:
        assert encode_header(*_fields(decode_header(raw))) == raw


def _fields(h: Header) -> tuple[int, int, int, int]:
    return h.type, h.flags, h.stream_id, h.length


def test_header_bytes_match_hashicorp_layout():
    # hashicorp/yamux encode(): [0]=version [1]=type [2:4]=flags BE [4:8]=stream BE [8:12]=len BE
    assert encode_header(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0) == bytes.fromhex(
        "00 01 0001 00000001 00000000"
    )
    assert encode_header(TYPE_DATA, FLAG_FIN | FLAG_ACK, 0x01020304, 0x00040000) == bytes.fromhex(
        "00 00 0006 01020304 00040000"
    )
    assert encode_header(TYPE_PING, FLAG_ACK, 0, 0xDEADBEEF) == bytes.fromhex(
        "00 02 0002 00000000 deadbeef"
    )
    assert encode_header(TYPE_GO_AWAY, 0, 0, 1) == bytes.fromhex("00 03 0000 00000000 00000001")
    assert encode_header(TYPE_WINDOW_UPDATE, FLAG_RST, 7, 0)[2:4] == b"\x00\x08"
    assert INITIAL_WINDOW == 262144


def test_decode_errors_name_the_problem():
    with pytest.raises(FrameError, match="invalid protocol version 71"):
        decode_header(b"GET / HTTP/1")
    with pytest.raises(FrameError, match="invalid message type 4"):
        decode_header(bytes([0, 4]) + bytes(10))
    with pytest.raises(FrameError, match="must be 12 bytes"):
        decode_header(b"\x00")


async def _pair(cfg: SessionConfig | None = None):
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_connection(sock=a)
    rb, wb = await asyncio.open_connection(sock=b)
    client = Session(ra, wa, client=True, config=cfg or SessionConfig(enable_keepalive=False))
    server = Session(rb, wb, client=False, config=cfg or SessionConfig(enable_keepalive=False))
    client.start()
    server.start()
    return client, server


async def _raw_server():
    """A session whose peer is a raw socket the test writes frames to by hand."""
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_connection(sock=a)
    rb, wb = await asyncio.open_connection(sock=b)
    s = Session(ra, wa, client=True, config=SessionConfig(enable_keepalive=False))
    s.start()
    return s, rb, wb


def test_streams_carry_data_both_ways_with_flow_control():
    async def main():
        client, server = await _pair()
        s1 = client.open_stream()
        assert s1.stream_id == 1 and client.open_stream().stream_id == 3
        payload = bytes(range(256)) * 4096  # 1 MiB > 4 windows: needs window updates
        writer = asyncio.create_task(s1.write(payload))
        peer = await server.accept()
        assert peer.stream_id == 1
        got = bytearray()
        while len(got) < len(payload):
            got += await peer.read(100_000)
        await writer
        assert bytes(got) == payload
        await peer.write(b"pong")
        await peer.close_write()
        assert await s1.read() == b"pong"
        assert await s1.read() == b""
        await client.close()
        await server.close()

    asyncio.run(main())


def test_window_is_not_exceeded_while_the_reader_is_idle():
    async def main():
        client, server = await _pair()
        s = client.open_stream()
        writer = asyncio.create_task(s.write(b"x" * (INITIAL_WINDOW + 10)))
        await asyncio.sleep(0.2)
        assert not writer.done()  # blocked on the peer's window
        assert s._send_window == 0
        peer = await server.accept()
        total = 0
        while total < INITIAL_WINDOW + 10:
            total += len(await peer.read())
        await asyncio.wait_for(writer, 5)
        await client.close()
        await server.close()

    asyncio.run(main())


def test_reset_and_ping_and_session_close_fail_streams():
    async def main():
        client, server = await _pair()
        assert await client.ping() < 1
        s = client.open_stream()
        await s.write(b"hi")
        peer = await server.accept()
        peer.abort()
        with pytest.raises(StreamResetError):
            while True:
                await asyncio.wait_for(s.read(), 5)
        s2 = client.open_stream()
        await s2.write(b"x")
        await server.accept()
        await server.close("test")
        with pytest.raises(StreamResetError, match="session closed"):
            await asyncio.wait_for(s2.read(), 5)
        await asyncio.wait_for(client.wait_closed(), 5)

    asyncio.run(main())


def test_data_beyond_the_window_is_a_protocol_error(caplog):
    async def main():
        s, rb, wb = await _raw_server()
        wb.write(encode_header(TYPE_WINDOW_UPDATE, FLAG_SYN, 2, 0))
        wb.write(encode_header(TYPE_DATA, 0, 2, INITIAL_WINDOW + 1) + b"z" * (INITIAL_WINDOW + 1))
        await wb.drain()
        await asyncio.wait_for(s.wait_closed(), 5)
        assert "receive window exceeded" in s.close_reason
        # ACK for the SYN, then Go Away with the protocol-error code.
        frames = await rb.read(1000)
        assert frames[:12] == encode_header(TYPE_WINDOW_UPDATE, FLAG_ACK, 2, 0)
        assert encode_header(TYPE_GO_AWAY, 0, 0, 1) in frames

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert "yamux: receive window exceeded on stream 2" in caplog.text


def test_duplicate_syn_and_error_go_away_close_the_session():
    async def main():
        s, _rb, wb = await _raw_server()
        wb.write(encode_header(TYPE_WINDOW_UPDATE, FLAG_SYN, 2, 0) * 2)
        await wb.drain()
        await asyncio.wait_for(s.wait_closed(), 5)
        assert s.close_reason == "duplicate stream declared: 2"
        s, _rb, wb = await _raw_server()
        wb.write(encode_header(TYPE_GO_AWAY, 0, 0, 2))
        await wb.drain()
        await asyncio.wait_for(s.wait_closed(), 5)
        assert s.close_reason == "received internal error go away"

    asyncio.run(main())


def test_normal_go_away_stops_new_streams_only():
    async def main():
        client, server = await _pair()
        s = client.open_stream()
        await s.write(b"a")
        peer = await server.accept()
        await server.go_away()
        await asyncio.sleep(0.1)
        with pytest.raises(ConnectionError, match="go away"):
            client.open_stream()
        await s.write(b"still works")
        assert await peer.read() == b"a"
        assert await peer.read() == b"still works"

    asyncio.run(main())


def test_ping_is_answered_with_the_same_opaque_value():
    async def main():
        _s, rb, wb = await _raw_server()
        wb.write(encode_header(TYPE_PING, FLAG_SYN, 0, 0xCAFEF00D))
        await wb.drain()
        reply = await asyncio.wait_for(rb.readexactly(12), 5)
        assert struct.unpack(">BBHII", reply) == (0, TYPE_PING, FLAG_ACK, 0, 0xCAFEF00D)

    asyncio.run(main())


def test_keepalive_without_answers_closes_the_session():
    async def main():
        a, b = socket.socketpair()
        ra, wa = await asyncio.open_connection(sock=a)
        cfg = SessionConfig(keepalive_interval=0.05, connection_write_timeout=0.3)
        s = Session(ra, wa, client=True, config=cfg)
        s.start()
        await asyncio.wait_for(s.wait_closed(), 5)
        assert s.close_reason == "keepalive timeout"
        b.close()

    asyncio.run(main())


def test_window_update_is_sent_once_half_the_window_is_consumed():
    async def main():
        s, rb, wb = await _raw_server()
        wb.write(encode_header(TYPE_WINDOW_UPDATE, FLAG_SYN, 2, 0))
        half = INITIAL_WINDOW // 2
        wb.write(encode_header(TYPE_DATA, 0, 2, half - 1) + b"a" * (half - 1))
        await wb.drain()
        stream = await s.accept()
        assert await rb.readexactly(12) == encode_header(TYPE_WINDOW_UPDATE, FLAG_ACK, 2, 0)
        got = 0
        while got < half - 1:
            got += len(await stream.read())
        with pytest.raises(TimeoutError):  # one byte short of half: no update yet
            await asyncio.wait_for(rb.readexactly(12), 0.2)
        wb.write(encode_header(TYPE_DATA, 0, 2, 1) + b"b")
        await wb.drain()
        assert await stream.read() == b"b"
        assert await asyncio.wait_for(rb.readexactly(12), 5) == encode_header(
            TYPE_WINDOW_UPDATE, 0, 2, half
        )

    asyncio.run(main())


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.binary(min_size=1, max_size=70_000)),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 300_000),
)
def test_interleaved_writes_on_several_streams_arrive_intact(writes, big):
    # One write larger than the whole window makes flow control part of every example.
    writes = [*writes, (0, b"B" * big)]

    async def main():
        client, server = await _pair()
        streams = [client.open_stream() for _ in range(3)]
        received: dict[int, bytes] = {}

        async def drain_one() -> None:
            peer = await server.accept()
            buf = bytearray()
            while chunk := await peer.read(1000):
                buf += chunk
            received[peer.stream_id] = bytes(buf)

        readers = [asyncio.create_task(drain_one()) for _ in range(3)]
        for idx, data in writes:  # may exceed a window: the readers must keep up
            await asyncio.wait_for(streams[idx].write(data), 10)
        for st_ in streams:
            await st_.close_write()
        await asyncio.wait_for(asyncio.gather(*readers), 10)
        for i, st_ in enumerate(streams):
            expected = b"".join(d for idx, d in writes if idx == i)
            assert received[st_.stream_id] == expected
        await client.close()
        await server.close()

    asyncio.run(main())
