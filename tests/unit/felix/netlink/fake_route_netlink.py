"""An in-memory kernel for RouteTable unit tests (implements the RouteNetlink protocol)."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

from calico.felix.routetable import KernelRoute, LinkInfo, RouteNetlinkError
from calico.felix.routetable.model import RT_SCOPE_LINK, cidr_ip_version


@dataclass
class FakeKernel:
    links: dict[str, LinkInfo] = field(default_factory=dict)
    routes: dict[tuple[str, int], KernelRoute] = field(default_factory=dict)  # (cidr, metric)
    neigh: dict[tuple[str, int], str] = field(default_factory=dict)  # (ip, ifindex) -> mac
    calls: list[str] = field(default_factory=list)
    fail_next: dict[str, int] = field(default_factory=dict)  # op -> errno (one shot)
    _next_index: int = 10

    def add_link(self, name: str, up: bool = True) -> LinkInfo:
        self._next_index += 1
        link = LinkInfo(name=name, index=self._next_index, admin_up=up)
        self.links[name] = link
        return link

    def del_link(self, name: str) -> None:
        link = self.links.pop(name)
        self.routes = {k: r for k, r in self.routes.items() if r.ifindex != link.index}
        self.neigh = {k: m for k, m in self.neigh.items() if k[1] != link.index}

    def add_route(self, cidr: str, iface: str, proto: int = 3, metric: int = 1024) -> None:
        idx = self.links[iface].index
        self.routes[(cidr, metric)] = KernelRoute(cidr, idx, proto, RT_SCOPE_LINK, metric)

    def routes_on(self, iface: str) -> set[str]:
        idx = self.links[iface].index
        return {r.cidr for r in self.routes.values() if r.ifindex == idx}

    def _maybe_fail(self, op: str) -> None:
        code = self.fail_next.pop(op, None)
        if code is not None:
            raise RouteNetlinkError(code, f"injected {op} failure")

    # --- RouteNetlink -------------------------------------------------------------------------

    def list_links(self) -> list[LinkInfo]:
        self.calls.append("list_links")
        self._maybe_fail("list_links")
        return list(self.links.values())

    def lookup_link(self, name: str) -> LinkInfo | None:
        self.calls.append(f"lookup {name}")
        return self.links.get(name)

    def list_routes(self, ip_version: int) -> list[KernelRoute]:
        self.calls.append(f"list_routes {ip_version}")
        return [r for r in self.routes.values() if cidr_ip_version(r.cidr) == ip_version]

    def replace_route(
        self, cidr: str, ifindex: int, *, proto: int, scope: int, metric: int
    ) -> None:
        self.calls.append(f"replace {cidr} {ifindex}")
        self._maybe_fail("replace")
        link = next((x for x in self.links.values() if x.index == ifindex), None)
        if link is None:
            raise RouteNetlinkError(errno.ENODEV, "No such device")
        if not link.admin_up and cidr_ip_version(cidr) == 4:
            raise RouteNetlinkError(errno.ENETDOWN, "Network is down")
        self.routes[(cidr, metric)] = KernelRoute(cidr, ifindex, proto, scope, metric)

    def delete_route(self, route: KernelRoute) -> None:
        self.calls.append(f"delete {route.cidr} {route.ifindex}")
        if self.routes.get((route.cidr, route.metric)) != route:
            raise RouteNetlinkError(errno.ESRCH, "No such process")
        del self.routes[(route.cidr, route.metric)]

    def set_neighbour(self, ip: str, mac: str, ifindex: int) -> None:
        self.calls.append(f"neigh {ip} {mac}")
        self.neigh[(ip, ifindex)] = mac

    def delete_neighbour(self, ip: str, ifindex: int) -> None:
        self.calls.append(f"neigh-del {ip}")
        if self.neigh.pop((ip, ifindex), None) is None:
            raise RouteNetlinkError(errno.ENOENT, "No such file")

    def close(self) -> None:
        pass


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
