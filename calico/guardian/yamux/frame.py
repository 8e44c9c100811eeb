"""yamux frame headers: 12 bytes, big-endian, exactly as hashicorp/yamux lays them out.

    version:u8  type:u8  flags:u16  stream_id:u32  length:u32

``length`` is the payload size for Data, the window delta for Window Update, the opaque value
for Ping and the error code for Go Away. Decoding rejects what hashicorp rejects (a version
other than 0, an unknown type) so the session can close with a clear reason.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

PROTOCOL_VERSION = 0
HEADER_SIZE = 12
INITIAL_WINDOW = 256 * 1024

TYPE_DATA = 0
TYPE_WINDOW_UPDATE = 1
TYPE_PING = 2
TYPE_GO_AWAY = 3
TYPE_NAMES = {
    TYPE_DATA: "Data",
    TYPE_WINDOW_UPDATE: "WindowUpdate",
    TYPE_PING: "Ping",
    TYPE_GO_AWAY: "GoAway",
}

FLAG_SYN = 0x1
FLAG_ACK = 0x2
FLAG_FIN = 0x4
FLAG_RST = 0x8

GO_AWAY_NORMAL = 0
GO_AWAY_PROTOCOL_ERROR = 1
GO_AWAY_INTERNAL_ERROR = 2

_STRUCT = struct.Struct(">BBHII")
MAX_U32 = 0xFFFFFFFF


class FrameError(ValueError):
    """A header the peer should never have sent; the session closes with this reason."""


@dataclass(frozen=True, slots=True)
class Header:
    type: int
    flags: int
    stream_id: int
    length: int
    version: int = PROTOCOL_VERSION

    def __str__(self) -> str:
        name = TYPE_NAMES.get(self.type, str(self.type))
        return (
            f"Vsn:{self.version} Type:{name} Flags:{self.flags:#x} "
            f"StreamID:{self.stream_id} Length:{self.length}"
        )


def encode_header(type_: int, flags: int, stream_id: int, length: int) -> bytes:
    """The 12 header bytes; raises ``struct.error`` for a field out of range."""
    return _STRUCT.pack(PROTOCOL_VERSION, type_, flags, stream_id, length)


def decode_header(data: bytes) -> Header:
    if len(data) != HEADER_SIZE:
        raise FrameError(f"yamux header must be {HEADER_SIZE} bytes, got {len(data)}")
    version, type_, flags, stream_id, length = _STRUCT.unpack(data)
    if version != PROTOCOL_VERSION:
        raise FrameError(f"invalid protocol version {version} (header bytes {data.hex()})")
    if type_ not in TYPE_NAMES:
        raise FrameError(f"invalid message type {type_} (header bytes {data.hex()})")
    return Header(type=type_, flags=flags, stream_id=stream_id, length=length, version=version)
