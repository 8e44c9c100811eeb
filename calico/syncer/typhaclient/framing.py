"""Length-prefixed frames: a 4-byte big-endian payload length, then the payload.

A payload is one msgpack message (``messages``), or — once the server announced it with a
``DecoderRestart`` — that message compressed as a raw snappy block. Only server-to-client
frames are ever compressed. A reader refuses a frame longer than its cap before reading it,
so garbage or a hostile peer cannot make it allocate: the server reads at most 1 MiB per client
message (upstream's cap), the client allows large snapshot chunks.
"""

from __future__ import annotations

import socket
import struct

import cramjam

from calico.syncer.typhaclient.messages import (
    COMPRESSION_SNAPPY,
    Message,
    ProtocolError,
    decode,
    encode,
)

HEADER = struct.Struct(">I")
MAX_INBOUND_SERVER = 1 << 20  # client -> server messages (upstream maxInboundMessageBytes)
MAX_INBOUND_CLIENT = 256 << 20  # server -> client frames (snapshot chunks of 1000 KVs)
COMPRESSIONS = (COMPRESSION_SNAPPY,)


class FrameTooLargeError(ProtocolError):
    pass


def compress(payload: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(payload))


def decompress(payload: bytes) -> bytes:
    try:
        return bytes(cramjam.snappy.decompress_raw(payload))
    except Exception as exc:  # cramjam.DecompressionError and friends
        raise ProtocolError(f"undecodable compressed frame: {exc}") from None


def frame(payload: bytes, compressed: bool = False) -> bytes:
    """One frame around an already-encoded payload."""
    if compressed:
        payload = compress(payload)
    return HEADER.pack(len(payload)) + payload


def frame_message(msg: Message, compressed: bool = False) -> bytes:
    return frame(encode(msg), compressed)


def check_length(header: bytes, cap: int) -> int:
    (length,) = HEADER.unpack(header)
    if length > cap:
        raise FrameTooLargeError(f"frame of {length} bytes exceeds the {cap}-byte limit")
    return length


def decode_payload(payload: bytes, compressed: bool) -> Message:
    return decode(decompress(payload) if compressed else payload)


class SocketFrameReader:
    """Blocking frame reader over a socket (the client side; the server uses asyncio streams)."""

    def __init__(self, sock: socket.socket, cap: int = MAX_INBOUND_CLIENT) -> None:
        self._sock = sock
        self._cap = cap
        self.compressed = False

    def _exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by peer")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_payload(self) -> bytes:
        length = check_length(self._exact(HEADER.size), self._cap)
        return self._exact(length) if length else b""

    def read(self) -> Message:
        return decode_payload(self.read_payload(), self.compressed)
