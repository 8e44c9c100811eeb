"""The arithmetic of `calicoctl ipam split`: CIDR splitting, child names, NUMBER parsing."""

from __future__ import annotations

import ipaddress
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.calicoctl.errors import CtlError
from calico.calicoctl.ipam_split import child_name, parse_count, split_cidr


@given(
    version=st.sampled_from([4, 6]),
    raw=st.integers(min_value=0, max_value=2**128 - 1),
    prefix=st.integers(min_value=0, max_value=128),
    power=st.integers(min_value=1, max_value=8),
)
def test_children_partition_the_parent(version: int, raw: int, prefix: int, power: int) -> None:
    bits = 32 if version == 4 else 128
    prefix %= bits + 1
    net_class = ipaddress.IPv4Network if version == 4 else ipaddress.IPv6Network
    parent = net_class((raw % 2**bits, prefix), strict=False)
    parts = 2**power
    if prefix + power > bits:
        with pytest.raises(ValueError, match="is not large enough to be split into"):
            split_cidr(str(parent), parts)
        return
    children = [ipaddress.ip_network(c) for c in split_cidr(str(parent), parts)]
    assert len(children) == parts
    assert all(c.prefixlen == prefix + power for c in children)
    assert children[0].network_address == parent.network_address
    assert children[-1].broadcast_address == parent.broadcast_address
    for a, b in itertools.pairwise(children):
        assert int(b.network_address) == int(a.broadcast_address) + 1


def test_split_masks_host_bits_like_upstream() -> None:
    assert split_cidr("10.0.1.77/24", 2) == ["10.0.1.0/25", "10.0.1.128/25"]


@pytest.mark.parametrize("parts", [0, 1, 3, 6, 12, -4])
def test_split_number_must_be_power_of_two_above_one(parts: int) -> None:
    with pytest.raises(ValueError) as info:
        split_cidr("10.0.0.0/16", parts)
    assert str(info.value) == f"number to split CIDR into is not a valid power of 2: {parts}"


def test_split_exact_boundary() -> None:
    assert len(split_cidr("10.0.0.0/24", 256)) == 256
    with pytest.raises(
        ValueError, match=r"10\.0\.0\.0/24 is not large enough to be split into 512"
    ):
        split_cidr("10.0.0.0/24", 512)
    with pytest.raises(ValueError, match="error reading CIDR nonsense"):
        split_cidr("nonsense", 2)


def test_child_names_truncate_long_parents() -> None:
    assert child_name("pool", 3) == "split-pool-3"
    long = "p" * 250
    assert child_name(long, 7) == f"split-{'p' * 245}-7"
    assert child_name("p" * 245, 0) == f"split-{'p' * 245}-0"  # 253 characters: fits
    assert child_name("p" * 246, 0) == f"split-{'p' * 245}-0"  # 254: truncated


@pytest.mark.parametrize(("text", "value"), [("4", 4), ("+8", 8), ("-2", -2), ("0", 0)])
def test_parse_count_accepts_go_integers(text: str, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("4.0", "invalid syntax"),
        (" 4", "invalid syntax"),
        ("4_0", "invalid syntax"),
        ("", "invalid syntax"),
        ("9223372036854775808", "value out of range"),
    ],
)
def test_parse_count_refuses_like_atoi(text: str, reason: str) -> None:
    with pytest.raises(CtlError) as info:
        parse_count(text)
    assert str(info.value) == (
        f"error reading number to split IP pools into. {text} is not a valid number: "
        f'strconv.Atoi: parsing "{text}": {reason}'
    )
