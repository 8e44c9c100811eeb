"""Set and map element deltas, and the batch that carries a whole transaction, over nfnetlink.

Why: libnftables 1.0.6 answers any element command by first dumping the members of every
interval set in the table (one netlink dump per set), so a 3-member add in a table with 1,000
sets costs ~100x a chain rewrite. An element-only delta needs none of that: we already know the
set types, so we encode the elements ourselves and send them as one nfnetlink batch, which the
kernel commits atomically, exactly like a libnftables transaction.

Encoding (what libnftables itself sends, checked against it in tests): keys are the datatype's
wire bytes, concatenation fields padded to 4 bytes; an interval-set member is a start element
plus an end element (flag ``INTERVAL_END``) one past its last address, or, when it runs to the
top of the address space, a start element marked open in its userdata. Only the types below are
encoded; anything else raises :class:`Unencodable` and the caller falls back to libnftables.
Chain and rule messages join the same batch with bodies encoded by ``nlrules.py``.
"""

from __future__ import annotations

import bisect
import errno
import itertools
import os
import select
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from calico import nlmsg
from calico.felix.nftables.elements import Element, SetType, Verdict
from calico.nlmsg import NLA_F_NESTED, NLM_F_ACK, NLM_F_REQUEST, attr

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END = 0x10, 0x11
NFT_MSG_NEWSETELEM, NFT_MSG_DELSETELEM = 12, 14
NLM_F_CREATE = 0x400
NLM_F_DUMP = 0x300
DUMP_RECV_BYTES = 1 << 20  # a dump's datagrams are at most the receive buffer (>= 1 MiB here)
FAMILIES = {"inet": 1, "ip": 2, "ip6": 10, "bridge": 7, "netdev": 5, "arp": 3}
# Attribute numbers (linux/netfilter/nf_tables.h).
LIST_TABLE, LIST_SET, LIST_ELEMENTS = 1, 2, 3
LIST_ELEM = 1
ELEM_KEY, ELEM_DATA, ELEM_FLAGS, ELEM_USERDATA = 1, 2, 3, 6
DATA_VALUE, DATA_VERDICT = 1, 2
VERDICT_CODE, VERDICT_CHAIN = 1, 2
INTERVAL_END = 1
# libnftnl's userdata TLV "element flags" = "interval open" (no end element follows).
OPEN_INTERVAL_UDATA = bytes([1, 4]) + struct.pack("=I", 1)
VERDICT_CODES = {"accept": 1, "drop": 0, "continue": -1, "jump": -3, "goto": -4, "return": -5}
IFNAMSIZ = 16
# A batch well under the kernel's default netlink receive buffer.
MAX_BATCH_BYTES = 128 * 1024
# Socket buffers are grown to fit each batch, as libnftables does (``SO_*BUFFORCE`` needs
# CAP_NET_ADMIN, which Felix has; without it the sysctl caps apply). The kernel takes a batch
# only whole, in one sendmsg no longer than the send buffer minus 32 bytes, and queues every
# ack before we read one: an ack costs ~1 KiB of receive buffer (skb truesize).
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33
MIN_SOCKET_BUFFER = 1 << 20
ACK_BUFFER_BYTES = 1024


class Unencodable(ValueError):
    """An element or type this encoder does not handle (the caller uses libnftables)."""


# ---- keys ---------------------------------------------------------------------------------------


def _addr_bytes(text: str) -> bytes:
    family = socket.AF_INET6 if ":" in text else socket.AF_INET
    return socket.inet_pton(family, text)


def _scalar_key(value: Element, typ: str) -> bytes:
    if typ in ("ipv4_addr", "ipv6_addr"):
        if not isinstance(value, str) or "/" in value or "-" in value:
            raise Unencodable(f"{value!r} is not a single {typ}")
        raw = _addr_bytes(value)
        if len(raw) != (4 if typ == "ipv4_addr" else 16):
            raise Unencodable(f"{value!r} is not an {typ}")
        return raw
    if typ == "inet_proto" and isinstance(value, int) and 0 <= value <= 0xFF:
        return bytes([value])
    if typ == "inet_service" and isinstance(value, int) and 0 <= value <= 0xFFFF:
        return struct.pack("!H", value)
    if typ == "ifname" and isinstance(value, str):
        raw = value.encode()
        if not raw or len(raw) >= IFNAMSIZ or b"\0" in raw or "*" in value:
            raise Unencodable(f"bad interface name {value!r}")
        return raw.ljust(IFNAMSIZ, b"\0")
    raise Unencodable(f"cannot encode {value!r} as {typ}")


def _pad4(raw: bytes) -> bytes:
    return raw + b"\0" * (-len(raw) % 4)


def encode_key(value: Element, typ: SetType) -> bytes:
    """Wire bytes of one non-interval key (concatenations field by field, 4-byte aligned)."""
    if isinstance(typ, tuple):
        if not isinstance(value, tuple) or len(value) != len(typ):
            raise Unencodable(f"{value!r} does not match {typ!r}")
        return b"".join(_pad4(_scalar_key(v, t)) for v, t in zip(value, typ, strict=True))
    return _scalar_key(value, typ)


def _address_span(value: Element, typ: SetType) -> tuple[int, int, int]:
    """(first, last, width in bytes) of an interval-set address member."""
    if typ not in ("ipv4_addr", "ipv6_addr") or not isinstance(value, str):
        raise Unencodable(f"interval sets of {typ!r} are not encoded here")
    width = 4 if typ == "ipv4_addr" else 16
    if "/" in value:
        addr, length_text = value.split("/")
        first, length = int.from_bytes(_addr_bytes(addr), "big"), int(length_text)
        last = first | ((1 << (width * 8 - length)) - 1)
    elif "-" in value:
        lo, hi = value.split("-")
        first, last = (int.from_bytes(_addr_bytes(x), "big") for x in (lo, hi))
    else:
        first = last = int.from_bytes(_addr_bytes(value), "big")
    if len(_addr_bytes(value.split("/")[0].split("-")[0])) != width or first > last:
        raise Unencodable(f"{value!r} is not a {typ} span")
    return first, last, width


# ---- messages -----------------------------------------------------------------------------------


def nested(kind: int, *parts: bytes) -> bytes:
    return attr(kind | NLA_F_NESTED, b"".join(parts))


def _elem(key: bytes, flags: int = 0, data: Verdict | None = None, udata: bytes = b"") -> bytes:
    parts = [nested(ELEM_KEY, attr(DATA_VALUE, key))]
    if data is not None:
        kind, target = data
        verdict = [attr(VERDICT_CODE, struct.pack("!i", VERDICT_CODES[kind]))]
        if target:
            verdict.append(attr(VERDICT_CHAIN, target.encode() + b"\0"))
        parts.append(nested(ELEM_DATA, nested(DATA_VERDICT, *verdict)))
    if flags:
        parts.append(attr(ELEM_FLAGS, struct.pack("!I", flags)))
    if udata:
        parts.append(attr(ELEM_USERDATA, udata))
    return nested(LIST_ELEM, *parts)


def set_member_elems(value: Element, typ: SetType, interval: bool) -> list[bytes]:
    """The netlink elements standing for one set member."""
    if not interval:
        return [_elem(encode_key(value, typ))]
    first, last, width = _address_span(value, typ)
    start = first.to_bytes(width, "big")
    if last == (1 << (width * 8)) - 1:
        return [_elem(start, udata=OPEN_INTERVAL_UDATA)]
    return [_elem(start), _elem((last + 1).to_bytes(width, "big"), INTERVAL_END)]


class _Template:
    """An element's bytes around its key: ``_elem`` of a marker key, split at the marker, so
    encoding one member is two concatenations (``member_elems``)."""

    def __init__(self, key_len: int, flags: int = 0) -> None:
        marker = bytes([0xA5]) * key_len
        whole = _elem(marker, flags)
        assert whole.count(marker) == 1
        self.head, _, self.tail = whole.partition(marker)

    def __call__(self, key: bytes) -> bytes:
        return self.head + key + self.tail


_ADDR_WIDTH = {"ipv4_addr": (socket.AF_INET, 4), "ipv6_addr": (socket.AF_INET6, 16)}
_TEMPLATES = {
    width: (_Template(width), _Template(width, INTERVAL_END)) for width in (4, 12, 16, 24)
}
_PAD3 = b"\0\0\0"


def member_elems(members: Iterable[Element], typ: SetType, interval: bool) -> list[bytes]:
    """``set_member_elems`` of every member, in order, with the common members (a host
    address, ``address . proto . port`` with integer proto and port) encoded from a template;
    anything else goes through ``set_member_elems`` itself, errors included. Why: a first
    apply at 250,000 remote endpoints encodes hundreds of thousands of members
    (design/performance.md "Felix's first apply (session 6)")."""
    out: list[bytes] = []
    concat = isinstance(typ, tuple)
    spec = _ADDR_WIDTH.get(typ[0] if concat else typ)  # type: ignore[index, arg-type]
    if spec is None or (concat and (interval or typ[1:] != ("inet_proto", "inet_service"))):
        for m in members:
            out += set_member_elems(m, typ, interval)
        return out
    family, width = spec
    pton = socket.inet_pton
    append = out.append
    if concat:
        plain, _ = _TEMPLATES[width + 8]
        head = plain.head
        # The bytes after the address, per (proto, port): a set's members share a few.
        tails: dict[tuple[int, int], bytes] = {}
        for m in members:
            try:
                addr, proto, port = m  # type: ignore[misc]
                if type(proto) is not int or type(port) is not int or "/" in addr or "-" in addr:
                    raise ValueError
                tail = tails.get((proto, port))
                if tail is None:
                    tail = proto.to_bytes(1, "big") + _PAD3 + port.to_bytes(2, "big") + b"\0\0"
                    tail = tails[proto, port] = tail + plain.tail
                append(head + pton(family, addr) + tail)
            except (ValueError, TypeError, OSError, OverflowError):
                out += set_member_elems(m, typ, interval)
        return out
    start, end = _TEMPLATES[width]
    start_head, start_tail, end_head, end_tail = start.head, start.tail, end.head, end.tail
    top = (1 << (width * 8)) - 1
    for m in members:
        try:
            if type(m) is not str or "/" in m or "-" in m:
                raise ValueError
            raw = pton(family, m)
        except (ValueError, OSError):
            out += set_member_elems(m, typ, interval)
            continue
        if not interval:
            append(start_head + raw + start_tail)
            continue
        value = int.from_bytes(raw, "big")
        if value == top:
            out += set_member_elems(m, typ, interval)  # the open interval: rare
            continue
        append(start_head + raw + start_tail)
        append(end_head + (value + 1).to_bytes(width, "big") + end_tail)
    return out


def map_elem(key: Element, key_type: SetType, verdict: Verdict | None) -> bytes:
    """A verdict-map element (``verdict`` None when deleting: the key alone identifies it)."""
    if verdict is not None and verdict[0] not in VERDICT_CODES:
        raise Unencodable(f"verdict {verdict!r}")
    return _elem(encode_key(key, key_type), data=verdict)


# ---- set and map creation ----------------------------------------------------------------------

# Attribute numbers of a NEWSET message (linux/netfilter/nf_tables.h) and set flags.
SET_NAME, SET_FLAGS, SET_KEY_TYPE, SET_KEY_LEN = 2, 3, 4, 5
SET_DATA_TYPE, SET_DATA_LEN, SET_ID, SET_USERDATA = 6, 7, 10, 13
SET_F_INTERVAL, SET_F_MAP = 0x4, 0x8
DATA_TYPE_VERDICT = 0xFFFFFF00
# nft datatype ids and key widths of the scalar types Felix's sets and maps use.
_DATATYPES = {"ipv4_addr": (7, 4), "ipv6_addr": (8, 16), "inet_proto": (12, 1),
              "inet_service": (13, 2), "ifname": (41, IFNAMSIZ)}  # fmt: skip
_TYPE_BITS = 6  # a concatenation's type id: the fields' ids, 6 bits apart


def _udata(kind: int, value: bytes) -> bytes:
    return bytes([kind, len(value)]) + value


def _u32_host(value: int) -> bytes:
    return struct.pack("=I", value)


# The set userdata libnftables 1.0.6 sends for each of the set shapes we create (captured with
# strace from its JSON path): key byte order big-endian (2) for an address key; for the
# address . proto . port concatenation, byte order 0 and the TLV it adds for the concatenation;
# for an ifname : verdict map, key order host (1), data order 0 and "data interval" 0.
_ADDR_SET_UDATA = _udata(0, _u32_host(2))
_CONCAT_SET_UDATA = _udata(0, _u32_host(0)) + _udata(3, _udata(0, _u32_host(13)) + _udata(1, b""))
_VERDICT_MAP_UDATA = _udata(0, _u32_host(1)) + _udata(1, _u32_host(0)) + _udata(6, _u32_host(0))
_CONCAT_FIELDS = ("inet_proto", "inet_service")


def set_body(name: str, typ: SetType, interval: bool, is_map: bool, set_id: int) -> bytes:
    """The attributes of a NEWSET message after the table, as libnftables sends them for the
    set shapes Felix creates: address sets (plain or interval), ``address . inet_proto .
    inet_service`` sets and ``ifname : verdict`` maps. Anything else is :class:`Unencodable`."""
    if isinstance(typ, tuple):
        if interval or is_map or len(typ) != 3 or typ[1:] != _CONCAT_FIELDS:
            raise Unencodable(f"set type {typ!r}")
        if typ[0] not in ("ipv4_addr", "ipv6_addr"):
            raise Unencodable(f"set type {typ!r}")
        type_id, key_len = 0, 0
        for t in typ:
            tid, width = _DATATYPES[t]
            type_id, key_len = (type_id << _TYPE_BITS) | tid, key_len + width + (-width % 4)
        flags, udata = 0, _CONCAT_SET_UDATA
    elif is_map:
        if typ != "ifname" or interval:
            raise Unencodable(f"map key type {typ!r}")
        (type_id, key_len), flags, udata = _DATATYPES[typ], SET_F_MAP, _VERDICT_MAP_UDATA
    elif typ in ("ipv4_addr", "ipv6_addr"):
        (type_id, key_len), udata = _DATATYPES[typ], _ADDR_SET_UDATA
        flags = SET_F_INTERVAL if interval else 0
    else:
        raise Unencodable(f"set type {typ!r}")
    if not isinstance(name, str) or not name:
        raise Unencodable(f"set name {name!r}")
    parts = [attr(SET_NAME, name.encode() + b"\0")]
    parts += [attr(k, struct.pack("!I", v)) for k, v in
              ((SET_FLAGS, flags), (SET_KEY_TYPE, type_id), (SET_KEY_LEN, key_len))]  # fmt: skip
    if is_map:
        parts.append(attr(SET_DATA_TYPE, struct.pack("!I", DATA_TYPE_VERDICT)))
        parts.append(attr(SET_DATA_LEN, struct.pack("!I", 0)))
    parts.append(attr(SET_ID, struct.pack("!I", set_id)))
    parts.append(attr(SET_USERDATA, udata))
    return b"".join(parts)


SET_DESC, SET_DESC_SIZE = 9, 1
SET_F_ANONYMOUS_CONSTANT = 0x3
ELEMENT_LIST_SET_ID = 4


def anonymous_set_bodies(
    name: str, key_type: int, key_len: int, keys: Iterable[bytes], udata: bytes, set_id: int
) -> tuple[bytes, bytes]:
    """The NEWSET and NEWSETELEM bodies (after the table) of a rule's inline constant set, as
    libnftables sends them: named ``__set%d`` (the kernel numbers it), found by ``set_id``."""
    keys = list(keys)
    name_attr = attr(SET_NAME, name.encode() + b"\0")
    newset = b"".join([
        name_attr,
        attr(SET_FLAGS, struct.pack("!I", SET_F_ANONYMOUS_CONSTANT)),
        attr(SET_KEY_TYPE, struct.pack("!I", key_type)),
        attr(SET_KEY_LEN, struct.pack("!I", key_len)),
        attr(SET_ID, struct.pack("!I", set_id)),
        nested(SET_DESC, attr(SET_DESC_SIZE, struct.pack("!I", len(keys)))),
        attr(SET_USERDATA, udata),
    ])  # fmt: skip
    elems = name_attr + attr(ELEMENT_LIST_SET_ID, struct.pack("!I", set_id))
    elems += nested(LIST_ELEMENTS, *(_elem(k) for k in keys))
    return newset, elems


# Object messages a whole transaction may carry besides elements, with their flags and what an
# error names (the body after the table attribute is encoded by the caller, nlrules.py).
NFT_MSG_NEWTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_DELCHAIN = 0, 3, 5
NFT_MSG_NEWRULE, NFT_MSG_DELRULE, NFT_MSG_NEWSET, NFT_MSG_DELSET = 6, 8, 9, 11
NLM_F_APPEND = 0x800
_OBJECT_MESSAGES = {
    NFT_MSG_NEWTABLE: (NLM_F_CREATE, "adding table"),
    NFT_MSG_NEWCHAIN: (NLM_F_CREATE, "adding chain"),
    NFT_MSG_DELCHAIN: (0, "deleting chain"),
    NFT_MSG_NEWRULE: (NLM_F_CREATE | NLM_F_APPEND, "adding a rule to"),
    NFT_MSG_DELRULE: (0, "flushing chain"),
    NFT_MSG_NEWSET: (NLM_F_CREATE, "adding set/map"),
    NFT_MSG_NEWSETELEM: (NLM_F_CREATE, "adding elements of"),  # an anonymous set's, by id
    NFT_MSG_DELSET: (0, "deleting set/map"),
}
_ELEMENT_KINDS = (NFT_MSG_NEWSETELEM, NFT_MSG_DELSETELEM)


ELEMENT_MESSAGE_BYTES = MAX_BATCH_BYTES // 4


def element_chunks(elems: list[bytes]) -> list[list[bytes]]:
    """``elems`` cut into runs, each the longest that keeps its bytes within
    ``ELEMENT_MESSAGE_BYTES`` (at least one element): the cut points are found by bisecting
    the running byte count, so a run costs a slice, not a Python step per element (a first
    apply at 250,000 endpoints has ~270,000 elements)."""
    ends = list(itertools.accumulate(map(len, elems)))
    chunks: list[list[bytes]] = []
    start, base = 0, 0
    while start < len(elems):
        stop = max(bisect.bisect_right(ends, base + ELEMENT_MESSAGE_BYTES, lo=start), start + 1)
        chunks.append(elems[start:stop])
        start, base = stop, ends[stop - 1]
    return chunks


@dataclass
class ElementBatch:
    """The messages of one transaction, in order: element messages (``add``) and, for a whole
    transaction, table/chain/rule/set messages (``add_object``) with pre-encoded bodies."""

    family: str
    table: str
    # (message kind, set or object name, element list | encoded body)
    messages: list[tuple[int, str, list[bytes] | bytes]] = field(default_factory=list)

    def add(self, delete: bool, set_name: str, elems: Iterable[bytes]) -> None:
        """Element messages of at most ``ELEMENT_MESSAGE_BYTES`` of elements each (an
        element bigger than that alone), cut where ``element_chunks`` says."""
        kind = NFT_MSG_DELSETELEM if delete else NFT_MSG_NEWSETELEM
        elems = elems if isinstance(elems, list) else list(elems)
        for chunk in element_chunks(elems):
            self.messages.append((kind, set_name, chunk))

    def add_object(self, kind: int, name: str, body: bytes) -> None:
        """A table/chain/rule/set message; ``body`` is its attributes after the table's."""
        if kind not in _OBJECT_MESSAGES:
            raise Unencodable(f"message kind {kind}")
        self.messages.append((kind, name, body))

    def __bool__(self) -> bool:
        return bool(self.messages)

    def describe(self, index: int) -> str:
        kind, name, _ = self.messages[index]
        if kind in _ELEMENT_KINDS:
            verb = "deleting" if kind == NFT_MSG_DELSETELEM else "adding"
            return f"{verb} elements of {name}"
        return f"{_OBJECT_MESSAGES[kind][1]} {name}"

    def encode(self, seq: int) -> tuple[bytes, list[int]]:
        """The whole batch (begin ``seq``, messages, end) and the messages' seqs. Only the
        last message asks for an ack (design/felix-nftables.md "Transactions over netlink")."""
        if self.family not in FAMILIES:
            raise Unencodable(f"family {self.family!r}")
        fam = FAMILIES[self.family]
        # Every message's nfgenmsg header and table attribute are the same: packed once.
        prefix = struct.pack("=BBH", fam, 0, 0) + attr(LIST_TABLE, self.table.encode() + b"\0")
        header, header_size = nlmsg.HDR.pack, nlmsg.HDR.size + len(prefix)
        out = [_nlmsg(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, seq, 0, NFNL_SUBSYS_NFTABLES)]
        last = len(self.messages)
        seqs = list(range(seq + 1, seq + last + 1))
        for i, (kind, name, payload) in enumerate(self.messages, start=1):
            ack = NLM_F_ACK if i == last else 0
            if isinstance(payload, bytes):
                body = payload
                flags = NLM_F_REQUEST | ack | _OBJECT_MESSAGES[kind][0]
            else:
                body = attr(LIST_SET, name.encode() + b"\0") + nested(LIST_ELEMENTS, *payload)
                create = NLM_F_CREATE if kind == NFT_MSG_NEWSETELEM else 0
                flags = NLM_F_REQUEST | ack | create
            msg_type = (NFNL_SUBSYS_NFTABLES << 8) | kind
            out.append(header(header_size + len(body), msg_type, flags, seq + i, 0))
            out.append(prefix)
            out.append(body)
        out.append(_nlmsg(NFNL_MSG_BATCH_END, NLM_F_REQUEST, seq + len(seqs) + 1, 0,
                          NFNL_SUBSYS_NFTABLES))  # fmt: skip
        return b"".join(out), seqs


def _nlmsg(
    msg_type: int, flags: int, seq: int, family: int, res_id: int, body: bytes = b""
) -> bytes:
    payload = struct.pack("=BBH", family, 0, socket.htons(res_id)) + body
    return nlmsg.message(msg_type, flags, seq, payload)


# ---- transport ----------------------------------------------------------------------------------


class NetlinkElements:
    """Sends :class:`ElementBatch` es on one nfnetlink socket, opened on first use (so it lives
    in the network namespace of the thread that first sends, like a libnftables handle) and
    kept: closing a netlink socket waits for an RCU grace period (~15 ms measured under load).
    Not thread-safe, like the table that owns it."""

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._seq = (os.getpid() & 0xFFFF) << 16
        self._sock: socket.socket | None = None
        # Replies may be left unread only after a refused batch (its answer stops at the first
        # error): only then is the socket drained before the next batch, which saves a
        # syscall and a GIL hand-back per batch (batch_refusal skips other seqs anyway).
        self._stale = False

    def send(self, batch: ElementBatch) -> str | None:
        """Commit ``batch`` atomically; None on success, else the kernel's error text."""
        if not batch:
            return None
        self._seq = (self._seq + len(batch.messages) + 2) & 0x7FFFFFFF
        data, seqs = batch.encode(self._seq)
        sock = self._socket()
        self._fit(sock, len(data), len(seqs))
        try:
            if self._stale:
                _drain(sock)  # replies a refused batch left behind
                self._stale = False
            sock.sendall(data)
            error = _read_acks(sock, seqs, batch, self.timeout)
        except OSError as exc:
            self.close()
            return f"netlink: {exc}"
        if error is not None:
            self._stale = True
            if error.startswith("no netlink ack"):
                self.close()  # a late reply must not be read as the next batch's
        return error

    def dump(self, kind: int, family: str, body: bytes, multi: bool = True) -> list[bytes]:
        """The replies to one nf_tables GET request (a dump when ``multi``), bodies with their
        nfgenmsg header; ``OSError`` with the kernel's errno if it refuses. For
        ``nlreadback.read_table``: a restart's readback without libnftables."""
        if family not in FAMILIES:
            raise Unencodable(f"family {family!r}")
        sock = self._socket()
        if self._stale:
            _drain(sock)
            self._stale = False
        self._seq = (self._seq + 1) & 0x7FFFFFFF
        flags = NLM_F_REQUEST | (NLM_F_DUMP if multi else 0)  # a GET's error comes unasked
        msg_type = (NFNL_SUBSYS_NFTABLES << 8) | kind
        request = _nlmsg(msg_type, flags, self._seq, FAMILIES[family], 0, body)
        try:
            sock.sendall(request)
            replies = nlmsg.dump_replies(
                nlmsg.receive(sock, self.timeout, DUMP_RECV_BYTES), self._seq, "nftables dump"
            )
        except TimeoutError:
            self.close()  # a late reply must not be read as the next request's
            raise
        return [body for msg_type, body in replies if msg_type >> 8 == NFNL_SUBSYS_NFTABLES]

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
            sock.settimeout(self.timeout)
            sock.bind((0, 0))
            self._sock = sock
            self._fit(sock, MIN_SOCKET_BUFFER, 0)
        return self._sock

    def _fit(self, sock: socket.socket, data_bytes: int, acks: int) -> None:
        """Grow the buffers for a batch of ``data_bytes`` with ``acks`` acks; raises
        :class:`Unencodable` (nothing sent: the caller uses libnftables) if they cannot."""
        send = max(data_bytes + 4096, MIN_SOCKET_BUFFER)
        recv = max(acks * ACK_BUFFER_BYTES + 65536, MIN_SOCKET_BUFFER)
        for force, plain, want in (
            (SO_SNDBUFFORCE, socket.SO_SNDBUF, send),
            (SO_RCVBUFFORCE, socket.SO_RCVBUF, recv),
        ):
            if sock.getsockopt(socket.SOL_SOCKET, plain) >= want:
                continue  # the kernel reports twice what was set: this is the real size
            try:
                sock.setsockopt(socket.SOL_SOCKET, force, want)
            except PermissionError:
                sock.setsockopt(socket.SOL_SOCKET, plain, want)
            have = sock.getsockopt(socket.SOL_SOCKET, plain)
            if have < want:
                raise Unencodable(f"batch needs a {want}-byte socket buffer, have {have}")


def _drain(sock: socket.socket) -> None:
    while select.select([sock], [], [], 0)[0]:
        sock.recv(1 << 16)


def _read_acks(
    sock: socket.socket, seqs: list[int], batch: ElementBatch, timeout: float
) -> str | None:
    """Wait for the batch's answer: the first refused message's error (the kernel has rolled
    the whole batch back by the time it reports it), else the last message's ack."""
    try:
        refused = nlmsg.batch_refusal(nlmsg.receive(sock, timeout, 1 << 16), seqs[0], seqs[-1])
    except nlmsg.AckTimeout as e:
        return f"no netlink ack for {e.missing} message(s)"
    if refused is None:
        return None
    seq, code = refused
    what = "the batch" if seq < seqs[0] else batch.describe(seq - seqs[0])
    return f"{what}: {os.strerror(code)} ({errno.errorcode.get(code, str(-code))})"


__all__ = [
    "ElementBatch",
    "NetlinkElements",
    "Unencodable",
    "anonymous_set_bodies",
    "attr",
    "element_chunks",
    "encode_key",
    "map_elem",
    "member_elems",
    "nested",
    "set_body",
    "set_member_elems",
]
