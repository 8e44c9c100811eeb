"""Kubernetes connection rebalancing: Typha's connection limit from the node and Typha counts.

With ``ConnectionRebalancingMode=kubernetes`` every ``K8sServicePollIntervalSecs`` (+10 %)
Typha counts its peers (unique endpoint addresses of the ``K8sServiceName`` service's
EndpointSlices that carry a port named ``K8sPortName``; readiness is not checked) and the
nodes the felix syncer has seen (``NodeCounter``), and hands the governor
``max_conn_limit(...)``; the governor then sheds one random connection per drop interval
until it is under the new limit (design/typha.md "Connection rebalancing"). The sum of every
Typha's limit covers the cluster even if one Typha dies, so a Felix dropped here finds room
elsewhere. Any failure to count means the upper limit: never shed load on bad information.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

from calico.datastore.errors import DatastoreError
from calico.model import ResourceKey
from calico.syncer.api import SyncerCallbacks, SyncStatus, Update
from calico.syncer.definitions import SYNCER_TYPES

log = logging.getLogger(__name__)

NUM_SYNCER_TYPES = len(SYNCER_TYPES)  # each Felix-side node holds one connection per type
REQUEST_TIMEOUT = 30.0
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class CountUnavailable(Exception):
    """A count the limit needs cannot be had now (not in sync yet, API unreachable)."""


def max_conn_limit(num_typhas: int | None, num_nodes: int | None, lower: int, upper: int) -> int:
    """Upstream's ``CalculateMaxConnLimit``; None for a count that failed.

    One Typha is left out of the share (so the rest absorb a dying one) and 20 % is added as
    headroom, in integer arithmetic: ``4 * (1 + nodes * 120 / (typhas - 1) / 100)``, at least
    ``lower``, at most ``upper``. A lone Typha (or none seen) takes the upper limit.
    """
    if num_typhas is None or num_nodes is None or num_typhas <= 1:
        return upper
    candidate = NUM_SYNCER_TYPES * (1 + num_nodes * 120 // (num_typhas - 1) // 100)
    return min(max(candidate, lower), upper)


def count_typhas(slices: Iterable[dict[str, Any]], port_name: str) -> int:
    """Unique endpoint addresses over the slices that expose a port named ``port_name``."""
    addresses: set[str] = set()
    for piece in slices:
        if not any((p or {}).get("name") == port_name for p in piece.get("ports") or []):
            continue
        for endpoint in piece.get("endpoints") or []:
            addresses.update(endpoint.get("addresses") or [])
    return len(addresses)


class TyphaCounter:
    """Counts the Typha service's endpoints through the official client (``Rest``)."""

    def __init__(self, rest: Any, namespace: str, service: str, port_name: str) -> None:
        self.rest = rest
        self.path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
        self.selector = f"{SERVICE_NAME_LABEL}={service}"
        self.port_name = port_name

    def count(self) -> int:
        try:
            body = self.rest.request("GET", self.path, {"labelSelector": self.selector})
            return count_typhas(body.get("items") or [], self.port_name)
        except (DatastoreError, ValueError, TypeError, AttributeError) as exc:
            raise CountUnavailable(f"cannot list Typha endpoint slices: {exc}") from None


class NodeCounter:
    """The felix syncer's callbacks, passed through, counting the v3 Nodes seen.

    Counts names rather than NEW/DELETED events (as upstream does), so a repeated update or a
    delete of an unseen node cannot skew it. An error until the first IN_SYNC: before that the
    count is only part of the cluster.
    """

    def __init__(self, downstream: SyncerCallbacks) -> None:
        self.downstream = downstream
        self._lock = threading.Lock()
        self._nodes: set[str] = set()
        self._in_sync = False

    def on_updates(self, updates: list[Update]) -> None:
        with self._lock:
            for u in updates:
                if isinstance(u.key, ResourceKey) and u.key.kind == "Node":
                    if u.value is None:
                        self._nodes.discard(u.key.name)
                    else:
                        self._nodes.add(u.key.name)
        self.downstream.on_updates(updates)

    def on_status_updated(self, status: SyncStatus) -> None:
        if status is SyncStatus.IN_SYNC:
            with self._lock:
                self._in_sync = True
        self.downstream.on_status_updated(status)

    def num_nodes(self) -> int:
        with self._lock:
            if not self._in_sync:
                raise CountUnavailable("the felix syncer is not in sync yet")
            return len(self._nodes)


class Rebalancer:
    """Polls both counts off the event loop and applies the limit when it changes."""

    def __init__(
        self,
        count_typhas: Callable[[], int],
        count_nodes: Callable[[], int],
        lower: int,
        upper: int,
        interval: float,
        apply: Callable[[int], None],
    ) -> None:
        self.count_typhas = count_typhas
        self.count_nodes = count_nodes
        self.lower = lower
        self.upper = upper
        self.interval = interval
        self.apply = apply
        self.limit = upper  # what the governor starts with

    def compute(self) -> int:
        typhas = nodes = None
        try:
            typhas = self.count_typhas()
            nodes = self.count_nodes()
        except CountUnavailable as exc:
            log.warning("Connection rebalancing: %s; using the upper limit %d", exc, self.upper)
        return max_conn_limit(typhas, nodes, self.lower, self.upper)

    def poll_once(self, limit: int) -> None:
        if limit != self.limit:
            log.info("Connection rebalancing: max connections %d -> %d", self.limit, limit)
            self.limit = limit
            self.apply(limit)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval * (1 + random.random() * 0.1))
            self.poll_once(await asyncio.to_thread(self.compute))
