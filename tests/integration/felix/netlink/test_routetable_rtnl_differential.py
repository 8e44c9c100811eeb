"""Route and neighbour writes over our struct encoder against pyroute2's, in the kernel.

Two fresh namespaces with the same links get the same hypothesis-drawn sequence of route
replaces and deletes and neighbour sets and deletes (IPv4 and IPv6, several protocols,
scopes and metrics, an admin-down link, a missing ifindex): ``ours`` through
``PyRoute2Netlink`` (``calico.felix.routetable.rtnl``), ``ref`` through ``pyroute2.IPRoute``
with exactly the keywords the route table sent before (the previous implementation). Every
call must fail with the same errno or succeed on both, and afterwards the main table and the
neighbour table must be equal, compared by link name.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nlns import NS, netns
from pyroute2 import IPRoute, NetlinkError

from calico.felix.routetable.model import KernelRoute
from calico.felix.routetable.netlink import PyRoute2Netlink, RouteNetlinkError

pytestmark = pytest.mark.root

LINKS = ("cali1", "cali2", "calidown")
MISSING_INDEX = 4000
CIDRS4 = ("10.65.0.1/32", "10.65.0.2/32", "10.65.1.0/26", "10.66.0.0/16")
CIDRS6 = ("fd00:65::1/128", "fd00:65::2/128", "fd00:65:1::/64")
NEIGH_IPS = ("10.65.0.1", "10.65.0.2", "fd00:65::1", "fd00:65::2")
MACS = ("ee:ee:ee:ee:ee:ee", "02:00:0a:41:00:01", "aa:bb:cc:00:11:22")
NUD_PERMANENT = 0x80


def _setup(ns: NS) -> None:
    for name in LINKS:
        ns.ip("link", "add", name, "type", "veth", "peer", "name", f"p{name}")
        ns.ip("link", "set", f"p{name}", "up")
        if name != "calidown":
            ns.ip("link", "set", name, "up")


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[NS, NS, PyRoute2Netlink, IPRoute]]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    with netns("calrtA") as ours, netns("calrtB") as ref:
        for ns in (ours, ref):
            _setup(ns)
        nl = PyRoute2Netlink(ours.name)
        try:
            yield ours, ref, nl, ref.ipr
        finally:
            nl.close()


class Reference:
    """The route table's previous writes: pyroute2 calls with the same keywords."""

    def __init__(self, ipr: IPRoute) -> None:
        self.ipr = ipr

    def _call(self, api: str, command: str, **kw: Any) -> None:
        getattr(self.ipr, api)(command, **kw)

    def replace_route(
        self, cidr: str, ifindex: int, *, proto: int, scope: int, metric: int
    ) -> None:
        family = socket.AF_INET6 if ":" in cidr else socket.AF_INET
        self._call(
            "route",
            "replace",
            dst=cidr,
            table=254,
            family=family,
            oif=ifindex,
            scope=scope,
            proto=proto,
            priority=metric,
        )

    def delete_route(self, route: KernelRoute) -> None:
        family = socket.AF_INET6 if ":" in route.cidr else socket.AF_INET
        self._call(
            "route",
            "del",
            dst=route.cidr,
            table=254,
            family=family,
            oif=route.ifindex,
            priority=route.metric,
            proto=route.proto,
            scope=route.scope,
        )

    def set_neighbour(self, ip: str, mac: str, ifindex: int) -> None:
        self._call("neigh", "replace", dst=ip, lladdr=mac, ifindex=ifindex, state=NUD_PERMANENT)

    def delete_neighbour(self, ip: str, ifindex: int) -> None:
        self._call("neigh", "del", dst=ip, ifindex=ifindex)


links = st.sampled_from((*LINKS, None))  # None: an ifindex that does not exist
route_args = st.fixed_dictionaries(
    {
        "cidr": st.sampled_from(CIDRS4 + CIDRS6),
        "link": links,
        "proto": st.sampled_from((3, 80, 4)),
        "scope": st.sampled_from((0, 253)),
        "metric": st.sampled_from((0, 7, 1024)),
    }
)
ops = st.one_of(
    st.tuples(st.just("replace_route"), route_args),
    st.tuples(st.just("delete_route"), route_args),
    st.tuples(
        st.just("set_neighbour"),
        st.fixed_dictionaries(
            {"ip": st.sampled_from(NEIGH_IPS), "mac": st.sampled_from(MACS), "link": links}
        ),
    ),
    st.tuples(
        st.just("delete_neighbour"),
        st.fixed_dictionaries({"ip": st.sampled_from(NEIGH_IPS), "link": links}),
    ),
)


def _index(ns: NS, link: str | None) -> int:
    return MISSING_INDEX if link is None else ns.index(link)


def _run(target: Any, ns: NS, op: str, args: dict[str, Any]) -> int:
    """Apply one op; the errno it failed with, or 0."""
    idx = _index(ns, args["link"])
    try:
        if op == "replace_route":
            target.replace_route(
                args["cidr"], idx, proto=args["proto"], scope=args["scope"], metric=args["metric"]
            )
        elif op == "delete_route":
            target.delete_route(
                KernelRoute(args["cidr"], idx, args["proto"], args["scope"], args["metric"])
            )
        elif op == "set_neighbour":
            target.set_neighbour(args["ip"], args["mac"], idx)
        else:
            target.delete_neighbour(args["ip"], idx)
    except RouteNetlinkError as e:
        assert isinstance(target, PyRoute2Netlink)
        what = args.get("cidr") or args["ip"]
        assert e.strerror.startswith(f"{op.replace('_', ' ')} {what}: "), e.strerror
        return e.errno or -1
    except NetlinkError as e:
        return e.code
    return 0


def _routes(ns: NS) -> list[tuple[Any, ...]]:
    names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ns.ipr.link("dump")}
    out = []
    for family in (socket.AF_INET, socket.AF_INET6):
        for r in ns.ipr.route("dump", family=family, table=254):
            if r["proto"] == 2:  # the kernel's own (link-local, address subnets)
                continue
            out.append(
                (
                    r["family"],
                    r.get("dst"),
                    r["dst_len"],
                    r["table"],
                    r.get("table"),
                    r["proto"],
                    r["scope"],
                    r["type"],
                    r["flags"],
                    names.get(r.get("oif")),
                    r.get("priority"),
                    r.get("gateway"),
                )
            )
    return sorted(out, key=repr)


def _neighbours(ns: NS) -> list[tuple[Any, ...]]:
    names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ns.ipr.link("dump")}
    out = []
    for n in ns.ipr.neigh("dump"):
        name = names.get(n["ifindex"])
        if name in LINKS and n.get("dst") in NEIGH_IPS:  # not the kernel's multicast entries
            out.append((n["family"], name, n.get("dst"), n.get("lladdr"), n["state"], n["flags"]))
    return sorted(out, key=repr)


def _reset(ns: NS) -> None:
    for name in LINKS:
        ns.ip("route", "flush", "dev", name)
        ns.ip("-6", "route", "flush", "dev", name)
        ns.ip("neigh", "flush", "dev", name, "nud", "all")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seq=st.lists(ops, min_size=1, max_size=12))
def test_kernel_tables_equal_pyroute2s(
    pair: tuple[NS, NS, PyRoute2Netlink, IPRoute], seq: list[tuple[str, dict[str, Any]]]
) -> None:
    ours, ref, nl, ipr = pair
    reference = Reference(ipr)
    try:
        for op, args in seq:
            got = _run(nl, ours, op, args)
            want = _run(reference, ref, op, args)
            assert got == want, (op, args, os.strerror(got), os.strerror(want))
        assert _routes(ours) == _routes(ref)
        assert _neighbours(ours) == _neighbours(ref)
    finally:
        _reset(ours)
        _reset(ref)


def test_errors_name_the_request_and_carry_the_kernels_errno(
    pair: tuple[NS, NS, PyRoute2Netlink, IPRoute],
) -> None:
    ours, _, nl, _ = pair
    idx = ours.index("cali1")
    with pytest.raises(RouteNetlinkError) as info:
        nl.delete_route(KernelRoute("10.65.9.9/32", idx, 3, 253, 1024))
    assert info.value.errno == errno.ESRCH
    assert info.value.strerror == "delete route 10.65.9.9/32: No such process"
    with pytest.raises(RouteNetlinkError) as info:
        nl.delete_neighbour("10.65.9.9", idx)
    assert info.value.errno == errno.ENOENT
    assert info.value.strerror.startswith("delete neighbour 10.65.9.9: ")
    with pytest.raises(RouteNetlinkError) as info:
        nl.replace_route("10.65.9.9/32", MISSING_INDEX, proto=3, scope=253, metric=1024)
    assert info.value.errno == errno.ENODEV
    with pytest.raises(RouteNetlinkError) as info:  # refused before anything is sent
        nl.set_neighbour("10.65.9.9", "not-a-mac", idx)
    assert info.value.errno == errno.EINVAL and "invalid request" in info.value.strerror
    # The socket survives refusals: the next write works.
    nl.replace_route("10.65.9.9/32", idx, proto=3, scope=253, metric=1024)
    assert "10.65.9.9/32" in ours.routes_on("cali1")
    _reset(ours)


def test_writes_from_a_new_thread_use_a_socket_of_their_own(
    pair: tuple[NS, NS, PyRoute2Netlink, IPRoute],
) -> None:
    import threading

    ours, _, nl, _ = pair
    idx = ours.index("cali2")
    nl.replace_route("10.65.8.1/32", idx, proto=3, scope=253, metric=1024)
    first = nl._dumper
    errors: list[BaseException] = []

    def other() -> None:
        try:
            nl.replace_route("10.65.8.2/32", idx, proto=3, scope=253, metric=1024)
        except BaseException as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert not errors and nl._dumper is not first
    assert {"10.65.8.1/32", "10.65.8.2/32"} <= ours.routes_on("cali2")
    _reset(ours)
