"""Element canonicalisation: desired spellings and kernel listings must meet in one form."""

from __future__ import annotations

import pytest

from calico.felix.nftables.elements import (
    canonical,
    canonical_verdict,
    sort_key,
    to_json,
    verdict_json,
)

PORTS = ("ipv4_addr", "inet_proto", "inet_service")


@pytest.mark.parametrize(
    ("value", "typ", "want"),
    [
        ("10.0.0.0/24", "ipv4_addr", "10.0.0.0/24"),
        ("10.0.0.5/24", "ipv4_addr", "10.0.0.0/24"),  # host bits masked
        ("10.0.0.1/32", "ipv4_addr", "10.0.0.1"),  # kernel lists /32 as a plain address
        ({"prefix": {"addr": "10.0.0.1", "len": 32}}, "ipv4_addr", "10.0.0.1"),
        ({"range": ["10.0.0.0", "10.0.0.255"]}, "ipv4_addr", "10.0.0.0/24"),
        ({"range": ["10.1.0.0", "10.1.0.5"]}, "ipv4_addr", "10.1.0.0-10.1.0.5"),
        ("FD00::1", "ipv6_addr", "fd00::1"),
        ({"prefix": {"addr": "fd00::", "len": 64}}, "ipv6_addr", "fd00::/64"),
        ("tcp", "inet_proto", 6),
        ("UDP", "inet_proto", 17),
        ("80", "inet_service", 80),
        ({"range": [1000, 2000]}, "inet_service", "1000-2000"),
        ("1000-2000", "inet_service", "1000-2000"),
        (("10.0.0.1", "tcp", "80"), PORTS, ("10.0.0.1", 6, 80)),
        ({"concat": ["10.0.0.1", "udp", 53]}, PORTS, ("10.0.0.1", 17, 53)),
        ("cali1234", "ifname", "cali1234"),
    ],
)
def test_canonical(value: object, typ: str | tuple[str, ...], want: object) -> None:
    assert canonical(value, typ) == want


@pytest.mark.parametrize(
    ("elem", "typ", "json"),
    [
        ("10.0.0.0/24", "ipv4_addr", {"prefix": {"addr": "10.0.0.0", "len": 24}}),
        ("10.0.0.1", "ipv4_addr", "10.0.0.1"),
        ("10.1.0.0-10.1.0.5", "ipv4_addr", {"range": ["10.1.0.0", "10.1.0.5"]}),
        ("1000-2000", "inet_service", {"range": [1000, 2000]}),
        (("10.0.0.1", 6, 80), PORTS, {"concat": ["10.0.0.1", 6, 80]}),
    ],
)
def test_to_json_round_trips(elem: object, typ: str | tuple[str, ...], json: object) -> None:
    assert to_json(elem, typ) == json  # type: ignore[arg-type]
    assert canonical(json, typ) == elem


def test_bad_elements_rejected() -> None:
    with pytest.raises(ValueError):
        canonical("not-an-ip", "ipv4_addr")
    with pytest.raises(ValueError):
        canonical(("10.0.0.1", "tcp"), PORTS)
    with pytest.raises(ValueError):
        canonical(True, "inet_service")


def test_verdicts() -> None:
    assert canonical_verdict(("goto", "filter-x")) == ("goto", "filter-x")
    assert canonical_verdict({"jump": {"target": "filter-y"}}) == ("jump", "filter-y")
    assert canonical_verdict({"drop": None}) == ("drop", "")
    assert canonical_verdict("accept") == ("accept", "")
    assert verdict_json(("goto", "c")) == {"goto": {"target": "c"}}
    assert verdict_json(("accept", "")) == {"accept": None}
    with pytest.raises(ValueError):
        canonical_verdict(("goto", ""))


def test_sort_key_orders_mixed_types() -> None:
    assert sorted([80, "1000-2000", 22], key=sort_key) == sorted([22, 80, "1000-2000"], key=repr)
