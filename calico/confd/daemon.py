"""``calico component confd``: the BGP syncer feeds the key space; never render before the
syncer is in sync; retry failures with 250 ms -> 5 s back-off (design/confd.md "Render loop")."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calico import birdctl
from calico.backoff import Backoff
from calico.confd import keyspace
from calico.confd.passwords import NoSecretSource
from calico.confd.renderer import Renderer, RenderError
from calico.confd.state import BGPState
from calico.model.ipam_keys import BlockAffinityKey
from calico.syncer.api import SyncStatus, Update

log = logging.getLogger(__name__)
RETRY_MIN, RETRY_MAX = 0.25, 5.0


class _Callbacks:
    """Syncer callbacks -> one queue the loop drains (the syncer's thread never renders).

    ``only_host``: drop other hosts' block affinities — Typha's bgp stream carries every host's,
    the local syncer already filters them to this node."""

    def __init__(self, only_host: str | None = None) -> None:
        self.q: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.only_host = only_host

    def on_status_updated(self, status: SyncStatus) -> None:
        self.q.put(("status", status))

    def on_updates(self, updates: list[Update]) -> None:
        if self.only_host is not None:
            host = self.only_host
            updates = [
                u for u in updates if not isinstance(u.key, BlockAffinityKey) or u.key.host == host
            ]
        self.q.put(("updates", updates))


class Confd:
    def __init__(
        self,
        backend: Any,
        renderer: Renderer,
        nodename: str,
        env: Mapping[str, str],
        status_path: Path | None = None,
        typha: Any = None,
    ) -> None:
        """``typha`` (``ClientSettings``): sync through Typha, ``backend`` unused (may be None)."""
        self.renderer, self.nodename, self.env = renderer, nodename, dict(env)
        self.state = BGPState()
        self.cb = _Callbacks(only_host=nodename if typha is not None else None)
        self.syncer: Any
        if typha is not None:
            from calico.syncer.typhaclient import TyphaSyncer

            log.info("Syncing through Typha at %s", typha.addr)
            self.syncer = TyphaSyncer(typha, self.cb)
        else:
            from calico.syncer.definitions import bgp_syncer

            self.syncer = bgp_syncer(backend, self.cb, node=nodename)
        self.in_sync = False
        self.stop_event = threading.Event()
        self.status_path = status_path
        self.last_error: str | None = None
        self.passwords: Any = NoSecretSource()
        self.hold_until: float | None = None
        # calico.confd.localpeers.StatusDirWatcher (None: no local workload peers)
        self.workloads: Any = None
        # calico.confd.routegen.RouteGenerator (None: no Kubernetes API for Services)
        self.routegen: Any = None

    def secret_changed(self, name: str) -> None:
        """A watched Secret changed (called on its watch thread): re-resolve passwords."""
        self.cb.q.put(("secret", name))

    def services_changed(self) -> None:
        """A Service or EndpointSlice changed (called on its watch thread)."""
        self.cb.q.put(("services", None))

    def workloads_changed(self) -> None:
        """The endpoint status files' local peers changed (called on the watcher's thread)."""
        self.cb.q.put(("workloads", None))

    def _drain(self, timeout: float) -> bool:
        """Apply queued syncer events; True when anything confd uses changed."""
        changed = False
        try:
            kind, payload = self.cb.q.get(timeout=timeout)
        except queue.Empty:
            return False
        while True:
            if kind in ("secret", "workloads", "services"):
                changed = True
            elif kind == "status":
                if payload is SyncStatus.IN_SYNC and not self.in_sync:
                    log.info("BGP syncer in sync")
                    self.in_sync = True
                    changed = True
            else:
                for u in payload:
                    changed |= self.state.apply(u)
            try:
                kind, payload = self.cb.q.get_nowait()
            except queue.Empty:
                return changed

    def _report(self) -> None:
        if self.status_path is not None:
            birdctl.write_status(self.status_path, dict(self.renderer.errors))

    def step(self) -> bool | None:
        """Rebuild the key space and render what it touched; True on success, None when
        held back until ``hold_until`` (a referenced Secret, or the Services, not read yet)."""
        self.passwords.begin()
        workloads = self.workloads.active() if self.workloads is not None else []
        k8s, svc_hold = None, None
        if self.routegen is not None:
            g = self.state.global_config()
            wanted = any(keyspace.advertised_cidrs(g.spec if g else None, self.env))
            k8s, svc_hold = self.routegen.snapshot(wanted)
        ks = keyspace.build(
            self.state, self.nodename, self.env, self.passwords.lookup, workloads, k8s
        )
        holds = [t for t in (self.passwords.end(), svc_hold) if t is not None]
        self.hold_until = min(holds) if holds else None
        if self.hold_until is not None:
            return None
        self.renderer.update(ks)
        gspec = self.state.global_config()
        try:
            self.renderer.process(gspec.spec if gspec else None, self.state.filters)
        except (RenderError, ValueError) as exc:
            self.last_error = str(exc)
            self._report()
            return False
        self.last_error = None
        self._report()
        return True

    def run(self, run_once: bool = False, poll: float = 0.5) -> int:
        if self.workloads is not None:
            self.workloads.start()
        self.syncer.start()
        try:
            backoff = Backoff(RETRY_MIN, RETRY_MAX)
            pending = False
            retry_at: float | None = None
            while not self.stop_event.is_set():
                wait = poll if retry_at is None else max(0.0, retry_at - time.monotonic())
                pending |= self._drain(min(wait, poll))
                if not self.in_sync:
                    continue  # never render a partial picture
                due = retry_at is not None and time.monotonic() >= retry_at
                if not pending and not due:
                    continue
                pending = False
                result = self.step()
                if result is None:  # waiting for a Secret (or its deadline)
                    retry_at = self.hold_until
                    continue
                if result:
                    backoff.reset()
                    retry_at = None
                    if run_once:
                        return 0
                else:
                    if run_once:
                        log.error("confd --run-once failed: %s", self.last_error)
                        return 1
                    delay = backoff.next()
                    log.warning("Render failed; retrying in %.2fs", delay)
                    retry_at = time.monotonic() + delay
            return 0
        finally:
            self.syncer.stop()
            self.passwords.stop()
            if self.workloads is not None:
                self.workloads.stop()
            if self.routegen is not None:
                self.routegen.stop()
