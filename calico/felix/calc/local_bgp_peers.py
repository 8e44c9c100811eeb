"""LocalBGPPeerCalculator: which BGPPeer (``localWorkloadSelector``) each local workload peers with.

Why it exists: confd peers with a workload only when Felix has written the BGPPeer's name as
``bgpPeerName`` into that workload's endpoint status file (design/confd.md "Local workload
peers"). Felix decides, as upstream: a BGPPeer with a ``localWorkloadSelector`` applies on this
host when it is global (neither ``node`` nor ``nodeSelector``), names this host in ``node``, or
its ``nodeSelector`` matches this host's Node labels; a local workload endpoint whose labels
match an applicable peer's ``localWorkloadSelector`` gets that peer's name. With several
matching peers the first name in sort order wins (a deterministic choice; upstream picks one
too). Results go to the PolicyResolver, which carries the name in the endpoint message
(design/felix-calc-nodes.md "LocalBGPPeerCalculator").

Inputs: ResourceKey BGPPeer and this host's Node (all-updates fan-out), local
WorkloadEndpointKey updates (local fan-out). Output: ``on_change(key, name)`` for each local
endpoint whose answer changed ("" = none; a new endpoint without a peer reports nothing);
a removed endpoint reports nothing (the resolver forgets the name with the endpoint).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from calico import selector
from calico.felix.calc.fanout import TypeFanout
from calico.model import ResourceKey, WorkloadEndpointKey
from calico.model import values as v1

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Peer:
    node: str | None
    node_selector: selector.Selector | None
    workload_selector: selector.Selector


class LocalBGPPeerCalculator:
    """See the module docstring."""

    def __init__(self, hostname: str, on_change: Callable[[WorkloadEndpointKey, str], None]):
        self.hostname = hostname
        self._on_change = on_change
        self._peers: dict[str, _Peer] = {}
        self._node_labels: Mapping[str, str] = {}
        self._labels: dict[WorkloadEndpointKey, Mapping[str, str]] = {}
        self._names: dict[WorkloadEndpointKey, str] = {}

    def register(self, all_updates: TypeFanout, local_endpoints: TypeFanout) -> None:
        all_updates.register(ResourceKey, self.on_resource)
        local_endpoints.register(WorkloadEndpointKey, self.on_endpoint)

    # -- inputs ---------------------------------------------------------------------------------

    def on_resource(self, key: ResourceKey, value: Any) -> None:
        if key.kind == "BGPPeer":
            peer = None if value is None else _peer(key.name, value)
            if self._peers.get(key.name) == peer:
                return
            if peer is None:
                self._peers.pop(key.name, None)
            else:
                self._peers[key.name] = peer
            self._recompute_all()
        elif key.kind == "Node" and key.name == self.hostname:
            labels = dict(value.metadata.labels or {}) if value is not None else {}
            if labels != self._node_labels:
                self._node_labels = labels
                self._recompute_all()

    def on_endpoint(self, key: WorkloadEndpointKey, value: v1.WorkloadEndpoint | None) -> None:
        if value is None:
            self._labels.pop(key, None)
            self._names.pop(key, None)
            return
        labels = dict(value.labels)
        if self._labels.get(key) == labels:
            return
        self._labels[key] = labels
        self._recompute(key)

    # -- computation ----------------------------------------------------------------------------

    def peer_name(self, labels: Mapping[str, str]) -> str:
        """The first applicable BGPPeer (by name) whose localWorkloadSelector matches."""
        for name in sorted(self._peers):
            peer = self._peers[name]
            if self._applies(peer) and peer.workload_selector.evaluate(labels):
                return name
        return ""

    def _applies(self, peer: _Peer) -> bool:
        if peer.node is None and peer.node_selector is None:
            return True
        if peer.node == self.hostname:
            return True
        return peer.node_selector is not None and peer.node_selector.evaluate(self._node_labels)

    def _recompute_all(self) -> None:
        for key in sorted(self._labels, key=str):
            self._recompute(key)

    def _recompute(self, key: WorkloadEndpointKey) -> None:
        name = self.peer_name(self._labels[key])
        changed = self._names.get(key, "") != name
        self._names[key] = name
        if changed:
            self._on_change(key, name)


def _peer(name: str, value: Any) -> _Peer | None:
    """The parts of a BGPPeer this node needs; None without a localWorkloadSelector (or with a
    selector that does not parse: logged, the peer is ignored rather than half-applied)."""
    spec = value.spec
    if spec.local_workload_selector is None:
        return None
    try:
        return _Peer(
            node=spec.node,
            node_selector=None
            if spec.node_selector is None
            else selector.parse(spec.node_selector),
            workload_selector=selector.parse(spec.local_workload_selector),
        )
    except selector.SelectorParseError as exc:
        log.warning("BGPPeer %s ignored for local workload peering: %s", name, exc)
        return None
