"""Three real nodes whose Felix and confd sync through ONE Typha (``calico node cluster up
--typha``, BGP backend, no-encap pool): Typha runs in the cluster's lan namespace against the
cluster's etcd; every Felix and every confd streams from it, BIRD's mesh is Established and pods
talk across nodes over BIRD's routes; a policy change made with calicoctl reaches all three
Felixes through Typha; and while Typha is down a policy change reaches none of them (no Felix
watches the datastore itself), then arrives everywhere once Typha is back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import Cluster, dual_server, poll, tcp_ok
from node_harness import Workload, require_root

from calico.node.cluster import fabric, typha
from calico.node.cluster import spec as cluster_spec

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

PORT = 7300
DENY_TALK = """apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: typha-deny-talk
spec:
  selector: projectcalico.org/namespace == 'talk'
  types: [Ingress]
  ingress:
    - action: Deny
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_root()
    root = tmp_path_factory.mktemp("clty")
    addr = typha.address(cluster_spec.build("any", root))  # the router address: fixed
    c = Cluster(root, backend="bird", extra_env={"FELIX_TYPHAADDR": addr})
    # the harness builds its own spec; the same cluster with the Typha option on (so
    # lifecycle.prepare starts Typha before the nodes, as ``up --typha`` does)
    c.spec = dataclasses.replace(c.spec, typha=True)
    try:
        c.up(vxlan_mode="Never")
        yield c
    finally:
        c.down()
        assert not fabric.cluster_netns(c.spec.name), "namespaces left behind"


@pytest.fixture(scope="module")
def pods(cluster: Cluster) -> Iterator[dict[str, Workload]]:
    made = {n: cluster.add_workload(i, "talk", n) for i, n in ((1, "a"), (2, "b"), (3, "c"))}
    with contextlib.ExitStack() as stack:
        for w in made.values():
            stack.enter_context(dual_server(w.netns, PORT))
        yield made


def metric(cluster: Cluster, sample: str) -> float:
    for line in typha.metrics(cluster.spec).splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError(f"Typha has no metric {sample}")


def service_log(cluster: Cluster, index: int, service: str = "felix") -> str:
    path: Path = cluster.node(index).log_dir / service / "current"
    return path.read_text(errors="replace") if path.exists() else ""


def felix_log(cluster: Cluster, index: int) -> str:
    return service_log(cluster, index, "felix")


PAIRS = (("a", "b"), ("b", "c"), ("c", "a"))


def all_pairs(pods: dict[str, Workload], allowed: bool, timeout: float) -> tuple[bool, float]:
    def check() -> bool:
        return all(tcp_ok(pods[s], pods[d].ip, PORT, 0.3) is allowed for s, d in PAIRS)

    return poll(check, timeout, 0.2)


def test_every_felix_syncs_through_the_one_typha(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    addr = typha.address(cluster.spec)
    for i in (1, 2, 3):
        assert f"Syncing through Typha at {addr}" in felix_log(cluster, i), i
        assert f"Syncing through Typha at {addr}" in service_log(cluster, i, "confd"), i
    assert metric(cluster, 'typha_connections_streaming{syncer="felix"}') == 3
    assert metric(cluster, 'typha_connections_streaming{syncer="bgp"}') == 3
    assert metric(cluster, "typha_connections_active") == 6
    for i in (1, 2, 3):
        ok, _ = poll(lambda i=i: cluster.bgp_status(i).count("Established") >= 2, 60, 1)
        assert ok, f"node {i}'s BIRD mesh is not Established\n{cluster.bgp_status(i)}"
    ok, _ = all_pairs(pods, True, 30)
    assert ok, f"pods do not talk across nodes\n{cluster.diagnostics()}"


def test_policy_change_reaches_all_three_through_typha(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    seq = metric(cluster, 'typha_breadcrumb_seq_number{syncer="felix"}')
    cluster.calicoctl("apply", "-f", "-", stdin=DENY_TALK)
    try:
        blocked, waited = all_pairs(pods, False, 10)
        assert blocked, f"deny not enforced on every node after {waited:.1f}s"
        assert metric(cluster, 'typha_breadcrumb_seq_number{syncer="felix"}') > seq
    finally:
        cluster.calicoctl("delete", "globalnetworkpolicy", "typha-deny-talk")
    ok, waited = all_pairs(pods, True, 10)
    assert ok, f"traffic not restored on every node {waited:.1f}s after the delete"


def test_without_typha_no_felix_sees_a_change_until_it_is_back(
    cluster: Cluster, pods: dict[str, Workload]
) -> None:
    assert typha.stop(cluster.spec)
    try:
        cluster.calicoctl("apply", "-f", "-", stdin=DENY_TALK)
        time.sleep(8)  # far longer than the policy took through Typha
        assert all(tcp_ok(pods[s], pods[d].ip, PORT, 0.5) for s, d in PAIRS), (
            "a Felix applied a policy while Typha was down: it reads the datastore itself"
        )
    finally:
        typha.start(cluster.spec)
    try:
        blocked, waited = all_pairs(pods, False, 30)
        assert blocked, f"deny not enforced everywhere {waited:.1f}s after Typha came back"
        for i in (1, 2, 3):
            log = felix_log(cluster, i)
            assert re.search(r"Connection to Typha lost .*reconnecting", log), i
        ok = poll(
            lambda: metric(cluster, 'typha_connections_streaming{syncer="felix"}') == 3, 20, 0.5
        )[0]
        assert ok, "not every Felix reconnected to Typha"
    finally:
        cluster.calicoctl("delete", "globalnetworkpolicy", "typha-deny-talk")
    ok, _ = all_pairs(pods, True, 15)
    assert ok
