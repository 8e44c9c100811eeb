"""The node controller (design/kube-controllers.md "Node controller").

One reconcile = what upstream's node sub-controllers do, from the current Kubernetes view:

- etcd mode only: delete Calico Nodes whose Kubernetes orchRef names a node that is gone
  (``DeleteNodes``), and copy Kubernetes node labels onto the Calico Node (``syncLabels``;
  the previously copied set is remembered in the ``projectcalico.org/kube-labels``
  annotation so removed Kubernetes labels are removed, Calico-only labels are kept);
- both modes: auto host endpoints ``<node>-auto-hep`` (``interfaceName: "*"``, the node's
  addresses, the node's labels plus ``projectcalico.org/created-by:
  calico-kube-controllers``) when enabled, and removal of those we created when disabled or
  when the node is gone; then one IPAM GC pass (calico.kube_controllers.ipamgc).

Nothing is done while the Kubernetes view is not in sync: a half-listed node collection
would look like deleted nodes.
"""

from __future__ import annotations

import contextlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from calico.api.cluster import Node
from calico.api.endpoints import HostEndpoint, HostEndpointSpec
from calico.datastore.client import Client
from calico.datastore.errors import (
    DatastoreError,
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.kube_controllers.ipamgc import IPAMGarbageCollector, PassResult
from calico.kube_controllers.kubecache import KubeCache
from calico.kube_controllers.metrics import IPAMMetrics

log = logging.getLogger(__name__)

KUBE_LABELS = "projectcalico.org/kube-labels"
CREATED_BY = "projectcalico.org/created-by"
CREATED_BY_US = "calico-kube-controllers"
AUTO_HEP_SUFFIX = "-auto-hep"
WRITE_WORKERS = 8
_SOFT = (UpdateConflictError, ResourceDoesNotExistError, ResourceAlreadyExistsError)


def k8s_node_name(node: Node) -> str | None:
    for ref in node.spec.orch_refs or ():
        if ref.orchestrator == "k8s":
            return ref.node_name or node.metadata.name
    return None


def _kube_labels(view: dict[str, Any]) -> dict[str, str]:
    text = (view.get("metadata", {}).get("annotations") or {}).get(KUBE_LABELS)
    try:
        labels = json.loads(text) if text else {}
    except ValueError:
        return {}
    return labels if isinstance(labels, dict) else {}


def synced_labels(node: Node, kube: dict[str, str]) -> tuple[dict[str, str], str]:
    """The Calico Node's labels after a sync, and the new kube-labels annotation."""
    old = _kube_labels({"metadata": {"annotations": node.metadata.annotations or {}}})
    labels = {k: v for k, v in (node.metadata.labels or {}).items() if k not in old}
    labels.update(kube)
    return labels, json.dumps(kube, sort_keys=True, separators=(",", ":"))


def node_ips(node: Node) -> list[str]:
    """A node's own addresses (BGP, tunnels, WireGuard), bare, deduplicated, in order."""
    spec = node.spec
    out: list[str] = []
    bgp = spec.bgp
    for text in (
        bgp.ipv4_address if bgp else None,
        bgp.ipv6_address if bgp else None,
        bgp.ipv4_ipip_tunnel_addr if bgp else None,
        spec.ipv4_vxlan_tunnel_addr,
        spec.ipv6_vxlan_tunnel_addr,
        spec.wireguard.interface_ipv4_address if spec.wireguard else None,
        spec.wireguard.interface_ipv6_address if spec.wireguard else None,
    ):
        if text:
            ip = text.split("/")[0]
            if ip not in out:
                out.append(ip)
    return out


def auto_hep(node: Node) -> HostEndpoint:
    hep = HostEndpoint(
        spec=HostEndpointSpec(
            node=node.metadata.name,
            interface_name="*",
            expected_ips=node_ips(node) or None,
            profiles=["projectcalico-default-allow"],
        )
    )
    hep.metadata.name = node.metadata.name + AUTO_HEP_SUFFIX
    hep.metadata.labels = {**(node.metadata.labels or {}), CREATED_BY: CREATED_BY_US}
    return hep


class NodeController:
    name = "node"

    def __init__(
        self,
        calico: Client,
        kube: KubeCache,
        gc: IPAMGarbageCollector,
        *,
        kubernetes_datastore: bool,
        sync_labels: bool,
        auto_host_endpoints: bool,
        metrics: IPAMMetrics | None = None,
    ) -> None:
        self.calico = calico
        self.kube = kube
        self.gc = gc
        self.kdd = kubernetes_datastore
        self.sync_labels = sync_labels and not kubernetes_datastore
        self.auto_heps = auto_host_endpoints
        self.metrics = metrics

    def reconcile(self) -> PassResult | None:
        if not self.kube.in_sync:
            return None
        k8s_nodes = self.kube.node_names()
        calico_nodes: list[Node] = self.calico.list(Node).items  # type: ignore[assignment]
        live = set(k8s_nodes)
        kept: list[Node] = []
        for node in calico_nodes:
            ref = k8s_node_name(node)
            if ref is None:
                live.add(node.metadata.name)  # not a Kubernetes node: never ours to judge
                kept.append(node)
            elif ref in k8s_nodes or self.kdd:
                kept.append(node)
            else:
                self._delete_node(node)
        if self.sync_labels:
            views = self.kube.snapshot("Node")
            jobs = []
            for node in kept:
                ref = k8s_node_name(node)
                view = views.get(("", ref)) if ref else None
                if view is not None:
                    jobs.append((node, _kube_labels(view)))
            with ThreadPoolExecutor(WRITE_WORKERS) as pool:  # independent CAS writes
                list(pool.map(lambda job: self._sync_labels(*job), jobs))
        self._reconcile_heps(kept if self.auto_heps else [])
        result = self.gc.run_pass(live, self.kube.pod_ips())
        log.info(
            "Node controller pass: %d nodes, %d addresses released, %d leak candidates",
            len(live),
            len(result.released),
            result.candidates,
        )
        if self.metrics is not None:
            self.metrics.record(result)
        return result

    def _delete_node(self, node: Node) -> None:
        log.info("Kubernetes node %s is gone: deleting its Calico Node", node.metadata.name)
        with contextlib.suppress(ResourceDoesNotExistError, UpdateConflictError):
            self.calico.delete(Node, node.metadata.name)

    def _sync_labels(self, node: Node, kube: dict[str, str]) -> None:
        labels, annotation = synced_labels(node, kube)
        annotations = dict(node.metadata.annotations or {})
        if labels == (node.metadata.labels or {}) and annotations.get(KUBE_LABELS) == annotation:
            return
        annotations[KUBE_LABELS] = annotation
        node.metadata.labels = labels or None
        node.metadata.annotations = annotations
        try:
            self.calico.update(node)
        except _SOFT:
            log.info("Node %s changed while syncing labels; next pass retries", node.metadata.name)

    def _reconcile_heps(self, nodes: list[Node]) -> None:
        wanted = {hep.metadata.name: hep for hep in map(auto_hep, nodes)}
        existing = {
            h.metadata.name: h
            for h in self.calico.list(HostEndpoint).items
            if (h.metadata.labels or {}).get(CREATED_BY) == CREATED_BY_US
        }
        for name in existing:
            if name not in wanted:
                with contextlib.suppress(*_SOFT):
                    self.calico.delete(HostEndpoint, name)
        for name, hep in wanted.items():
            current = existing.get(name)
            try:
                if current is None:
                    self.calico.create(hep)
                elif (current.metadata.labels, current.spec) != (hep.metadata.labels, hep.spec):
                    current.metadata.labels = hep.metadata.labels
                    current.spec = hep.spec
                    self.calico.update(current)
            except _SOFT:
                continue
            except DatastoreError as exc:
                log.warning("Could not write host endpoint %s: %s", name, exc)
