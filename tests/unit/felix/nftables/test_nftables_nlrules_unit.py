"""Rule and plan encoding for netlink, without a kernel: what is refused, and that the statement
memo never changes an encoding (the kernel comparison is test_nftables_nlrules_kernel.py)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.felix.nftables import nlrules
from calico.felix.nftables.netlink import NFT_MSG_NEWRULE, Unencodable
from calico.felix.nftables.nlbatch import MAX_TRANSACTION_BYTES, plan_batch
from calico.felix.nftables.nlrules import chain_body, rule_body
from calico.felix.nftables.transaction import ElementOp, Plan, Stats
from calico.felix.rules import exprs as x

V4 = x.nfproto(4)
SADDR = x.payload("ip", "saddr")
DADDR = x.payload("ip", "daddr")


def test_payload_needs_its_explicit_dependency_even_when_memoised() -> None:
    with_dep = rule_body("c", [V4, x.match(SADDR, "10.0.0.1"), x.ACCEPT], None)
    assert with_dep
    with pytest.raises(Unencodable, match="implicit dependency"):
        rule_body("c", [x.match(SADDR, "10.0.0.1"), x.ACCEPT], None)
    with pytest.raises(Unencodable, match="implicit dependency"):  # ipv6 context is not ipv4
        rule_body("c", [x.nfproto(6), x.match(SADDR, "10.0.0.1")], None)
    icmp = x.match(x.payload("icmp", "type"), 8)
    with pytest.raises(Unencodable):
        rule_body("c", [icmp], None)
    assert rule_body("c", [x.match(x.meta("l4proto"), 1), icmp], None)


def test_adjacent_payload_compares_merge_as_libnftables_does() -> None:
    for op in ("==", "!="):  # libnftables merges both into one 8-byte load and compare
        body = rule_body(
            "c", [V4, x.match(SADDR, "1.1.1.1", op), x.match(DADDR, "2.2.2.2", op)], None
        )
        assert body.count(b"payload\0") == 1
        assert struct.pack("!I", 8) in body  # the load's length
        assert bytes([1, 1, 1, 1, 2, 2, 2, 2]) in body
    icmp = [x.match(x.meta("l4proto"), 1), x.match(x.payload("icmp", "type"), 8),
            x.match(x.payload("icmp", "code"), 0)]  # fmt: skip
    assert rule_body("c", icmp, None).count(b"payload\0") == 1
    with pytest.raises(Unencodable, match="rewrite"):  # operators differ
        rule_body("c", [V4, x.match(SADDR, "1.1.1.1"), x.match(DADDR, "2.2.2.2", "!=")], None)
    with pytest.raises(Unencodable, match="rewrite"):  # the later field first
        rule_body("c", [V4, x.match(DADDR, "2.2.2.2"), x.match(SADDR, "1.1.1.1")], None)
    ip6 = [x.nfproto(6), x.match(x.payload("ip6", "saddr"), "::1"),
           x.match(x.payload("ip6", "daddr"), "::2")]  # fmt: skip
    with pytest.raises(Unencodable, match="rewrite"):  # 32 bytes: more than one register
        rule_body("c", ip6, None)
    separated = [V4, x.match(SADDR, "1.1.1.1"), x.COUNTER, x.match(DADDR, "2.2.2.2")]
    assert rule_body("c", separated, None).count(b"payload\0") == 2
    lookup_then_const = [V4, x.match(SADDR, "@s"), x.match(DADDR, "2.2.2.2")]
    assert rule_body("c", lookup_then_const, None).count(b"payload\0") == 2


@pytest.mark.parametrize(
    "stmt",
    [
        x.match(x.payload("th", "dport"), {"set": [1, 2]}),  # anonymous set
        x.match(x.meta("iifname"), "*"),
        x.match(x.meta("iifname"), "a" * 16),  # longer than IFNAMSIZ - 1
        x.match(x.meta("l4proto"), "tcp"),  # names are not resolved
        x.match(x.meta("mark"), -1),
        x.match(x.meta("skuid"), 0),
        x.match(x.payload("th", "dport"), {"range": [5, 5]}),
        {"log": {"prefix": "p"}},  # no group: syslog levels are not encoded
        {"reject": {"type": "tcp reset"}},
        {"queue": {"num": 1}},
        {"jump": {"target": ""}},
    ],
)
def test_unencodable_statements(stmt: dict[str, Any]) -> None:
    with pytest.raises(Unencodable):
        rule_body("c", [stmt], None)


def test_reject_type_follows_the_family_context() -> None:
    def reject(kind: int, code: int) -> bytes:  # NFTA_REJECT_TYPE, NFTA_REJECT_ICMP_CODE
        return (
            struct.pack("=HH", 8, 1) + struct.pack("!I", kind) + struct.pack("=HHB3x", 5, 2, code)
        )

    icmpx = reject(2, 1)  # port-unreachable for whatever family
    assert icmpx in rule_body("c", [x.REJECT], None)
    assert icmpx in rule_body("c", [x.match(x.meta("l4proto"), 6), x.REJECT], None)
    assert reject(0, 3) in rule_body("c", [V4, x.REJECT], None)  # icmp port-unreachable
    assert reject(0, 4) in rule_body("c", [x.nfproto(6), x.REJECT], None)  # icmpv6


def test_prefix_with_host_bits_is_refused() -> None:
    bad = x.match(SADDR, {"prefix": {"addr": "10.0.0.1", "len": 24}})
    with pytest.raises(Unencodable, match="host bits"):
        rule_body("c", [V4, bad], None)


def test_comment_is_libnftnl_userdata_tlv() -> None:
    body = rule_body("c", [x.ACCEPT], "cali:abc; hi")
    tlv = bytes([0, len("cali:abc; hi") + 1]) + b"cali:abc; hi\0"
    attr = struct.pack("=HH", 4 + len(tlv), 7) + tlv
    assert body.endswith(attr + b"\0" * (-len(tlv) % 4))


def test_base_chain_attributes() -> None:
    plain = chain_body({"family": "inet", "table": "t", "name": "c"})
    assert plain == struct.pack("=HH", 6, 3) + b"c\0\0\0"
    base = {"name": "b", "type": "filter", "hook": "forward", "prio": -10, "policy": "drop"}
    assert chain_body(base).startswith(plain.replace(b"c", b"b"))
    for broken in ({**base, "hook": "ingress"}, {**base, "policy": "queue"}, {"name": ""}):
        with pytest.raises(Unencodable):
            chain_body(broken)


statements = st.one_of(
    st.sampled_from([V4, x.nfproto(6), x.match(x.meta("l4proto"), 6), x.ACCEPT, x.COUNTER]),
    st.integers(0, 0xFFFFFFFF).map(x.mark_is_set),
    st.sampled_from(["10.0.0.1", "@s4", {"prefix": {"addr": "10.0.0.0", "len": 8}}]).map(
        lambda v: x.match(SADDR, v)
    ),
    st.integers(0, 0xFFFF).map(lambda p: x.match(x.payload("th", "dport"), p)),
    st.sampled_from(["t1", "t2"]).map(x.jump),
)


def _encode(exprs: list[Any]) -> bytes | None:
    try:
        return rule_body("c", exprs, "cali:x;")
    except Unencodable:
        return None


@given(st.lists(statements, max_size=6))
def test_memo_never_changes_an_encoding(exprs: list[Any]) -> None:
    warm = _encode(exprs)
    nlrules._MEMO.clear()
    cold = _encode(exprs)
    assert warm == cold
    assert _encode(exprs) == cold  # and again from the memo just filled


def _plan(commands: list[dict[str, Any]], ops: list[ElementOp] | None = None) -> Plan:
    return Plan(commands=commands, stats=Stats(), element_ops=ops or [])


def _cmd(verb: str, kind: str, **obj: Any) -> dict[str, Any]:
    return {verb: {kind: {"family": "inet", "table": "t", **obj}}}


def test_plan_batch_refuses_what_it_cannot_send() -> None:
    table = {"add": {"table": {"family": "inet", "name": "t"}}}
    ok = _plan([table, _cmd("add", "rule", chain="c", expr=[x.ACCEPT], comment="cali:a;")])
    assert [m[0] for m in plan_batch("inet", "t", ok).messages] == [0, NFT_MSG_NEWRULE]
    with pytest.raises(Unencodable, match="add set"):
        plan_batch("inet", "t", _plan([table, _cmd("add", "set", name="s", type="ipv4_addr")]))
    with pytest.raises(Unencodable, match="outside our table"):
        plan_batch("inet", "other", ok)
    rewrite = _plan([table])
    rewrite.replace_all = True
    with pytest.raises(Unencodable, match="full table rewrite"):
        plan_batch("inet", "t", rewrite)
    element = _cmd("add", "element", name="s", elem=["10.0.0.1"])
    with pytest.raises(Unencodable, match="structured"):
        plan_batch("inet", "t", _plan([table, element]))  # no ElementOp for the command
    op = ElementOp(False, "s", "ipv4_addr", False, ("10.0.0.1",))
    with pytest.raises(Unencodable, match="structured"):
        plan_batch("inet", "t", _plan([table], [op]))  # an ElementOp without its command
    assert len(plan_batch("inet", "t", _plan([table, element], [op])).messages) == 2


def test_plan_batch_size_limit_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    from calico.felix.nftables import nlbatch

    def plan_of(comment_len: int, n: int) -> Plan:
        rule = _cmd("add", "rule", chain="c", expr=[x.ACCEPT], comment="k" * comment_len)
        return _plan([rule] * n)

    assert MAX_TRANSACTION_BYTES >= 1 << 20
    monkeypatch.setattr(nlbatch, "MAX_TRANSACTION_BYTES", 1 << 20)  # the same check, faster
    one = plan_batch("inet", "t", plan_of(100, 1))
    size = len(one.messages[0][2])
    n = (1 << 20) // size
    assert len(plan_batch("inet", "t", plan_of(100, n)).messages) == n  # n * size <= limit
    with pytest.raises(Unencodable, match="too big"):
        plan_batch("inet", "t", plan_of(100, n + 1))


def test_expression_memo_by_identity_gives_the_encoding_of_fresh_objects() -> None:
    """The rule-body memo is keyed by the statement objects (the renderer shares them among
    endpoint chains of one shape): equal statements as fresh objects encode the same, a
    memoised list is not re-encoded, and an unencodable list keeps raising."""
    import copy

    from calico.felix.nftables import nlrules

    exprs = [x.match(x.meta("l4proto"), 6), x.match(x.payload("th", "dport"), 80), x.ACCEPT]
    first = rule_body("c1", exprs, "k")
    key = tuple(map(id, exprs))
    assert key in nlrules._EXPRS_MEMO
    assert rule_body("c1", list(exprs), "k") == first  # same objects, new list: a hit
    assert rule_body("c1", copy.deepcopy(exprs), "k") == first  # fresh objects: encoded again
    assert rule_body("c2", exprs, "k") != first  # the chain name is outside the memo
    bad = [x.match(SADDR, "10.0.0.1"), x.ACCEPT]  # no nfproto dependency: unencodable
    for _ in range(2):
        with pytest.raises(Unencodable):
            rule_body("c", bad, None)


INLINE = x.match(x.payload("icmpv6", "type"), {"set": [130, 131]})


def _fresh_reference(exprs: list[Any]) -> tuple[bytes, list[Any]]:
    """A rule with an inline set encoded with no memo at all (``_fresh``), and the sets it
    asked the batch for."""
    asked: list[Any] = []
    return nlrules._fresh(exprs, lambda anon: asked.append(anon) or len(asked)), asked


@pytest.mark.parametrize("position", [1, 2, 3])
def test_inline_set_found_on_a_memo_miss_after_memoised_statements(position: int) -> None:
    """The inline-set check runs only on a statement-memo miss: a rule whose statements
    before the inline set are memo hits (and one whose rule memo misses) is still encoded
    afresh, asks for its set every time, and its inline statement is never memoised."""
    base = [x.match(x.meta("l4proto"), 58), x.match(x.meta("iifname"), "cali1"), x.ACCEPT]
    exprs = [*base[:position], INLINE, *base[position:]]
    rule_body("c", base, None)  # the statements around the inline one are memo hits
    want, want_sets = _fresh_reference(exprs)
    for _ in range(2):
        asked: list[Any] = []
        body = rule_body("c", exprs, None, lambda anon, asked=asked: asked.append(anon) or 1)
        assert body == _str_chain("c") + want
        assert [a.keys for a in asked] == [a.keys for a in want_sets]
        assert tuple(map(id, exprs)) not in nlrules._EXPRS_MEMO
    assert not any(k[0] == nlrules.statement_key(INLINE) for k in nlrules._MEMO)
    with pytest.raises(Unencodable, match="inline set outside a batch"):
        rule_body("c", exprs, None)


def _str_chain(name: str) -> bytes:
    return nlrules._str(nlrules.RULE_CHAIN, name)


@given(
    st.lists(st.one_of(statements, st.just(INLINE)), max_size=5),
    st.booleans(),
)
def test_lazy_inline_check_matches_the_up_front_one(exprs: list[Any], clear: bool) -> None:
    """Against the rule as the encoder treated it before the check moved into the memo miss:
    any inline set -> ``_fresh`` with the batch's set, else the memoised encoding."""
    if clear:
        nlrules._MEMO.clear()
        nlrules._EXPRS_MEMO.clear()
    exprs = [dict(s) for s in exprs]  # fresh objects: the rule memo cannot answer
    if any(map(nlrules._has_inline_set, exprs)):
        try:
            want: bytes | None = _str_chain("c") + _fresh_reference(exprs)[0]
        except Unencodable:
            want = None
    else:
        want = _encode(exprs)
        want = None if want is None else want[: -len(nlrules._comment_attr("cali:x;"))]
    try:
        got: bytes | None = rule_body("c", exprs, None, lambda anon: 1)
    except Unencodable:
        got = None
    assert got == want


contexts = st.lists(st.sampled_from([V4, x.nfproto(6), x.match(x.meta("l4proto"), 6)]), max_size=2)
jumps = st.builds(
    lambda kind, target: {kind: {"target": target}},
    st.sampled_from(["jump", "goto"]),
    st.one_of(st.text(max_size=20), st.integers(), st.none()),
)


@given(contexts, jumps, st.lists(statements, max_size=2), st.booleans())
def test_jump_fast_path_equals_the_memoised_encoding(
    before: list[Any], jump: dict[str, Any], after: list[Any], clear: bool
) -> None:
    """A jump or goto encodes, with its context and last compare, as the general memoised
    path does after any statements (bad targets are refused by it alike)."""
    if clear:
        nlrules._MEMO.clear()
        nlrules._JUMPS.clear()
    context: tuple[tuple[str, int], ...] = ()
    last = None
    try:
        for stmt in before:
            _, context, last, _ = nlrules._statement_memoised(stmt, context, last)
    except Unencodable:
        return
    try:
        want: Any = nlrules._statement_memoised(jump, context, last)
    except Unencodable:
        want = Unencodable
    for _ in range(2):  # the second time from the jump memo
        try:
            got: Any = nlrules._statement(jump, context, last)
        except Unencodable:
            got = Unencodable
        assert got == want
    exprs = [*before, dict(jump), *after]
    fast = _encode(exprs)
    nlrules._MEMO.clear()
    nlrules._JUMPS.clear()
    assert _encode([dict(s) for s in exprs]) == fast


# ---- statement keys (orjson) and JSON arrays ---------------------------------------------------


# Statements the key must keep apart from their JSON twins: every array both as a list and as a
# tuple, ints next to bools and floats, str and int subclasses, NaN where None is valid.
class _Str(str):
    pass


class _Int(int):
    pass


def _tupled(value: Any) -> Any:
    """``value`` with every list a tuple (the same JSON)."""
    if isinstance(value, dict):
        return {k: _tupled(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return tuple(_tupled(v) for v in value)
    return value


array_statements = st.one_of(
    st.lists(st.sampled_from(["new", "established", "related", "invalid"]), min_size=1,
             max_size=3, unique=True).map(lambda s: x.ct_state(*s)),
    st.integers(0, 0xFFFFFFFF).map(x.mark_set),
    st.integers(0, 0xFFFFFFFF).map(x.mark_clear),
    st.integers(0, 0xFFFFFFFF).map(x.mark_is_any),
    st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)).map(
        lambda r: x.match(x.payload("th", "dport"), {"range": [min(r), max(r) + 1]})
    ),
    st.just(x.match({"concat": [SADDR, x.payload("th", "dport")]}, "@ipport")),
)  # fmt: skip


def _twins(stmt: dict[str, Any]) -> list[Any]:
    """JSON twins of ``stmt`` and near-twins orjson must not confuse with it."""
    ((kind, body),) = stmt.items()
    out: list[Any] = [_tupled(stmt), {kind: body}]
    if body is None:
        out.append({kind: float("nan")})
    if isinstance(body, dict) and body.get("op") == "==":
        right = body["right"]
        if isinstance(right, int) and not isinstance(right, bool):
            out += [{kind: body | {"right": float(right)}}, {kind: body | {"right": _Int(right)}}]
            if right in (0, 1):
                out.append({kind: body | {"right": bool(right)}})
        if isinstance(right, str):
            out.append({kind: body | {"right": _Str(right)}})
    return out


def _one(stmt: Any) -> Any:
    try:
        return nlrules._statement_memoised(stmt, (("nfproto", 2),), None)
    except Unencodable:
        return Unencodable


@given(st.one_of(statements, array_statements, st.just(x.ACCEPT), st.just(x.COUNTER)))
def test_statement_key_never_answers_for_a_different_statement(stmt: dict[str, Any]) -> None:
    """With the statement in the memo, each twin still encodes as it does from an empty memo
    (a tuple as its list, a float, bool, subclass or NaN as the encoder alone treats it)."""
    for twin in _twins(stmt):
        nlrules._MEMO.clear()
        cold = _one(twin)
        nlrules._MEMO.clear()
        _one(stmt)
        assert _one(twin) == cold, twin


@given(st.lists(st.one_of(statements, array_statements), max_size=5))
def test_arrays_encode_as_lists_or_tuples_alike(exprs: list[Any]) -> None:
    """The commands' JSON writes a tuple as an array, as it does a list: the encoder reads
    both as one (so its encoding is a function of the JSON text its memo is keyed by)."""
    want = _encode(exprs)
    nlrules._MEMO.clear()
    nlrules._EXPRS_MEMO.clear()
    assert _encode([_tupled(s) for s in exprs]) == want


def test_statement_key_falls_back_to_repr_where_orjson_would_merge_values() -> None:
    key = nlrules.statement_key
    mark = b'{"meta":{"key":"mark"}}'
    assert key(x.mark_set(5)) == b'{"mangle":{"key":%s,"value":{"|":[%s,5]}}}' % (mark, mark)
    assert key(x.ACCEPT) == repr(x.ACCEPT)  # null: NaN is written so too
    assert key({"counter": float("nan")}) == repr({"counter": float("nan")})
    assert key(x.match(x.meta("l4proto"), _Int(6))) == repr(x.match(x.meta("l4proto"), _Int(6)))
    assert key({"x": 1 << 70}) == repr({"x": 1 << 70})
    assert key({1: "a"}) == repr({1: "a"})
    assert key(x.match(x.meta("l4proto"), True)) != key(x.match(x.meta("l4proto"), 1))


@pytest.mark.parametrize(
    "stmt",
    [
        x.match({"ct": {"key": "state"}}, [["new"]], "in"),
        x.match(x.meta("nfproto"), ["ipv4"]),
        x.match({"fib": {"result": "oif", "flags": [["saddr"]]}}, False),
    ],
)
def test_unhashable_values_are_unencodable_not_a_crash(stmt: dict[str, Any]) -> None:
    with pytest.raises(Unencodable):
        rule_body("c", [V4, stmt], None)


@given(st.sampled_from(["jump", "goto"]), st.text(min_size=1, max_size=300))
def test_jump_verdict_template_equals_the_reference(kind: str, target: str) -> None:
    try:
        want = nlrules._verdict(kind, target)
    except (UnicodeEncodeError, struct.error) as exc:
        with pytest.raises(type(exc)):
            nlrules._jump_verdict(kind, target)
        return
    assert nlrules._jump_verdict(kind, target) == want


@given(st.sampled_from(sorted(nlrules.CMP_OPS)), st.binary(max_size=40))
def test_cmp_template_equals_the_reference(op: str, raw: bytes) -> None:
    assert nlrules._cmp(op, raw) == nlrules._cmp_reference(op, raw)


@given(
    st.sampled_from(sorted(nlrules.META_KEYS)),
    st.tuples(st.integers(0, 5), st.integers(0, 64), st.integers(1, 16)),
    st.integers(0, 12),
)
def test_cached_loads_equal_fresh_ones(key: str, payload: tuple[int, int, int], slot: int) -> None:
    assert nlrules._meta_load(key, slot) == nlrules._meta_load.__wrapped__(key, slot)
    assert nlrules._payload_load(*payload, slot) == nlrules._payload_load.__wrapped__(
        *payload, slot
    )
