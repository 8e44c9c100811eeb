"""confd render benchmark: 1,000-node full mesh and 1,000 nodes with 2 route reflectors.

Run as ``python benchmarks/bench_confd.py``. For each topology the measured node's full cycle
(key space rebuild from the syncer state + rendering all six templates + staging, ``bird -p``
check and install) is timed, best of 3, each on a fresh output directory; the baseline is the
same cycle for a 10-node cluster of the same shape measured in the same run. Target <= 1 s.
Then an unrelated change (a Node label no selector uses) must render nothing: the metric is
templates rendered by that cycle (target 0), with the renders a relevant change (a node's
address) causes as baseline, plus the time of the no-op cycle. Last, per-service
advertisement: the key space build for a node with 1,000 Services and their EndpointSlices
(half Local with an endpoint on the node), baseline 10 Services, best of 5.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import emit  # noqa: E402

from calico.api.io import load_documents  # noqa: E402
from calico.confd import keyspace  # noqa: E402
from calico.confd.renderer import Renderer  # noqa: E402
from calico.confd.state import BGPState, state_from_resources  # noqa: E402

CONFD_FS = _ROOT.parent / "node" / "filesystem" / "etc" / "calico" / "confd"
H = "apiVersion: projectcalico.org/v3\n"


def _node(i: int, rr: bool) -> str:
    labels = "{route-reflector: 'true'}" if rr else "{}"
    rr_id = ", routeReflectorClusterID: 224.0.0.1" if rr else ""
    return (
        f"{H}kind: Node\nmetadata: {{name: node-{i}, labels: {labels}}}\n"
        f"spec: {{bgp: {{ipv4Address: 10.{i // 250}.{i % 250}.1/8{rr_id}}}}}\n"
    )


def cluster(n: int, rrs: int) -> str:
    docs = [_node(i, i < rrs) for i in range(n)]
    docs.append(f"{H}kind: IPPool\nmetadata: {{name: pool}}\nspec: {{cidr: 10.240.0.0/12}}\n")
    for b in range(4):
        docs.append(
            f"{H}kind: BlockAffinity\nmetadata: {{name: b{b}}}\n"
            f"spec: {{node: node-{rrs}, cidr: 10.24{b}.0.0/26, state: confirmed, "
            "deleted: 'false'}\n"
        )
    if rrs:
        docs.append(
            f"{H}kind: BGPConfiguration\nmetadata: {{name: default}}\n"
            "spec: {nodeToNodeMeshEnabled: false}\n"
        )
        docs.append(
            f"{H}kind: BGPPeer\nmetadata: {{name: to-rrs}}\n"
            "spec: {peerSelector: has(route-reflector)}\n"
        )
    return "---\n".join(docs)


def renderer(out: Path, node: str) -> Renderer:
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(CONFD_FS, out)
    r = Renderer(out, node, {"NODENAME": node}, krt_tunnel=False)
    r.resources = [dataclasses.replace(res, reload_cmd="") for res in r.resources]
    r.dirty = set(r.resources)
    return r


def cycle(state: BGPState, r: Renderer, node: str) -> None:
    r.update(keyspace.build(state, node))
    g = state.global_config()
    r.process(g.spec if g else None, state.filters)


def full_render(state: BGPState, node: str, tmp: Path) -> tuple[float, int]:
    best, peers = float("inf"), 0
    for i in range(3):
        r = renderer(tmp / f"r{i}", node)
        t0 = time.perf_counter()
        cycle(state, r, node)
        best = min(best, time.perf_counter() - t0)
        peers = (tmp / f"r{i}" / "config" / "bird.cfg").read_text().count("protocol bgp ")
    return best, peers


def services(n: int, node: str) -> tuple[dict, dict]:
    svcs, slices = {}, {}
    for i in range(n):
        key = f"ns/s{i}"
        svcs[key] = {
            "metadata": {"name": f"s{i}", "namespace": "ns"},
            "spec": {
                "type": "LoadBalancer",
                "clusterIP": f"10.96.{i // 250}.{i % 250 + 1}",
                "externalTrafficPolicy": "Local" if i % 2 else "Cluster",
            },
            "status": {"loadBalancer": {"ingress": [{"ip": f"10.97.{i // 250}.{i % 250 + 1}"}]}},
        }
        slices[key] = {
            "metadata": {
                "name": f"s{i}-x",
                "namespace": "ns",
                "labels": {"kubernetes.io/service-name": f"s{i}"},
            },
            "endpoints": [{"addresses": [f"10.240.{i // 250}.{i % 250}"], "nodeName": node}],
        }
    return svcs, slices


def bench_services() -> None:
    cfg = (
        f"{H}kind: BGPConfiguration\nmetadata: {{name: default}}\nspec: "
        "{serviceClusterIPs: [{cidr: 10.96.0.0/12}], "
        "serviceLoadBalancerIPs: [{cidr: 10.97.0.0/16}]}\n"
    )
    state = state_from_resources(load_documents(cluster(10, 0) + "---\n" + cfg), "node-0")

    def best(k8s: tuple[dict, dict]) -> tuple[float, int]:
        t, n = float("inf"), 0
        for _ in range(5):
            t0 = time.perf_counter()
            ks = keyspace.build(state, "node-0", {}, k8s_services=k8s)
            t = min(t, time.perf_counter() - t0)
            n = sum(1 for k in ks if k.startswith("/calico/staticroutes/") and k.endswith("-32"))
        return t, n

    base, _ = best(services(10, "node-0"))
    value, routes = best(services(1000, "node-0"))
    emit("confd", "keyspace_1000_services_s", value, base, host_routes=routes)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for topo, rrs, node in (
            ("mesh", 0, "node-0"),
            ("rr_client", 2, "node-2"),
            ("rr", 2, "node-0"),
        ):
            small = state_from_resources(load_documents(cluster(10, rrs)), node)
            big = state_from_resources(load_documents(cluster(1000, rrs)), node)
            base, _ = full_render(small, node, tmp)
            value, peers = full_render(big, node, tmp)
            emit("confd", f"render_1000_nodes_{topo}_s", value, base, peers=peers, target_s=1.0)

            r = renderer(tmp / "steady", node)
            cycle(big, r, node)
            before = r.renders
            labelled = load_documents(_node(500, False).replace("labels: {}", "labels: {x: y}"))[0]
            big.nodes["node-500"] = labelled
            t0 = time.perf_counter()
            cycle(big, r, node)
            noop_s = time.perf_counter() - t0
            unrelated = r.renders - before
            moved = load_documents(_node(500, False).replace(".1/8", ".77/8"))[0]
            big.nodes["node-500"] = moved
            before = r.renders
            cycle(big, r, node)
            relevant = r.renders - before
            emit(
                "confd",
                f"renders_after_unrelated_change_{topo}",
                unrelated,
                relevant,
                noop_cycle_s=round(noop_s, 4),
                target=0,
            )


if __name__ == "__main__":
    main()
    bench_services()
