"""Fixtures for rule-renderer kernel tests: a fresh namespace, and a host+3-workload topology."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from rules_netns import Topology, add_veth, in_ns, link_mac, netns, servers


def _need_root() -> None:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs root, iproute2 and nft")


@pytest.fixture
def rules_ns() -> Iterator[str]:
    _need_root()
    with netns() as ns:
        yield ns


SERVER_PORTS = ("8080", "9090")


@pytest.fixture(scope="module")
def topology() -> Iterator[Topology]:
    _need_root()
    with netns("calhost") as host, netns("calw1") as w1, netns("calw2") as w2, netns("calw3") as w3:
        topo = Topology(host)
        in_ns(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for i, wl in enumerate((w1, w2, w3), start=1):
            iface, ip = f"calit{i}", f"10.65.0.{i}"
            add_veth(iface, "eth0", ns=host, peer_ns=wl)
            in_ns(wl, "ip", "link", "set", "eth0", "up")
            in_ns(wl, "ip", "addr", "add", f"{ip}/32", "dev", "eth0")
            in_ns(wl, "ip", "route", "add", "10.65.0.0/24", "dev", "eth0")
            in_ns(host, "ip", "link", "set", iface, "up")
            in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{iface}.proxy_arp=1")
            in_ns(host, "sysctl", "-qw", f"net.ipv4.neigh.{iface}.proxy_delay=0")
            in_ns(host, "ip", "route", "add", f"{ip}/32", "dev", iface)
            mac = link_mac(wl, "eth0")
            in_ns(
                host, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", iface, "nud", "permanent"
            )
            topo.workloads.append(wl)
            topo.ips.append(ip)
            topo.ifaces.append(iface)
        with servers(w2, *SERVER_PORTS):
            yield topo
