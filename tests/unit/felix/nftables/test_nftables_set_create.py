"""Set and map creation over netlink (``netlink.set_body``, ``nlbatch.plan_batch``).

The expected bodies are what libnftables 1.0.6 sent for the same sets from its JSON path
(``nft -j -f`` under ``strace -e sendmsg``), after the table attribute; only the set id
(numbered from 1 in batch order) varies. The kernel-side check, that both paths leave the same
listing, is tests/integration/felix/nftables/test_nftables_first_apply_kernel.py.
"""

from __future__ import annotations

from unittest import mock

import pytest

from calico.felix.nftables.elements import sort_key
from calico.felix.nftables.netlink import (
    NFT_MSG_NEWSET,
    NFT_MSG_NEWSETELEM,
    Unencodable,
    set_body,
    set_member_elems,
)
from calico.felix.nftables.nlbatch import plan_batch
from calico.felix.nftables.state import KernelState, MapState, SetState
from calico.felix.nftables.transaction import Desired, Dirty, build_plan

PORTS4 = ("ipv4_addr", "inet_proto", "inet_service")
PORTS6 = ("ipv6_addr", "inet_proto", "inet_service")

# (name, type, interval, is_map, set id) -> libnftables' NEWSET body after the table attribute.
CAPTURED = {
    ("e4", "ipv4_addr", True, False, 1): "070002006534000008000300000000040800040000000007080005"
    "000000000408000a00000000010a000d000004020000000000",
    ("n6", "ipv6_addr", True, False, 3): "070002006e36000008000300000000040800040000000008080005"
    "000000001008000a00000000030a000d000004020000000000",
    ("p4", PORTS4, False, False, 4): "07000200703400000800030000000000080004000000730d080005"
    "000000000c08000a000000000414000d00000400000000030800040d0000000100",
    ("p6", PORTS6, False, False, 5): "07000200703600000800030000000000080004000000830d080005"
    "000000001808000a000000000514000d00000400000000030800040d0000000100",
    ("s4", "ipv4_addr", False, False, 6): "070002007334000008000300000000000800040000000007080005"
    "000000000408000a00000000060a000d000004020000000000",
    ("s6", "ipv6_addr", False, False, 7): "070002007336000008000300000000000800040000000008080005"
    "000000001008000a00000000070a000d000004020000000000",
    ("m1", "ifname", False, True, 8): "070002006d31000008000300000000080800040000000029080005"
    "000000001008000600ffffff00080007000000000008000a000000000816000d0000040100000001040000"
    "00000604000000000000",
}


@pytest.mark.parametrize("shape", list(CAPTURED))
def test_set_body_is_what_libnftables_sends(shape: tuple) -> None:  # type: ignore[type-arg]
    assert set_body(*shape).hex() == CAPTURED[shape]


@pytest.mark.parametrize(
    "typ, interval, is_map",
    [
        ("inet_service", False, False),
        ("mark", False, False),
        (PORTS4, True, False),
        (("ipv4_addr", "inet_service"), False, False),
        (("ifname", "inet_proto", "inet_service"), False, False),
        ("ipv4_addr", False, True),
        ("ifname", True, True),
        ("ifname", False, False),
    ],
)
def test_other_shapes_are_unencodable(typ: object, interval: bool, is_map: bool) -> None:
    with pytest.raises(Unencodable):
        set_body("x", typ, interval, is_map, 1)  # type: ignore[arg-type]


def _first_apply(desired: Desired):  # type: ignore[no-untyped-def]
    dirty = Dirty()
    dirty.mark_all(desired)
    return build_plan("inet", "calico", desired, KernelState(), dirty)


def test_first_apply_creates_each_set_then_its_members_in_command_order() -> None:
    d = Desired()
    d.sets["b"] = SetState("ipv4_addr", True, {"10.0.0.0/24", "10.1.0.1"})
    d.sets["a"] = SetState(PORTS4, False, set())
    d.sets["c"] = SetState("ipv6_addr", False, {"fd00::2", "fd00::1"})
    d.maps["m"] = MapState("ifname", {"cali1": ("accept", "")})
    plan = _first_apply(d)
    batch = plan_batch("inet", "calico", plan)
    kinds = [(k, name) for k, name, _ in batch.messages]
    assert kinds[1:] == [
        (NFT_MSG_NEWSET, "a"),
        (NFT_MSG_NEWSET, "b"),
        (NFT_MSG_NEWSETELEM, "b"),
        (NFT_MSG_NEWSET, "c"),
        (NFT_MSG_NEWSETELEM, "c"),
        (NFT_MSG_NEWSET, "m"),
        (NFT_MSG_NEWSETELEM, "m"),
    ]
    bodies = {name: body for k, name, body in batch.messages if k == NFT_MSG_NEWSET}
    assert bodies["a"] == set_body("a", PORTS4, False, False, 1)
    assert bodies["b"] == set_body("b", "ipv4_addr", True, False, 2)
    assert bodies["m"] == set_body("m", "ifname", False, True, 4)
    # A new set's members go in the order of its inline ``elem`` (sorted, as libnftables got them).
    elems = {name: body for k, name, body in batch.messages if k == NFT_MSG_NEWSETELEM}
    want = [e for m in ("fd00::1", "fd00::2") for e in set_member_elems(m, "ipv6_addr", False)]
    assert elems["c"] == want
    sets = {
        c["add"]["set"]["name"]: c["add"]["set"] for c in plan.json_commands() if "set" in c["add"]
    }
    assert sets["c"]["elem"] == ["fd00::1", "fd00::2"] and "elem" not in sets["a"]


def test_a_set_of_another_type_sends_the_plan_through_libnftables() -> None:
    d = Desired()
    d.sets["s"] = SetState("ipv4_addr", False, {"10.0.0.1"})
    d.sets["svc"] = SetState("inet_service", False, {80})
    with pytest.raises(Unencodable):
        plan_batch("inet", "calico", _first_apply(d))


# libnftables 1.0.6's messages (after the table attribute) for, in one batch: ``add set m4``
# (interval, set id 1), ``add chain c1``, then in c1 ``meta l4proto 58 icmpv6 type { 130, 131,
# 132, 133, 135, 136 } accept comment "x"`` (its inline set gets id 2). Rule bodies are not
# compared byte for byte (libnftables orders some expression attributes differently, which
# the kernel does not see); the kernel test compares the listings.
INLINE_SET = (
    "0c0002005f5f7365742564000800030000000003080004000000001d080005000000000108000a0000000002"
    "0c000980080001000000000620000d000004020000000314000407000000010c00040e000000010401000000"
)
INLINE_ELEMENTS = (
    "0c0002005f5f736574256400080004000000000264000380100001800c0001800500010082000000100002800c"
    "0001800500010083000000100003800c0001800500010084000000100004800c0001800500010085000000100005"
    "800c0001800500010087000000100006800c0001800500010088000000"
)
# The rule's lookup names the inline set and its id (libnftables: the same two attributes).
INLINE_LOOKUP = "0c0001005f5f7365742564000800040000000002"


def test_inline_set_is_what_libnftables_sends() -> None:
    from calico.felix.nftables.netlink import NFT_MSG_NEWRULE
    from calico.felix.nftables.transaction import Plan, SetCreate, Stats
    from calico.felix.rules import exprs as x

    def rule(exprs: list, comment: str | None = None) -> dict:  # type: ignore[type-arg]
        obj = {"family": "inet", "table": "calico", "chain": "c1", "expr": exprs}
        return {"add": {"rule": obj if comment is None else {**obj, "comment": comment}}}

    icmpv6 = [
        x.match(x.meta("l4proto"), 58),
        x.match(x.payload("icmpv6", "type"), {"set": [130, 131, 132, 133, 135, 136]}),
        x.ACCEPT,
    ]
    fib = [
        x.match({"&": [x.meta("mark"), 0x80000]}, 0x80000),
        x.match({"fib": {"result": "oif", "flags": ["saddr", "iif"]}}, False),
        x.DROP,
    ]
    commands = [
        {"add": {"table": {"family": "inet", "name": "calico"}}},
        {"add": {"set": {"family": "inet", "table": "calico", "name": "m4", "type": "ipv4_addr",
                         "flags": ["interval"]}}},
        {"add": {"chain": {"family": "inet", "table": "calico", "name": "c1"}}},
        rule(icmpv6, "x"),
        rule(fib),
    ]  # fmt: skip
    plan = Plan(commands, Stats(), creates=[SetCreate("m4", "ipv4_addr", True)])
    for _ in range(2):  # the second time from the memos: the inline set is encoded afresh
        messages = plan_batch("inet", "calico", plan).messages
        assert [k for k, _, _ in messages][3:] == [
            NFT_MSG_NEWSET,
            NFT_MSG_NEWSETELEM,
            NFT_MSG_NEWRULE,
            NFT_MSG_NEWRULE,
        ]
        bodies = [body.hex() for _, _, body in messages[3:]]  # type: ignore[union-attr]
        # libnftables numbers the list's element attributes 1, 2, ...; the kernel walks the
        # list without reading them, and ours are all 1, as in every element message we send.
        elements = INLINE_ELEMENTS
        for i in range(2, 7):
            elements = elements.replace(f"1000{i:02x}800c00", "100001800c00")
        assert bodies[:2] == [INLINE_SET, elements]
        assert INLINE_LOOKUP in bodies[2] and "5f5f736574" not in bodies[3]


def test_named_port_lookup_gets_the_family_match_libnftables_adds() -> None:
    """``ip daddr . meta l4proto . th dport @s`` alone encodes as ``meta nfproto ipv4`` plus
    the lookup (what libnftables sends, ``nft --debug=netlink``); after ``meta nfproto !=`` it
    is refused."""
    from calico.felix.nftables.nlrules import rule_body
    from calico.felix.rules import exprs as x

    for proto, family in (("ip", 4), ("ip6", 6)):
        concat = {
            "concat": [x.payload(proto, "daddr"), x.meta("l4proto"), x.payload("th", "dport")]
        }
        lookup = x.match(concat, "@s")
        explicit = rule_body("c", [x.nfproto(family), lookup, x.ACCEPT], None)
        assert rule_body("c", [lookup, x.ACCEPT], None) == explicit
        excluded = x.match(x.meta("nfproto"), "ipv6" if family == 4 else "ipv4", "!=")
        with pytest.raises(Unencodable):
            rule_body("c", [excluded, lookup], None)


@pytest.mark.parametrize("extra", [0, 1])
def test_sets_over_the_limit_are_created_in_their_own_order(extra: int) -> None:
    """Up to ``SORTED_CREATE_LIMIT`` members a new set's elements are sorted; above it they go
    in the set's order, the same elements; the libnftables JSON is sorted either way."""
    from calico.felix.nftables import transaction

    limit = 50
    members = {f"10.0.{i >> 8}.{i & 255}" for i in range(limit + extra)}
    d = Desired()
    d.sets["s"] = SetState("ipv4_addr", True, members)
    with mock.patch.object(transaction, "SORTED_CREATE_LIMIT", limit):
        plan = _first_apply(d)
    (create,) = plan.creates
    ordered = tuple(sorted(members, key=sort_key))
    assert create.members == (ordered if not extra else tuple(members))
    elems = [e for k, _, body in plan_batch("inet", "calico", plan).messages
             if k == NFT_MSG_NEWSETELEM for e in body]  # fmt: skip
    want = [e for m in create.members for e in set_member_elems(m, "ipv4_addr", True)]
    assert elems == want
    assert sorted(elems) == sorted(
        e for m in ordered for e in set_member_elems(m, "ipv4_addr", True)
    )
    (cmd,) = [c["add"]["set"] for c in plan.json_commands() if "set" in c["add"]]
    assert cmd["elem"] == list(ordered)
