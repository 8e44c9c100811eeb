"""Element canonicalisation: desired spellings and kernel listings must meet in one form."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.nftables.elements import (
    canonical,
    canonical_all,
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


# canonical_all's fast paths against the element-at-a-time reference: the same set, or the
# same error (type and message) when some member is bad.
_addrs = st.one_of(
    st.sampled_from(["10.0.0.1", "10.0.0.1/32", "10.0.0.0/24", "fd00::1", "FD00::0001",
                     "fd00::/64", "10.0.0.1-10.0.0.5", "10.0.0.256", "", "x", "1.2.3"]),
    st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t))),
    st.builds(lambda a, n: {"prefix": {"addr": a, "len": n}}, st.just("10.1.0.0"),
              st.integers(8, 33)),
    st.integers(0, 3),
)  # fmt: skip
_protos = st.one_of(
    st.sampled_from([6, 17, "tcp", "TCP", "udp", "sctp", "6", " 6", "bogus", True, 6.0, -1]),
    st.integers(0, 300),
)
_ports = st.one_of(
    st.sampled_from([80, 8080, "80", "80-90", "90-80", "http", True, 8080.0, "x"]),
    st.integers(-1, 70000),
)
_port_members = st.one_of(
    st.tuples(_addrs, _protos, _ports),
    st.tuples(_addrs, _protos),
    st.builds(lambda a, p, q: {"concat": [a, p, q]}, _addrs, _protos, _ports),
    st.builds(list, st.tuples(_addrs, _protos, _ports)),
)


def _all_or_error(fn: Any, values: list[Any], typ: Any) -> Any:
    try:
        return fn(values, typ)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def _reference_all(values: list[Any], typ: Any) -> set[Any]:
    return {canonical(v, typ) for v in values}


@settings(max_examples=500, deadline=None)
@given(
    values=st.lists(_port_members, max_size=12),
    typ=st.sampled_from([("ipv4_addr", "inet_proto", "inet_service"),
                         ("ipv6_addr", "inet_proto", "inet_service")]),
)  # fmt: skip
def test_canonical_all_of_port_sets_equals_the_reference(values: list[Any], typ: Any) -> None:
    assert _all_or_error(canonical_all, values, typ) == _all_or_error(_reference_all, values, typ)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(_addrs, max_size=12), typ=st.sampled_from(["ipv4_addr", "ipv6_addr"]))
def test_canonical_all_of_address_sets_equals_the_reference(values: list[Any], typ: Any) -> None:
    assert _all_or_error(canonical_all, values, typ) == _all_or_error(_reference_all, values, typ)


def test_canonical_all_shares_a_pair_but_not_across_types() -> None:
    typ = ("ipv4_addr", "inet_proto", "inet_service")
    got = canonical_all(
        [("10.0.0.1", "tcp", 80), ("10.0.0.2", "tcp", 80), ("10.0.0.3", 6, "80")], typ
    )
    assert got == {("10.0.0.1", 6, 80), ("10.0.0.2", 6, 80), ("10.0.0.3", 6, 80)}
    with pytest.raises(ValueError):  # True == 1, but a bool is no port: never from the memo
        canonical_all([("10.0.0.1", 6, 1), ("10.0.0.2", 6, True)], typ)
