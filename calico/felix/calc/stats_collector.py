"""StatsCollector: cluster-wide counts for Felix's metrics (upstream felix/calc/stats_collector.go).

The dataplane only ever sees this host's endpoints, so the cluster figures are counted where
every update passes: the calc graph. Hosts are the Nodes the syncer reports; workload endpoints
are counted on every host. A resync is counted each time the syncer enters ResyncInProgress.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from calico.felix.calc.fanout import TypeFanout
from calico.model import ResourceKey, WorkloadEndpointKey
from calico.syncer.api import SyncStatus


@dataclass(frozen=True, slots=True)
class ClusterStats:
    num_hosts: int = 0
    num_workload_endpoints: int = 0


class StatsSink(Protocol):
    def on_cluster_stats(self, stats: ClusterStats) -> None: ...
    def on_resync_started(self) -> None: ...


class StatsCollector:
    """Registers WorkloadEndpointKey, ResourceKey (Node) and a status handler.

    Invariants: ``on_cluster_stats`` is called once per change of either count (never for an
    update that leaves both unchanged); ``on_resync_started`` once per transition into
    ResyncInProgress (repeats of the same status are not transitions).
    """

    def __init__(self, sink: StatsSink) -> None:
        self._sink = sink
        self._hosts: set[str] = set()
        self._weps: set[WorkloadEndpointKey] = set()
        self._sent = ClusterStats()
        self._status: SyncStatus | None = None

    def register(self, fanout: TypeFanout) -> None:
        fanout.register(WorkloadEndpointKey, self.on_workload)
        fanout.register(ResourceKey, self.on_resource)
        fanout.register_status_handler(self.on_status)

    def on_workload(self, key: WorkloadEndpointKey, value: Any) -> None:
        weps = self._weps
        count = len(weps)
        if value is None:
            weps.discard(key)
        else:
            weps.add(key)
        if len(weps) != count:  # an update of a known endpoint changes no count
            self._maybe_send()

    def on_resource(self, key: ResourceKey, value: Any) -> None:
        if key.kind != "Node":
            return
        hosts = self._hosts
        count = len(hosts)
        if value is None:
            hosts.discard(key.name)
        else:
            hosts.add(key.name)
        if len(hosts) != count:
            self._maybe_send()

    def on_status(self, status: SyncStatus) -> None:
        if status is SyncStatus.RESYNC_IN_PROGRESS and self._status is not status:
            self._sink.on_resync_started()
        self._status = status

    def _maybe_send(self) -> None:
        sent, hosts, weps = self._sent, len(self._hosts), len(self._weps)
        if hosts != sent.num_hosts or weps != sent.num_workload_endpoints:  # no object to compare
            self._sent = stats = ClusterStats(hosts, weps)
            self._sink.on_cluster_stats(stats)
