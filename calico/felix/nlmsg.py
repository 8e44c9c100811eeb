"""Netlink framing for Felix's raw sockets: the message header, attributes, and one reply walk.

Why: the rtnetlink batch writer (``calico.felix.nlbatch``: acks of a pipelined batch, dumps)
and the nfnetlink transaction sender (``calico.felix.nftables.netlink``) each walked reply
buffers by hand. Here is the one walk, in three layers so that each can be tested alone:
:func:`split` cuts one datagram into :class:`Message` s, :func:`receive` reads datagrams off a
socket with a timeout, and :func:`dump_replies` / :func:`acks` give a dump's or a batch's
answer out of any message stream (design/felix-dataplane.md "Netlink framing").

A netlink datagram holds whole messages, each 4-byte aligned. A header whose length is below
the header's own size ends the walk (nothing after it can be framed); a message cut short by
the end of the buffer (a datagram truncated by a small receive buffer) is given with the body
there is, so that an error ack's code, which comes first, is still read, and ends the walk.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
from collections.abc import Collection, Iterable, Iterator
from typing import NamedTuple

NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_MULTI, NLM_F_ACK = 0x1, 0x2, 0x4
NLA_F_NESTED = 0x8000
HDR = struct.Struct("=IHHII")  # length, type, flags, seq, port id
_RTA = struct.Struct("=HH")
_ERRNO = struct.Struct("=i")


def message(msg_type: int, flags: int, seq: int, body: bytes = b"") -> bytes:
    """One message: the header (port id 0, the kernel's) and ``body``."""
    return HDR.pack(HDR.size + len(body), msg_type, flags, seq, 0) + body


def attr(kind: int, data: bytes) -> bytes:
    """One attribute, padded to 4 bytes."""
    length = _RTA.size + len(data)
    return _RTA.pack(length, kind) + data + b"\0" * (-length % 4)


def parse_attrs(data: bytes, offset: int) -> dict[int, bytes]:
    """Attributes from ``offset`` to the end of ``data`` (last one of a type wins; the walk
    stops at a truncated or bogus length)."""
    out: dict[int, bytes] = {}
    end = len(data)
    while offset + _RTA.size <= end:
        length, kind = _RTA.unpack_from(data, offset)
        if length < _RTA.size:
            break
        out[kind & 0x3FFF] = data[offset + _RTA.size : offset + length]
        offset += (length + 3) & ~3
    return out


class Message(NamedTuple):
    msg_type: int
    flags: int
    seq: int
    body: bytes

    @property
    def error(self) -> int:
        """An NLMSG_ERROR's errno (positive; 0 for an ack; EPROTO when the code is cut off).
        Only meaningful for NLMSG_ERROR."""
        if len(self.body) < _ERRNO.size:
            return errno.EPROTO
        return -_ERRNO.unpack_from(self.body, 0)[0]


def split(data: bytes) -> Iterator[Message]:
    """The messages of one datagram, in order."""
    off, size = 0, len(data)
    while off + HDR.size <= size:
        length, msg_type, flags, seq, _pid = HDR.unpack_from(data, off)
        if length < HDR.size:
            return
        yield Message(msg_type, flags, seq, data[off + HDR.size : off + length])
        off += (length + 3) & ~3


def receive(sock: socket.socket, timeout: float, bufsize: int = 1 << 20) -> Iterator[Message]:
    """Every message arriving on ``sock``, datagram by datagram, without end; raises
    ``TimeoutError`` when nothing arrives for ``timeout`` seconds, and the socket's own
    ``OSError`` s. Stop iterating to stop reading: the rest of the datagram being walked is
    dropped (a caller that needs later replies keeps iterating)."""
    while True:
        if not select.select([sock], [], [], timeout)[0]:
            raise TimeoutError(errno.ETIMEDOUT, "no netlink reply")
        yield from split(sock.recv(bufsize))


def dump_replies(messages: Iterable[Message], seq: int, what: str) -> Iterator[Message]:
    """The answer to dump request ``seq``: its messages up to its NLMSG_DONE (or the one
    message, when it is not flagged NLM_F_MULTI); an NLMSG_ERROR for it raises ``OSError``
    with the kernel's errno (``what: strerror``). Other sequence numbers are skipped: late
    replies to an earlier request."""
    for m in messages:
        if m.seq != seq:
            continue
        if m.msg_type == NLMSG_DONE:
            return
        if m.msg_type == NLMSG_ERROR:
            code = m.error
            if code:
                raise OSError(code, f"{what}: {os.strerror(code)}")
            continue
        yield m
        if not m.flags & NLM_F_MULTI:
            return


def acks(messages: Iterable[Message], seqs: Collection[int]) -> Iterator[tuple[int, int]]:
    """``(seq, errno)`` of the first ack of each of ``seqs``, in arrival order, until every one
    is acked (errno 0: done). Messages of other sequence numbers, repeats and anything but
    NLMSG_ERROR are skipped."""
    pending = set(seqs)
    if not pending:
        return
    for m in messages:
        if m.msg_type == NLMSG_ERROR and m.seq in pending:
            pending.discard(m.seq)
            yield m.seq, m.error
            if not pending:
                return


__all__ = [
    "HDR",
    "Message",
    "acks",
    "attr",
    "dump_replies",
    "message",
    "parse_attrs",
    "receive",
    "split",
]
