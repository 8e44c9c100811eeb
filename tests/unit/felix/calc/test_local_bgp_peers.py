"""LocalBGPPeerCalculator: BGPPeer localWorkloadSelector -> bgpPeerName on local workloads, on
its own (every scope rule, ordering, invalidation) and through the whole calc graph (the
WorkloadEndpointUpdate carries the name), fed v3 YAML through the real update processors."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from recording_callbacks import updates_from_yaml

from calico import selector
from calico.felix.calc.calc_graph import build_felix_calc_pipeline
from calico.felix.calc.fanout import TypeFanout
from calico.felix.calc.local_bgp_peers import LocalBGPPeerCalculator
from calico.felix.messages import WorkloadEndpointID, WorkloadEndpointUpdate
from calico.model import ResourceKey, WorkloadEndpointKey
from calico.syncer.api import SyncStatus, Update, UpdateType

HOST = "h1"


def peer(name: str, lws: str | None, *, node: str | None = None, sel: str | None = None) -> str:
    fields = ["asNumber: 65001", f"localWorkloadSelector: {lws!r}" if lws else "peerIP: 10.9.9.9"]
    if node:
        fields.append(f"node: {node}")
    if sel:
        fields.append(f"nodeSelector: {sel!r}")
    return f"""
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {{name: {name}}}
spec: {{{", ".join(fields)}}}
"""


def node(name: str, labels: str = "{}") -> str:
    return f"""
apiVersion: projectcalico.org/v3
kind: Node
metadata: {{name: {name}, labels: {labels}}}
spec: {{bgp: {{ipv4Address: 10.0.0.1/24}}}}
"""


def wep(pod: str, labels: str = "{}", host: str = HOST) -> str:
    return f"""
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {{name: {host}-k8s-{pod}-eth0, namespace: ns1, labels: {labels}}}
spec: {{node: {host}, orchestrator: k8s, pod: {pod}, endpoint: eth0, interfaceName: cali{pod},
        ipNetworks: [10.1.0.1/32]}}
"""


class Calc:
    """The calculator on its own fan-outs (local = this host's endpoints, as the graph splits)."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str]] = []
        self.calc = LocalBGPPeerCalculator(
            HOST, lambda k, n: self.changes.append((k.workload_id, n))
        )
        self.all, self.local = TypeFanout(), TypeFanout()
        self.calc.register(self.all, self.local)

    def apply(self, text: str, *, delete: bool = False) -> list[tuple[str, str]]:
        self.changes = []
        for key, value in updates_from_yaml(text, delete=delete):
            if isinstance(key, WorkloadEndpointKey):
                if key.hostname == HOST:
                    self.local.on_update(key, value)
            else:
                self.all.on_update(key, value)
        return self.changes


def test_global_peer_matches_by_workload_labels_and_follows_label_changes() -> None:
    c = Calc()
    assert c.apply(wep("a", "{app: bird}")) == []  # no peer yet: nothing to say
    assert c.apply(peer("p1", "app == 'bird'")) == [("ns1/a", "p1")]
    assert c.apply(wep("b", "{app: web}")) == []
    assert c.apply(wep("a", "{app: web}")) == [("ns1/a", "")]
    assert c.apply(wep("b", "{app: bird}")) == [("ns1/b", "p1")]
    assert c.apply(wep("b", "{app: bird, x: y}")) == []  # still p1: no change reported


def test_peer_without_local_workload_selector_is_ignored() -> None:
    c = Calc()
    c.apply(wep("a", "{app: bird}"))
    assert c.apply(peer("p1", None)) == []
    assert c.calc.peer_name({"app": "bird"}) == ""


def test_node_scope_by_name_and_by_selector_on_this_hosts_labels() -> None:
    c = Calc()
    c.apply(wep("a", "{app: bird}"))
    assert c.apply(peer("p1", "app == 'bird'", node="other")) == []
    assert c.apply(peer("p1", "app == 'bird'", node=HOST)) == [("ns1/a", "p1")]
    assert c.apply(peer("p1", "app == 'bird'", sel="rack == 'r1'")) == [("ns1/a", "")]
    # Another node's labels do not count; this host's do, and follow changes.
    assert c.apply(node("h2", "{rack: r1}")) == []
    assert c.apply(node(HOST, "{rack: r1}")) == [("ns1/a", "p1")]
    assert c.apply(node(HOST, "{rack: r2}")) == [("ns1/a", "")]
    assert c.apply(node(HOST, "{rack: r1}")) == [("ns1/a", "p1")]
    assert c.apply(node(HOST), delete=True) == [("ns1/a", "")]


def test_first_matching_peer_by_name_wins_and_deletion_falls_back() -> None:
    c = Calc()
    c.apply(wep("a", "{app: bird}"))
    assert c.apply(peer("p2", "has(app)")) == [("ns1/a", "p2")]
    assert c.apply(peer("p1", "app == 'bird'")) == [("ns1/a", "p1")]
    assert c.apply(peer("p3", "all()")) == []
    assert c.apply(peer("p1", "app == 'bird'"), delete=True) == [("ns1/a", "p2")]
    # Losing the selector (now a peerIP peer) is the same as deleting it for this purpose.
    assert c.apply(peer("p2", None)) == [("ns1/a", "p3")]


def test_removed_endpoint_is_forgotten_and_reported_afresh_when_it_returns() -> None:
    c = Calc()
    c.apply(peer("p1", "all()"))
    assert c.apply(wep("a")) == [("ns1/a", "p1")]
    assert c.apply(wep("a"), delete=True) == []
    assert c.apply(peer("p1", "all()"), delete=True) == []  # nothing left to update
    c.apply(peer("p1", "all()"))
    assert c.apply(wep("a")) == [("ns1/a", "p1")]


# --- through the whole graph --------------------------------------------------------------


def graph_messages(pipeline: Any, batches: list[list[Any]], text: str, delete: bool = False):
    before = len(batches)
    for key, value in updates_from_yaml(text, delete=delete):
        utype = UpdateType.DELETED if value is None else UpdateType.UPDATED
        pipeline.on_updates([Update(key, value, "1", utype)])
    pipeline.flush()
    return [m for b in batches[before:] for m in b if isinstance(m, WorkloadEndpointUpdate)]


def test_workload_endpoint_update_carries_the_bgp_peer_name() -> None:
    batches: list[list[Any]] = []
    pipeline = build_felix_calc_pipeline(HOST, batches.append, synchronous=True)
    graph_messages(pipeline, batches, wep("a", "{app: bird}") + "---" + wep("r", "{}", "h2"))
    pipeline.on_status_updated(SyncStatus.IN_SYNC)
    pipeline.flush()
    wid = WorkloadEndpointID("k8s", "ns1/a", "eth0")
    (first,) = [m for b in batches for m in b if isinstance(m, WorkloadEndpointUpdate)]
    assert first.id == wid and first.endpoint.bgp_peer_name == ""
    # A peer arrives: the endpoint is re-sent with the name (remote endpoints never are).
    (msg,) = graph_messages(pipeline, batches, peer("p1", "app == 'bird'"))
    assert msg.id == wid and msg.endpoint.bgp_peer_name == "p1"
    assert msg.endpoint.name == first.endpoint.name
    # An unrelated BGPPeer changes nothing downstream.
    assert graph_messages(pipeline, batches, peer("zz", "app == 'other'")) == []
    (msg,) = graph_messages(pipeline, batches, peer("p1", "app == 'bird'"), delete=True)
    assert msg.endpoint.bgp_peer_name == ""


# --- property: incremental == from scratch ------------------------------------------------

LABELS = [{}, {"app": "bird"}, {"app": "web"}, {"app": "bird", "rack": "r1"}]
SELECTORS = ["app == 'bird'", "has(app)", "all()", "rack == 'r1'"]
NODE_SELECTORS = [None, "rack == 'r1'", "!has(rack)"]
PEERS = ["p0", "p1", "p2"]
PODS = ["a", "b"]


class _Value:
    """The slice of a v3 BGPPeer / Node / v1 WEP the calculator reads."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def _bgp_peer(lws: str | None, node_name: str | None, node_sel: str | None) -> Any:
    spec = _Value(local_workload_selector=lws, node=node_name, node_selector=node_sel)
    return _Value(spec=spec)


ops = st.one_of(
    st.tuples(
        st.just("peer"),
        st.sampled_from(PEERS),
        st.one_of(st.none(), st.sampled_from(SELECTORS)),
        st.sampled_from([None, HOST, "h2"]),
        st.sampled_from(NODE_SELECTORS),
        st.booleans(),
    ),
    st.tuples(st.just("node"), st.sampled_from(range(len(LABELS))), st.booleans()),
    st.tuples(
        st.just("wep"), st.sampled_from(PODS), st.sampled_from(range(len(LABELS))), st.booleans()
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ops, max_size=30))
def test_incremental_answers_equal_a_from_scratch_computation(steps: list[Any]) -> None:
    names: dict[str, str] = {}
    calc = LocalBGPPeerCalculator(HOST, lambda k, n: names.__setitem__(k.workload_id, n))
    peers: dict[str, tuple[str, str | None, str | None]] = {}
    node_labels: dict[str, str] = {}
    weps: dict[str, dict[str, str]] = {}
    for op in steps:
        if op[0] == "peer":
            _, name, lws, node_name, node_sel, gone = op
            value = None if gone else _bgp_peer(lws, node_name, node_sel)
            calc.on_resource(ResourceKey("BGPPeer", name), value)
            if gone or lws is None:
                peers.pop(name, None)
            else:
                peers[name] = (lws, node_name, node_sel)
        elif op[0] == "node":
            _, idx, gone = op
            meta = _Value(labels=dict(LABELS[idx]))
            calc.on_resource(ResourceKey("Node", HOST), None if gone else _Value(metadata=meta))
            node_labels = {} if gone else dict(LABELS[idx])
        else:
            _, pod, idx, gone = op
            key = WorkloadEndpointKey(HOST, "k8s", f"ns1/{pod}", "eth0")
            calc.on_endpoint(key, None if gone else _Value(labels=dict(LABELS[idx])))
            if gone:
                weps.pop(pod, None)
                names.pop(f"ns1/{pod}", None)
            else:
                weps[pod] = dict(LABELS[idx])
    for pod, labels in weps.items():
        want = ""
        for name in sorted(peers):
            lws, node_name, node_sel = peers[name]
            applies = (node_name is None and node_sel is None) or node_name == HOST
            applies = applies or (
                node_sel is not None and selector.parse(node_sel).evaluate(node_labels)
            )
            if applies and selector.parse(lws).evaluate(labels):
                want = name
                break
        assert names.get(f"ns1/{pod}", "") == want, (pod, labels, peers, node_labels)
