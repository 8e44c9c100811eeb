"""VXLAN programming with 1,000 remote nodes, in a throwaway network namespace (root).

Measured (targets from issue 14):

* ``program_1000_nodes_s`` - one IPv4 VXLANManager, cold: device creation, readback and the
  3,001 kernel objects (1,000 routes via the peers' tunnel IPs, 1,000 permanent neighbours,
  1,000 FDB entries, one blackhole) for 1,000 remote VTEPs (target <= 2 s). Baseline: the same
  objects written by one ``ip -batch`` (routes, neighbours) plus one ``bridge -batch`` (FDB)
  into a second fresh namespace - iproute2's own floor, process start included.
* ``calc_graph_plus_program_1000_nodes_s`` - the same, starting from typed datastore updates
  (1,000 Nodes with tunnel addresses, their blocks, a VXLAN pool) through the real calc graph
  (VXLAN and L3 route resolvers, event sequencer) into a fresh manager; same baseline.
* ``one_node_change_s`` - with 1,000 present, one remote node's VTEP changes (new tunnel IP
  and MAC: calc graph sends remove + update) and its block route follows; time of that apply
  (target <= 20 ms). Baseline: the same five kernel changes by one ``ip -batch`` and one
  ``bridge -batch`` (median of 5 runs each).
* ``resync_1000_nodes_s`` - a periodic refresh with nothing to repair (readback of all owned
  objects) - what the loop pays every RouteRefreshInterval; baseline: ``ip route show`` +
  ``ip neigh show`` + ``bridge fdb show`` of the same namespace.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # the shared netns_support module
import netns_support as nss  # noqa: E402
from harness import emit  # noqa: E402

from calico.api.cluster import Node  # noqa: E402
from calico.felix.calc.calc_graph import build_felix_calc_pipeline  # noqa: E402
from calico.felix.dataplane.managers.vxlan import VXLANManager  # noqa: E402
from calico.felix.dataplane.vxlan_kernel import VXLANKernel  # noqa: E402
from calico.felix.dataplane.vxlan_model import Settings  # noqa: E402
from calico.felix.messages import (  # noqa: E402
    IPPoolType,
    RouteType,
    RouteUpdate,
    VXLANTunnelEndpointRemove,
    VXLANTunnelEndpointUpdate,
)
from calico.model import BlockKey, HostConfigKey, IPPoolKey, ResourceKey  # noqa: E402
from calico.model import values as v1  # noqa: E402
from calico.syncer.api import SyncStatus, Update, UpdateType  # noqa: E402

BENCH = "vxlan"
N = 1000
ME = "bench-me"


def node_ip(i: int) -> str:
    return f"10.0.{i // 250}.{i % 250 + 2}"


def tunnel_ip(i: int) -> str:
    return f"10.244.{i // 4}.{(i % 4) * 64}"


def block(i: int) -> str:
    return f"{tunnel_ip(i)}/26"


def mac(i: int) -> str:
    return f"66:00:00:00:{i // 256:02x}:{i % 256:02x}"


def vtep(name: str, i: int, **kw: str) -> VXLANTunnelEndpointUpdate:
    return VXLANTunnelEndpointUpdate(
        node=name,
        mac=kw.get("mac", mac(i)),
        ipv4_addr=kw.get("ip", tunnel_ip(i)),
        parent_device_ip=node_ip(i),
    )


def remote_route(i: int) -> RouteUpdate:
    return RouteUpdate(
        dst=block(i),
        types=frozenset({RouteType.REMOTE_WORKLOAD}),
        ip_pool_type=IPPoolType.VXLAN,
        dst_node_name=f"n{i}",
        dst_node_ip=node_ip(i),
    )


def make_ns(stack_names: list[str]) -> str:
    """A namespace whose eth0 (one end of a veth pair) carries the node's underlay address."""
    name = nss.unique_name("bvx")
    nss.add_netns(name)
    stack_names.append(name)
    nss.ip("link", "set", "lo", "up", ns=name)
    nss.add_veth("eth0", "eth0p", ns=name)
    nss.ip("addr", "add", "10.0.250.1/16", "dev", "eth0", ns=name)
    for dev in ("eth0", "eth0p"):
        nss.ip("link", "set", dev, "up", ns=name)
    return name


def manager(ns: str) -> VXLANManager:
    return VXLANManager(
        Settings(version=4, hostname=ME, mtu=1450),
        VXLANKernel(4, netns=ns),
        refresh_interval=90.0,
    )


def own_vtep() -> VXLANTunnelEndpointUpdate:
    return VXLANTunnelEndpointUpdate(
        node=ME, mac="66:ff:00:00:00:01", ipv4_addr="10.245.0.0", parent_device_ip="10.0.250.1"
    )


def batch(ns: str, tool: str, lines: list[str]) -> float:
    """Seconds for ``tool -n ns -batch -`` to apply ``lines``."""
    start = time.perf_counter()
    subprocess.run(
        [tool, "-n", ns, "-batch", "-"],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def baseline_full(ns: str) -> float:
    nss.ip(
        "link",
        "add",
        "vxlan.calico",
        "type",
        "vxlan",
        "id",
        "4096",
        "dstport",
        "4789",
        "local",
        "10.0.250.1",
        "dev",
        "eth0",
        "nolearning",
        ns=ns,
    )
    nss.ip("link", "set", "vxlan.calico", "up", ns=ns)
    ip_lines = [
        f"neigh replace {tunnel_ip(i)} lladdr {mac(i)} dev vxlan.calico nud permanent"
        for i in range(N)
    ]
    ip_lines += [
        f"route replace {block(i)} via {tunnel_ip(i)} dev vxlan.calico onlink proto boot mtu 1450"
        for i in range(N)
    ]
    ip_lines.append("route replace blackhole 10.245.0.0/26 proto 80")
    fdb = [
        f"fdb replace {mac(i)} dev vxlan.calico dst {node_ip(i)} self permanent" for i in range(N)
    ]
    return batch(ns, "bridge", fdb) + batch(ns, "ip", ip_lines)


def counts(ns: str) -> tuple[int, int, int]:
    routes = nss.ip("route", "show", "dev", "vxlan.calico", ns=ns).count("\n")
    neigh = nss.ip("neigh", "show", "dev", "vxlan.calico", ns=ns).count("PERMANENT")
    fdb = nss.run("bridge", "-n", ns, "fdb", "show", "dev", "vxlan.calico").stdout.count(" dst ")
    return routes, neigh, fdb


def feed_manager(mgr: VXLANManager) -> None:
    mgr.on_update(own_vtep())
    for i in range(N):
        mgr.on_update(vtep(f"n{i}", i))
        mgr.on_update(remote_route(i))
    mgr.on_update(
        RouteUpdate(
            dst="10.245.0.0/26",
            types=frozenset({RouteType.LOCAL_WORKLOAD}),
            ip_pool_type=IPPoolType.VXLAN,
            dst_node_name=ME,
        )
    )


def datastore_updates() -> list[Update]:
    """What the felix syncer delivers for a VXLAN pool, 1,001 Nodes and their blocks."""
    out: list[Update] = []

    def add(key: object, value: object) -> None:
        out.append(Update(key, value, "1", UpdateType.NEW))  # type: ignore[arg-type]

    add(IPPoolKey("10.244.0.0/14"), v1.IPPool(cidr="10.244.0.0/14", vxlan_mode="always", ipam=True))
    nodes = [(ME, "10.0.250.1", "10.245.0.0", "10.245.0.0/26")]
    nodes += [(f"n{i}", node_ip(i), tunnel_ip(i), block(i)) for i in range(N)]
    for name, ip, tun, blk in nodes:
        node = Node.model_validate(
            {
                "metadata": {"name": name},
                "spec": {"bgp": {"ipv4Address": f"{ip}/16"}, "ipv4VXLANTunnelAddr": tun},
            }
        )
        add(ResourceKey("Node", name), node)
        add(HostConfigKey(name, "IPv4VXLANTunnelAddr"), tun)
        add(
            BlockKey(blk),
            v1.AllocationBlock(
                cidr=blk, affinity=f"host:{name}", allocations=(None,) * 64, unallocated=()
            ),
        )
    return out


def main() -> None:
    names: list[str] = []
    try:
        # 1. Cold programming from messages, against ip/bridge -batch.
        base_ns, ns = make_ns(names), make_ns(names)
        base = baseline_full(base_ns)
        mgr = manager(ns)
        feed_manager(mgr)
        start = time.perf_counter()
        errors = mgr.apply()
        cold = time.perf_counter() - start
        assert errors == [], errors
        got = counts(ns)
        assert got == (N, N, N), got
        assert counts(base_ns) == (N, N, N)
        emit(BENCH, "program_1000_nodes_s", cold, base, target=2.0, objects=3 * N + 1)

        # 2. Periodic resync with nothing to repair.
        mgr.queue_resync()
        start = time.perf_counter()
        assert mgr.apply() == []
        resync = time.perf_counter() - start
        start = time.perf_counter()
        nss.ip("route", "show", ns=ns)
        nss.ip("neigh", "show", ns=ns)
        nss.run("bridge", "-n", ns, "fdb", "show", "dev", "vxlan.calico")
        emit(BENCH, "resync_1000_nodes_s", resync, time.perf_counter() - start)

        # 3. One remote node changes (its VTEP and block), 1,000 present.
        changes, bases = [], []
        for k in range(5):
            i = 100 + k
            new_ip, new_mac = f"10.246.{k}.0", f"66:aa:00:00:00:{k:02x}"
            start = time.perf_counter()
            mgr.on_update(VXLANTunnelEndpointRemove(f"n{i}"))
            mgr.on_update(vtep(f"n{i}", i, ip=new_ip, mac=new_mac))
            mgr.on_update(remote_route(i))
            assert mgr.apply() == []
            changes.append(time.perf_counter() - start)
            ip_lines = [
                f"neigh del {tunnel_ip(i)} dev vxlan.calico",
                f"neigh replace {new_ip} lladdr {new_mac} dev vxlan.calico nud permanent",
                f"route replace {block(i)} via {new_ip} dev vxlan.calico onlink proto boot "
                "mtu 1450",
            ]
            fdb = [
                f"fdb del {mac(i)} dev vxlan.calico dst {node_ip(i)} self",
                f"fdb replace {new_mac} dev vxlan.calico dst {node_ip(i)} self permanent",
            ]
            bases.append(batch(base_ns, "bridge", fdb) + batch(base_ns, "ip", ip_lines))
        route = nss.ip("route", "show", block(104), ns=ns)
        assert "via 10.246.4.0" in route, route
        emit(
            BENCH,
            "one_node_change_s",
            statistics.median(changes),
            statistics.median(bases),
            target=0.02,
            max=round(max(changes), 6),
        )
        mgr.close()

        # 4. From datastore updates through the calc graph.
        ns2 = make_ns(names)
        with tempfile.TemporaryDirectory():
            batches: list[list[object]] = []
            pipeline = build_felix_calc_pipeline(
                ME,
                batches.append,
                synchronous=True,
                enable_vxlan_resolver=True,
                route_source="CalicoIPAM",
            )
            updates = datastore_updates()
            mgr2 = manager(ns2)
            start = time.perf_counter()
            pipeline.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
            pipeline.on_updates(updates)
            pipeline.on_status_updated(SyncStatus.IN_SYNC)
            pipeline.flush()
            for b in batches:
                for msg in b:
                    mgr2.on_update(msg)  # type: ignore[arg-type]
            assert mgr2.apply() == []
            e2e = time.perf_counter() - start
            got = counts(ns2)
            assert got == (N, N, N), got
            emit(BENCH, "calc_graph_plus_program_1000_nodes_s", e2e, base, target=2.0)
            mgr2.close()
    finally:
        for name in names:
            nss.delete_netns(name)


if __name__ == "__main__":
    main()
