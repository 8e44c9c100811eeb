"""The struct-decoded link dump (``VXLANKernel.links``, MTU detection) against pyroute2's
``get_links`` on the same namespace: same links, names, indexes, MTUs and up state."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import netns_support as nss
import pytest
from pyroute2 import IPRoute

from calico.felix.dataplane.vxlan_kernel import IFF_RUNNING, IFF_UP, KernelError, VXLANKernel

pytestmark = pytest.mark.root


@pytest.fixture
def ns() -> Iterator[str]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    with nss.netns("callnk") as name:
        yield name


def pyroute2_links(ns: str) -> list[tuple[str, int, int, bool]]:
    with IPRoute(netns=ns, flags=0) as ipr:
        return [
            (
                m.get_attr("IFLA_IFNAME"),
                m["index"],
                m.get_attr("IFLA_MTU") or 0,
                bool(m["flags"] & IFF_UP and m["flags"] & IFF_RUNNING),
            )
            for m in ipr.get_links()
        ]


def ours(ns: str) -> list[tuple[str, int, int, bool]]:
    kernel = VXLANKernel(4, netns=ns)
    try:
        return [(lk.name, lk.index, lk.mtu, lk.oper_up) for lk in kernel.links()]
    finally:
        kernel.close()


def test_link_dump_equals_pyroute2s(ns: str) -> None:
    def veth(a: str, b: str, mtu: int) -> None:
        nss.in_ns(ns, "ip", "link", "add", a, "mtu", str(mtu), "type", "veth", "peer", "name", b)

    veth("down-a", "down-b", 1234)
    veth("cali0123456789a", "up-peer", 9000)  # a 15-character name
    nss.in_ns(ns, "ip", "link", "set", "cali0123456789a", "up")  # peer down: not running
    veth("run-a", "run-b", 1500)
    for name in ("run-a", "run-b"):
        nss.in_ns(ns, "ip", "link", "set", name, "up")  # both ends up: running
    for i in range(75):  # more links than one recv() of replies holds
        veth(f"m{i}", f"n{i}", 1280 + i)
    got = ours(ns)
    assert got == pyroute2_links(ns)
    by_name = {name: (mtu, up) for name, _, mtu, up in got}
    assert by_name["lo"] == (65536, True)
    assert by_name["down-a"] == (1234, False)
    assert by_name["cali0123456789a"] == (9000, False)
    assert by_name["run-a"] == by_name["run-b"] == (1500, True)
    assert by_name["m74"] == (1354, False)
    assert by_name["n74"] == (1500, False)  # the peer keeps the default
    assert len(got) == 1 + 6 + 150


def test_a_vanished_namespace_is_a_kernel_error() -> None:
    kernel = VXLANKernel(4, netns=nss.unique_name("gone"))
    try:
        with pytest.raises(KernelError, match=r"^dump links: "):
            kernel.links()
    finally:
        kernel.close()


def test_delete_device_removes_only_a_present_device(ns: str) -> None:
    """VXLAN off at start-up: the device a previous run left is deleted (True), an absent
    one is no error (False), and a name that only starts like it is left alone."""
    nss.in_ns(ns, "ip", "link", "add", "vxlan.calico", "type", "veth", "peer", "name", "vx-peer")
    nss.in_ns(ns, "ip", "link", "add", "vxlan.calico2", "type", "veth", "peer", "name", "vx-p2")
    kernel = VXLANKernel(4, netns=ns)
    try:
        assert kernel.delete_device("vxlan.calico") is True
        names = {name for name, *_ in ours(ns)}
        assert "vxlan.calico" not in names and "vx-peer" not in names  # veth peers go together
        assert "vxlan.calico2" in names
        assert kernel.delete_device("vxlan.calico") is False
        assert kernel.delete_device("vxlan-v6.calico") is False
    finally:
        kernel.close()
