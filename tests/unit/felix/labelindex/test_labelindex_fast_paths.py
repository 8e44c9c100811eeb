"""The per-endpoint fast paths of the IP set index against the general paths they shortcut
(design/performance.md "Calc graph at 250,000: per-endpoint cost"):

* a new item's members counted directly against the general Counter-delta path: the same
  callbacks in the same order, the same members, after every call;
* ``nets_normalised=True`` with :func:`host_cidrs` members against normalising them again
  (and against the linear oracle, which always normalises);
* ``_host_cidr``'s already-a-host-member check (:func:`is_host_member`) against its general
  path and ``ipaddress``, and the validation filter's use of it against ``ipaddress``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Hashable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from labelindex_helpers import apply_ip_set_op, named_port_index_ops

from calico.felix.calc import validation_filter as vf
from calico.felix.labelindex import (
    LinearSelectorAndNamedPortIndex,
    NamedPort,
    SelectorAndNamedPortIndex,
    all_host_members,
    check_net,
    host_cidrs,
    is_host_member,
    members,
    normalise_net,
    normalise_nets,
)
from calico.felix.labelindex.members import _host_cidr, _host_cidr_general
from calico.selector import parse

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

AnyIndex = SelectorAndNamedPortIndex | LinearSelectorAndNamedPortIndex


class OrderedRecorder:
    """Every callback in call order (the differential tests elsewhere compare multisets)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Hashable, str]] = []

    def added(self, set_id: Hashable, member: str) -> None:
        self.events.append(("+", set_id, member))

    def removed(self, set_id: Hashable, member: str) -> None:
        self.events.append(("-", set_id, member))

    def take(self) -> list[tuple[str, Hashable, str]]:
        out = list(self.events)
        self.events.clear()
        return out


def general_only(rec: OrderedRecorder) -> SelectorAndNamedPortIndex:
    index = SelectorAndNamedPortIndex(rec.added, rec.removed)
    index.new_item_fast_path = False
    return index


def apply(index: AnyIndex, op: tuple, *, as_host_members: bool = False) -> object:
    """Run one generated op; returns the error type it raised (or None), so that the paths
    can be compared on failures too. ``as_host_members``: endpoints' nets go in as
    :func:`host_cidrs` output with ``nets_normalised=True``."""
    try:
        apply_ip_set_op(index, op, as_host_members=as_host_members)
    except Exception as exc:  # compared, not swallowed: both sides must raise alike
        return type(exc)
    return None


def same_state(a: AnyIndex, b: AnyIndex) -> None:
    assert a.ip_set_ids() == b.ip_set_ids()
    for set_id in a.ip_set_ids():
        assert a.members(set_id) == b.members(set_id), set_id


@SETTINGS
@given(named_port_index_ops)
def test_new_item_fast_path_matches_general_path(ops: list[tuple]) -> None:
    fast_rec, slow_rec = OrderedRecorder(), OrderedRecorder()
    fast = SelectorAndNamedPortIndex(fast_rec.added, fast_rec.removed)
    slow = general_only(slow_rec)
    assert fast.new_item_fast_path and not slow.new_item_fast_path
    for op in ops:
        assert apply(fast, op) == apply(slow, op)
        assert fast_rec.take() == slow_rec.take(), op
        same_state(fast, slow)


@SETTINGS
@given(named_port_index_ops)
def test_normalised_host_members_taken_as_given(ops: list[tuple]) -> None:
    """host_cidrs' output with ``nets_normalised=True`` gives the events and members of the
    same output normalised again, on the fast path, the general path and the linear oracle."""
    recs = [OrderedRecorder() for _ in range(4)]
    given_fast = SelectorAndNamedPortIndex(recs[0].added, recs[0].removed)
    given_slow = general_only(recs[1])
    renormalised = general_only(recs[2])
    linear = LinearSelectorAndNamedPortIndex(recs[3].added, recs[3].removed)
    for op in ops:
        errors = [
            apply(given_fast, op, as_host_members=True),
            apply(given_slow, op, as_host_members=True),
            apply(linear, op, as_host_members=True),
        ]
        if op[0] == "ep":
            item_id, labels, nets, ports, parent_ids = op[1:]
            errors.append(apply(renormalised, ("ep", item_id, labels, host_cidrs(nets), ports,
                                               parent_ids)))  # fmt: skip
        else:
            errors.append(apply(renormalised, op))
        assert errors == [None] * 4
        events = [rec.take() for rec in recs]
        assert events[0] == events[1] == events[2], op
        assert sorted(events[0]) == sorted(events[3]), op  # the oracle's order is its own
        same_state(given_fast, renormalised)
        same_state(given_fast, linear)


def test_new_item_adds_a_repeated_member_once_and_counts_it_twice() -> None:
    rec = OrderedRecorder()
    index = SelectorAndNamedPortIndex(rec.added, rec.removed)
    index.update_ip_set("s", parse("a == 'x'"))
    index.update_ip_set("p", parse("a == 'x'"), "tcp", "http")
    ports = [NamedPort("http", "TCP", 80), NamedPort("http", "tcp", 80)]
    index.update_endpoint_or_set("e", {"a": "x"}, ["10.0.0.1", "10.0.0.1/32"], ports)
    events = rec.take()
    assert sorted(events) == [("+", "p", "10.0.0.1,tcp:80"), ("+", "s", "10.0.0.1/32")]
    index.update_endpoint_or_set("e", {"a": "x"}, ["10.0.0.1"], ports)  # one reference left
    assert rec.take() == []
    index.update_endpoint_or_set("e", {"a": "x"}, ["10.0.0.2"], ports)
    assert sorted(rec.take()) == [
        ("+", "p", "10.0.0.2,tcp:80"),
        ("+", "s", "10.0.0.2/32"),
        ("-", "p", "10.0.0.1,tcp:80"),
        ("-", "s", "10.0.0.1/32"),
    ]


def test_new_item_matching_nothing_and_bad_nets() -> None:
    rec = OrderedRecorder()
    index = SelectorAndNamedPortIndex(rec.added, rec.removed)
    index.update_ip_set("s", parse("a == 'x'"))
    index.update_endpoint_or_set("e", {"a": "y"}, ["10.0.0.1"])
    assert rec.take() == [] and index.members("s") == frozenset()
    with pytest.raises(ValueError):
        index.update_endpoint_or_set("bad", {"a": "x"}, ["10.0.0.300"])
    # a rejected new item leaves no trace: it is new again (fast path) next time
    index.update_endpoint_or_set("bad", {"a": "x"}, ["10.0.0.3"])
    assert rec.take() == [("+", "s", "10.0.0.3/32")]
    index.delete_endpoint_or_set("bad")
    assert rec.take() == [("-", "s", "10.0.0.3/32")]
    index.update_endpoint_or_set("bad", {"a": "x"}, ["10.0.0.3"])  # re-added after a delete
    assert rec.take() == [("+", "s", "10.0.0.3/32")]


def _reference_host(addr: str) -> str:
    ip = ipaddress.ip_address(addr.strip().split("/", 1)[0])
    return f"{ip}/{ip.max_prefixlen}"


def _outcome(fn: object, text: str) -> object:
    try:
        return fn(text)  # type: ignore[operator]
    except ValueError:
        return ValueError


_addresses = st.ip_addresses()
_spellings = st.one_of(
    _addresses.map(str),
    _addresses.map(lambda a: a.exploded),
    _addresses.map(lambda a: str(a).upper()),
    st.ip_addresses(v=4).map(lambda a: f"::ffff:{a}"),
    st.ip_addresses(v=4).map(lambda a: ".".join(f"{int(o):03d}" for o in str(a).split("."))),
    st.text("0123456789abcdefABCDEF:. \x00", max_size=20),
)
host_inputs = st.builds(
    lambda a, suffix: f"{a}{suffix}",
    _spellings,
    st.sampled_from(["/32", "/128", "/24", "/64", "", " /32", "/32 ", "/32/32"]),
)


@settings(max_examples=2000, deadline=None)
@given(host_inputs)
def test_host_cidr_fast_path_matches_general_path(text: str) -> None:
    got = _outcome(_host_cidr, text)
    assert got == _outcome(_host_cidr_general, text) == _outcome(_reference_host, text)
    if got is not ValueError:
        # what nets_normalised=True relies on: a host member normalises to itself
        assert normalise_nets([got]) == (got,)
    if is_host_member(text):
        # what the shortcuts rely on: valid, its own member and its own host member
        check_net(text)
        assert normalise_net(text) == (text,) and host_cidrs([text]) == (text,)


@settings(max_examples=2000, deadline=None)
@given(host_inputs)
def test_validation_filter_nets_with_host_members_same_as_ipaddress(text: str) -> None:
    try:
        ipaddress.ip_network(text, strict=False)
        valid = True
    except ValueError:
        valid = False
    try:
        vf._nets([text], "nets")
        accepted = True
    except vf.Invalid:
        accepted = False
    assert accepted == valid


@pytest.mark.parametrize(
    ("text", "member"),
    [
        ("10.0.0.1/32", "10.0.0.1/32"),
        ("10.0.0.1/128", "10.0.0.1/32"),
        ("fd00::1/128", "fd00::1/128"),
        ("fd00::1/32", "fd00::1/128"),
        ("FD00::1/128", "fd00::1/128"),
        ("fd00:0:0::1/128", "fd00::1/128"),
        ("::1/128", "::1/128"),
        ("::ffff:1.2.3.4/128", "::ffff:102:304/128"),
        ("010.0.0.1/32", ValueError),
        ("/32", ValueError),
        ("/128", ValueError),
        ("10.0.0.1/32 ", "10.0.0.1/32"),
    ],
)
def test_host_cidr_boundaries(text: str, member: object) -> None:
    assert _outcome(_host_cidr, text) == member
    # conservative: ``::1`` (its first 80 bits zero, like the IPv4-mapped) takes the long way
    assert is_host_member(text) == (member == text and text != "::1/128")


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.lists(host_inputs, max_size=3), min_size=1, max_size=4))
def test_all_host_members_and_the_remembered_tuple(groups: list[list[str]]) -> None:
    """``all_host_members`` is True exactly for tuples of host members; ``host_cidrs`` answers
    what the general path answers for every tuple and list, whichever tuple was remembered
    last (a True answer replaces it, a False one keeps it), and the validation filter's
    ``_nets`` accepts exactly what ``ipaddress`` accepts either way."""
    tuples = [tuple(g) for g in groups]
    for nets in [*tuples, *tuples]:  # the second pass: each tuple is a remembered one in turn
        before = members._verified[0]
        expect = all(is_host_member(n) for n in nets)
        assert all_host_members(nets) == expect
        assert all_host_members(list(nets)) is False  # only tuples
        assert members._verified[0] is (nets if expect else before)
        for other in tuples:
            general = _outcome(lambda t: tuple(_host_cidr_general(a) for a in t), other)
            assert _outcome(host_cidrs, other) == general
            assert _outcome(host_cidrs, list(other)) == general
            try:
                for n in other:
                    ipaddress.ip_network(n, strict=False)
                valid = True
            except ValueError:
                valid = False
            try:
                vf._nets(other, "nets")
                accepted = True
            except vf.Invalid:
                accepted = False
            assert accepted == valid


def test_remembered_tuple_boundaries() -> None:
    members._verified[0] = None
    assert all_host_members(()) and host_cidrs(()) == ()  # empty: vacuously all host members
    good = ("10.0.0.1/32", "fd00::1/128")
    assert all_host_members(good) and host_cidrs(good) is good
    equal_copy = tuple(list(good))  # equal, another object: parsed again, same answer
    assert host_cidrs(equal_copy) == good
    assert not all_host_members(("10.0.0.1/32", "10.0.0.1/24"))  # the last text decides
    assert members._verified[0] is good  # a False answer keeps the remembered tuple
    assert host_cidrs(("10.0.0.1/32", "10.0.0.1/24")) == ("10.0.0.1/32", "10.0.0.1/32")
    assert not all_host_members(("010.0.0.1/32",)) and not all_host_members((b"10.0.0.1/32",))
    assert not all_host_members(["10.0.0.1/32"]) and members._verified[0] is good
