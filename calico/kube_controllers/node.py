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
import ipaddress
import json
import logging
from typing import Any

from calico.api import parse_resource
from calico.api.cluster import Node
from calico.api.endpoints import HostEndpoint, HostEndpointSpec
from calico.datastore.backend import KVPair
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
from calico.kube_controllers.writes import cas_write_all
from calico.model.resources import resource_prefix

log = logging.getLogger(__name__)

KUBE_LABELS = "projectcalico.org/kube-labels"
CREATED_BY = "projectcalico.org/created-by"
CREATED_BY_US = "calico-kube-controllers"
AUTO_HEP_SUFFIX = "-auto-hep"
_SOFT = (UpdateConflictError, ResourceDoesNotExistError, ResourceAlreadyExistsError)


def _k8s_ref(data: dict[str, Any]) -> str | None:
    """The Kubernetes node a stored Calico Node (JSON) belongs to, or None."""
    for ref in (data.get("spec") or {}).get("orchRefs") or ():
        if ref.get("orchestrator") == "k8s":
            return ref.get("nodeName") or (data.get("metadata") or {}).get("name")
    return None


def _kube_labels(view: dict[str, Any]) -> dict[str, str]:
    text = (view.get("metadata", {}).get("annotations") or {}).get(KUBE_LABELS)
    try:
        labels = json.loads(text) if text else {}
    except ValueError:
        return {}
    return labels if isinstance(labels, dict) else {}


def synced_labels(
    labels: dict[str, str], annotations: dict[str, str], kube: dict[str, str]
) -> dict[str, str]:
    """A Calico Node's labels after a sync: the stored ones minus the previously copied
    Kubernetes keys (annotation ``projectcalico.org/kube-labels``) plus ``kube``."""
    old = _kube_labels({"metadata": {"annotations": annotations}})
    out = {k: v for k, v in labels.items() if k not in old}
    out.update(kube)
    return out


def label_sync_write(
    kv: KVPair, data: dict[str, Any], kube: dict[str, str]
) -> tuple[str, str, int] | None:
    """The raw write (key, stored JSON, expected revision) that syncs ``kube`` onto the stored
    Calico Node ``data``, or None when its labels already match. As upstream, only a label
    change writes; the annotation is refreshed with it. The JSON is edited in place of a model
    round trip (5,000 nodes per resync) and encoded as the typed client stores it; ``data``
    is left holding the synced node."""
    meta = data.setdefault("metadata", {})
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    new = synced_labels(labels, annotations, kube)
    if new == labels:
        return None
    meta["labels"] = new
    if not new:
        del meta["labels"]
    meta["annotations"] = {
        **annotations,
        KUBE_LABELS: json.dumps(kube, sort_keys=True, separators=(",", ":")),
    }
    return kv.key, json.dumps(data, separators=(",", ":"), sort_keys=True), kv.revision


def node_ips(node: Node) -> list[str]:
    """An auto host endpoint's ``expectedIPs``, in upstream's order: BGP IPv4 and IPv6 (prefix
    dropped), the IPIP, VXLAN (IPv4) and WireGuard (IPv4) tunnel addresses, then the node's
    ``InternalIP`` addresses not already listed. IPv6 tunnel addresses are not included."""
    spec, bgp = node.spec, node.spec.bgp
    out: list[str] = []
    if bgp is not None:
        for cidr in (bgp.ipv4_address, bgp.ipv6_address):
            if cidr:
                out.append(str(ipaddress.ip_interface(cidr).ip))
        if bgp.ipv4_ipip_tunnel_addr:
            out.append(bgp.ipv4_ipip_tunnel_addr)
    if spec.ipv4_vxlan_tunnel_addr:
        out.append(spec.ipv4_vxlan_tunnel_addr)
    if spec.wireguard is not None and spec.wireguard.interface_ipv4_address:
        out.append(spec.wireguard.interface_ipv4_address)
    seen = set(out)
    for addr in spec.addresses or ():
        if addr.type == "InternalIP" and addr.address not in seen:
            out.append(addr.address)
    return out


def hep_needs_update(current: HostEndpoint, wanted: HostEndpoint) -> bool:
    """Upstream compares labels, ``expectedIPs`` and ``interfaceName`` only (a profile edited
    on an auto host endpoint is left alone)."""
    cur, want = current.spec, wanted.spec
    return (
        (current.metadata.labels or {}) != (wanted.metadata.labels or {})
        or (cur.expected_ips or []) != (want.expected_ips or [])
        or cur.interface_name != want.interface_name
    )


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
        live = set(k8s_nodes)
        kept: list[tuple[KVPair, dict[str, Any]]] = []
        for kv in self.calico.backend.list(resource_prefix("Node")).kvs:
            data = json.loads(kv.value)
            name = (data.get("metadata") or {}).get("name", "")
            ref = _k8s_ref(data)
            if ref is None:
                live.add(name)  # not a Kubernetes node: never ours to judge
                kept.append((kv, data))
            elif ref in k8s_nodes or self.kdd:
                kept.append((kv, data))
            else:
                self._delete_node(name)
        if self.sync_labels:
            views = self.kube.snapshot("Node")
            jobs = []
            for kv, data in kept:
                ref = _k8s_ref(data)
                view = views.get(("", ref)) if ref else None
                job = label_sync_write(kv, data, _kube_labels(view)) if view else None
                if job is not None:
                    jobs.append(job)
            cas_write_all(self.calico.backend, jobs, "node label sync")
        # host endpoints follow the nodes as just synced (label_sync_write edits ``data``)
        nodes = [parse_resource(d, source=kv.key) for kv, d in kept] if self.auto_heps else []
        self._reconcile_heps(nodes)  # type: ignore[arg-type]
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

    def _delete_node(self, name: str) -> None:
        log.info("Kubernetes node %s is gone: deleting its Calico Node", name)
        with contextlib.suppress(ResourceDoesNotExistError, UpdateConflictError):
            self.calico.delete(Node, name)

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
                elif hep_needs_update(current, hep):
                    current.metadata.labels = hep.metadata.labels
                    current.spec = hep.spec
                    self.calico.update(current)
            except _SOFT:
                continue
            except DatastoreError as exc:
                log.warning("Could not write host endpoint %s: %s", name, exc)
