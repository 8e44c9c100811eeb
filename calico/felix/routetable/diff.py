"""Pure route diffing for one interface: what to (re)program, what to delete, what must wait."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from calico.felix.routetable.model import RT_SCOPE_LINK, KernelRoute, RouteTarget


@dataclass(frozen=True)
class RouteSpec:
    """How every route we program looks, apart from its destination and device."""

    proto: int
    metric: int


@dataclass
class IfacePlan:
    program: list[RouteTarget] = field(default_factory=list)  # add or replace
    delete: list[KernelRoute] = field(default_factory=list)  # now
    wait: dict[str, float] = field(default_factory=dict)  # cidr -> earliest deletion time


def route_is_correct(route: KernelRoute, spec: RouteSpec) -> bool:
    """A kernel route already programmed the way we would program it.

    IPv6 routes always read back with universe scope, so scope is only checked for IPv4.
    """
    if route.proto != spec.proto or route.metric != spec.metric:
        return False
    return route.ip_version == 6 or route.scope == RT_SCOPE_LINK


def plan_iface(
    desired: Mapping[str, RouteTarget],
    kernel: Iterable[KernelRoute],
    spec: RouteSpec,
    *,
    deletable: Callable[[KernelRoute], bool],
    deletion_time: Callable[[str], float],
    now: float,
) -> IfacePlan:
    """Compare the desired and kernel routes of one interface.

    ``deletable`` says whether an unwanted route is ours to remove at all (owned interface prefix,
    or a route we once programmed); ``deletion_time`` gives its grace deadline. A kernel route for
    a desired CIDR with the wrong metric is a leftover from an older config: once the right route is
    programmed it goes without grace, since the destination stays reachable.
    """
    plan = IfacePlan()
    by_cidr: dict[str, list[KernelRoute]] = {}
    for route in kernel:
        by_cidr.setdefault(route.cidr, []).append(route)

    for cidr in sorted(desired):
        existing = by_cidr.get(cidr, [])
        if not any(route_is_correct(r, spec) for r in existing):
            plan.program.append(desired[cidr])
        plan.delete.extend(r for r in existing if r.metric != spec.metric)

    for cidr in sorted(by_cidr.keys() - desired.keys()):
        for route in by_cidr[cidr]:
            if not deletable(route):
                continue
            when = deletion_time(cidr)
            if now >= when:
                plan.delete.append(route)
            else:
                plan.wait[cidr] = when
    return plan
