"""VXLANManager scheduling and error handling against a fake kernel; MTU detection and file;
unsupported tunnels; the start-up encapsulation and the restart on its change."""

from __future__ import annotations

import errno
import logging
import re
from pathlib import Path

import pytest

from calico.api.io import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend
from calico.felix import nlbatch as nb
from calico.felix.config import resolve
from calico.felix.config.sources import Source
from calico.felix.daemon import ConfigConnector
from calico.felix.dataplane.build import build_vxlan_managers
from calico.felix.dataplane.encap_support import TunnelSupportReporter
from calico.felix.dataplane.managers.vxlan import VXLANManager, pool_overlap_errors
from calico.felix.dataplane.mtu import LinkMTU, encap_mtus, find_host_mtu, write_mtu_file
from calico.felix.dataplane.vxlan_kernel import KernelError, Link
from calico.felix.dataplane.vxlan_model import Settings
from calico.felix.messages import (
    Encapsulation,
    IPAMPool,
    IPAMPoolUpdate,
    IPPoolType,
    RouteType,
    RouteUpdate,
    VXLANTunnelEndpointRemove,
    VXLANTunnelEndpointUpdate,
)
from calico.felix.startup_config import load_encapsulation


class FakeKernel:
    """Records requests; keeps neighbours/FDB/routes as the manager would read them back."""

    version = 4

    def __init__(self) -> None:
        self.sent: list[list[nb.Request]] = []
        self.ensured = 0
        self.reads = 0
        self.fail_next: int | None = None
        self.parent: Link | None = Link("eth0", 2, 1500, True)
        self.neigh: dict[str, str] = {}
        self.fdb: dict[str, str] = {}
        self.routes: dict = {}

    def link_with_address(self, ip: str) -> Link | None:
        return self.parent

    def ensure_device(self, spec, parent) -> int:
        self.ensured += 1
        return 7

    def links(self) -> list[Link]:
        return [Link("eth0", 2, 1500, True), Link("vxlan.calico", 7, 1450, True)]

    def read_neighbours(self, ifindex: int) -> dict[str, str]:
        self.reads += 1
        return dict(self.neigh)

    def read_fdb(self, ifindex: int) -> dict[str, str]:
        return dict(self.fdb)

    def read_routes(self, ifindex, proto, names) -> dict:
        return dict(self.routes)

    def send(self, requests: list[nb.Request]) -> list[nb.Failure]:
        self.sent.append(list(requests))
        if self.fail_next is not None:
            code, self.fail_next = self.fail_next, None
            return [nb.Failure(requests[0], code)]
        return []

    def close(self) -> None:
        pass


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def vtep(node: str, n: int) -> VXLANTunnelEndpointUpdate:
    return VXLANTunnelEndpointUpdate(
        node=node,
        mac=f"66:00:00:00:00:{n:02x}",
        ipv4_addr=f"10.244.{n}.0",
        parent_device_ip=f"10.0.0.{n}",
    )


def remote_route(n: int) -> RouteUpdate:
    return RouteUpdate(
        dst=f"10.244.{n}.0/26",
        types=frozenset({RouteType.REMOTE_WORKLOAD}),
        ip_pool_type=IPPoolType.VXLAN,
        dst_node_name=f"n{n}",
        dst_node_ip=f"10.0.0.{n}",
    )


def make() -> tuple[VXLANManager, FakeKernel, Clock]:
    kernel, clock = FakeKernel(), Clock()
    mgr = VXLANManager(
        Settings(version=4, hostname="n1", mtu=1450),
        kernel,  # type: ignore[arg-type]
        refresh_interval=90.0,
        clock=clock,
    )
    mgr.on_update(vtep("n1", 1))
    return mgr, kernel, clock


def kinds(reqs: list[nb.Request]) -> list[str]:
    return [r.what.split(" ")[0] + " " + r.what.split(" ")[1] for r in reqs]


def test_nothing_is_programmed_without_an_own_vtep():
    kernel, clock = FakeKernel(), Clock()
    mgr = VXLANManager(Settings(version=4, hostname="n1"), kernel, clock=clock)  # type: ignore
    mgr.on_update(vtep("n2", 2))
    assert mgr.apply() == []
    assert kernel.ensured == 0 and kernel.sent == []


def test_first_apply_resyncs_then_writes_l2_before_routes_then_idles():
    mgr, kernel, _clock = make()
    mgr.on_update(vtep("n2", 2))
    mgr.on_update(remote_route(2))
    assert mgr.apply() == []
    assert kernel.reads == 1 and kernel.ensured == 1
    assert kinds(kernel.sent[0]) == ["set FDB", "set neighbour", "replace route"]
    assert mgr.apply() == []  # in sync: no netlink at all
    assert len(kernel.sent) == 1 and kernel.reads == 1
    deadline = mgr.next_deadline()
    assert deadline is not None and 100 + 81 <= deadline <= 100 + 99  # 90 s +- 10 %


def test_one_node_change_is_one_small_delta():
    mgr, kernel, _ = make()
    for n in range(2, 50):
        mgr.on_update(vtep(f"n{n}", n))
        mgr.on_update(remote_route(n))
    mgr.apply()
    mgr.on_update(VXLANTunnelEndpointRemove("n7"))
    mgr.apply()
    assert kinds(kernel.sent[-1]) == ["delete route", "delete neighbour", "delete FDB"]


def test_stale_kernel_entries_are_deleted_at_resync():
    mgr, kernel, _ = make()
    kernel.neigh = {"10.244.9.0": "66:00:00:00:00:09"}
    kernel.fdb = {"66:00:00:00:00:09": "10.0.0.9"}
    assert mgr.apply() == []
    assert kinds(kernel.sent[0]) == ["delete neighbour", "delete FDB"]


def test_refresh_reads_back_again_and_repairs():
    mgr, kernel, clock = make()
    mgr.on_update(vtep("n2", 2))
    mgr.apply()
    kernel.fdb = {}  # someone deleted it; the manager's cache still has it
    kernel.neigh = {"10.244.2.0": "66:00:00:00:00:02"}
    clock.now += 100
    assert mgr.apply() == []
    assert kernel.reads == 2
    assert kinds(kernel.sent[-1]) == ["set FDB"]


def test_a_refused_request_is_an_error_retried_after_a_second_with_a_resync():
    mgr, kernel, clock = make()
    mgr.on_update(vtep("n2", 2))
    kernel.fail_next = errno.EINVAL
    errors = mgr.apply()
    assert len(errors) == 1 and "Invalid argument" in errors[0]
    assert mgr.next_deadline() == pytest.approx(clock.now + 1.0)
    assert mgr.apply() == []  # not due yet: nothing
    clock.now += 1.0
    assert mgr.apply() == []
    assert kernel.reads == 2


def test_deleting_something_already_gone_is_fine():
    mgr, kernel, _ = make()
    kernel.neigh = {"10.244.9.0": "66:00:00:00:00:09"}
    kernel.fail_next = errno.ENOENT
    assert mgr.apply() == []


def test_missing_parent_is_a_clear_error():
    mgr, kernel, _ = make()
    kernel.parent = None
    errors = mgr.apply()
    assert errors == [
        "no interface carries this node's IPv4 address 10.0.0.1; cannot create vxlan.calico"
    ]


def test_iface_events_for_device_or_parent_queue_a_resync():
    mgr, _kernel, clock = make()
    mgr.apply()
    mgr.on_iface_state("cali123", "up", 9)
    assert mgr.next_deadline() > clock.now
    mgr.on_iface_state("vxlan.calico", "up", 7)
    assert mgr.next_deadline() == clock.now


def test_bad_input_is_logged_once_per_distinct_error(caplog):
    caplog.set_level(logging.ERROR)
    mgr, _kernel, _ = make()
    bad = VXLANTunnelEndpointUpdate(
        node="x", mac="nope", ipv4_addr="10.244.9.0", parent_device_ip="10.0.0.9"
    )
    mgr.on_update(bad)
    mgr.apply()
    mgr.on_update(vtep("n2", 2))
    mgr.apply()
    assert caplog.text.count("node x: malformed VXLAN tunnel MAC 'nope'") == 1


def test_pool_overlap_errors_only_involving_vxlan_pools():
    pools = {
        "a": IPAMPool("10.0.0.0/16", vxlan_mode="Always"),
        "b": IPAMPool("10.0.5.0/24"),
        "c": IPAMPool("10.9.0.0/16"),
        "d": IPAMPool("10.9.1.0/24"),  # overlaps c, but neither is VXLAN
        "e": IPAMPool("fd00::/64", vxlan_mode="Always"),
    }
    assert pool_overlap_errors(pools, 4) == [
        "VXLAN IP pool 10.0.0.0/16 overlaps IP pool 10.0.5.0/24; routes may be ambiguous"
    ]
    assert pool_overlap_errors(pools, 6) == []


def test_pool_overlap_is_logged_by_the_manager(caplog):
    caplog.set_level(logging.ERROR)
    mgr, _, _ = make()
    mgr.on_update(IPAMPoolUpdate("a", IPAMPool("10.0.0.0/16", vxlan_mode="Always")))
    mgr.on_update(IPAMPoolUpdate("b", IPAMPool("10.0.0.0/24", vxlan_mode="Always")))
    mgr.complete_deferred_work()
    assert "VXLAN IP pool 10.0.0.0/16 overlaps IP pool 10.0.0.0/24" in caplog.text


# -- MTU -----------------------------------------------------------------------------------

PATTERN = re.compile(r"^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)")


def test_host_mtu_is_the_smallest_oper_up_matching_link():
    links = [
        LinkMTU("eth0", 1500, True),
        LinkMTU("ens3", 9000, True),
        LinkMTU("eth1", 1400, False),  # down: ignored
        LinkMTU("docker0", 1000, True),  # no match
    ]
    assert find_host_mtu(links, PATTERN) == 1500


def test_no_matching_link_falls_back_to_1460(caplog):
    caplog.set_level(logging.WARNING)
    assert find_host_mtu([LinkMTU("lo", 65536, True)], PATTERN) == 1460
    assert "No oper-up interface matches MTUIfacePattern" in caplog.text


def test_encap_mtus_and_pod_mtu_over_enabled_encaps():
    m = encap_mtus(1500)
    assert (m.ipip, m.vxlan, m.vxlan_v6, m.wireguard, m.wireguard_v6) == (
        1480,
        1450,
        1430,
        1440,
        1420,
    )
    assert encap_mtus(1500, vxlan=1400).vxlan == 1400
    assert m.pod_mtu(ipip=False, vxlan=True, vxlan_v6=False) == 1450
    assert m.pod_mtu(ipip=False, vxlan=True, vxlan_v6=True) == 1430
    assert m.pod_mtu(ipip=False, vxlan=False, vxlan_v6=False) == 1500


def test_mtu_file_is_decimal_without_newline_mode_0644(tmp_path: Path):
    path = tmp_path / "deep" / "mtu"
    write_mtu_file(path, 1450)
    assert path.read_bytes() == b"1450"
    assert path.stat().st_mode & 0o777 == 0o644
    write_mtu_file(path, 1430)
    assert path.read_text() == "1430"
    assert [p.name for p in path.parent.iterdir()] == ["mtu"]  # no temp files left


def test_mtu_file_path_is_a_felix_parameter():
    assert resolve({}).mtu_file_path == "/var/lib/calico/mtu"
    cfg = resolve({Source.ENVIRONMENT: {"MTUFilePath": "/tmp/n1/mtu"}})
    assert cfg.mtu_file_path == "/tmp/n1/mtu"


# -- unsupported tunnels ---------------------------------------------------------------------


def test_ipip_request_without_module_is_a_clear_error_once(caplog):
    caplog.set_level(logging.ERROR)
    probes: list[str] = []
    r = TunnelSupportReporter(probe=lambda kind: probes.append(kind) or False)
    r.on_update(Encapsulation(ipip_enabled=True))
    r.on_update(Encapsulation(ipip_enabled=True, vxlan_enabled=True))
    assert probes == ["ipip"]
    assert len(r.problems) == 1 and "no 'ipip' module" in r.problems[0]
    assert "IPIP routes are not programmed" in caplog.text


def test_wireguard_config_without_module_is_reported_and_supported_kernel_is_quiet():
    r = TunnelSupportReporter(wireguard_v4=True, wireguard_v6=True, probe=lambda k: False)
    assert [p.split(" ")[0] for p in r.problems] == ["WireguardEnabled", "WireguardEnabledV6"]
    ok = TunnelSupportReporter(wireguard_v4=True, probe=lambda k: True)
    ok.on_update(Encapsulation(ipip_enabled=True))
    assert ok.problems == []


def test_probe_failure_counts_as_unsupported():
    def boom(kind: str) -> bool:
        raise KernelError("netlink down")

    r = TunnelSupportReporter(probe=boom)
    r.on_update(Encapsulation(ipip_enabled=True))
    assert len(r.problems) == 1


def test_vxlan_managers_only_for_enabled_families():
    em = encap_mtus
    cfg = resolve({}, hostname="n1")
    mgrs = build_vxlan_managers(cfg, Encapsulation(vxlan_enabled=True), em(1500))
    assert [(m.settings.version, m.settings.mtu) for m in mgrs] == [(4, 1450)]
    both = build_vxlan_managers(
        cfg, Encapsulation(vxlan_enabled=True, vxlan_enabled_v6=True), em(9000)
    )
    assert [(m.settings.version, m.settings.mtu) for m in both] == [(4, 8950), (6, 8930)]
    no_v6 = resolve({Source.ENVIRONMENT: {"Ipv6Support": "false"}}, hostname="n1")
    assert len(build_vxlan_managers(no_v6, Encapsulation(vxlan_enabled_v6=True), em(1500))) == 0


# -- start-up encapsulation and restart ----------------------------------------------------


def test_load_encapsulation_from_pools_and_overrides(tmp_path: Path):
    backend = open_backend(DatastoreConfig(local_path=str(tmp_path / "c.db")))
    try:
        client = Client(backend)
        assert load_encapsulation(backend) == Encapsulation()
        for name, spec in (
            ("v4", {"cidr": "10.0.0.0/16", "vxlanMode": "CrossSubnet"}),
            ("v6", {"cidr": "fd00::/64", "vxlanMode": "Always"}),
        ):
            client.apply(
                parse_resource(
                    {
                        "apiVersion": "projectcalico.org/v3",
                        "kind": "IPPool",
                        "metadata": {"name": name},
                        "spec": spec,
                    }
                )
            )
        assert load_encapsulation(backend) == Encapsulation(
            vxlan_enabled=True, vxlan_enabled_v6=True
        )
        assert load_encapsulation(backend, vxlan_enabled=False, ipip_enabled=True) == (
            Encapsulation(ipip_enabled=True, vxlan_enabled=False, vxlan_enabled_v6=True)
        )
    finally:
        backend.close()


def test_encapsulation_change_restarts_felix():
    forwarded: list[object] = []
    restarts: list[str] = []
    start = Encapsulation(vxlan_enabled=True)
    c = ConfigConnector(resolve({}), forwarded.extend, restarts.append, encap=start)
    c([start])
    assert restarts == [] and forwarded == [start]
    c([Encapsulation(vxlan_enabled=True, vxlan_enabled_v6=True)])
    assert len(restarts) == 1 and "encapsulation changed" in restarts[0]
    assert forwarded == [start]  # nothing forwarded once a restart is requested


class RecordingTable:
    def __init__(self) -> None:
        self.sets: dict[str, object] = {}

    def set_set(self, nft_set) -> None:
        self.sets[nft_set.name] = nft_set


def test_allowed_sources_set_is_remote_node_ips_plus_external_nodes():
    table = RecordingTable()
    mgr = VXLANManager(
        Settings(version=4, hostname="n1"),
        FakeKernel(),  # type: ignore[arg-type]
        table=table,  # type: ignore[arg-type]
        external_nodes=("10.0.0.0/30", "fd00::/64"),
    )
    mgr.complete_deferred_work()
    assert table.sets["cali40all-vxlan-net"].elements == {"10.0.0.0/30"}  # type: ignore
    for node, n in (("n1", 1), ("n2", 2), ("n9", 9)):
        mgr.on_update(vtep(node, n))
    mgr.complete_deferred_work()
    got = table.sets["cali40all-vxlan-net"]
    assert got.elements == {"10.0.0.0/30", "10.0.0.9"}  # type: ignore  # n2 inside the /30
    assert got.interval and got.type == "ipv4_addr"  # type: ignore
    table.sets.clear()
    mgr.complete_deferred_work()
    assert table.sets == {}  # unchanged: not re-set


def test_unwritable_mtu_file_is_fatal_only_with_require_mtu_file(tmp_path: Path, monkeypatch):
    from calico.felix.dataplane import build

    monkeypatch.setattr(build, "detect_mtus", lambda config, encap: (encap_mtus(1500), 1450))
    blocker = tmp_path / "file"
    blocker.write_text("")
    bad = str(blocker / "mtu")  # a directory that is a file: cannot be created
    cfg = resolve({Source.ENVIRONMENT: {"MTUFilePath": bad}})
    assert build.publish_mtu(cfg, Encapsulation()).vxlan == 1450  # logged, not fatal
    strict = resolve({Source.ENVIRONMENT: {"MTUFilePath": bad, "RequireMTUFile": "true"}})
    with pytest.raises(build.DataplaneStartError, match="cannot write MTU file"):
        build.publish_mtu(strict, Encapsulation())
    good = resolve({Source.ENVIRONMENT: {"MTUFilePath": str(tmp_path / "n1" / "mtu")}})
    build.publish_mtu(good, Encapsulation(vxlan_enabled=True))
    assert (tmp_path / "n1" / "mtu").read_text() == "1450"
