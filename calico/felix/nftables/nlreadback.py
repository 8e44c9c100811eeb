"""Read a table back as a :class:`KernelState` over netlink dumps, without libnftables.

Why: a restarted Felix reads its table back before diffing it, and through libnftables
(``list table`` JSON plus ``parse_listing``) that was 0.4-0.7 s of a 1.1 s restart at the
cold-start shape (design/performance.md "Restart: reading the table back over netlink
(session 7)"). The resync needs little of a table: per chain its hook spec, policy and its
rules' comments in order; per set and map its type, interval flag and members. That is read
here from GETTABLE, GETCHAIN, GETRULE, GETSET and one GETSETELEM dump per set; rule expressions
are never decoded (the hashes in their comments stand for them).

The result must equal ``parse_listing`` of the same table. Anything this decoder is not sure
libnftables would show the same way (another family or hook, bound chains, sets with timeouts,
expressions, element comments, types other than the ones Felix creates) raises
:class:`Undecodable`, and the caller reads the table through libnftables instead.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct
from collections.abc import Iterator
from typing import Protocol

from calico.felix.nftables.elements import Element, SetType, Verdict
from calico.felix.nftables.netlink import OPEN_INTERVAL_UDATA, attr
from calico.felix.nftables.state import (
    ChainState,
    HookSpec,
    KernelState,
    MapState,
    SetState,
    hash_from_comment,
)
from calico.nlmsg import parse_attrs

# nfnetlink message kinds (linux/netfilter/nf_tables.h).
GETTABLE, GETCHAIN, GETRULE, GETSET, GETSETELEM, GETGEN = 1, 4, 7, 10, 13, 16
GEN_ID = 1
TRIES = 3  # reads of a table that changed while it was dumped, before giving up
# NFTA_TABLE_*, NFTA_CHAIN_*, NFTA_HOOK_*, NFTA_RULE_*, NFTA_SET_*, NFTA_SET_ELEM_*.
TABLE_NAME = 1
CHAIN_TABLE, CHAIN_NAME, CHAIN_HOOK, CHAIN_POLICY, CHAIN_TYPE, CHAIN_FLAGS = 1, 3, 4, 5, 7, 10
HOOK_NUM, HOOK_PRIORITY, HOOK_DEV = 1, 2, 3
RULE_TABLE, RULE_CHAIN, RULE_USERDATA = 1, 2, 7
SET_TABLE, SET_NAME, SET_FLAGS, SET_KEY_TYPE, SET_KEY_LEN = 1, 2, 3, 4, 5
SET_DATA_TYPE, SET_TIMEOUT, SET_EXPR, SET_EXPRESSIONS = 6, 11, 17, 18
LIST_TABLE, LIST_SET, LIST_ELEMENTS, LIST_ELEM = 1, 2, 3, 1
ELEM_KEY, ELEM_DATA, ELEM_FLAGS, ELEM_USERDATA = 1, 2, 3, 6
DATA_VALUE, DATA_VERDICT, VERDICT_CODE, VERDICT_CHAIN = 1, 2, 1, 2
INTERVAL_END = 1
SET_F_ANONYMOUS, SET_F_INTERVAL, SET_F_MAP = 0x1, 0x4, 0x8
DATA_TYPE_VERDICT = 0xFFFFFF00
UDATA_RULE_COMMENT = 0
# What libnftables names the hooks of the families Felix uses, and chain policies.
_HOOKS = ("prerouting", "input", "forward", "output", "postrouting")
_HOOK_FAMILIES = frozenset({"inet", "ip", "ip6"})
_POLICIES = {0: "drop", 1: "accept"}
# nft datatype ids -> (name, wire width) of the key types Felix's sets and maps use.
_DATATYPES = {7: ("ipv4_addr", 4), 8: ("ipv6_addr", 16), 12: ("inet_proto", 1),
              13: ("inet_service", 2), 41: ("ifname", 16)}  # fmt: skip
_TYPE_BITS = 6
_VERDICTS = {1: "accept", 0: "drop", -1: "continue", -3: "jump", -4: "goto", -5: "return"}
_ELEM_KNOWN = frozenset({ELEM_KEY, ELEM_DATA, ELEM_FLAGS, ELEM_USERDATA})
_RTA = struct.Struct("=HH")
_U32, _S32 = struct.Struct("!I"), struct.Struct("!i")


class Undecodable(ValueError):
    """Something in the table this decoder does not read (the caller uses libnftables)."""


class Dumper(Protocol):
    """Answers one nfnetlink request (``NetlinkElements.dump``): the replies' bodies, each
    starting with its nfgenmsg header; ``OSError`` with the kernel's errno on refusal."""

    def dump(self, kind: int, family: str, body: bytes, multi: bool = True) -> list[bytes]: ...


# ---- reading ------------------------------------------------------------------------------------


def read_table(conn: Dumper, family: str, table: str) -> KernelState:
    """The state of ``family table`` as ``parse_listing`` would give it; an empty state when
    the table does not exist. Raises :class:`Undecodable` or ``OSError``. The ruleset's
    generation is read before and after, as libnftables does for its cache: the dumps are
    several requests, and a commit between them would give a picture no kernel ever held."""
    for _ in range(TRIES):
        gen = _generation(conn, family)
        state = _read_once(conn, family, table)
        if _generation(conn, family) == gen:
            return state
    raise Undecodable(f"the ruleset changed during each of {TRIES} reads")


def _generation(conn: Dumper, family: str) -> int:
    (body,) = conn.dump(GETGEN, family, b"", multi=False)
    return _U32.unpack(_attrs(body)[GEN_ID])[0]


def _read_once(conn: Dumper, family: str, table: str) -> KernelState:
    name = table.encode() + b"\0"
    try:
        conn.dump(GETTABLE, family, attr(TABLE_NAME, name), multi=False)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return KernelState()
        raise
    chains = conn.dump(GETCHAIN, family, b"")
    rules = conn.dump(GETRULE, family, attr(RULE_TABLE, name))
    sets = conn.dump(GETSET, family, attr(SET_TABLE, name))
    state = KernelState(table_exists=True)
    hooks = decode_chains(chains, family, table)
    hashes = decode_rule_hashes(rules, table)
    for chain, (hook, policy) in hooks.items():
        state.chains[chain] = ChainState(hook, policy, tuple(hashes.get(chain, ())))
    for set_name, typ, flags in decode_sets(sets, table):
        body = attr(LIST_TABLE, name) + attr(LIST_SET, set_name.encode() + b"\0")
        elems = conn.dump(GETSETELEM, family, body)
        if flags & SET_F_MAP:
            state.maps[set_name] = MapState(typ, decode_map_elements(elems, typ))
        else:
            interval = bool(flags & SET_F_INTERVAL)
            members = decode_set_elements(elems, typ, interval)
            state.sets[set_name] = SetState(typ, interval, members)
    return state


# ---- decoding (pure: tests feed captured or synthetic bodies) ------------------------------------


def _attrs(body: bytes) -> dict[int, bytes]:
    return parse_attrs(body, 4)  # after the nfgenmsg header


def _text(raw: bytes) -> str:
    try:
        return raw.split(b"\0", 1)[0].decode()
    except UnicodeDecodeError:
        raise Undecodable(f"name {raw!r} is not UTF-8") from None


def decode_chains(
    bodies: list[bytes], family: str, table: str
) -> dict[str, tuple[HookSpec | None, str | None]]:
    """Each chain of ``table``: its hook spec and policy (None, None for a regular chain)."""
    out: dict[str, tuple[HookSpec | None, str | None]] = {}
    for body in bodies:
        a = _attrs(body)
        if _text(a.get(CHAIN_TABLE, b"")) != table:
            continue
        if CHAIN_FLAGS in a and _U32.unpack(a[CHAIN_FLAGS])[0] & ~0x1:  # beyond "base"
            raise Undecodable("a chain with flags other than base (bound or hardware)")
        name = _text(a[CHAIN_NAME])
        if CHAIN_HOOK not in a:
            out[name] = (None, None)
            continue
        hook = parse_attrs(a[CHAIN_HOOK])
        num = _U32.unpack(hook[HOOK_NUM])[0]
        if family not in _HOOK_FAMILIES or num >= len(_HOOKS) or HOOK_DEV in hook:
            raise Undecodable(f"chain {name}: hook {num} of family {family}")
        policy = _POLICIES.get(_U32.unpack(a[CHAIN_POLICY])[0]) if CHAIN_POLICY in a else None
        if policy is None:
            raise Undecodable(f"chain {name}: no policy the decoder knows")
        prio = _S32.unpack(hook[HOOK_PRIORITY])[0]
        out[name] = (HookSpec(_text(a[CHAIN_TYPE]), _HOOKS[num], prio), policy)
    return out


def decode_rule_hashes(bodies: list[bytes], table: str) -> dict[str, list[str]]:
    """Per chain, the hash in each rule's comment, in rule order ("" for a foreign rule).

    The hot part of a readback (a rule per message, thousands): only the table, chain and
    userdata attributes are picked out, and chain names and comments are decoded once per
    distinct value (an endpoint chain's rules share them with every other of its shape)."""
    out: dict[str, list[str]] = {}
    want = table.encode() + b"\0"
    chains: dict[bytes, list[str]] = {}
    unpack = _RTA.unpack_from
    for body in bodies:
        tbl = chain = udata = b""
        off, end = 4, len(body)
        while off + 4 <= end:
            length, kind = unpack(body, off)
            if length < 4:
                break
            kind &= 0x3FFF
            if kind == RULE_TABLE:
                tbl = body[off + 4 : off + length]
            elif kind == RULE_CHAIN:
                chain = body[off + 4 : off + length]
            elif kind == RULE_USERDATA:
                udata = body[off + 4 : off + length]
            off += (length + 3) & ~3
        if tbl != want and _text(tbl) != table:
            continue
        hit = chains.get(chain)
        if hit is None:
            if not chain:
                raise Undecodable("a rule without its chain")
            hit = chains[chain] = out.setdefault(_text(chain), [])
        hit.append(hash_from_comment(rule_comment(udata)))
    return out


def rule_comment(udata: bytes) -> str | None:
    """The comment TLV of a rule's userdata (libnftnl's layout: type byte, length byte, value
    with its NUL), as libnftables reads it; None without one."""
    if udata[:1] == b"\0" and len(udata) == udata[1] + 2 and udata.endswith(b"\0"):
        return _text(udata[2:])  # the comment alone: every rule Felix writes
    comment, off = None, 0
    while off + 2 <= len(udata):
        kind, length = udata[off], udata[off + 1]
        value = udata[off + 2 : off + 2 + length]
        if len(value) != length:
            raise Undecodable("truncated rule userdata")
        if kind == UDATA_RULE_COMMENT:
            if not value.endswith(b"\0"):
                raise Undecodable("rule comment without its NUL")
            comment = _text(value)
        off += 2 + length
    return comment


def decode_sets(bodies: list[bytes], table: str) -> Iterator[tuple[str, SetType, int]]:
    """(name, key type, flags) of each named set and map of ``table``: anonymous sets (a
    rule's inline ``{ ... }``) are part of their rule, as in libnftables' listing."""
    for body in bodies:
        a = _attrs(body)
        if _text(a.get(SET_TABLE, b"")) != table:
            continue
        flags = _U32.unpack(a.get(SET_FLAGS, bytes(4)))[0]
        if flags & SET_F_ANONYMOUS:
            continue
        name = _text(a[SET_NAME])
        if flags & ~(SET_F_INTERVAL | SET_F_MAP):
            raise Undecodable(f"set {name}: flags {flags:#x}")
        if SET_TIMEOUT in a or SET_EXPR in a or SET_EXPRESSIONS in a:
            raise Undecodable(f"set {name}: timeout or expressions")
        typ = key_type(_U32.unpack(a[SET_KEY_TYPE])[0], _U32.unpack(a[SET_KEY_LEN])[0])
        if flags & SET_F_MAP:
            data = _U32.unpack(a.get(SET_DATA_TYPE, bytes(4)))[0]
            if data != DATA_TYPE_VERDICT or flags & SET_F_INTERVAL or typ != "ifname":
                raise Undecodable(f"map {name}: not an ifname : verdict map")
        elif flags & SET_F_INTERVAL and typ not in ("ipv4_addr", "ipv6_addr"):
            raise Undecodable(f"set {name}: interval set of {typ!r}")
        yield name, typ, flags


def key_type(type_id: int, key_len: int) -> SetType:
    """The type libnftables names for a key type id (a concatenation's fields are 6 bits
    apart, first field highest) and its length."""
    ids: list[int] = []
    while type_id:
        ids.insert(0, type_id & ((1 << _TYPE_BITS) - 1))
        type_id >>= _TYPE_BITS
    if not ids or any(i not in _DATATYPES for i in ids):
        raise Undecodable(f"key type {ids!r}")
    names = tuple(_DATATYPES[i][0] for i in ids)
    widths = [_DATATYPES[i][1] for i in ids]
    width = widths[0] if len(ids) == 1 else sum(-(-w // 4) * 4 for w in widths)
    if width != key_len:
        raise Undecodable(f"key type {names!r} of length {key_len}")
    if len(names) == 1:
        return names[0]
    if names[0] not in ("ipv4_addr", "ipv6_addr") or names[1:] != ("inet_proto", "inet_service"):
        raise Undecodable(f"concatenation {names!r}")
    return names


def _raw_elements(bodies: list[bytes]) -> list[bytes]:
    """Each element's attributes (still encoded) from a GETSETELEM dump's messages. A list
    built in one loop: a generator step per element was a third of a large set's decode."""
    out: list[bytes] = []
    append, unpack = out.append, _RTA.unpack_from
    for body in bodies:
        data = _attrs(body).get(LIST_ELEMENTS, b"")
        off, end = 0, len(data)
        while off + 4 <= end:
            length, kind = unpack(data, off)
            if length < 4 or off + length > end:
                raise Undecodable("malformed attribute in an element list")
            if kind & 0x3FFF == LIST_ELEM:
                append(data[off + 4 : off + length])
            off += (length + 3) & ~3
    return out


def _element(elem: bytes) -> dict[int, bytes]:
    a = parse_attrs(elem)
    if a.keys() - _ELEM_KNOWN:
        raise Undecodable(f"element attributes {sorted(a.keys() - _ELEM_KNOWN)}")
    return a


def _elements(bodies: list[bytes]) -> Iterator[dict[int, bytes]]:
    for elem in _raw_elements(bodies):
        yield _element(elem)


def _key_heads(width: int) -> frozenset[bytes]:
    """The first 8 bytes of an element holding only a ``width``-byte key: the key's nest
    header (with or without NLA_F_NESTED) and its value's header. The key follows, padded."""
    value = _RTA.pack(4 + width, DATA_VALUE)
    nest = 4 + 4 + width + (-width % 4)
    return frozenset(_RTA.pack(nest, kind) + value for kind in (ELEM_KEY, ELEM_KEY | 0x8000))


_END_FLAGS = attr(ELEM_FLAGS, _U32.pack(INTERVAL_END))


def _key(a: dict[int, bytes]) -> bytes:
    value = parse_attrs(a[ELEM_KEY]).get(DATA_VALUE)
    if value is None:
        raise Undecodable("element without a key value")
    return value


def _scalar(raw: bytes, typ: str) -> Element:
    if typ == "ipv4_addr" and len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw)
    if typ == "ipv6_addr" and len(raw) == 16:
        return socket.inet_ntop(socket.AF_INET6, raw)
    if typ == "inet_proto" and len(raw) == 1:
        return raw[0]
    if typ == "inet_service" and len(raw) == 2:
        return int.from_bytes(raw, "big")
    if typ == "ifname" and len(raw) == 16:
        name = raw.split(b"\0", 1)[0]
        if not name or raw[len(name) :].strip(b"\0"):
            raise Undecodable(f"interface name key {raw!r}")
        return _text(name)
    raise Undecodable(f"{typ} key {raw!r}")


def decode_key(raw: bytes, typ: SetType) -> Element:
    """The canonical element of a non-interval key (concatenation fields 4-byte aligned)."""
    if isinstance(typ, str):
        return _scalar(raw, typ)
    out, off = [], 0
    for t in typ:
        width = _DATATYPES_BY_NAME[t]
        out.append(_scalar(raw[off : off + width], t))
        off += -(-width // 4) * 4
    if off != len(raw):
        raise Undecodable(f"{typ!r} key of {len(raw)} bytes")
    return tuple(out)


_DATATYPES_BY_NAME = {name: width for name, width in _DATATYPES.values()}


def decode_set_elements(
    bodies: list[bytes], typ: SetType, interval: bool, fast: bool = True
) -> set[Element]:
    """The canonical members of a set from its GETSETELEM dump. Elements laid out as the
    kernel dumps Felix's own (a key alone; an interval end: a key and flags 1) are read at
    fixed offsets; any other goes through the attribute walk (``fast=False``: all of them,
    the reference the fast path is tested against). Why: at 250,000 remote endpoints a
    readback decodes ~500,000 elements, and the walk was ~10 us each."""
    width = _DATATYPES_BY_NAME[typ] if isinstance(typ, str) else 0
    if isinstance(typ, tuple):
        width = sum(-(-_DATATYPES_BY_NAME[t] // 4) * 4 for t in typ)
    heads = _key_heads(width) if fast else frozenset()
    start = 8 + width + (-width % 4)  # a key-only element's length
    end_len = start + len(_END_FLAGS)
    if not interval:
        members: set[Element] = set()
        add = members.add
        family = {"ipv4_addr": socket.AF_INET, "ipv6_addr": socket.AF_INET6}.get(typ)  # type: ignore[call-overload]
        ntop = socket.inet_ntop
        for elem in _raw_elements(bodies):
            if len(elem) == start and elem[:8] in heads:
                key = elem[8 : 8 + width]
                add(ntop(family, key) if family else decode_key(key, typ))
                continue
            a = _element(elem)
            if ELEM_DATA in a or ELEM_USERDATA in a or ELEM_FLAGS in a:
                raise Undecodable("a plain set element with data, flags or userdata")
            add(decode_key(_key(a), typ))
        return members
    assert isinstance(typ, str)
    points: list[tuple[int, int, bool]] = []  # (key, 0 end | 1 start, open)
    append, from_bytes = points.append, int.from_bytes
    for elem in _raw_elements(bodies):
        size = len(elem)
        if elem[:8] in heads:
            if size == start:
                append((from_bytes(elem[8 : 8 + width], "big"), 1, False))
                continue
            if size == end_len and elem[start:] == _END_FLAGS:
                append((from_bytes(elem[8 : 8 + width], "big"), 0, False))
                continue
        append(_point(_element(elem), typ, width))
    return interval_members(points, width)


def _point(a: dict[int, bytes], typ: str, width: int) -> tuple[int, int, bool]:
    """An interval set element as (key, 0 end | 1 start, open), by the attribute walk."""
    if ELEM_DATA in a:
        raise Undecodable("an interval set element with data")
    raw = _key(a)
    if len(raw) != width:
        raise Undecodable(f"{typ} key {raw!r}")
    flags = _U32.unpack(a[ELEM_FLAGS])[0] if ELEM_FLAGS in a else 0
    udata = a.get(ELEM_USERDATA, b"")
    if flags & ~INTERVAL_END or udata not in (b"", OPEN_INTERVAL_UDATA):
        raise Undecodable(f"interval element flags {flags:#x}, userdata {udata!r}")
    is_end = bool(flags & INTERVAL_END)
    return int.from_bytes(raw, "big"), 0 if is_end else 1, bool(udata)


def interval_members(points: list[tuple[int, int, bool]], width: int) -> set[Element]:
    """Members of an interval set from its start (1) and end (0) points: each start runs to
    the next end minus one, or to the top of the address space when it is marked open or
    nothing ends it. An end with no range open (libnftables' leading ``0 end``) is none."""
    top = (1 << (width * 8)) - 1
    members: set[Element] = set()
    start: int | None = None
    for key, kind, is_open in sorted(points):
        if kind == 0:
            if start is not None:
                if key <= start:
                    raise Undecodable("an interval that ends where it starts")
                members.add(_span(start, key - 1, width))
                start = None
            continue
        if start is not None:
            raise Undecodable("two interval starts in a row")
        if is_open:
            members.add(_span(key, top, width))
        else:
            start = key
    if start is not None:
        members.add(_span(start, top, width))
    return members


def _span(first: int, last: int, width: int) -> str:
    """An address span as ``canonical`` spells libnftables' listing of it: one address, a
    prefix (inet_ntop spelling) or a range (``ipaddress`` spelling, as ``_addr_range``)."""
    family = socket.AF_INET if width == 4 else socket.AF_INET6
    lo = socket.inet_ntop(family, first.to_bytes(width, "big"))
    size = last - first + 1
    if size == 1:
        return lo
    if size & (size - 1) == 0 and first % size == 0:
        return f"{lo}/{width * 8 - (size.bit_length() - 1)}"
    make = ipaddress.IPv4Address if width == 4 else ipaddress.IPv6Address
    return f"{make(first)}-{make(last)}"


def decode_map_elements(bodies: list[bytes], typ: SetType) -> dict[Element, Verdict]:
    """A verdict map's canonical elements from its GETSETELEM dump."""
    out: dict[Element, Verdict] = {}
    for a in _elements(bodies):
        if ELEM_FLAGS in a or ELEM_USERDATA in a or ELEM_DATA not in a:
            raise Undecodable("a map element with flags or userdata, or without data")
        verdict = parse_attrs(parse_attrs(a[ELEM_DATA]).get(DATA_VERDICT, b""))
        if VERDICT_CODE not in verdict:
            raise Undecodable("a map element whose data is not a verdict")
        kind = _VERDICTS.get(_S32.unpack(verdict[VERDICT_CODE])[0])
        target = _text(verdict[VERDICT_CHAIN]) if VERDICT_CHAIN in verdict else ""
        if kind is None or (kind in ("jump", "goto")) != bool(target):
            raise Undecodable(f"verdict {kind!r} {target!r}")
        out[decode_key(_key(a), typ)] = (kind, target)
    return out


__all__ = ["Dumper", "Undecodable", "read_table"]
