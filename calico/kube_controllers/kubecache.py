"""What the controllers know about Kubernetes: a watcher syncer over the Kubernetes backend.

The Kubernetes datastore already maps Nodes, Pods (WorkloadEndpoints), Namespaces and
ServiceAccounts (Profiles) and NetworkPolicies (KubernetesNetworkPolicy) to v3 objects, and
its watches plus the watcher syncer already ride out dropped connections and 410s (relist,
synthetic deletes). So the controllers' informers are one ``WatcherSyncer`` with a
pass-through processor that keeps the v3 JSON (no model validation: 50,000 pods). Callbacks
arrive on the syncer's one thread; readers take a consistent copy under the lock.
"""

from __future__ import annotations

import threading
from typing import Any

from calico.datastore import Backend
from calico.model import Key, ResourceKey
from calico.syncer.api import SyncStatus, Update
from calico.syncer.watchersyncer import ResourceType, WatcherSyncer

KINDS = ("Node", "WorkloadEndpoint", "Profile", "KubernetesNetworkPolicy")


def _raw(key: ResourceKey, value: Any) -> dict[Key, Any]:
    return {key: value}


class KubeCache:
    """``objects[kind][(namespace, name)]`` = the v3 JSON; ``generation`` counts changes."""

    def __init__(self, backend: Backend, kinds: tuple[str, ...] = KINDS) -> None:
        self.kinds = kinds
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in kinds}
        self.status = SyncStatus.WAIT_FOR_DATASTORE
        self.generation = 0
        self.stopped = False
        self.cond = threading.Condition()
        self.syncer = WatcherSyncer(backend, [ResourceType(k, _raw) for k in kinds], self)

    def start(self) -> None:
        self.syncer.start()

    def stop(self) -> None:
        """Stop watching. The syncer's closing synthetic deletes are ignored and the view
        stays "not in sync", so no controller mistakes a shutdown for deleted nodes."""
        with self.cond:
            self.stopped = True
            self.status = SyncStatus.WAIT_FOR_DATASTORE
            self.generation += 1
            self.cond.notify_all()
        self.syncer.stop(2.0)

    # -- SyncerCallbacks -------------------------------------------------------------------

    def on_status_updated(self, status: SyncStatus) -> None:
        with self.cond:
            if self.stopped:
                return
            self.status = status
            self.generation += 1
            self.cond.notify_all()

    def on_updates(self, updates: list[Update]) -> None:
        with self.cond:
            if self.stopped:
                return
            for u in updates:
                key = u.key
                assert isinstance(key, ResourceKey)
                bucket = self.objects[key.kind]
                ident = (key.namespace or "", key.name)
                if u.value is None:
                    bucket.pop(ident, None)
                else:
                    bucket[ident] = u.value
            self.generation += 1
            self.cond.notify_all()

    # -- readers ---------------------------------------------------------------------------

    @property
    def in_sync(self) -> bool:
        return self.status is SyncStatus.IN_SYNC

    def wait_change(self, generation: int, timeout: float) -> int:
        """Block until the generation moves past ``generation`` or ``timeout``; returns it."""
        with self.cond:
            self.cond.wait_for(lambda: self.generation != generation, timeout)
            return self.generation

    def wait_in_sync(self, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.in_sync, timeout)

    def snapshot(self, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
        with self.cond:
            return dict(self.objects[kind])

    def node_names(self) -> set[str]:
        with self.cond:
            return {name for _, name in self.objects["Node"]}

    def pod_ips(self) -> dict[tuple[str, str], set[str]]:
        """(namespace, pod) -> its addresses (bare IPs), from the pods' endpoint views."""
        out: dict[tuple[str, str], set[str]] = {}
        with self.cond:
            for (ns, _), wep in self.objects["WorkloadEndpoint"].items():
                spec = wep.get("spec", {})
                ips = {n.split("/")[0] for n in spec.get("ipNetworks") or ()}
                out.setdefault((ns, spec.get("pod", "")), set()).update(ips)
        return out
