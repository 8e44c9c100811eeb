"""Netlink framing for raw sockets: the message header, attributes, and one reply walk.

Why: the rtnetlink batch writer (``calico.felix.nlbatch``: acks of a pipelined batch, dumps),
the nfnetlink transaction sender (``calico.felix.nftables.netlink``), Felix's interface
monitor and the CNI plugin's rtnetlink client (``calico.cni.rtnl``) each walked reply buffers
and packed attributes by hand. It sits at the ground floor, standard library only, because
Felix and the CNI plugin may not import each other. Here is the one walk, in three layers
so that each can be tested alone: :func:`split` cuts one datagram into messages,
:func:`receive` reads datagrams off a socket with a timeout, and :func:`dump_replies` /
:func:`refusals` / :func:`batch_refusal` give a dump's or a batch's answer out of any stream
of datagrams (design/felix-dataplane.md "Netlink framing").

A netlink datagram holds whole messages, each 4-byte aligned. A header whose length is below
the header's own size ends the walk (nothing after it can be framed); a message cut short by
the end of the buffer (a datagram truncated by a small receive buffer) is given with the body
there is, so that an error ack's code, which comes first, is still read, and ends the walk.
With ``strict=True`` (the CNI plugin, which reads only short replies to its own requests)
either case raises ``ValueError`` instead.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
from collections.abc import Collection, Iterable, Iterator

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


def parse_attrs(data: bytes, offset: int = 0, strict: bool = False) -> dict[int, bytes]:
    """Attributes from ``offset`` to the end of ``data`` (last one of a type wins, nested
    ones stay raw, the NLA_F_* bits are dropped from the type). A truncated or bogus length
    ends the walk, or with ``strict`` raises ``ValueError`` naming its offset from
    ``offset``."""
    out: dict[int, bytes] = {}
    start, end = offset, len(data)
    while offset + _RTA.size <= end:
        length, kind = _RTA.unpack_from(data, offset)
        if length < _RTA.size or (strict and offset + length > end):
            if strict:
                raise ValueError(f"malformed rtattr at offset {offset - start} (length {length})")
            break
        out[kind & 0x3FFF] = data[offset + _RTA.size : offset + length]
        offset += (length + 3) & ~3
    return out


# One message: (type, flags, seq, body). A plain tuple: a NamedTuple per message made a
# 10,000-route dump's walk ~1.6x slower (design/felix-dataplane.md "Netlink framing").
Message = tuple[int, int, int, bytes]


def error_code(body: bytes) -> int:
    """An NLMSG_ERROR body's errno (positive; 0 for an ack; EPROTO when the code is cut off)."""
    return -_ERRNO.unpack_from(body, 0)[0] if len(body) >= _ERRNO.size else errno.EPROTO


def split(data: bytes, strict: bool = False) -> list[Message]:
    """The messages of one datagram, in order (a list: cheaper than a generator per message,
    and a datagram is at most the receive size). With ``strict`` a bogus or cut-off length
    raises ``ValueError`` instead of ending the walk."""
    out: list[Message] = []
    append, unpack = out.append, HDR.unpack_from
    off, size = 0, len(data)
    while off + HDR.size <= size:
        length, msg_type, flags, seq, _pid = unpack(data, off)
        if length < HDR.size or (strict and off + length > size):
            if strict:
                raise ValueError(f"malformed netlink message at offset {off} (length {length})")
            break
        append((msg_type, flags, seq, data[off + HDR.size : off + length]))
        off += (length + 3) & ~3
    return out


def receive(sock: socket.socket, timeout: float, bufsize: int = 1 << 20) -> Iterator[bytes]:
    """Every datagram arriving on ``sock``, without end; raises ``TimeoutError`` when nothing
    arrives for ``timeout`` seconds, and the socket's own ``OSError`` s. Datagrams, not
    messages: a generator step per message was measurable on large dumps."""
    while True:
        if not select.select([sock], [], [], timeout)[0]:
            raise TimeoutError(errno.ETIMEDOUT, "no netlink reply")
        yield sock.recv(bufsize)


def dump_replies(datagrams: Iterable[bytes], seq: int, what: str) -> list[tuple[int, bytes]]:
    """(type, body) of each message answering dump request ``seq``, up to its NLMSG_DONE (or
    the one message, when it is not flagged NLM_F_MULTI); an NLMSG_ERROR for it raises
    ``OSError`` with the kernel's errno (``what: strerror``). Other sequence numbers are
    skipped: late replies to an earlier request. Reads no datagram past the one that ends the
    answer."""
    out: list[tuple[int, bytes]] = []
    append = out.append
    for data in datagrams:
        for msg_type, flags, mseq, body in split(data):
            if mseq != seq:
                continue
            if msg_type == NLMSG_DONE:
                return out
            if msg_type == NLMSG_ERROR:
                code = error_code(body)
                if code:
                    raise OSError(code, f"{what}: {os.strerror(code)}")
                continue
            append((msg_type, body))
            if not flags & NLM_F_MULTI:
                return out
    return out


class AckTimeout(TimeoutError):
    """Nothing arrived for the timeout while ``missing`` acks were still due."""

    def __init__(self, missing: int) -> None:
        super().__init__(errno.ETIMEDOUT, f"no netlink ack for {missing} message(s)")
        self.missing = missing


def refusals(datagrams: Iterable[bytes], seqs: Collection[int]) -> Iterator[tuple[int, int]]:
    """``(seq, errno)`` of each of ``seqs`` whose first ack is an error, in arrival order,
    until every one is answered; reads no datagram after the one with the last. Messages of
    other sequence numbers, repeats and anything but NLMSG_ERROR are skipped. A timeout of
    ``datagrams`` (``receive``) becomes :class:`AckTimeout` with the number still due.
    Successes are not yielded: a batch of 256 mostly succeeds, and a generator step per ack
    cost more than the walk."""
    pending = set(seqs)
    if not pending:
        return
    try:
        for data in datagrams:
            for msg_type, _flags, seq, body in split(data):
                if msg_type == NLMSG_ERROR and seq in pending:
                    pending.discard(seq)
                    code = error_code(body)
                    if code:
                        yield seq, code
                    if not pending:
                        return
    except TimeoutError:
        raise AckTimeout(len(pending)) from None


def batch_refusal(datagrams: Iterable[bytes], first: int, last: int) -> tuple[int, int] | None:
    """``(seq, errno)`` of the first refused message of an nfnetlink batch whose messages are
    ``first``..``last`` and only ``last`` asks for an ack; None when ``last`` is acked. Why
    one ack: the kernel reports every failing message of a batch, asked or not, carries on
    after an error and answers ``last`` in any case, all after the batch is processed; one
    ack per message cost a ``recv`` each. An error for ``first - 1`` (the batch's begin
    message: the kernel refused the batch as a whole) is returned too. Reads no datagram after
    the answer; a timeout of ``datagrams`` becomes :class:`AckTimeout` (one message due)."""
    try:
        for data in datagrams:
            for msg_type, _flags, seq, body in split(data):
                if msg_type != NLMSG_ERROR or not first - 1 <= seq <= last:
                    continue
                code = error_code(body)
                if code:
                    return seq, code
                if seq == last:
                    return None
    except TimeoutError:
        raise AckTimeout(1) from None
    return None


__all__ = [
    "HDR",
    "AckTimeout",
    "Message",
    "attr",
    "batch_refusal",
    "dump_replies",
    "error_code",
    "message",
    "parse_attrs",
    "receive",
    "refusals",
    "split",
]
