"""The inet_pton fast path of member normalisation against ``ipaddress`` (its reference):
same members for every input it accepts, ``ValueError`` for every input it rejects."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.calc import validation_filter as vf
from calico.felix.labelindex.members import (
    NamedPort,
    check_net,
    host_cidrs,
    normalise_net,
    port_members,
)

V4_HALVES = ("0.0.0.0/1", "128.0.0.0/1")
V6_HALVES = ("::/1", "8000::/1")


def reference_net(net: str) -> tuple[str, ...]:
    network = ipaddress.ip_network(net.strip(), strict=False)
    if network.prefixlen == 0:
        return V4_HALVES if network.version == 4 else V6_HALVES
    return (network.with_prefixlen,)


def reference_host(addr: str) -> str:
    ip = ipaddress.ip_address(addr.strip().split("/", 1)[0])
    return f"{ip}/{ip.max_prefixlen}"


def outcome(fn: object, text: str) -> object:
    try:
        return fn(text)  # type: ignore[operator]
    except ValueError:
        return ValueError


addresses = st.ip_addresses()
inputs = st.one_of(
    st.builds(lambda a, n: f"{a}/{n}", addresses, st.integers(-1, 130)),
    st.builds(lambda a, n: f"{a}/{n}", addresses, st.text("0123456789 x./+", max_size=4)),
    addresses.map(str),
    addresses.map(lambda a: a.exploded),
    addresses.map(lambda a: f" {a} "),
    st.text("0123456789abcdef:./ %", max_size=24),
)


# One test for the three parsers over the same inputs: hypothesis' per-example cost is most of
# the time here, so sharing the 3,000 draws halves it (design/testing.md).
@settings(max_examples=3000, deadline=None)
@given(inputs)
def test_same_as_ipaddress_and_check_net_raises_exactly_when_normalise_net_does(text: str) -> None:
    expected = outcome(normalise_net, text)
    assert expected == outcome(reference_net, text)
    assert outcome(lambda t: host_cidrs([t])[0], text) == outcome(reference_host, text)
    assert outcome(check_net, text) == (ValueError if expected is ValueError else None)


@pytest.mark.parametrize(
    "text",
    [
        "010.0.0.1",  # leading zeros: rejected by both
        "10.0.0.1/024",
        "10.0.0.5/24",
        "::ffff:1.2.3.4/120",  # IPv4-mapped: ipaddress's spelling, not inet_ntop's
        "::ffff:0:0/0",
        "::1.2.3.4",
        "fe80::1%eth0",  # scoped: the ipaddress path decides
        "1.2.3.4/255.255.0.0",  # netmask form
        "0.0.0.0/0",
        "::/0",
        "1.2.3",
        "10.0.0.0/33",
        "10.0.0.0/",
        "::1/ 64",
        "10.0.0.0/٣",  # a non-ASCII digit
    ],
)
def test_edge_cases_same_as_ipaddress(text: str) -> None:
    assert outcome(normalise_net, text) == outcome(reference_net, text)
    assert outcome(lambda t: host_cidrs([t])[0], text) == outcome(reference_host, text)


def test_port_members_use_the_member_address() -> None:
    ports = [NamedPort("http", "TCP", 8080)]
    nets = normalise_net("fd00::1") + normalise_net("10.0.0.7/32")
    assert port_members(nets, ports, "http", "tcp") == ["fd00::1,tcp:8080", "10.0.0.7,tcp:8080"]


def _validates(fn: object, value: object) -> bool:
    try:
        fn([value], "nets")  # type: ignore[operator]
    except Exception as e:
        assert type(e).__name__ == "Invalid", e
        return False
    return True


def _reference_valid(parse: object, value: object) -> bool:
    try:
        parse(value)  # type: ignore[operator]
    except ValueError:
        return False
    return True


@settings(max_examples=2000, deadline=None)
@given(st.one_of(inputs, st.integers(-1, 2**33), st.builds(lambda a: f"{a}\n", addresses)))
def test_validation_filter_accepts_exactly_what_ipaddress_accepts(value: object) -> None:
    assert _validates(vf._nets, value) == _reference_valid(
        lambda x: ipaddress.ip_network(x, strict=False), value
    )
    assert _validates(vf._addrs, value) == _reference_valid(ipaddress.ip_address, value)
