"""TCX attach with real traffic: pinned links instead of tc filters, deny until policy, an
in-place re-attach (link update, same pin), migration tc <-> TCX on a live interface, detach
on removal (links and pins gone). (The attach-type choice: tests/unit/felix/bpf.)"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import netns_support as ns
import pytest
from bpf_support import PolicyState, dataplane, need_bpf

from calico.felix.bpf import attach, tcx
from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.libbpf import BPFError
from calico.felix.messages import Profile, Rule

pytestmark = pytest.mark.root

SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(64)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hi"); c.close()
"""
ALLOW_ALL = Profile(inbound_rules=(Rule(action="allow"),), outbound_rules=(Rule(action="allow"),))


@dataclass
class Topo:
    host: str
    wls: list[str]
    ips: list[str]
    ifaces: list[str]
    dp: BPFDataplane


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topo]:
    need_bpf()
    if not tcx.supported():
        pytest.skip("kernel without TCX")
    with contextlib.ExitStack() as stack:
        host = stack.enter_context(ns.netns("caltcxh"))
        wls = [stack.enter_context(ns.netns("caltcxw")) for _ in range(2)]
        ns.in_ns(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        ips, ifaces = [], []
        for i, wl in enumerate(wls, start=1):
            iface, ip = f"calitcx{i}", f"10.68.0.{i}"
            ns.add_veth(iface, "eth0", ns=host, peer_ns=wl)
            ns.in_ns(wl, "ip", "link", "set", "eth0", "up")
            ns.in_ns(wl, "ip", "addr", "add", f"{ip}/32", "dev", "eth0")
            ns.in_ns(wl, "ip", "route", "add", "default", "dev", "eth0")
            ns.in_ns(host, "ip", "link", "set", iface, "up")
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.conf.{iface}.proxy_arp=1")
            ns.in_ns(host, "sysctl", "-qw", f"net.ipv4.neigh.{iface}.proxy_delay=0")
            ns.in_ns(host, "ip", "route", "add", f"{ip}/32", "dev", iface)
            mac = ns.link_mac(wl, "eth0")
            ns.in_ns(host, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", iface,
                     "nud", "permanent")  # fmt: skip
            stack.enter_context(ns.py_server(wl, SERVER, "8080"))
            ips.append(ip)
            ifaces.append(iface)
        base = str(tmp_path_factory.mktemp("bpftcx"))
        dp = stack.enter_context(dataplane(base, host))
        dp.attach_type = "tcx"
        yield Topo(host, wls, ips, ifaces, dp)


def probe(topo: Topo) -> str:
    return ns.tcp_probe(topo.wls[0], topo.ips[1], 8080, 0.7)


def tc_filters(topo: Topo, iface: str) -> str:
    out = ns.in_ns(topo.host, "tc", "filter", "show", "dev", iface, "ingress", check=False)
    return out.stdout


def test_tcx_links_enforce_and_update_in_place(topo: Topo) -> None:
    dp, state = topo.dp, PolicyState()
    state.profiles["allow"] = ALLOW_ALL
    assert probe(topo) == "ok"
    for iface in topo.ifaces:
        dp.attach_iface(iface)
    assert attach.attach_mode(topo.ifaces[1], topo.host) == {"ingress": "tcx", "egress": "tcx"}
    assert attach.attached_programs(topo.ifaces[1], topo.host) == {
        "ingress": "calico_from_wep",
        "egress": "calico_to_wep",
    }
    assert "calico" not in tc_filters(topo, topo.ifaces[1])
    pins = [tcx.pin_path(dp.link_dir, topo.ifaces[1], d) for d in ("ingress", "egress")]
    assert all(os.path.exists(p) for p in pins)
    assert probe(topo) == "timeout"  # attached, no policy yet: deny
    for iface, ip in zip(topo.ifaces, topo.ips, strict=True):
        dp.set_workload_routes(iface, (f"{ip}/32",))  # from-WEP's reverse-path check
        dp.set_policies(iface, state.sources(profile_ids=("allow",)))
    assert probe(topo) == "ok"
    inodes = [os.stat(p).st_ino for p in pins]
    dp.attach_iface(topo.ifaces[1])  # re-attach: BPF_LINK_UPDATE on the pinned link
    assert [os.stat(p).st_ino for p in pins] == inodes
    assert probe(topo) == "ok"
    ids = tcx.programs(dp.ifindex(topo.ifaces[1]) or 0, topo.host)
    assert [name for name, _ in ids["ingress"]] == ["calico_from_wep"]  # one link, not two


def test_migration_between_tc_and_tcx(topo: Topo) -> None:
    dp, iface = topo.dp, topo.ifaces[1]
    dp.attach_type = "tc"
    try:
        dp.attach_iface(iface)
        assert attach.attach_mode(iface, topo.host) == {"ingress": "tc", "egress": "tc"}
        assert "calico_from_wep" in tc_filters(topo, iface)
        assert not os.path.exists(tcx.pin_path(dp.link_dir, iface, "ingress"))
        assert probe(topo) == "ok"
    finally:
        dp.attach_type = "tcx"
    dp.attach_iface(iface)
    assert attach.attach_mode(iface, topo.host) == {"ingress": "tcx", "egress": "tcx"}
    assert "calico" not in tc_filters(topo, iface)  # our clsact filters removed
    assert probe(topo) == "ok"


def test_remove_iface_detaches_links(topo: Topo) -> None:
    dp = topo.dp
    for iface in topo.ifaces:
        dp.remove_iface(iface)
        assert attach.attached_programs(iface, topo.host) == {}
        for d in ("ingress", "egress"):
            assert not os.path.exists(tcx.pin_path(dp.link_dir, iface, d))
    assert probe(topo) == "ok"  # plain routing again
    # a lost pin (a predecessor's private bpffs): detach still finds the link by program
    dp.attach_iface(topo.ifaces[0])
    for d in ("ingress", "egress"):
        os.unlink(tcx.pin_path(dp.link_dir, topo.ifaces[0], d))
    # the link lives on only while something holds it: unpinned, it is gone at once
    assert attach.attached_programs(topo.ifaces[0], topo.host) == {}
    with pytest.raises(BPFError, match="TCX attach to nosuch0"):
        tcx.attach(12345, "nosuch0", {"ingress": dp.from_fd}, dp.link_dir, topo.host)
