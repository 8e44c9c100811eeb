"""Local workload BGP peers: this node's workloads a BGPPeer's ``localWorkloadSelector`` picked
(design/confd.md "Local workload peers").

Felix writes one endpoint status file per local workload endpoint under
``<CALICO_ENDPOINT_STATUS_PATH_PREFIX>/endpoint-status/`` (default ``/var/run/calico``); its
``bgpPeerName`` names the BGPPeer whose ``localWorkloadSelector`` matched the workload. As
upstream's local-BGP-peer watcher, confd reads those files: a file with a ``bgpPeerName`` is an
active local peer at the first address of ``ipv4Nets`` / ``ipv6Nets``. :class:`StatusDir`
rescans the directory (only files whose size, mtime or inode changed are re-read);
:class:`StatusDirWatcher` does that on a thread and calls ``on_change`` when the set changes.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "/var/run/calico"
STATUS_DIR = "endpoint-status"
POLL_INTERVAL = 1.0
_TMP_PREFIX = ".tmp."  # Felix's in-flight atomic writes


def status_dir(env: Mapping[str, str]) -> Path:
    prefix = env.get("CALICO_ENDPOINT_STATUS_PATH_PREFIX", "").strip() or DEFAULT_PREFIX
    return Path(prefix) / STATUS_DIR


@dataclass(frozen=True)
class LocalWorkload:
    """One workload that should get a ``Local_Workload_`` peering."""

    name: str  # the status file's name
    bgp_peer_name: str
    ipv4: str  # "" when it has none
    ipv6: str

    def ip(self, version: int) -> str:
        return self.ipv4 if version == 4 else self.ipv6


def _first_ip(nets: object, version: int) -> str | None:
    """The address of the first entry ("" when there is none, None when it is invalid)."""
    if not isinstance(nets, list) or not nets:
        return ""
    try:
        iface = ipaddress.ip_interface(str(nets[0]))
    except ValueError:
        return None
    return str(iface.ip) if iface.version == version else None


def parse_status(name: str, text: str) -> LocalWorkload | None:
    """An endpoint status file -> the local peer it asks for, or None (no ``bgpPeerName``, no
    valid address, or not JSON)."""
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError:
        log.warning("Endpoint status file %s is not JSON; ignored", name)
        return None
    if not isinstance(doc, dict) or not doc.get("bgpPeerName"):
        return None
    v4, v6 = _first_ip(doc.get("ipv4Nets"), 4), _first_ip(doc.get("ipv6Nets"), 6)
    if v4 is None or v6 is None:
        log.warning("Endpoint status file %s has an invalid address; ignored for now", name)
        return None
    if not v4 and not v6:
        log.warning("Endpoint status file %s has no address yet; ignored for now", name)
        return None
    return LocalWorkload(name, str(doc["bgpPeerName"]), v4, v6)


class StatusDir:
    """The active local peers in one endpoint status directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: dict[str, tuple[tuple[int, int, int], LocalWorkload | None]] = {}

    def scan(self) -> bool:
        """Re-read what changed; True when the set of active local peers changed."""
        before = self.active()
        current: dict[str, tuple[tuple[int, int, int], LocalWorkload | None]] = {}
        try:
            entries = list(os.scandir(self.path))
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if entry.name.startswith(_TMP_PREFIX) or not entry.is_file():
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue  # deleted between listing and stat
            sig = (st.st_ino, st.st_size, st.st_mtime_ns)
            old = self._seen.get(entry.name)
            if old is not None and old[0] == sig:
                current[entry.name] = old
                continue
            try:
                text = Path(entry.path).read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
            current[entry.name] = (sig, parse_status(entry.name, text))
        self._seen = current
        return self.active() != before

    def active(self) -> list[LocalWorkload]:
        return sorted((w for _, w in self._seen.values() if w is not None), key=lambda w: w.name)


class StatusDirWatcher:
    """Rescans a :class:`StatusDir` every ``interval`` seconds on a thread."""

    def __init__(
        self, status: StatusDir, on_change: Callable[[], None], interval: float = POLL_INTERVAL
    ) -> None:
        self.status, self.on_change, self.interval = status, on_change, interval
        self._lock = threading.Lock()
        self._active = status.active()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.status.scan()  # the first picture before the first render
        self._active = self.status.active()
        self._thread = threading.Thread(target=self._run, daemon=True, name="endpoint-status")
        self._thread.start()

    def active(self) -> list[LocalWorkload]:
        with self._lock:
            return list(self._active)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                changed = self.status.scan()
            except OSError as exc:
                log.warning("Cannot read endpoint status directory %s: %s", self.status.path, exc)
                continue
            if changed:
                with self._lock:
                    self._active = self.status.active()
                self.on_change()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
