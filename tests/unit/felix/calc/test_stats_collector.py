"""StatsCollector: cluster-wide host/WEP counts and resync transitions, and their gauges."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from calico.felix.calc.fanout import TypeFanout
from calico.felix.calc.stats_collector import ClusterStats, StatsCollector
from calico.felix.dataplane.metrics import ClusterStatsGauges, FelixMetrics
from calico.model import ResourceKey, TierKey, WorkloadEndpointKey
from calico.syncer.api import SyncStatus


class Sink:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def on_cluster_stats(self, stats: ClusterStats) -> None:
        self.calls.append(stats)

    def on_resync_started(self) -> None:
        self.calls.append("resync")


def setup() -> tuple[TypeFanout, Sink]:
    fanout, sink = TypeFanout(), Sink()
    StatsCollector(sink).register(fanout)
    return fanout, sink


def wep(host: str, pod: str) -> WorkloadEndpointKey:
    return WorkloadEndpointKey(host, "k8s", f"ns/{pod}", "eth0")


def test_counts_change_only_when_membership_changes() -> None:
    fanout, sink = setup()
    fanout.on_update(ResourceKey("Node", "n1"), object())
    fanout.on_update(ResourceKey("Node", "n1"), object())  # update of a known host
    fanout.on_update(wep("n1", "a"), object())
    fanout.on_update(wep("n2", "b"), object())  # another host's endpoint counts too
    fanout.on_update(wep("n2", "b"), object())
    fanout.on_update(ResourceKey("Profile", "p"), object())  # not a Node
    fanout.on_update(TierKey("t"), object())  # not registered
    fanout.on_update(wep("n1", "a"), None)
    fanout.on_update(wep("n9", "never"), None)  # unknown delete: no change
    fanout.on_update(ResourceKey("Node", "n1"), None)
    assert sink.calls == [
        ClusterStats(1, 0),
        ClusterStats(1, 1),
        ClusterStats(1, 2),
        ClusterStats(1, 1),
        ClusterStats(0, 1),
    ]


def test_resyncs_counted_on_transitions_only() -> None:
    fanout, sink = setup()
    for status in (
        SyncStatus.WAIT_FOR_DATASTORE,
        SyncStatus.RESYNC_IN_PROGRESS,
        SyncStatus.RESYNC_IN_PROGRESS,
        SyncStatus.IN_SYNC,
        SyncStatus.RESYNC_IN_PROGRESS,
    ):
        fanout.on_status(status)
    assert sink.calls == ["resync", "resync"]


def test_gauges_follow_the_collector() -> None:
    metrics = FelixMetrics(CollectorRegistry())
    gauges = ClusterStatsGauges(metrics)
    fanout = TypeFanout()
    StatsCollector(gauges).register(fanout)
    fanout.on_status(SyncStatus.RESYNC_IN_PROGRESS)
    fanout.on_update(ResourceKey("Node", "n1"), object())
    fanout.on_update(wep("n1", "a"), object())
    fanout.on_update(wep("n2", "a"), object())
    registry = metrics.registry
    assert registry.get_sample_value("felix_cluster_num_hosts") == 1
    assert registry.get_sample_value("felix_cluster_num_workload_endpoints") == 2
    assert metrics.resyncs_started.value() == 1


def test_gauges_read_the_latest_counts_at_each_scrape() -> None:
    """The gauges are read at scrape time: each scrape sees the counts of the last change, a
    second sink over the same metrics (the daemon's resync sink) shares them, and a fresh
    registry starts at zero."""
    metrics = FelixMetrics(CollectorRegistry())
    registry = metrics.registry
    assert registry.get_sample_value("felix_cluster_num_hosts") == 0
    assert registry.get_sample_value("felix_cluster_num_workload_endpoints") == 0
    fanout = TypeFanout()
    StatsCollector(ClusterStatsGauges(metrics)).register(fanout)
    fanout.on_update(wep("n1", "a"), object())
    assert registry.get_sample_value("felix_cluster_num_workload_endpoints") == 1
    fanout.on_update(wep("n1", "b"), object())
    fanout.on_update(ResourceKey("Node", "n1"), object())
    assert registry.get_sample_value("felix_cluster_num_workload_endpoints") == 2
    assert registry.get_sample_value("felix_cluster_num_hosts") == 1
    metrics.cluster_stats().on_resync_started()  # another sink: the counts stay
    fanout.on_update(wep("n1", "a"), None)
    fanout.on_update(ResourceKey("Node", "n1"), None)
    assert registry.get_sample_value("felix_cluster_num_workload_endpoints") == 1
    assert registry.get_sample_value("felix_cluster_num_hosts") == 0
    assert metrics.resyncs_started.value() == 1


_ops = st.lists(
    st.tuples(
        st.sampled_from(["wep", "node", "profile"]),
        st.sampled_from(["a", "b", "c"]),
        st.booleans(),  # present (an update) or deleted
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_ops)
def test_sends_exactly_when_a_count_changes(ops: list[tuple[str, str, bool]]) -> None:
    """Against a reference that recounts after every update and sends on any difference (what
    the collector did before it skipped the compare for updates that change no count)."""
    fanout, sink = setup()
    hosts: set[str] = set()
    weps: set[str] = set()
    expected: list[ClusterStats] = []
    last = ClusterStats()
    for kind, name, present in ops:
        key: Any = wep("n1", name) if kind == "wep" else ResourceKey(kind.title(), name)
        fanout.on_update(key, object() if present else None)
        target = {"wep": weps, "node": hosts}.get(kind)
        if target is not None:
            (target.add if present else target.discard)(name)
        stats = ClusterStats(len(hosts), len(weps))
        if stats != last:
            expected.append(stats)
            last = stats
    assert sink.calls == expected
