"""Endpoint status files: how the CNI plugin learns that a workload's policy is in place.

Layout (compatible with upstream's file-based reporter and the CNI plugin's
``endpoint_status_dir``, default ``/var/run/calico/endpoint-status``):

* directory ``<EndpointStatusPathPrefix>/endpoint-status/``;
* one file per workload endpoint whose status is "up" (policy programmed, interface up), named
  ``<orchestrator> <workload> <endpoint>`` as :mod:`calico.model.status_files` spells it (the
  CNI plugin waits for that same name), e.g. ``k8s default%2Fnginx eth0``;
* content: compact JSON ``{"ifaceName":..,"mac":..,"ipv4Nets":[..],"ipv6Nets":[..],
  "bgpPeerName":..}`` in that key order with empty fields omitted (Go ``omitempty``).

Files are written atomically (temp file in the same directory + ``rename``) so a waiting CNI
plugin never reads a half-written file, and deleted when the endpoint goes down or away. Stale
files are only cleaned after the dataplane is in sync, so a restart doesn't briefly retract them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from calico.felix.messages import WorkloadEndpoint, WorkloadEndpointID
from calico.model.status_files import endpoint_status_filename, parse_endpoint_status_filename

log = logging.getLogger(__name__)

STATUS_DIR = "endpoint-status"
DEFAULT_PATH_PREFIX = "/var/run/calico"  # EndpointStatusPathPrefix
_TMP_PREFIX = ".tmp."


def status_filename(wep_id: WorkloadEndpointID) -> str:
    return endpoint_status_filename(wep_id.orchestrator_id, wep_id.workload_id, wep_id.endpoint_id)


def parse_status_filename(name: str) -> WorkloadEndpointID | None:
    parts = None if name.startswith(_TMP_PREFIX) else parse_endpoint_status_filename(name)
    if parts is None:
        return None
    orch, workload, endpoint = parts
    return WorkloadEndpointID(orchestrator_id=orch, workload_id=workload, endpoint_id=endpoint)


@dataclass(frozen=True)
class EndpointStatusContent:
    iface_name: str = ""
    mac: str = ""
    ipv4_nets: tuple[str, ...] = ()
    ipv6_nets: tuple[str, ...] = ()
    bgp_peer_name: str = ""

    @classmethod
    def from_endpoint(cls, ep: WorkloadEndpoint) -> EndpointStatusContent:
        return cls(
            iface_name=ep.name,
            mac=ep.mac,
            ipv4_nets=tuple(ep.ipv4_nets),
            ipv6_nets=tuple(ep.ipv6_nets),
            bgp_peer_name=ep.bgp_peer_name,
        )

    def to_json(self) -> str:
        doc: dict[str, object] = {}
        for key, value in (
            ("ifaceName", self.iface_name),
            ("mac", self.mac),
            ("ipv4Nets", list(self.ipv4_nets)),
            ("ipv6Nets", list(self.ipv6_nets)),
            ("bgpPeerName", self.bgp_peer_name),
        ):
            if value:
                doc[key] = value
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> EndpointStatusContent:
        doc = json.loads(text) if text.strip() else {}
        return cls(
            iface_name=doc.get("ifaceName", ""),
            mac=doc.get("mac", ""),
            ipv4_nets=tuple(doc.get("ipv4Nets") or ()),
            ipv6_nets=tuple(doc.get("ipv6Nets") or ()),
            bgp_peer_name=doc.get("bgpPeerName", ""),
        )


class EndpointStatusFiles:
    """The directory itself: atomic writes, deletes, listing."""

    def __init__(self, path_prefix: str | os.PathLike[str] = DEFAULT_PATH_PREFIX) -> None:
        self.dir = Path(path_prefix) / STATUS_DIR

    def ensure_dir(self) -> None:
        self.dir.mkdir(mode=0o755, parents=True, exist_ok=True)

    def path_for(self, wep_id: WorkloadEndpointID) -> Path:
        return self.dir / status_filename(wep_id)

    def write(self, wep_id: WorkloadEndpointID, content: EndpointStatusContent) -> None:
        final = self.path_for(wep_id)
        try:
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.dir)
        except FileNotFoundError:  # the directory is made once, not checked on every write
            self.ensure_dir()
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.dir)
        try:
            try:  # plain os calls: a text-mode file object costs ~10x the write itself
                os.write(fd, content.to_json().encode())
                os.fchmod(fd, 0o644)
            finally:
                os.close(fd)
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def delete(self, wep_id: WorkloadEndpointID) -> bool:
        """Remove the file; False if it was already gone."""
        try:
            self.path_for(wep_id).unlink()
        except FileNotFoundError:
            return False
        return True

    def read_all(self) -> dict[str, str | None]:
        """Status files present: filename -> content (None if unreadable). Cleans stray temps."""
        out: dict[str, str | None] = {}
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return out
        for entry in entries:
            if not entry.is_file():
                continue
            if entry.name.startswith(_TMP_PREFIX):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                continue
            try:
                out[entry.name] = Path(entry.path).read_text()
            except OSError:
                out[entry.name] = None
        return out


class EndpointStatusFileReporter:
    """Desired-state reconciler over :class:`EndpointStatusFiles`.

    Driven by the dataplane thread: :meth:`endpoint_up` once an endpoint's policy is programmed
    and its interface is up, :meth:`endpoint_down` when it goes down or is removed,
    :meth:`mark_in_sync` after the first complete apply, then :meth:`reconcile` after each apply
    (and with ``full_resync=True`` every ~10 s to repair outside interference). Returns errors
    for the caller to retry with backoff rather than raising.
    """

    def __init__(self, files: EndpointStatusFiles) -> None:
        self.files = files
        self._desired: dict[str, EndpointStatusContent] = {}
        self._written: dict[str, EndpointStatusContent] = {}
        self._dirty: set[str] = set()
        self._in_sync = False
        self._resync_needed = True
        self._names: dict[WorkloadEndpointID, str] = {}  # every endpoint, every apply: memo

    def _name(self, wep_id: WorkloadEndpointID) -> str:
        name = self._names.get(wep_id)
        if name is None:
            name = self._names[wep_id] = status_filename(wep_id)
        return name

    def endpoint_up(self, wep_id: WorkloadEndpointID, content: EndpointStatusContent) -> None:
        name = self._name(wep_id)
        if self._desired.get(name) != content:
            self._desired[name] = content
            self._dirty.add(name)

    def endpoint_down(self, wep_id: WorkloadEndpointID) -> None:
        name = self._name(wep_id)
        if self._desired.pop(name, None) is not None or name in self._written:
            self._dirty.add(name)

    def endpoint_removed(self, wep_id: WorkloadEndpointID) -> None:
        self.endpoint_down(wep_id)
        self._names.pop(wep_id, None)

    def mark_in_sync(self) -> None:
        self._in_sync = True

    def reconcile(self, *, full_resync: bool = False) -> list[str]:
        if not self._in_sync:
            return []
        errors: list[str] = []
        if full_resync or self._resync_needed:
            try:
                self._reload()
            except OSError as e:
                return [f"read {self.files.dir}: {e}"]
        for name in sorted(self._dirty):
            wep_id = parse_status_filename(name)
            want = self._desired.get(name)
            try:
                if want is not None and wep_id is not None:
                    self.files.write(wep_id, want)
                    self._written[name] = want
                else:
                    (self.files.dir / name).unlink(missing_ok=True)
                    self._written.pop(name, None)
                self._dirty.discard(name)
            except OSError as e:
                errors.append(f"{name}: {e}")
        if errors:
            self._resync_needed = True
        return errors

    def _reload(self) -> None:
        self.files.ensure_dir()
        self._written = {}
        for name, text in self.files.read_all().items():
            try:
                self._written[name] = EndpointStatusContent.from_json(text or "")
            except ValueError:
                self._written[name] = EndpointStatusContent(iface_name="<unparseable>")
        names = set(self._written) | set(self._desired)
        self._dirty = {n for n in names if self._written.get(n) != self._desired.get(n)}
        self._resync_needed = False
