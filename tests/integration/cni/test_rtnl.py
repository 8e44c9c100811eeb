"""calico.cni.rtnl against the kernel, inside throwaway namespaces (checked with iproute2)."""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket

import pytest
from netns_support import NetnsWorker, ip, netns, worker_netns

from calico.cni.rtnl import RTNL, NetlinkError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def _in(worker: NetnsWorker, fn):  # type: ignore[no-untyped-def]
    def run():  # type: ignore[no-untyped-def]
        with RTNL() as nl:
            return fn(nl)

    return worker.call(run)


def test_veth_addresses_routes_and_lookups() -> None:
    with worker_netns(NetnsWorker, "rtnlh") as host, netns("rtnlp") as pod:
        fd = os.open(f"/run/netns/{pod}", os.O_RDONLY)
        try:
            _in(host, lambda nl: nl.veth_add("vh0", "ee:ee:ee:ee:ee:ee", "vp0", fd, mtu=1400,
                                             num_queues=2))  # fmt: skip
        finally:
            os.close(fd)
        link = json.loads(ip("-d", "-j", "link", "show", "vh0", ns=host.name))[0]
        assert link["address"] == "ee:ee:ee:ee:ee:ee" and link["mtu"] == 1400
        assert link["num_tx_queues"] == 2 and link["linkinfo"]["info_kind"] == "veth"
        peer = json.loads(ip("-j", "link", "show", "vp0", ns=pod))[0]
        assert peer["mtu"] == 1400

        def configure(nl: RTNL) -> tuple[object, ...]:
            idx = nl.link_index("vh0")
            assert idx is not None
            nl.link_up(idx)
            nl.addr_add(idx, ipaddress.ip_address("10.1.2.3"), 32)
            nl.addr_add(idx, ipaddress.ip_address("fd00::5"), 128, nodad=True)
            nl.route_add(ipaddress.ip_network("10.9.0.0/24"), idx, scope_link=True)
            nl.route_add(ipaddress.ip_network("0.0.0.0/0"), idx, gateway="10.9.0.1")
            try:
                nl.route_add(ipaddress.ip_network("10.9.0.0/24"), idx, scope_link=True)
            except NetlinkError as exc:
                dup = exc.code
            return (idx, nl.link_by_index(idx), nl.link_by_name("nope"), nl.addrs(idx),
                    nl.routes(socket.AF_INET), dup)  # fmt: skip

        idx, by_index, missing, addrs, routes, dup = _in(host, configure)
        assert by_index.name == "vh0" and by_index.mac == "ee:ee:ee:ee:ee:ee"  # type: ignore[attr-defined]
        assert missing is None
        assert ("10.1.2.3", 32) in addrs and ("fd00::5", 128) in addrs  # type: ignore[operator]
        assert dup == errno.EEXIST
        assert ("10.9.0.0", 24, idx) in routes and ("", 0, idx) in routes  # type: ignore[operator]
        shown = json.loads(ip("-d", "-j", "route", "show", ns=host.name))
        default = next(r for r in shown if r["dst"] == "default")
        assert default["gateway"] == "10.9.0.1" and default["protocol"] == "static"
        subnet = next(r for r in shown if r["dst"] == "10.9.0.0/24")
        assert subnet["scope"] == "link"
        v6 = json.loads(ip("-j", "-6", "addr", "show", "vh0", ns=host.name))[0]["addr_info"]
        fd5 = next(a for a in v6 if a["local"] == "fd00::5")
        assert fd5["prefixlen"] == 128 and "peer" not in fd5 and fd5.get("nodad") is True

        _in(host, lambda nl: nl.link_delete(idx))
        assert ip("link", "show", "vh0", ns=host.name, check=False) == ""
        with pytest.raises(NetlinkError) as err:
            _in(host, lambda nl: nl.link_delete(idx))
        assert err.value.code == errno.ENODEV


def test_duplicate_veth_is_eexist() -> None:
    with worker_netns(NetnsWorker, "rtnlh") as host, netns("rtnlp") as pod:
        fd = os.open(f"/run/netns/{pod}", os.O_RDONLY)
        try:
            _in(host, lambda nl: nl.veth_add("vh0", "ee:ee:ee:ee:ee:ee", "vp0", fd))
            with pytest.raises(NetlinkError) as err:
                _in(host, lambda nl: nl.veth_add("vh1", "ee:ee:ee:ee:ee:ee", "vp0", fd))
        finally:
            os.close(fd)
        assert err.value.code == errno.EEXIST
        assert "vh1" not in ip("link", "show", ns=host.name)
