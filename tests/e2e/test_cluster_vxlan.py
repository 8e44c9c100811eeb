"""Three real nodes on one bridge with VXLAN: pod traffic across nodes, policy, NAT-outgoing,
Felix restarts, drift repair, CrossSubnet and node deletion (root, real kernel and traffic).

Node 3 sits on a second subnet behind the router, so with ``CrossSubnet`` node 1 routes to
node 2 directly and to node 3 through the tunnel. The module shares one cluster; the tests run
in file order and the last one deletes node 3.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_harness import (
    ROUTE_REFRESH_SECONDS,
    Cluster,
    addr6,
    block_of,
    cluster_up,
    dual_server,
    ip_json,
    ping,
    poll,
    routes_via,
    tcp_ok,
    tcp_send,
)
from netns_support import ip, run
from node_harness import PINGER, PY, Workload, in_ns

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

PORT = 7100
WORLD_PORT = 7200
VXLAN = "vxlan.calico"
VXLAN6 = "vxlan-v6.calico"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_up(tmp_path_factory.mktemp("cl"), second_subnet=(3,)) as c:
        yield c


@pytest.fixture(scope="module")
def pods(cluster: Cluster) -> Iterator[dict[str, Workload]]:
    """a on node 1, b on node 2, c on node 3, each serving DUAL_SERVER on PORT."""
    made = {
        "a": cluster.add_workload(1, "talk", "a"),
        "b": cluster.add_workload(2, "talk", "b"),
        "c": cluster.add_workload(3, "talk", "c"),
    }
    with contextlib.ExitStack() as stack:
        for w in made.values():
            stack.enter_context(dual_server(w.netns, PORT))
        yield made


def vtep(cluster: Cluster, index: int) -> dict[str, str]:
    spec = cluster.node_json(index)["spec"]
    return {
        "ip": spec.get("ipv4VXLANTunnelAddr", ""),
        "mac": spec.get("vxlanTunnelMACAddr", ""),
        "ip6": spec.get("ipv6VXLANTunnelAddr", ""),
        "mac6": spec.get("vxlanTunnelMACAddrV6", ""),
    }


def neighbours(ns: str, dev: str) -> dict[str, str]:
    """Permanent neighbour entries on ``dev``: IP -> MAC."""
    out = {}
    for family in ("-4", "-6"):
        for n in ip_json(ns, family, "neigh", "show", "dev", dev):
            if "PERMANENT" in n.get("state", []):
                out[n["dst"]] = n.get("lladdr", "")
    return out


def fdb(ns: str, dev: str) -> dict[str, str]:
    """FDB entries on ``dev``: MAC -> remote (underlay) IP."""
    res = run("bridge", "-n", ns, "-j", "fdb", "show", "dev", dev, check=False)
    entries = json.loads(res.stdout or "[]") if res.returncode == 0 else []
    return {e["mac"]: e.get("dst", "") for e in entries if e.get("dst")}


def route_to(ns: str, dst: str, family: str = "-4") -> dict[str, Any] | None:
    for r in ip_json(ns, family, "route", "show"):
        if r.get("dst") == dst:
            return r
    return None


def both_families(w: Workload) -> list[str]:
    return [w.ip, addr6(w)]


def test_pods_talk_across_nodes_both_directions_ipv4_ipv6_tcp_icmp(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    a, b, c = pods["a"], pods["b"], pods["c"]
    for src, dst in ((a, c), (c, a), (a, b), (b, a), (b, c), (c, b)):
        for addr in both_families(dst):
            ok, _ = poll(lambda s=src, d=addr: tcp_ok(s, d, PORT), 15, 0.3)
            assert ok, f"TCP {src.pod} -> {dst.pod} {addr}\n{cluster.diagnostics()}"
            assert ping(src, addr), f"ICMP {src.pod} -> {dst.pod} {addr}"
    # What carries it: node 1's VTEP view of node 3 (Always: every remote block via the tunnel).
    n1, v3 = cluster.node(1).host, vtep(cluster, 3)
    assert v3["ip"] and v3["mac"] and v3["ip6"] and v3["mac6"], v3
    assert neighbours(n1, VXLAN)[v3["ip"]] == v3["mac"]
    assert neighbours(n1, VXLAN6)[v3["ip6"]] == v3["mac6"]
    assert fdb(n1, VXLAN)[v3["mac"]] == cluster.node_spec(3).address
    assert fdb(n1, VXLAN6)[v3["mac6"]] == cluster.node_spec(3).address6
    route = route_to(n1, block_of(c.ip, 26))
    assert route is not None and route["dev"] == VXLAN and route["gateway"] == v3["ip"], route
    assert "onlink" in route.get("flags", [])
    route6 = route_to(n1, block_of(addr6(c), 122), "-6")
    assert route6 is not None and route6["dev"] == VXLAN6, route6
    # The pod MTU Felix worked out lands in each node's own MTU file and on the pods' veths.
    for index, w in ((1, a), (3, c)):
        mtu_file = cluster.node(index).state_dir / "mtu"
        mtu = int(mtu_file.read_text())
        assert mtu == 1430  # host 1500 - 70: the IPv6 tunnel is the smallest enabled encap
        assert json.loads(ip("-j", "link", "show", "eth0", ns=w.netns))[0]["mtu"] == mtu


DENY_BLOCKED = """apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: cluster-deny-blocked
spec:
  selector: app == 'target'
  types: [Ingress]
  ingress:
    - action: Deny
      source:
        selector: role == 'blocked'
    - action: Allow
"""


def test_policy_blocks_one_cross_node_pair_within_a_second(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    a, b, c = pods["a"], pods["b"], pods["c"]
    cluster.calicoctl("label", "workloadendpoint", "node2-k8s-b-eth0", "role=blocked", "-n", "talk")
    cluster.calicoctl("label", "workloadendpoint", "node3-k8s-c-eth0", "app=target", "-n", "talk")
    cluster.calicoctl("apply", "-f", "-", stdin=DENY_BLOCKED)
    try:
        for addr in both_families(c):
            blocked, waited = poll(lambda d=addr: not tcp_ok(b, d, PORT, 0.3), 1.0, 0.05)
            assert blocked, f"b -> c {addr} still allowed after {waited:.2f}s"
            assert tcp_ok(a, addr, PORT), "a -> c must stay allowed"
        assert tcp_ok(b, a.ip, PORT), "b -> a is not selected by the policy"
    finally:
        cluster.calicoctl("delete", "globalnetworkpolicy", "cluster-deny-blocked")
    for addr in both_families(c):
        ok, waited = poll(lambda d=addr: tcp_ok(b, d, PORT, 0.3), 1.0, 0.05)
        assert ok, f"b -> c {addr} not restored {waited:.2f}s after the delete"


def test_nat_outgoing_masquerades_leaving_the_pools_only(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    a, c = pods["a"], pods["c"]
    world = cluster.spec.world_netns
    with dual_server(world, WORLD_PORT):
        for pod, index in ((a, 1), (c, 3)):
            reply = tcp_send(pod, cluster.spec.world_ip, WORLD_PORT, "whoami")
            assert reply == f"ok {cluster.node_spec(index).address}", reply
    # Pod to pod across nodes keeps the pod's own source address.
    assert tcp_send(a, c.ip, PORT, "whoami") == f"ok {a.ip}"
    assert tcp_send(c, a.ip, PORT, "whoami") == f"ok {c.ip}"


def felix_ready(cluster: Cluster, index: int) -> bool:
    code = (
        "import urllib.request as u\n"
        "try: print(u.urlopen('http://localhost:9099/readiness', timeout=1).status)\n"
        "except Exception as e: print(0)\n"
    )
    return in_ns(cluster.node(index).host, PY, "-c", code).stdout.strip() == "200"


def test_felix_restart_keeps_established_cross_node_tcp(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    a, c = pods["a"], pods["c"]
    pinger = subprocess.Popen(
        ["ip", "netns", "exec", a.netns, PY, "-c", PINGER, c.ip, str(PORT)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert pinger.stdout is not None
        first = pinger.stdout.readline().strip()
        assert first and not first.startswith("dead"), first
        for index in (1, 3):
            service = cluster.node(index).state_dir / "service" / "felix"
            run("sv", "-w", "20", "restart", str(service), timeout=30)
        ok, _ = poll(lambda: felix_ready(cluster, 1) and felix_ready(cluster, 3), 60, 0.5)
        assert ok, cluster.diagnostics()
        ready_at, fresh = time.time(), 0
        while fresh < 10:  # round trips completed after both new Felixes took over
            line = pinger.stdout.readline().strip()
            assert line and not line.startswith("dead"), f"connection broke: {line!r}"
            fresh += float(line.split()[1]) >= ready_at
    finally:
        pinger.kill()
        pinger.wait(timeout=10)


def test_vtep_drift_is_repaired_within_one_refresh_interval(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    a, c = pods["a"], pods["c"]
    n1, v3 = cluster.node(1).host, vtep(cluster, 3)
    block = block_of(c.ip, 26)
    ip("route", "del", block, "dev", VXLAN, ns=n1)
    run("bridge", "-n", n1, "fdb", "del", v3["mac"], "dev", VXLAN, "dst",
        cluster.node_spec(3).address)  # fmt: skip
    assert route_to(n1, block) is None and v3["mac"] not in fdb(n1, VXLAN)

    def repaired() -> bool:
        return route_to(n1, block) is not None and v3["mac"] in fdb(n1, VXLAN)

    ok, waited = poll(repaired, ROUTE_REFRESH_SECONDS + 3, 0.2)
    assert ok, f"not repaired after {waited:.1f}s\n{cluster.diagnostics()}"
    assert tcp_ok(a, c.ip, PORT)


def test_cross_subnet_routes_directly_on_the_subnet_and_tunnels_off_it(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    a, b, c = pods["a"], pods["b"], pods["c"]
    n1 = cluster.node(1).host
    cluster.set_vxlan_mode("CrossSubnet")
    try:
        n2 = cluster.node_spec(2)

        def direct() -> bool:
            r = route_to(n1, block_of(b.ip, 26))
            return r is not None and r.get("dev") == "eth0" and r.get("gateway") == n2.address

        ok, _ = poll(direct, 10, 0.2)
        assert ok, route_to(n1, block_of(b.ip, 26))
        r6 = route_to(n1, block_of(addr6(b), 122), "-6")
        ok, _ = poll(lambda: (route_to(n1, block_of(addr6(b), 122), "-6") or {}).get("dev")
                     == "eth0", 10, 0.2)  # fmt: skip
        assert ok, r6
        tunnelled = route_to(n1, block_of(c.ip, 26))
        assert tunnelled is not None and tunnelled["dev"] == VXLAN, tunnelled
        for src, dst in ((a, b), (b, a), (a, c), (c, a)):
            for addr in both_families(dst):
                ok, _ = poll(lambda s=src, d=addr: tcp_ok(s, d, PORT), 10, 0.3)
                assert ok, f"CrossSubnet TCP {src.pod} -> {dst.pod} {addr}"
    finally:
        cluster.set_vxlan_mode("Always")
    ok, _ = poll(lambda: (route_to(n1, block_of(b.ip, 26)) or {}).get("dev") == VXLAN, 10, 0.2)
    assert ok, "back to Always: node 2's block goes through the tunnel again"


def test_deleting_a_node_removes_its_routes_neighbours_and_fdb_entries(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    v3 = vtep(cluster, 3)
    block = block_of(pods["c"].ip, 26)
    for index in (1, 2):
        ns = cluster.node(index).host
        assert v3["ip"] in neighbours(ns, VXLAN) and v3["mac"] in fdb(ns, VXLAN)
    cluster.node(3).stop()
    cluster.calicoctl("delete", "node", "node3")

    def gone(ns: str) -> bool:
        return (
            v3["ip"] not in neighbours(ns, VXLAN)
            and v3["ip6"] not in neighbours(ns, VXLAN6)
            and v3["mac"] not in fdb(ns, VXLAN)
            and v3["mac6"] not in fdb(ns, VXLAN6)
            and not any(r.get("gateway") == v3["ip"] for r in routes_via(ns, VXLAN))
            and route_to(ns, block) is None
        )

    for index in (1, 2):
        ns = cluster.node(index).host
        ok, waited = poll(lambda n=ns: gone(n), 10, 0.2)
        assert ok, f"node3's VTEP still on node{index} after {waited:.1f}s"
