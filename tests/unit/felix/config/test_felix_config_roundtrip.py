"""Property tests: for typed params with a canonical text form, parse(format(x)) == x, and
every table default is the parse of its documented default text."""

from __future__ import annotations

import ipaddress

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.config import PARAMS
from calico.felix.config import netparsers as n
from calico.felix.config import parsers as p

FAST = settings(max_examples=60, deadline=None)
ident = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
    min_size=1,
    max_size=12,
)


def roundtrip(parser: p.Parser, value: object) -> None:
    """As resolve reads it: ``none`` is the type's zero value, anything else is parsed."""
    text = parser.format(value)
    assert (parser.zero if text.lower() == "none" else parser.parse(text)) == value


@FAST
@given(st.booleans())
def test_bool(value: bool) -> None:
    roundtrip(p.BoolParser(), value)


@FAST
@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_int(value: int) -> None:
    roundtrip(p.IntParser(), value)


@FAST
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_and_seconds(value: float) -> None:
    roundtrip(p.FloatParser(), value)
    roundtrip(p.SecondsParser(), value)


@FAST
@given(st.integers(min_value=0, max_value=10**9))
def test_millis(value: int) -> None:
    parser = p.SecondsParser(unit=0.001)
    assert parser.parse(parser.format(parser.parse(str(value)))) == parser.parse(str(value))


@FAST
@given(st.integers(min_value=0, max_value=0xFFFFFFFF).filter(lambda v: v.bit_count() >= 2))
def test_mark_mask(value: int) -> None:
    roundtrip(p.MarkMaskParser(), value)


@FAST
@given(st.sampled_from(["DROP", "RETURN", "ACCEPT"]))
def test_choice(value: str) -> None:
    roundtrip(p.ChoiceParser(options=("DROP", "RETURN", "ACCEPT")), value)


@FAST
@given(st.dictionaries(ident, st.integers(min_value=0, max_value=10**6).map(lambda ms: ms / 1000)))
def test_key_duration_list(value: dict[str, float]) -> None:
    roundtrip(p.KeyDurationListParser(), value)


@FAST
@given(st.dictionaries(ident, st.text(alphabet="abcxyz0123:/._", max_size=8)))
def test_key_value_list(value: dict[str, str]) -> None:
    roundtrip(p.KeyValueListParser(), value)


v4_nets = st.builds(
    lambda addr, plen: str(ipaddress.ip_network(f"{addr}/{plen}", strict=False)),
    st.ip_addresses(v=4),
    st.integers(min_value=0, max_value=32),
)
v6_nets = st.builds(
    lambda addr, plen: str(ipaddress.ip_network(f"{addr}/{plen}", strict=False)),
    st.ip_addresses(v=6),
    st.integers(min_value=0, max_value=128),
)
proto_ports = st.builds(
    n.ProtoPort,
    st.sampled_from(["tcp", "udp"]),
    st.integers(min_value=0, max_value=65535),
    st.one_of(st.just(""), v4_nets, v6_nets),
)


@FAST
@given(st.lists(proto_ports, max_size=6).map(tuple))
def test_port_list(value: tuple[n.ProtoPort, ...]) -> None:
    roundtrip(n.PortListParser(), value)


@FAST
@given(st.lists(v4_nets, max_size=5).map(tuple))
def test_cidr_list(value: tuple[str, ...]) -> None:
    roundtrip(n.CIDRListParser(), value)


port_ranges = st.builds(
    lambda a, b: n.PortRange(min(a, b), max(a, b)),
    st.integers(min_value=0, max_value=65535),
    st.integers(min_value=0, max_value=65535),
)


@FAST
@given(port_ranges, st.lists(port_ranges, min_size=1, max_size=4).map(tuple))
def test_port_ranges(single: n.PortRange, many: tuple[n.PortRange, ...]) -> None:
    roundtrip(n.PortRangeParser(), single)
    roundtrip(n.PortRangeListParser(), many)


@FAST
@given(st.lists(st.integers(min_value=1, max_value=10**6), min_size=1, max_size=4))
def test_route_table_ranges(starts: list[int]) -> None:
    value = tuple(n.IndexRange(s, s + 10) for s in starts)
    roundtrip(n.RouteTableRangesParser(), value)


@FAST
@given(st.ip_addresses(v=4), st.ip_addresses(v=6))
def test_ips(v4: ipaddress.IPv4Address, v6: ipaddress.IPv6Address) -> None:
    roundtrip(n.IPParser(), v4)
    roundtrip(n.IPParser(version=6), v6)


iface_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=15)


@FAST
@given(st.lists(iface_names, min_size=1, max_size=4))
def test_iface_regex_list(names: list[str]) -> None:
    parser = n.IfaceRegexListParser()
    value = parser.parse(",".join([*names, "/^veth.*/"]))
    roundtrip(parser, value)


def test_every_default_formats_and_reparses() -> None:
    """Each parameter's typed default survives format -> parse (the table is self-consistent)."""
    for name, param in PARAMS.items():
        if not param.default_text or param.default == param.zero:
            continue
        if name == "DataplaneDriver":
            continue  # default kept raw: an executable looked up at parse time
        text = param.parser.format(param.default)
        assert param.parse(text) == param.default, name
