"""The netlink readback's decoder (``nlreadback``) without a kernel: dump bodies are built
with the batch encoder (``netlink``, ``nlrules``) and must decode to the canonical members,
verdicts and hashes they were encoded from; whatever the decoder does not read is
:class:`Undecodable`, never a wrong state. The kernel test
(``test_nftables_first_apply_kernel.py``) compares it with libnftables' listing."""

from __future__ import annotations

import errno
import itertools
import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.felix.nftables import nlreadback as rb
from calico.felix.nftables.elements import canonical
from calico.felix.nftables.netlink import attr, map_elem, nested, set_member_elems
from calico.felix.nftables.nlrules import rule_body
from calico.felix.nftables.state import ChainState, HookSpec, KernelState, MapState, SetState

NFGEN = struct.pack("=BBH", 1, 0, 0)
T = "calico"


def s(kind: int, text: str) -> bytes:
    return attr(kind, text.encode() + b"\0")


def u32(kind: int, value: int) -> bytes:
    return attr(kind, struct.pack("!I", value))


def elem_dump(elems: list[bytes], per_message: int = 3) -> list[bytes]:
    head = NFGEN + s(rb.LIST_TABLE, T) + s(rb.LIST_SET, "x")
    return [
        head + nested(rb.LIST_ELEMENTS, *elems[i : i + per_message])
        for i in range(0, max(len(elems), 1), per_message)
    ]


# ---- members -------------------------------------------------------------------------------


def _v4(value: int) -> str:
    return ".".join(str(value >> s & 255) for s in (24, 16, 8, 0))


@st.composite
def v4_intervals(draw: st.DrawFn) -> set[str]:
    """Disjoint members between consecutive cut points, some adjacent (both neighbours
    drawn), the last possibly running to the top: hosts, prefixes and ranges."""
    top = (1 << 32) - 1
    cuts = sorted(draw(st.sets(st.integers(0, top), min_size=1, max_size=12)))
    spans = [(lo, hi - 1) for lo, hi in itertools.pairwise(cuts)] + [(cuts[-1], top)]
    chosen = [span for span in spans if draw(st.booleans())]
    return {canonical(f"{_v4(lo)}-{_v4(hi)}", "ipv4_addr") for lo, hi in chosen}  # type: ignore[misc]


@given(members=v4_intervals(), seed=st.integers(0, 1 << 16))
def test_interval_members_decode_to_what_was_encoded(members: set[str], seed: int) -> None:
    elems = [e for m in members for e in set_member_elems(m, "ipv4_addr", True)]
    random.Random(seed).shuffle(elems)  # the kernel dumps in its own order
    assert rb.decode_set_elements(elem_dump(elems), "ipv4_addr", True) == members
    assert rb.decode_set_elements(elem_dump(elems), "ipv4_addr", True, fast=False) == members


NOT_NESTED = 0x7FFF  # the element key's nest header as a kernel without NLA_F_NESTED sends it


@given(
    members=st.lists(st.ip_addresses(v=4).map(str), unique=True, max_size=8),
    interval=st.booleans(),
    odd=st.lists(st.sampled_from(["plain", "unflagged", "open", "comment", "flags0"]), max_size=3),
)
def test_fast_element_path_equals_the_attribute_walk(
    members: list[str], interval: bool, odd: list[str]
) -> None:
    """Fixed-offset reads where the layout is the kernel's usual one, the walk elsewhere:
    the same members, or the same refusal, either way."""
    elems = [e for m in members for e in set_member_elems(m, "ipv4_addr", interval)]
    for kind in odd:
        (plain,) = set_member_elems("192.0.2.1", "ipv4_addr", False)
        inner = plain[4:]
        if kind == "unflagged":  # the key nest without NLA_F_NESTED
            length, typ = struct.unpack_from("=HH", inner)
            inner = struct.pack("=HH", length, typ & NOT_NESTED) + inner[4:]
        elif kind == "open":
            inner += attr(rb.ELEM_USERDATA, bytes([1, 4]) + struct.pack("=I", 1))
        elif kind == "comment":
            inner += attr(rb.ELEM_USERDATA, b"\x00\x03ab\x00")
        elif kind == "flags0":
            inner += u32(rb.ELEM_FLAGS, 0)
        elems.append(nested(1, inner))

    def decode(fast: bool) -> object:
        try:
            return rb.decode_set_elements(elem_dump(elems), "ipv4_addr", interval, fast=fast)
        except rb.Undecodable as exc:
            return type(exc)

    assert decode(True) == decode(False)


@given(
    hosts=st.sets(st.ip_addresses(v=6).map(str), max_size=10),
    prefixes=st.sets(st.integers(1, 0xFFFF), max_size=5),
)
def test_ipv6_members_round_trip(hosts: set[str], prefixes: set[int]) -> None:
    plain = {canonical(h, "ipv6_addr") for h in hosts}
    elems = [e for m in plain for e in set_member_elems(m, "ipv6_addr", False)]
    assert rb.decode_set_elements(elem_dump(elems), "ipv6_addr", False) == plain
    nets = {canonical(f"{p:x}::/16", "ipv6_addr") for p in prefixes}
    elems = [e for m in nets for e in set_member_elems(m, "ipv6_addr", True)]
    assert rb.decode_set_elements(elem_dump(elems), "ipv6_addr", True) == nets


@given(
    members=st.sets(
        st.tuples(
            st.ip_addresses(v=4).map(str), st.sampled_from([6, 17, 132]), st.integers(0, 0xFFFF)
        ),
        max_size=10,
    )
)
def test_named_port_members_round_trip(members: set[tuple[str, int, int]]) -> None:
    typ = ("ipv4_addr", "inet_proto", "inet_service")
    elems = [e for m in members for e in set_member_elems(m, typ, False)]
    assert rb.decode_set_elements(elem_dump(elems), typ, False) == members
    assert rb.decode_set_elements(elem_dump(elems), typ, False, fast=False) == members


def test_verdict_map_round_trips() -> None:
    want = {"cali1": ("goto", "cali-tw-cali1"), "eth0": ("accept", ""), "x": ("return", "")}
    elems = [map_elem(k, "ifname", v) for k, v in want.items()]
    assert rb.decode_map_elements(elem_dump(elems), "ifname") == want


def test_span_spelling_matches_canonical() -> None:
    for first, last in ((5, 5), (0, 255), (256, 511), (3, 9), (0, (1 << 32) - 1)):
        text = f"{_v4(first)}-{_v4(last)}"
        assert rb._span(first, last, 4) == canonical(text, "ipv4_addr")
    mapped = (0xFFFF << 32) | 0x01020304
    assert rb._span(mapped, mapped + 2, 16) == canonical(
        {"range": ["::ffff:1.2.3.4", "::ffff:1.2.3.6"]}, "ipv6_addr"
    )


@pytest.mark.parametrize(
    "extra",
    [
        attr(rb.ELEM_USERDATA, b"\x00\x03ab\x00"),  # an element comment
        attr(4, struct.pack("!Q", 1000)),  # a timeout
        u32(rb.ELEM_FLAGS, 2),  # a catch-all
    ],
)
def test_elements_it_does_not_read_are_undecodable(extra: bytes) -> None:
    (plain,) = set_member_elems("10.0.0.1", "ipv4_addr", False)
    odd = nested(1, plain[4:] + extra)
    with pytest.raises(rb.Undecodable):
        rb.decode_set_elements(elem_dump([odd]), "ipv4_addr", True)


# ---- sets, chains, rules -----------------------------------------------------------------------


def set_msg(name: str, flags: int, type_id: int, key_len: int, *extra: bytes) -> bytes:
    head = [s(rb.SET_TABLE, T), s(rb.SET_NAME, name), u32(rb.SET_FLAGS, flags)]
    key = [u32(rb.SET_KEY_TYPE, type_id), u32(rb.SET_KEY_LEN, key_len)]
    return NFGEN + b"".join([*head, *key, *extra])


def test_sets_types_and_what_is_skipped_or_refused() -> None:
    concat = (7 << 12) | (12 << 6) | 13
    bodies = [
        set_msg("a", 0x4, 7, 4),
        set_msg("p", 0, concat, 12),
        set_msg("__set0", 0x3, 14, 1),  # anonymous: part of its rule
        set_msg("m", 0x8, 41, 16, u32(rb.SET_DATA_TYPE, rb.DATA_TYPE_VERDICT)),
        NFGEN + s(rb.SET_TABLE, "other") + s(rb.SET_NAME, "z"),
    ]
    got = list(rb.decode_sets(bodies, T))
    assert got == [("a", "ipv4_addr", 4), ("p", ("ipv4_addr", "inet_proto", "inet_service"), 0),
                   ("m", "ifname", 8)]  # fmt: skip
    for odd in (
        set_msg("t", 0x10, 7, 4),  # timeout flag
        set_msg("u", 0, 19, 4),  # a mark set: not a type Felix creates
        set_msg("w", 0, 7, 16),  # key length of another type
        set_msg("i", 0x4, 13, 2),  # interval set of ports
        set_msg("d", 0x8, 41, 16, u32(rb.SET_DATA_TYPE, 7)),  # a data map
    ):
        with pytest.raises(rb.Undecodable):
            list(rb.decode_sets([odd], T))


def chain_msg(name: str, *extra: bytes) -> bytes:
    return NFGEN + s(rb.CHAIN_TABLE, T) + s(rb.CHAIN_NAME, name) + b"".join(extra)


def hook(num: int, prio: int) -> bytes:
    return nested(
        rb.CHAIN_HOOK, u32(rb.HOOK_NUM, num), attr(rb.HOOK_PRIORITY, struct.pack("!i", prio))
    )


def test_chains_hooks_and_policies() -> None:
    bodies = [
        chain_msg("plain"),
        chain_msg(
            "base",
            hook(2, -10),
            u32(rb.CHAIN_POLICY, 1),
            s(rb.CHAIN_TYPE, "filter"),
            u32(rb.CHAIN_FLAGS, 1),
        ),
        NFGEN + s(rb.CHAIN_TABLE, "other") + s(rb.CHAIN_NAME, "z"),
    ]
    assert rb.decode_chains(bodies, "inet", T) == {
        "plain": (None, None),
        "base": (HookSpec("filter", "forward", -10), "accept"),
    }
    for odd in (chain_msg("b", u32(rb.CHAIN_FLAGS, 4)), chain_msg("i", hook(5, 0), u32(5, 1))):
        with pytest.raises(rb.Undecodable):
            rb.decode_chains([odd], "inet", T)


def test_rule_hashes_in_order_per_chain() -> None:
    table = s(rb.RULE_TABLE, T)
    bodies = [
        NFGEN + table + rule_body("c1", [{"accept": None}], "cali:h1; one"),
        NFGEN + table + rule_body("c2", [{"accept": None}], "foreign"),
        NFGEN + table + rule_body("c1", [{"drop": None}], None),
        NFGEN + table + rule_body("c1", [{"drop": None}], "cali:h3;"),
        NFGEN + s(rb.RULE_TABLE, "other") + rule_body("c1", [{"drop": None}], "cali:x;"),
    ]
    assert rb.decode_rule_hashes(bodies, T) == {"c1": ["h1", "", "h3"], "c2": [""]}
    two = bytes([1, 2, 9, 9]) + bytes([0, 6]) + b"cali:\0"
    assert rb.rule_comment(two) == "cali:"
    with pytest.raises(rb.Undecodable):
        rb.rule_comment(bytes([0, 9]) + b"short\0")


class FakeDumps:
    """Answers a read_table's requests from canned replies (and counts generations)."""

    def __init__(self, table: bool = True, gens: tuple[int, ...] = (7, 7)) -> None:
        self.table, self.gens, self.calls = table, list(gens), 0

    def dump(self, kind: int, family: str, body: bytes, multi: bool = True) -> list[bytes]:
        self.calls += 1
        if kind == rb.GETGEN:
            return [NFGEN + u32(rb.GEN_ID, self.gens.pop(0) if self.gens else 0)]
        if kind == rb.GETTABLE and not self.table:
            raise OSError(errno.ENOENT, "no table")
        if kind == rb.GETCHAIN:
            return [chain_msg("c1"), chain_msg("b", hook(1, 0), u32(rb.CHAIN_POLICY, 0),
                                                s(rb.CHAIN_TYPE, "filter"))]  # fmt: skip
        if kind == rb.GETRULE:
            return [NFGEN + s(rb.RULE_TABLE, T) + rule_body("c1", [{"accept": None}], "cali:h;")]
        if kind == rb.GETSET:
            return [set_msg("a", 0, 7, 4)]
        if kind == rb.GETSETELEM:
            return elem_dump(set_member_elems("10.0.0.1", "ipv4_addr", False))
        return [NFGEN]


def test_read_table_assembles_the_state() -> None:
    got = rb.read_table(FakeDumps(), "inet", T)
    assert got == KernelState(
        table_exists=True,
        chains={
            "c1": ChainState(None, None, ("h",)),
            "b": ChainState(HookSpec("filter", "input", 0), "drop", ()),
        },
        sets={"a": SetState("ipv4_addr", False, {"10.0.0.1"})},
        maps={},
    )
    assert rb.read_table(FakeDumps(table=False), "inet", T) == KernelState()
    assert MapState("ifname") == MapState("ifname", {})


def test_read_table_rereads_a_table_that_changed_while_dumped() -> None:
    moving = FakeDumps(gens=(1, 2, 2, 2))
    assert rb.read_table(moving, "inet", T).table_exists
    with pytest.raises(rb.Undecodable, match="changed"):
        rb.read_table(FakeDumps(gens=tuple(range(10))), "inet", T)


@given(st.text(max_size=30), st.lists(st.text(max_size=200), max_size=8))
def test_rule_hashes_equal_their_reference(chain: str, texts: list[str]) -> None:
    """The one-call base64 of the first 12 bytes is the definition's urlsafe base64 of the
    whole digest cut to 16 characters."""
    from calico.felix.nftables.model import rule_hashes, rule_hashes_reference

    assert rule_hashes(chain, texts) == rule_hashes_reference(chain, texts)
