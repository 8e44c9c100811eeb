"""The Services and EndpointSlices confd's per-service advertisement reads (upstream's route
generator; design/confd.md "Per-service advertisement").

Started the first time a build needs it (any of ``serviceClusterIPs``,
``serviceExternalIPs``, ``serviceLoadBalancerIPs`` or ``CALICO_ADVERTISE_CLUSTER_IPS`` set),
as upstream, which watches Services only when asked to advertise them. Until both collections
are listed, builds are held back (up to ``wait`` seconds, as the Secret source), so the first
configuration already carries the per-service routes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)
SYNC_WAIT = 3.0
SERVICES = "/api/v1/services"
ENDPOINT_SLICES = "/apis/discovery.k8s.io/v1/endpointslices"

Picture = tuple[Mapping[str, Any], Mapping[str, Any]]


class RouteGenerator:
    def __init__(
        self,
        watcher_factory: Callable[[str, Callable[[], None]], Any],
        on_change: Callable[[], None],
        wait: float = SYNC_WAIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``watcher_factory(path, on_change)``: a started-on-demand
        :class:`calico.datastore.kubernetes.collection.CollectionWatcher`."""
        self.factory, self.on_change, self.wait, self.clock = (
            watcher_factory,
            on_change,
            wait,
            clock,
        )
        self._watchers: tuple[Any, Any] | None = None
        self._started_at = 0.0

    def snapshot(self, wanted: bool) -> tuple[Picture | None, float | None]:
        """(Services and EndpointSlices or None, the time to hold the render until or None)."""
        if not wanted:
            return None, None
        if self._watchers is None:
            log.info("Starting route generator for service advertisement")
            self._watchers = (
                self.factory(SERVICES, self.on_change),
                self.factory(ENDPOINT_SLICES, self.on_change),
            )
            for w in self._watchers:
                w.start()
            self._started_at = self.clock()
        svcs, slices = self._watchers
        if not (svcs.synced and slices.synced):
            deadline = self._started_at + self.wait
            if self.clock() < deadline:
                return None, deadline
            log.warning("Services/EndpointSlices not listed yet; rendering without them")
        return (svcs.objects(), slices.objects()), None

    def stop(self) -> None:
        for w in self._watchers or ():
            w.stop()
