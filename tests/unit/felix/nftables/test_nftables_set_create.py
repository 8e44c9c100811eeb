"""Set and map creation over netlink (``netlink.set_body``, ``nlbatch.plan_batch``).

The expected bodies are what libnftables 1.0.6 sent for the same sets from its JSON path
(``nft -j -f`` under ``strace -e sendmsg``), after the table attribute; only the set id
(numbered from 1 in batch order) varies. The kernel-side check, that both paths leave the same
listing, is tests/integration/felix/nftables/test_nftables_first_apply_kernel.py.
"""

from __future__ import annotations

import pytest

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
    sets = {c["add"]["set"]["name"]: c["add"]["set"] for c in plan.commands if "set" in c["add"]}
    assert sets["c"]["elem"] == ["fd00::1", "fd00::2"] and "elem" not in sets["a"]


def test_a_set_of_another_type_sends_the_plan_through_libnftables() -> None:
    d = Desired()
    d.sets["s"] = SetState("ipv4_addr", False, {"10.0.0.1"})
    d.sets["svc"] = SetState("inet_service", False, {80})
    with pytest.raises(Unencodable):
        plan_batch("inet", "calico", _first_apply(d))
