"""Two nodes sharing the embedded datastore file, each in its own namespace, started from a
shell whose stray datastore variables point somewhere else: the nodes' flags win, every
per-node file stays under each node's state dir, and pods talk across the nodes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import Cluster, cluster_up, dual_server, poll, tcp_ok

pytestmark = [pytest.mark.root, pytest.mark.timeout(600)]

STRAY = {
    "CALICO_DATASTORE_TYPE": "etcdv3",
    "CALICO_ETCD_ENDPOINTS": "http://192.0.2.1:2379",
    "CALICO_CNI_DAEMON_SOCKET": "/nonexistent/other-node.sock",
    "FELIX_ENDPOINTSTATUSPATHPREFIX": "/nonexistent/shared",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cll")
    with cluster_up(root, count=2, datastore="local", extra_env=STRAY) as c:
        yield c


def test_nodes_share_the_file_keep_their_own_files_and_pods_talk(cluster: Cluster) -> None:
    a = cluster.add_workload(1, "local", "a")
    b = cluster.add_workload(2, "local", "b")
    with dual_server(b.netns, 7300), dual_server(a.netns, 7300):
        for src, dst in ((a, b), (b, a)):
            ok, _ = poll(lambda s=src, d=dst: tcp_ok(s, d.ip, 7300), 15, 0.3)
            assert ok, f"{src.pod} -> {dst.pod}\n{cluster.diagnostics()}"
    names = {n["metadata"]["name"] for n in cluster.calicoctl_items("nodes")}
    assert names == {"node1", "node2"}
    for index, pod in ((1, "a"), (2, "b")):
        state = cluster.node(index).state_dir
        status = sorted(p.name for p in (state / "endpoint-status").iterdir())
        # Each Felix keeps exactly its own workloads' status files, in its own dir.
        assert status == [f"k8s local%2F{pod} eth0"], status
        assert (state / "mtu").read_text().strip().isdigit()
        assert (state / "felix.cfg").exists()
        assert (
            f'localDatastorePath: "{cluster.spec.local_datastore}"'
            in (state / "calicoctl.cfg").read_text()
        )
        run_file = (state / "service" / "felix" / "run").read_text()
        assert "export DATASTORE_TYPE=local" in run_file
        assert f"FELIX_ENDPOINTSTATUSPATHPREFIX={state}" in run_file
        # No supervised process inherited the caller's stray variables.
        pids = cluster.node(index).marked_processes()
        assert pids
        for pid in pids:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            stray = [e for e in environ if e.decode() in {f"{k}={v}" for k, v in STRAY.items()}]
            assert not stray, (pid, stray)
