"""Pure route diffing and grace-period bookkeeping."""

from __future__ import annotations

import pytest

from calico.felix.routetable import KernelRoute, RouteTarget
from calico.felix.routetable.diff import RouteSpec, plan_iface, route_is_correct
from calico.felix.routetable.grace import GraceTracker
from calico.felix.routetable.model import normalize_cidr

SPEC = RouteSpec(proto=3, metric=1024)


def kr(cidr: str, proto: int = 3, scope: int = 253, metric: int = 1024) -> KernelRoute:
    return KernelRoute(normalize_cidr(cidr), 7, proto, scope, metric)


def plan(desired: list[RouteTarget], kernel: list[KernelRoute], *, now=0.0, when=0.0, ok=True):
    return plan_iface(
        {t.cidr: t for t in desired},
        kernel,
        SPEC,
        deletable=lambda r: ok,
        deletion_time=lambda c: when,
        now=now,
    )


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("10.0.0.1", "10.0.0.1/32"), ("10.0.0.1/32", "10.0.0.1/32"), ("fd00::1", "fd00::1/128")],
)
def test_route_target_normalises_cidr(raw: str, norm: str) -> None:
    assert RouteTarget(raw).cidr == norm
    assert RouteTarget(raw, dest_mac="AA:BB:CC:DD:EE:FF").dest_mac == "aa:bb:cc:dd:ee:ff"


def test_missing_route_is_programmed_and_correct_one_left_alone() -> None:
    p = plan([RouteTarget("10.0.0.1"), RouteTarget("10.0.0.2")], [kr("10.0.0.1/32")])
    assert [t.cidr for t in p.program] == ["10.0.0.2/32"]
    assert p.delete == [] and p.wait == {}


@pytest.mark.parametrize(
    "wrong", [kr("10.0.0.1/32", proto=4), kr("10.0.0.1/32", scope=0), kr("10.0.0.1/32", metric=5)]
)
def test_wrong_route_is_reprogrammed(wrong: KernelRoute) -> None:
    p = plan([RouteTarget("10.0.0.1")], [wrong])
    assert [t.cidr for t in p.program] == ["10.0.0.1/32"]
    # A wrong-metric twin would survive a replace, so it is deleted straight away.
    assert p.delete == ([wrong] if wrong.metric != 1024 else [])


def test_ipv6_scope_is_ignored() -> None:
    assert route_is_correct(kr("fd00::1/128", scope=0), SPEC)


def test_unwanted_route_waits_for_grace_then_goes() -> None:
    stale = kr("10.0.0.9/32")
    waiting = plan([], [stale], now=5.0, when=10.0)
    assert waiting.delete == [] and waiting.wait == {"10.0.0.9/32": 10.0}
    due = plan([], [stale], now=10.0, when=10.0)
    assert due.delete == [stale] and due.wait == {}


def test_not_deletable_routes_are_ignored() -> None:
    p = plan([], [kr("10.0.0.9/32")], now=100.0, ok=False)
    assert p.delete == [] and p.wait == {}


def test_grace_counts_from_iface_appearance_and_last_desired() -> None:
    g = GraceTracker(10.0)
    g.iface_seen("cali1", 100.0)
    g.iface_seen("cali1", 105.0)  # later sightings don't reset
    assert g.deletion_time("cali1", "10.0.0.1/32", 100.0) == 110.0
    g.route_undesired("cali1", "10.0.0.1/32", 130.0)
    assert g.deletion_time("cali1", "10.0.0.1/32", 130.0) == 140.0
    assert not g.may_delete("cali1", "10.0.0.1/32", 139.9)
    assert g.may_delete("cali1", "10.0.0.1/32", 140.0)
    assert g.was_desired("cali1", "10.0.0.1/32")
    g.route_desired("cali1", "10.0.0.1/32")
    assert not g.was_desired("cali1", "10.0.0.1/32")


def test_grace_restarts_when_iface_recreated() -> None:
    g = GraceTracker(10.0)
    g.iface_seen("cali1", 0.0)
    g.route_undesired("cali1", "10.0.0.1/32", 1.0)
    g.iface_gone("cali1")
    assert g.first_seen("cali1") is None and not g.was_desired("cali1", "10.0.0.1/32")
    g.iface_seen("cali1", 50.0)
    assert g.deletion_time("cali1", "10.0.0.1/32", 50.0) == 60.0


def test_unseen_iface_is_never_immediately_deletable() -> None:
    assert not GraceTracker(10.0).may_delete("cali9", "10.0.0.1/32", 7.0)
