"""Scenario tests for SelectorAndNamedPortIndex, run against both implementations, plus the
member-format helpers."""

from __future__ import annotations

import pytest
from labelindex_helpers import Recorder

from calico.felix.labelindex import (
    LinearSelectorAndNamedPortIndex,
    NamedPort,
    SelectorAndNamedPortIndex,
    host_cidrs,
    normalise_net,
)
from calico.felix.labelindex.members import port_protocol, set_protocol
from calico.selector import parse

HTTP_TCP = NamedPort("http", "TCP", 8080)


@pytest.fixture(
    params=[SelectorAndNamedPortIndex, LinearSelectorAndNamedPortIndex],
    ids=["optimised", "linear"],
)
def idx(request: pytest.FixtureRequest):
    rec = Recorder()
    index = request.param(rec.started, rec.stopped)
    index.rec = rec
    return index


def events(index) -> set[tuple]:
    counted = index.rec.take()
    assert all(n == 1 for n in counted.values())
    return set(counted)


# --- member formats -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("net", "members"),
    [
        ("10.0.0.1", ("10.0.0.1/32",)),
        ("10.0.0.1/32", ("10.0.0.1/32",)),
        ("10.1.2.3/16", ("10.1.0.0/16",)),
        ("0.0.0.0/0", ("0.0.0.0/1", "128.0.0.0/1")),
        ("fd00::1", ("fd00::1/128",)),
        ("FD00:0::1/128", ("fd00::1/128",)),
        ("fd00::1/64", ("fd00::/64",)),
        ("::/0", ("::/1", "8000::/1")),
    ],
)
def test_normalise_net(net: str, members: tuple[str, ...]) -> None:
    assert normalise_net(net) == members


def test_normalise_net_rejects_junk() -> None:
    with pytest.raises(ValueError):
        normalise_net("10.0.0.300")


def test_host_cidrs_ignore_prefix() -> None:
    assert host_cidrs(["10.0.0.5/24", "10.0.0.6", "fd00::5/64"]) == (
        "10.0.0.5/32",
        "10.0.0.6/32",
        "fd00::5/128",
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [("TCP", "tcp"), ("udp", "udp"), ("SCTP", "sctp"), ("17", "udp"), (6, "tcp"), ("", "tcp")],
)
def test_port_protocol(given: str | int, expected: str) -> None:
    assert port_protocol(given) == expected


def test_set_protocol() -> None:
    assert set_protocol(None) is None
    assert set_protocol("ANY") == "any"
    assert set_protocol("132") == "sctp"
    with pytest.raises(ValueError):
        set_protocol("icmp")


# --- selector sets --------------------------------------------------------------------------


def test_selector_set_members_are_normalised_cidrs(idx) -> None:
    idx.update_ip_set("s", parse("has(a)"))
    idx.update_endpoint_or_set("ep", {"a": ""}, ["10.0.0.1", "fd00::1/128"])
    idx.update_endpoint_or_set("ns", {"a": "x"}, ["192.168.7.9/16"])
    assert events(idx) == {
        ("+", "s", "10.0.0.1/32"),
        ("+", "s", "fd00::1/128"),
        ("+", "s", "192.168.0.0/16"),
    }
    assert idx.members("s") == {"10.0.0.1/32", "fd00::1/128", "192.168.0.0/16"}


def test_members_are_reference_counted(idx) -> None:
    idx.update_ip_set("s", parse("all()"))
    idx.update_endpoint_or_set("e1", {}, ["10.0.0.1"])
    idx.update_endpoint_or_set("e2", {}, ["10.0.0.1/32"])
    assert events(idx) == {("+", "s", "10.0.0.1/32")}
    idx.delete_endpoint_or_set("e1")
    assert events(idx) == set()
    idx.delete_endpoint_or_set("e2")
    assert events(idx) == {("-", "s", "10.0.0.1/32")}


def test_zero_prefix_split_shares_refcount_with_explicit_halves(idx) -> None:
    idx.update_ip_set("s", parse("all()"))
    idx.update_endpoint_or_set("ns", {}, ["0.0.0.0/0", "::/0"])
    assert events(idx) == {
        ("+", "s", "0.0.0.0/1"),
        ("+", "s", "128.0.0.0/1"),
        ("+", "s", "::/1"),
        ("+", "s", "8000::/1"),
    }
    idx.update_endpoint_or_set("ns2", {}, ["0.0.0.0/1"])
    idx.update_endpoint_or_set("ns", {}, ["::/0"])
    assert events(idx) == {("-", "s", "128.0.0.0/1")}


def test_initial_members_and_silent_delete(idx) -> None:
    idx.update_endpoint_or_set("e1", {"app": "web"}, ["10.0.0.1"])
    idx.update_ip_set("s", parse('app == "web"'))
    assert events(idx) == {("+", "s", "10.0.0.1/32")}
    idx.update_ip_set("s", parse("app=='web'"))  # identical definition
    assert events(idx) == set()
    idx.delete_ip_set("s")
    assert events(idx) == set()
    assert idx.members("s") == set() and idx.ip_set_ids() == set()
    idx.update_endpoint_or_set("e1", {"app": "web"}, ["10.0.0.2"])
    idx.delete_ip_set("s")
    assert events(idx) == set()


def test_label_change_moves_endpoint_in_and_out(idx) -> None:
    idx.update_ip_set("s", parse('app == "web"'))
    idx.update_endpoint_or_set("e1", {"app": "db"}, ["10.0.0.1"])
    assert events(idx) == set()
    idx.update_endpoint_or_set("e1", {"app": "web"}, ["10.0.0.1"])
    assert events(idx) == {("+", "s", "10.0.0.1/32")}
    idx.update_endpoint_or_set("e1", {"app": "web"}, ["10.0.0.1"])
    assert events(idx) == set()
    idx.update_endpoint_or_set("e1", {"app": "web"}, ["10.0.0.1", "10.0.0.2"])
    assert events(idx) == {("+", "s", "10.0.0.2/32")}
    idx.update_endpoint_or_set("e1", {"app": "db"}, ["10.0.0.1", "10.0.0.2"])
    assert events(idx) == {("-", "s", "10.0.0.1/32"), ("-", "s", "10.0.0.2/32")}


def test_parent_labels_and_late_parent(idx) -> None:
    idx.update_ip_set("s", parse('ns == "prod"'))
    idx.update_endpoint_or_set("e1", {}, ["10.0.0.1"], (), ["kns.prod"])
    assert events(idx) == set()
    idx.update_parent_labels("kns.prod", {"ns": "prod"})
    assert events(idx) == {("+", "s", "10.0.0.1/32")}
    idx.update_parent_labels("kns.prod", {"ns": "prod"})
    assert events(idx) == set()
    idx.delete_parent_labels("kns.prod")
    assert events(idx) == {("-", "s", "10.0.0.1/32")}


def test_parent_change_with_shared_ip_does_not_flap(idx) -> None:
    idx.update_ip_set("s", parse('ns == "a"'))
    idx.update_parent_labels("p", {"ns": "a"})
    idx.update_parent_labels("q", {"ns": "b"})
    idx.update_endpoint_or_set("e1", {}, ["10.0.0.1"], (), ["p"])
    idx.update_endpoint_or_set("e2", {}, ["10.0.0.1"], (), ["q"])
    assert events(idx) == {("+", "s", "10.0.0.1/32")}
    idx.update_endpoint_or_set("e2", {}, ["10.0.0.1"], (), ["p"])
    idx.update_endpoint_or_set("e1", {}, ["10.0.0.1"], (), ["q"])
    assert events(idx) == set()


# --- named-port sets ------------------------------------------------------------------------


def test_named_port_members(idx) -> None:
    idx.update_ip_set("n", parse("has(app)"), "tcp", "http")
    idx.update_endpoint_or_set(
        "e1",
        {"app": "web"},
        ["10.0.0.1", "fd00::1"],
        [HTTP_TCP, NamedPort("http", "udp", 9090), NamedPort("dns", "tcp", 53)],
    )
    assert events(idx) == {("+", "n", "10.0.0.1,tcp:8080"), ("+", "n", "fd00::1,tcp:8080")}


@pytest.mark.parametrize(
    ("set_proto", "expected"),
    [
        ("tcp", {"10.0.0.1,tcp:1", "10.0.0.1,tcp:2", "10.0.0.1,tcp:5"}),
        ("udp", {"10.0.0.1,udp:3"}),
        ("sctp", {"10.0.0.1,sctp:4"}),
        ("any", {f"10.0.0.1,{p}" for p in ("tcp:1", "tcp:2", "udp:3", "sctp:4", "tcp:5")}),
        (None, {f"10.0.0.1,{p}" for p in ("tcp:1", "tcp:2", "udp:3", "sctp:4", "tcp:5")}),
    ],
)
def test_named_port_protocol_compatibility(idx, set_proto: str | None, expected: set[str]) -> None:
    ports = [
        NamedPort("p", "TCP", 1),
        NamedPort("p", "6", 2),
        NamedPort("p", "UDP", 3),
        NamedPort("p", "sctp", 4),
        NamedPort("p", "", 5),  # unspecified: TCP
        NamedPort("other", "tcp", 6),
    ]
    idx.update_endpoint_or_set("e1", {}, ["10.0.0.1"], ports)
    idx.update_ip_set("n", parse("all()"), set_proto, "p")
    assert idx.members("n") == expected
    assert events(idx) == {("+", "n", m) for m in expected}


def test_named_port_change_without_label_change(idx) -> None:
    idx.update_ip_set("n", parse("all()"), "tcp", "http")
    idx.update_endpoint_or_set("e1", {}, ["10.0.0.1"], [HTTP_TCP])
    assert events(idx) == {("+", "n", "10.0.0.1,tcp:8080")}
    idx.update_endpoint_or_set("e1", {}, ["10.0.0.1"], [NamedPort("http", "tcp", 8081)])
    assert events(idx) == {("-", "n", "10.0.0.1,tcp:8080"), ("+", "n", "10.0.0.1,tcp:8081")}
    idx.update_endpoint_or_set("e1", {}, ["10.0.0.1"], [])
    assert events(idx) == {("-", "n", "10.0.0.1,tcp:8081")}


def test_redefining_a_set_emits_only_the_difference(idx) -> None:
    idx.update_endpoint_or_set("e1", {"a": "1"}, ["10.0.0.1"], [HTTP_TCP])
    idx.update_endpoint_or_set("e2", {"a": "2"}, ["10.0.0.2"], [HTTP_TCP])
    idx.update_ip_set("x", parse("has(a)"))
    assert len(events(idx)) == 2
    idx.update_ip_set("x", parse('a == "1"'))
    assert events(idx) == {("-", "x", "10.0.0.2/32")}
    idx.update_ip_set("x", parse('a == "1"'), "tcp", "http")
    assert events(idx) == {("-", "x", "10.0.0.1/32"), ("+", "x", "10.0.0.1,tcp:8080")}
