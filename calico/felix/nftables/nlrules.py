"""Rule expressions and chain attributes in nfnetlink form, as libnftables 1.0.6 encodes them.

Why: a new workload's transaction mixes chain writes with set and map elements, and any element
command makes libnftables refill its cache over every interval set in the table. Encoding the
statements our renderer emits ourselves lets the whole transaction go as one raw batch
(design/felix-nftables.md "Transactions over netlink").

The encoding follows what ``nft --debug=netlink`` shows libnftables sending for the same JSON:
meta mark values in host byte order, payload values in network order, 32-bit registers numbered
as libnftables numbers them, equality on a port range as ``cmp gte`` plus ``cmp lte``, a
byte-aligned prefix as a shorter payload load, two compares on consecutive header bytes merged
into one, ``reject`` typed by the family context. What libnftables would add or rewrite
otherwise (implicit protocol dependencies, other neighbouring compares, anonymous sets) is
not reproduced: such a rule raises :class:`~calico.felix.nftables.netlink.Unencodable` and
the transaction goes through libnftables.
``tests/integration/felix/nftables/test_nftables_nlrules_kernel.py`` checks the listings of
both paths are identical.
"""

from __future__ import annotations

import functools
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from calico.felix.nftables.netlink import VERDICT_CODES, Unencodable, attr, nested
from calico.nlmsg import NLA_F_NESTED

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; keep working without it
    _orjson = None  # type: ignore[assignment]

# A JSON array, as libnftables reads the commands' JSON text: a list or a tuple (``json.dumps``
# writes both as arrays), so an encoding is a function of the statement's JSON value.
_ARRAY = (list, tuple)

# linux/netfilter/nf_tables.h
LIST_ELEM = 1
EXPR_NAME, EXPR_DATA = 1, 2
DATA_VALUE, DATA_VERDICT = 1, 2
VERDICT_CODE, VERDICT_CHAIN = 1, 2
REG_VERDICT, REG_1, REG32_00 = 0, 1, 8
CMP_OPS = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
META_KEYS = {"mark": 3, "iifname": 6, "oifname": 7, "nfproto": 15, "l4proto": 16}
NFPROTO = {"ipv4": 2, "ipv6": 10}
CT_STATES = {"invalid": 1, "established": 2, "related": 4, "new": 8, "untracked": 64}
BASE_NETWORK, BASE_TRANSPORT = 1, 2
IFNAMSIZ = 16
# (base, offset, length, family the header needs: nfproto, or l4proto for ICMP)
PAYLOADS: dict[tuple[str, str], tuple[int, int, int, tuple[str, int] | None]] = {
    ("ip", "saddr"): (BASE_NETWORK, 12, 4, ("nfproto", 2)),
    ("ip", "daddr"): (BASE_NETWORK, 16, 4, ("nfproto", 2)),
    ("ip6", "saddr"): (BASE_NETWORK, 8, 16, ("nfproto", 10)),
    ("ip6", "daddr"): (BASE_NETWORK, 24, 16, ("nfproto", 10)),
    ("th", "sport"): (BASE_TRANSPORT, 0, 2, None),
    ("th", "dport"): (BASE_TRANSPORT, 2, 2, None),
    ("icmp", "type"): (BASE_TRANSPORT, 0, 1, ("l4proto", 1)),
    ("icmp", "code"): (BASE_TRANSPORT, 1, 1, ("l4proto", 1)),
    ("icmpv6", "type"): (BASE_TRANSPORT, 0, 1, ("l4proto", 58)),
    ("icmpv6", "code"): (BASE_TRANSPORT, 1, 1, ("l4proto", 58)),
}
HOOKS = {"prerouting": 0, "input": 1, "forward": 2, "output": 3, "postrouting": 4}
CHAIN_TYPES = ("filter", "nat", "route")
POLICIES = {"drop": 0, "accept": 1}
# NFTA_CHAIN_* / NFTA_HOOK_* / NFTA_RULE_*
CHAIN_NAME, CHAIN_HOOK, CHAIN_POLICY, CHAIN_TYPE = 3, 4, 5, 7
HOOK_NUM, HOOK_PRIORITY = 1, 2
RULE_CHAIN, RULE_EXPRESSIONS, RULE_USERDATA = 2, 4, 7
UDATA_RULE_COMMENT = 0
# NFTA_FIB_* and its flags; NFTA_LOOKUP_SET_ID.
FIB_DREG, FIB_RESULT, FIB_FLAGS = 1, 2, 3
FIB_RESULTS = {"oif": 1}
FIB_F = {"saddr": 0x1, "daddr": 0x2, "mark": 0x4, "iif": 0x8, "oif": 0x10}
FIB_F_PRESENT = 0x20
LOOKUP_SET_ID = 4
ANONYMOUS_SET_NAME = "__set%d"  # the kernel numbers it; rules find it by id


@dataclass(frozen=True)
class AnonymousSet:
    """A constant set written inline in a rule (``icmpv6 type {...}``): libnftables sends it
    as a NEWSET (flags anonymous|constant) plus its elements just before the rule, which
    looks it up by set id. ``udata`` is libnftables 1.0.6's set userdata for its key."""

    key_type: int
    key_len: int
    keys: tuple[bytes, ...]
    udata: bytes


# The inline sets encoded, by the payload they match: (nft datatype id, key length, set
# userdata as libnftables 1.0.6 sent it for ``icmpv6 type { ... }``, captured with strace).
_ANONYMOUS_KEYS = {
    ("icmpv6", "type"): (
        29,
        1,
        bytes.fromhex("0004020000000314000407000000010c00040e000000010401000000"),
    ),
}
NewSet = Callable[[AnonymousSet], int]  # adds the set to the batch, returns its set id


def _u32(kind: int, value: int) -> bytes:
    return attr(kind, struct.pack("!I", value & 0xFFFFFFFF))


def _str(kind: int, text: str) -> bytes:
    return attr(kind, text.encode() + b"\0")


def _value(kind: int, raw: bytes) -> bytes:
    return nested(kind, attr(DATA_VALUE, raw))


def _expr(name: str, *attrs: bytes) -> bytes:
    return nested(LIST_ELEM, _str(EXPR_NAME, name), nested(EXPR_DATA, *attrs))


def _reg(slot: int) -> int:
    """libnftables' register number for 32-bit slot ``slot``: the 128-bit name where aligned."""
    return REG_1 + slot // 4 if slot % 4 == 0 else REG32_00 + slot


# Loads by their few distinct arguments (the header fields in PAYLOADS, their byte-aligned
# prefixes and merges, and register slots): a statement-memo miss, a new policy's port or
# address compare, is a load and a compare.
@functools.cache
def _meta_load(key: str, slot: int = 0) -> bytes:
    return _expr("meta", _u32(1, _reg(slot)), _u32(2, META_KEYS[key]))


@functools.cache
def _payload_load(base: int, offset: int, length: int, slot: int = 0) -> bytes:
    return _expr("payload", _u32(1, _reg(slot)), _u32(2, base), _u32(3, offset), _u32(4, length))


def _cmp_reference(op: str, raw: bytes) -> bytes:
    """A compare of register 1 with ``raw``, built attribute by attribute (what :func:`_cmp`
    packs at once)."""
    return _expr("cmp", _u32(1, REG_1), _u32(2, CMP_OPS[op]), _value(3, raw))


_CMP = struct.Struct("=HH8sHH8s8sHH")
_CMP_NAME = _str(EXPR_NAME, "cmp")
_CMP_SREG = _u32(1, REG_1)
_CMP_OPS = {op: _u32(2, code) for op, code in CMP_OPS.items()}


def _cmp(op: str, raw: bytes) -> bytes:
    """:func:`_cmp_reference`: the nests' lengths and constant attributes in one pack."""
    value = attr(DATA_VALUE, raw)
    n = len(value)  # padded, as the nests count it
    return _CMP.pack(
        36 + n, LIST_ELEM | NLA_F_NESTED, _CMP_NAME, 24 + n, EXPR_DATA | NLA_F_NESTED,
        _CMP_SREG, _CMP_OPS[op], 4 + n, 3 | NLA_F_NESTED,
    ) + value  # fmt: skip


def _bitwise(mask: bytes, xor: bytes) -> bytes:
    return _expr(
        "bitwise",
        _u32(1, REG_1),
        _u32(2, REG_1),
        _u32(6, 0),  # NFT_BITWISE_BOOL
        _u32(3, len(mask)),
        _value(4, mask),
        _value(5, xor),
    )


def _lookup(set_ref: Any, inverted: bool, vmap: bool = False) -> bytes:
    if not isinstance(set_ref, str) or not set_ref.startswith("@") or len(set_ref) < 2:
        raise Unencodable(f"lookup of {set_ref!r}")
    attrs = [_str(1, set_ref[1:]), _u32(2, REG_1)]
    if vmap:
        attrs.append(_u32(3, REG_VERDICT))
    if inverted:
        attrs.append(_u32(5, 1))  # NFT_LOOKUP_F_INV
    return _expr("lookup", *attrs)


def _verdict(kind: str, target: str | None = None) -> bytes:
    parts = [attr(VERDICT_CODE, struct.pack("!i", VERDICT_CODES[kind]))]
    if target is not None:
        if not isinstance(target, str) or not target:
            raise Unencodable(f"{kind} target {target!r}")
        parts.append(_str(VERDICT_CHAIN, target))
    return _expr("immediate", _u32(1, REG_VERDICT), nested(2, nested(DATA_VERDICT, *parts)))


# A jump or goto verdict around its one variable part, the chain attribute: the lengths of its
# four nests and the constant attributes in one pack (a policy activation's new targets).
_JUMP = struct.Struct("=HH16sHH8sHHHH8s")
_IMMEDIATE = _str(EXPR_NAME, "immediate")
_VERDICT_REG = _u32(1, REG_VERDICT)
_JUMP_CODES = {k: attr(VERDICT_CODE, struct.pack("!i", VERDICT_CODES[k])) for k in ("jump", "goto")}


def _jump_verdict(kind: str, target: str) -> bytes:
    """:func:`_verdict` of a ``jump`` or ``goto`` to ``target`` (a non-empty ``str``)."""
    chain = _str(VERDICT_CHAIN, target)
    n = len(chain)  # padded, as the nests count it
    head = _JUMP.pack(
        48 + n, LIST_ELEM | NLA_F_NESTED, _IMMEDIATE, 28 + n, EXPR_DATA | NLA_F_NESTED,
        _VERDICT_REG, 16 + n, 2 | NLA_F_NESTED, 12 + n, DATA_VERDICT | NLA_F_NESTED,
        _JUMP_CODES[kind],
    )  # fmt: skip
    return head + chain


def _int(value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise Unencodable(f"{value!r} is not an integer in [{lo}, {hi}]")
    return value


def _is_mark(e: Any) -> bool:
    return e == {"meta": {"key": "mark"}}


# A payload compare with a constant, as libnftables may merge it with the next one:
# (header base, offset, length, operator, value bytes).
_Const = tuple[int, int, int, str, bytes]
# (bytes, protocol context after, last constant compare, whether the bytes replace the previous
# statement's: a merged compare)
_Encoded = tuple[bytes, tuple[tuple[str, int], ...], _Const | None, bool]


class _Rule:
    """One rule's statements -> expressions, tracking the protocol context libnftables keeps
    (an explicit ``meta nfproto``/``meta l4proto`` match) so a payload whose header would need
    an implicit dependency is refused rather than encoded differently."""

    def __init__(self, new_set: NewSet | None = None) -> None:
        self.new_set = new_set
        self.out: list[bytes] = []
        self.context: dict[str, int] = {}
        self.last_const: _Const | None = None  # the previous statement's, if it was one
        self.merged = False  # this statement's bytes replace the previous statement's

    def statement(self, stmt: Any) -> None:
        try:
            self._statement(stmt)
        except TypeError:  # an unhashable value where a name is looked up: not ours to send
            raise Unencodable(f"statement {stmt!r}") from None

    def _statement(self, stmt: Any) -> None:
        if not isinstance(stmt, dict) or len(stmt) != 1:
            raise Unencodable(f"statement {stmt!r}")
        ((kind, body),) = stmt.items()
        const = None
        if kind == "match":
            const = self.match(body)
        elif kind in ("accept", "drop", "return", "continue") and body is None:
            self.out.append(_verdict(kind))
        elif kind in ("jump", "goto") and isinstance(body, dict) and set(body) == {"target"}:
            self.out.append(_verdict(kind, body["target"]))
        elif kind == "reject" and body is None:
            # As libnftables picks it: after ``meta nfproto ipv4|ipv6`` an icmp/icmpv6
            # port-unreachable (type ICMP_UNREACH, code 3 or 4), else icmpx port-unreachable.
            kind_code = {2: (0, 3), 10: (0, 4)}.get(self.context.get("nfproto", 0), (2, 1))
            self.out.append(_expr("reject", _u32(1, kind_code[0]), attr(2, bytes([kind_code[1]]))))
        elif kind in ("counter", "notrack") and body is None:
            self.out.append(_expr(kind))
        elif kind == "masquerade" and body is None:
            self.out.append(_expr("masq"))
        elif kind == "mangle":
            self.mangle(body)
        elif kind == "log":
            self.log(body)
        elif kind == "vmap":
            self.vmap(body)
        else:
            raise Unencodable(f"statement {stmt!r}")
        self.last_const = const

    def match(self, m: Any) -> _Const | None:
        if not isinstance(m, dict) or set(m) != {"op", "left", "right"}:
            raise Unencodable(f"match {m!r}")
        op, left, right = m["op"], m["left"], m["right"]
        if not isinstance(left, dict) or len(left) != 1:
            raise Unencodable(f"match on {left!r}")
        ((lkind, lbody),) = left.items()
        if lkind == "ct" and lbody == {"key": "state"} and op == "in":
            self.ct_state(right)
        elif op not in ("==", "!="):
            raise Unencodable(f"operator {op!r}")
        elif lkind == "meta" and isinstance(lbody, dict) and set(lbody) == {"key"}:
            self.meta_match(lbody["key"], op, right)
        elif lkind == "&" and isinstance(lbody, _ARRAY) and len(lbody) == 2 and _is_mark(lbody[0]):
            mask = _int(lbody[1], 0, 0xFFFFFFFF)
            self.out += [
                _meta_load("mark"),
                _bitwise(struct.pack("=I", mask), bytes(4)),
                _cmp(op, struct.pack("=I", _int(right, 0, 0xFFFFFFFF))),
            ]
        elif lkind == "payload":
            return self.payload_match(lbody, op, right)
        elif lkind == "concat":
            self.concat_lookup(lbody, op, right)
        elif lkind == "fib":
            self.fib_missing(lbody, op, right)
        else:
            raise Unencodable(f"match on {left!r}")
        return None

    def ct_state(self, right: Any) -> None:
        states = right if isinstance(right, _ARRAY) else [right]
        if not states or any(s not in CT_STATES for s in states):
            raise Unencodable(f"ct state {right!r}")
        bits = 0
        for s in states:
            bits |= CT_STATES[s]
        self.out += [
            _expr("ct", _u32(1, REG_1), _u32(2, 0)),  # NFT_CT_STATE
            _bitwise(struct.pack("=I", bits), bytes(4)),
            _cmp("!=", bytes(4)),
        ]

    def meta_match(self, key: Any, op: str, right: Any) -> None:
        if key == "nfproto":
            if right not in NFPROTO:
                raise Unencodable(f"nfproto {right!r}")
            raw = bytes([NFPROTO[right]])
        elif key == "l4proto":
            raw = bytes([_int(right, 0, 255)])
        elif key == "mark":
            raw = struct.pack("=I", _int(right, 0, 0xFFFFFFFF))
        elif key in ("iifname", "oifname"):
            raw = _ifname(right)
        else:
            raise Unencodable(f"meta {key!r}")
        if op == "==" and key in ("nfproto", "l4proto"):
            self.context[key] = raw[0]
        elif key == "nfproto":  # a family excluded: no implicit dependency is reproduced
            self.context["nfproto!="] = raw[0]
        self.out += [_meta_load(key), _cmp(op, raw)]

    def _payload(self, body: Any) -> tuple[int, int, int]:
        if not isinstance(body, dict) or set(body) != {"protocol", "field"}:
            raise Unencodable(f"payload {body!r}")
        spec = PAYLOADS.get((body["protocol"], body["field"]))
        if spec is None:
            raise Unencodable(f"payload {body!r}")
        base, offset, length, needs = spec
        if needs is not None and self.context.get(needs[0]) != needs[1]:
            raise Unencodable(f"{body!r} would get an implicit dependency")
        return base, offset, length

    def fib_missing(self, body: Any, op: str, right: Any) -> None:
        """``fib <flags> oif missing`` (``== false``): libnftables asks for the "present"
        result and compares it with a zero word."""
        if not isinstance(body, dict) or set(body) != {"result", "flags"} or right is not False:
            raise Unencodable(f"fib {body!r} {op} {right!r}")
        flags = body["flags"]
        if body["result"] not in FIB_RESULTS or op != "==" or not isinstance(flags, _ARRAY):
            raise Unencodable(f"fib {body!r} {op} {right!r}")
        if not flags or any(f not in FIB_F for f in flags) or len(set(flags)) != len(flags):
            raise Unencodable(f"fib flags {flags!r}")
        bits = FIB_F_PRESENT
        for f in flags:
            bits |= FIB_F[f]
        fib = _expr(
            "fib", _u32(FIB_FLAGS, bits), _u32(FIB_RESULT, FIB_RESULTS[body["result"]]),
            _u32(FIB_DREG, REG_1),
        )  # fmt: skip
        self.out += [fib, _cmp("==", bytes(4))]

    def anonymous_lookup(self, body: Any, op: str, right: Any) -> None:
        """``payload == { constants }``, for the payloads in ``_ANONYMOUS_KEYS`` only."""
        spec = _ANONYMOUS_KEYS.get((body["protocol"], body["field"]))
        members = right["set"]
        if spec is None or op != "==" or self.new_set is None or not isinstance(members, _ARRAY):
            raise Unencodable(f"anonymous set {right!r} on {body!r}")
        key_type, key_len, udata = spec
        keys = [_int(m, 0, (1 << (8 * key_len)) - 1) for m in members]
        if not keys or len(set(keys)) != len(keys):
            raise Unencodable(f"anonymous set {right!r}")
        base, offset, length = self._payload(body)
        raw = tuple(k.to_bytes(key_len, "big") for k in keys)
        set_id = self.new_set(AnonymousSet(key_type, key_len, raw, udata))
        lookup = _expr(
            "lookup", _u32(2, REG_1), _str(1, ANONYMOUS_SET_NAME), _u32(LOOKUP_SET_ID, set_id)
        )
        self.out += [_payload_load(base, offset, length), lookup]

    def payload_match(self, body: Any, op: str, right: Any) -> _Const | None:
        base, offset, length = self._payload(body)
        if isinstance(right, str) and right.startswith("@"):
            self.out += [_payload_load(base, offset, length), _lookup(right, op == "!=")]
            return None
        if isinstance(right, dict) and set(right) == {"set"}:
            self.anonymous_lookup(body, op, right)
            return None
        if length in (4, 16):
            return self.address_match(base, offset, length, op, right)
        if isinstance(right, dict) and set(right) == {"range"} and length == 2:
            lo, hi = (_int(v, 0, 0xFFFF) for v in _pair(right["range"]))
            if lo >= hi:
                raise Unencodable(f"range {right!r}")
            load = _payload_load(base, offset, length)
            if op == "==":
                self.out += [load, _expr_cmp(">=", lo, 2), _expr_cmp("<=", hi, 2)]
            else:
                self.out += [load, _range_neq(lo, hi)]
            return None
        value = _int(right, 0, (1 << (8 * length)) - 1)
        return self._const(base, offset, length, op, value.to_bytes(length, "big"))

    def _const(self, base: int, offset: int, length: int, op: str, raw: bytes) -> _Const:
        """A payload compared with a constant. libnftables merges it with the previous
        statement when that compared the bytes just before, with the same operator (``!=``
        too), into one load and one compare; so do we. Other neighbours on one header are
        refused (libnftables' choice there is not reproduced)."""
        prev = self.last_const
        if prev is not None and prev[0] == base:
            if prev[3] == op and prev[1] + prev[2] == offset and prev[2] + length <= 16:
                base, offset, length, raw = base, prev[1], prev[2] + length, prev[4] + raw
                self.merged = True
            elif prev[1] + prev[2] >= offset and offset + length >= prev[1]:
                raise Unencodable("adjacent payload compares libnftables would rewrite")
        self.out += [_payload_load(base, offset, length), _cmp(op, raw)]
        return base, offset, length, op, raw

    def address_match(
        self, base: int, offset: int, width: int, op: str, right: Any
    ) -> _Const | None:
        family = socket.AF_INET if width == 4 else socket.AF_INET6
        if isinstance(right, str):
            return self._const(base, offset, width, op, _inet(family, right))
        if not isinstance(right, dict) or set(right) != {"prefix"}:
            raise Unencodable(f"address match {right!r}")
        p = right["prefix"]
        if not isinstance(p, dict) or set(p) != {"addr", "len"}:
            raise Unencodable(f"prefix {p!r}")
        plen = _int(p["len"], 1, width * 8 - 1)
        addr = int.from_bytes(_inet(family, p["addr"]), "big")
        mask = ((1 << (width * 8)) - 1) ^ ((1 << (width * 8 - plen)) - 1)
        if addr & ~mask:
            raise Unencodable(f"prefix {p!r} has host bits")
        if plen % 8 == 0:
            n = plen // 8
            return self._const(base, offset, n, op, addr.to_bytes(width, "big")[:n])
        self.out += [
            _payload_load(base, offset, width),
            _bitwise(mask.to_bytes(width, "big"), bytes(width)),
            _cmp(op, addr.to_bytes(width, "big")),
        ]
        return None

    def _family_dependency(self, body: Any) -> None:
        """A concatenation's ``ip``/``ip6`` field in a rule with no ``meta nfproto`` match yet:
        libnftables puts ``meta nfproto ipv4|ipv6`` in front of the loads (the named-port rule
        of a multi-port match has none of its own); so do we. Other missing dependencies
        (ICMP's ``l4proto``) stay :class:`Unencodable`."""
        spec = (
            PAYLOADS.get((body.get("protocol"), body.get("field")))
            if isinstance(body, dict)
            else None
        )
        if spec is None or spec[3] is None or spec[3][0] != "nfproto":
            return
        if "nfproto" in self.context or "nfproto!=" in self.context:
            return
        family = spec[3][1]
        self.out += [_meta_load("nfproto"), _cmp("==", bytes([family]))]
        self.context["nfproto"] = family

    def concat_lookup(self, fields: Any, op: str, right: Any) -> None:
        if not isinstance(fields, _ARRAY) or len(fields) < 2:
            raise Unencodable(f"concat {fields!r}")
        loads, slot = [], 0
        for f in fields:
            if not isinstance(f, dict) or len(f) != 1:
                raise Unencodable(f"concat field {f!r}")
            ((kind, body),) = f.items()
            if kind == "payload":
                self._family_dependency(body)
                base, offset, length = self._payload(body)
                loads.append(_payload_load(base, offset, length, slot))
            elif kind == "meta" and body in ({"key": "l4proto"}, {"key": "nfproto"}):
                length = 1
                loads.append(_meta_load(body["key"], slot))
            else:
                raise Unencodable(f"concat field {f!r}")
            slot += (length + 3) // 4
        self.out += [*loads, _lookup(right, op == "!=")]

    def mangle(self, body: Any) -> None:
        if not isinstance(body, dict) or set(body) != {"key", "value"} or not _is_mark(body["key"]):
            raise Unencodable(f"mangle {body!r}")
        value = body["value"]
        if not isinstance(value, dict) or len(value) != 1:
            raise Unencodable(f"mangle value {value!r}")
        ((op, args),) = value.items()
        if op not in ("|", "&") or not isinstance(args, _ARRAY) or len(args) != 2:
            raise Unencodable(f"mangle value {value!r}")
        if not _is_mark(args[0]):
            raise Unencodable(f"mangle value {value!r}")
        bits = _int(args[1], 0, 0xFFFFFFFF)
        mask, xor = (~bits & 0xFFFFFFFF, bits) if op == "|" else (bits, 0)
        self.out += [
            _meta_load("mark"),
            _bitwise(struct.pack("=I", mask), struct.pack("=I", xor)),
            _expr("meta", _u32(2, META_KEYS["mark"]), _u32(3, REG_1)),
        ]

    def log(self, body: Any) -> None:
        if not isinstance(body, dict) or not set(body) <= {"prefix", "group", "snaplen"}:
            raise Unencodable(f"log {body!r}")
        if "group" not in body:
            raise Unencodable("log without a group")  # syslog levels are not encoded
        attrs = [attr(1, struct.pack("!H", _int(body["group"], 0, 0xFFFF)))]
        if "prefix" in body:
            prefix = body["prefix"]
            if not isinstance(prefix, str) or "\0" in prefix or len(prefix.encode()) > 127:
                raise Unencodable(f"log prefix {prefix!r}")
            attrs.append(_str(2, prefix))
        if "snaplen" in body:
            attrs.append(_u32(3, _int(body["snaplen"], 0, 0xFFFFFFFF)))
        self.out.append(_expr("log", *attrs))

    def vmap(self, body: Any) -> None:
        if not isinstance(body, dict) or set(body) != {"key", "data"}:
            raise Unencodable(f"vmap {body!r}")
        key = body["key"]
        if key not in ({"meta": {"key": "iifname"}}, {"meta": {"key": "oifname"}}):
            raise Unencodable(f"vmap key {key!r}")
        self.out += [_meta_load(key["meta"]["key"]), _lookup(body["data"], False, vmap=True)]


def _pair(value: Any) -> tuple[Any, Any]:
    if not isinstance(value, _ARRAY) or len(value) != 2:
        raise Unencodable(f"range {value!r}")
    return value[0], value[1]


def _expr_cmp(op: str, value: int, width: int) -> bytes:
    return _cmp(op, value.to_bytes(width, "big"))


def _range_neq(lo: int, hi: int) -> bytes:
    return _expr(
        "range",
        _u32(1, REG_1),
        _u32(2, CMP_OPS["!="]),
        _value(3, lo.to_bytes(2, "big")),
        _value(4, hi.to_bytes(2, "big")),
    )


def _inet(family: int, text: Any) -> bytes:
    try:
        return socket.inet_pton(family, text)
    except (OSError, TypeError) as exc:
        raise Unencodable(f"address {text!r}") from exc


def _ifname(name: Any) -> bytes:
    """Exact names NUL-padded to IFNAMSIZ; ``prefix*`` as the bare prefix (a prefix compare)."""
    if not isinstance(name, str) or not name or "\0" in name or "\\" in name:
        raise Unencodable(f"interface name {name!r}")
    raw = name.encode()
    if name.endswith("*") and "*" not in name[:-1] and len(raw) > 1:
        return raw[:-1]
    if "*" in name or len(raw) >= IFNAMSIZ:
        raise Unencodable(f"interface name {name!r}")
    return raw.ljust(IFNAMSIZ, b"\0")


# Encoded statements by (statement key, protocol context, previous payload-compare header): a
# statement's bytes depend on nothing else, and a new workload's chains repeat the same few
# statements with a new chain name, so most of a delta is dictionary hits. Bounded; cleared
# when full.
_MEMO: dict[tuple[bytes | str, tuple[tuple[str, int], ...], _Const | None], _Encoded] = {}
MEMO_LIMIT = 50_000

# Subclasses of str/int/dict/list, dataclasses and datetimes make orjson raise (no ``default``)
# rather than write them as their base value.
_KEY_OPTIONS = (
    0
    if _orjson is None
    else _orjson.OPT_PASSTHROUGH_SUBCLASS
    | _orjson.OPT_PASSTHROUGH_DATACLASS
    | _orjson.OPT_PASSTHROUGH_DATETIME
)


def statement_key(stmt: Any) -> bytes | str:
    """The statement memo's key: the statement's JSON text as orjson writes it (insertion
    order), else its ``repr``. Equal JSON text means an equal encoding: the encoder reads only
    JSON values (dicts with ``str`` keys, arrays, ``str``, exact ``int``, ``bool``, None), as
    libnftables reads the text. Where orjson would write something as another value's text the
    ``repr`` is used: it refuses subclasses and integers past 64 bits (see ``_KEY_OPTIONS``),
    and a text with ``null`` in it (NaN and infinities are written as ``null`` too) is not
    trusted. orjson also writes Enum members and UUIDs as their values; the renderer puts
    neither in a statement. ~8x cheaper than ``repr``, which was a third of the encoding of a
    first activation's chains (design/performance.md "Statement keys through orjson
    (session 13)")."""
    if _orjson is not None:
        try:
            text = _orjson.dumps(stmt, option=_KEY_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError
            return repr(stmt)
        if b"null" not in text:
            return text
    return repr(stmt)


class _Inline(Exception):
    """A statement with an inline set reached the memoised path: the rule is encoded afresh."""


# Jump and goto verdicts by (kind, target): a policy activation's endpoint chains jump to every
# newly active policy's chains, so most of its statement-memo misses were jumps. A verdict
# neither reads nor changes the protocol context and ends any compare merge, so its encoding
# is this and its context and last compare are (unchanged, none) on every path.
_JUMPS: dict[tuple[str, str], bytes] = {}


def _jump(stmt: dict[str, Any], context: tuple[tuple[str, int], ...]) -> _Encoded | None:
    """A ``{"jump"|"goto": {"target": name}}`` statement's encoding, else None."""
    if len(stmt) != 1:
        return None
    ((kind, body),) = stmt.items()
    if kind not in ("jump", "goto") or type(body) is not dict or len(body) != 1:
        return None
    target = body.get("target")
    if type(target) is not str or not target:
        return None  # the general path says why it is refused
    hit = _JUMPS.get((kind, target))
    if hit is None:
        hit = _jump_verdict(kind, target)
        if len(_JUMPS) >= MEMO_LIMIT:
            _JUMPS.clear()
        _JUMPS[kind, target] = hit
    return hit, context, None, False


def _statement(stmt: Any, context: tuple[tuple[str, int], ...], last: _Const | None) -> _Encoded:
    if type(stmt) is dict and ("jump" in stmt or "goto" in stmt):
        jumped = _jump(stmt, context)
        if jumped is not None:
            return jumped
    return _statement_memoised(stmt, context, last)


def _statement_memoised(
    stmt: Any, context: tuple[tuple[str, int], ...], last: _Const | None
) -> _Encoded:
    """Any statement through the memo: the reference :func:`_statement`'s jump path equals."""
    key = (statement_key(stmt), context, last)
    hit = _MEMO.get(key)
    if hit is None:
        # Only a miss can be an inline set (those are never stored): checked here, not for
        # every statement of every new rule up front (a fifth of a policy activation's batch).
        if _has_inline_set(stmt):
            raise _Inline
        r = _Rule()
        r.context, r.last_const = dict(context), last
        r.statement(stmt)
        hit = (b"".join(r.out), tuple(sorted(r.context.items())), r.last_const, r.merged)
        if len(_MEMO) >= MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[key] = hit
    return hit


# Whole expression lists by the identity of their statement objects: the renderer hands out
# the same rule objects for every endpoint chain of one shape (calico.felix.rules.endpoints),
# so a new workload's rules are found here without a ``repr`` per statement. The memo keeps
# the statements alive, so their ids cannot be reused while they are keys; statements are
# never mutated once rendered.
_EXPRS_MEMO: dict[tuple[int, ...], tuple[tuple[Any, ...], bytes]] = {}


def _has_inline_set(stmt: Any) -> bool:
    """A match on an inline ``{"set": [...]}``: its bytes carry a batch's set id, so it is
    encoded afresh every time (never memoised)."""
    m = stmt.get("match") if isinstance(stmt, dict) else None
    return isinstance(m, dict) and isinstance(m.get("right"), dict) and "set" in m["right"]


def _fresh(exprs: list[Any], new_set: NewSet) -> bytes:
    """A rule with an inline set, encoded without the memos."""
    r = _Rule(new_set)
    for stmt in exprs:
        r.merged = False
        before = len(r.out)
        r.statement(stmt)
        if r.merged:  # the merged compare replaces the previous statement's two expressions
            del r.out[before - 2 : before]
    return nested(RULE_EXPRESSIONS, *r.out)


def _expressions(exprs: list[Any], new_set: NewSet | None = None) -> bytes:
    key = tuple(map(id, exprs))
    hit = _EXPRS_MEMO.get(key)
    if hit is not None:
        return hit[1]
    context: tuple[tuple[str, int], ...] = ()
    last: _Const | None = None
    encoded: list[bytes] = []
    try:
        for stmt in exprs:
            out, context, last, merged = _statement(stmt, context, last)
            if merged:
                encoded[-1] = out
            else:
                encoded.append(out)
    except _Inline:
        if new_set is None:
            raise Unencodable("an inline set outside a batch") from None
        return _fresh(exprs, new_set)
    blob = nested(RULE_EXPRESSIONS, *encoded)
    if len(_EXPRS_MEMO) >= MEMO_LIMIT:
        _EXPRS_MEMO.clear()
    _EXPRS_MEMO[key] = (tuple(exprs), blob)
    return blob


# A rule's chain attribute by name: a new endpoint chain's ~200 rules share one chain name.
# Bounded like the memos above. Comments are not memoised: each starts with its rule's hash,
# chained from the chain name (``model.rule_hashes``), so a comment recurs only when its chain
# is rewritten; a memo of them was all misses (0 hits in 3,036, bench_policy_activation.py).
_CHAIN_ATTRS: dict[str, bytes] = {}


def _comment_attr(comment: str) -> bytes:
    raw = comment.encode() + b"\0"
    if len(raw) > 255:
        raise Unencodable("comment too long")
    return attr(RULE_USERDATA, bytes((UDATA_RULE_COMMENT, len(raw))) + raw)


def rule_body(
    chain: str, exprs: list[Any], comment: str | None, new_set: NewSet | None = None
) -> bytes:
    """The attributes of a NEWRULE message after the table (its chain, expressions, comment).
    ``new_set`` adds an inline set's messages to the batch first and returns its set id
    (without it, a rule with an inline set is :class:`Unencodable`)."""
    head = _CHAIN_ATTRS.get(chain)
    if head is None:
        head = _str(RULE_CHAIN, chain)
        if len(_CHAIN_ATTRS) >= MEMO_LIMIT:
            _CHAIN_ATTRS.clear()
        _CHAIN_ATTRS[chain] = head
    if comment:
        return head + _expressions(exprs, new_set) + _comment_attr(comment)
    return head + _expressions(exprs, new_set)


def chain_body(obj: dict[str, Any]) -> bytes:
    """The attributes of a NEWCHAIN message after the table, from a libnftables chain object."""
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise Unencodable(f"chain {obj!r}")
    parts = [_str(CHAIN_NAME, name)]
    base_keys = {"type", "hook", "prio", "policy"}
    if not base_keys & obj.keys():
        return parts[0]
    if obj.get("hook") not in HOOKS or obj.get("type") not in CHAIN_TYPES or "dev" in obj:
        raise Unencodable(f"base chain {obj!r}")
    prio = _int(obj.get("prio"), -(1 << 31), (1 << 31) - 1)
    parts.append(nested(CHAIN_HOOK, _u32(HOOK_NUM, HOOKS[obj["hook"]]), _u32(HOOK_PRIORITY, prio)))
    policy = obj.get("policy")
    if policy is not None:
        if policy not in POLICIES:
            raise Unencodable(f"chain policy {policy!r}")
        parts.append(_u32(CHAIN_POLICY, POLICIES[policy]))
    parts.append(_str(CHAIN_TYPE, obj["type"]))
    return b"".join(parts)


__all__ = ["AnonymousSet", "chain_body", "rule_body"]
