"""A fake Kubernetes API server on loopback for the Kubernetes-datastore tests (scaffolding only).

No kube-apiserver can be installed here, and kmock 0.8 lacks resourceVersions, PUT, selectors,
bookmarks and 410 (design/datastore-kubernetes.md "Testing"), so this emulator implements the
subset of the API the backend and the official client use:

- discovery ``/api``, ``/apis``, ``/healthz``; core ``nodes``, ``pods``, ``namespaces``,
  ``serviceaccounts``, ``services``, ``secrets``; ``networking.k8s.io/v1`` networkpolicies;
  ``discovery.k8s.io/v1`` endpointslices; every Calico plural under ``crd.projectcalico.org/v1``
  (and ``projectcalico.org/v3`` when ``v3_crds``);
- one global integer resourceVersion; POST stamps uid/RV/creationTimestamp and answers 201;
  PUT needs a matching RV on custom resources (422 if missing, 409 if stale) and a matching uid;
  ``/status`` PUT and strategic-merge PATCH of metadata + status; DELETE honours ``uid`` and
  ``resourceVersion`` preconditions;
- list with ``labelSelector`` (equality, ``!=``, ``in``, ``notin``, existence),
  ``fieldSelector=metadata.name=``/``metadata.namespace=``, ``limit``/``continue``;
- watch from a resourceVersion (history replay), ``BOOKMARK`` every ``bookmark_interval``,
  ``ERROR`` 410 ``Expired`` below the compaction point, ``timeoutSeconds``; test hooks
  ``compact()``, ``drop_watches()`` (connection loss) and ``expire_next_watches``.
"""

from __future__ import annotations

import bisect
import copy
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CALICO_PLURALS = {
    "bgpconfigurations": ("BGPConfiguration", False),
    "bgpfilters": ("BGPFilter", False),
    "bgppeers": ("BGPPeer", False),
    "blockaffinities": ("BlockAffinity", False),
    "caliconodestatuses": ("CalicoNodeStatus", False),
    "clusterinformations": ("ClusterInformation", False),
    "felixconfigurations": ("FelixConfiguration", False),
    "globalnetworkpolicies": ("GlobalNetworkPolicy", False),
    "globalnetworksets": ("GlobalNetworkSet", False),
    "hostendpoints": ("HostEndpoint", False),
    "ipamblocks": ("IPAMBlock", False),
    "ipamhandles": ("IPAMHandle", False),
    "ippools": ("IPPool", False),
    "ipreservations": ("IPReservation", False),
    "kubecontrollersconfigurations": ("KubeControllersConfiguration", False),
    "networkpolicies": ("NetworkPolicy", True),
    "networksets": ("NetworkSet", True),
    "stagedglobalnetworkpolicies": ("StagedGlobalNetworkPolicy", False),
    "stagedkubernetesnetworkpolicies": ("StagedKubernetesNetworkPolicy", True),
    "stagednetworkpolicies": ("StagedNetworkPolicy", True),
    "tiers": ("Tier", False),
}
STATUS_KINDS = {"IPPool", "Tier", "KubeControllersConfiguration", "CalicoNodeStatus"}


@dataclass(frozen=True)
class _Res:
    group: str  # "" = core
    version: str
    plural: str
    kind: str
    namespaced: bool
    custom: bool = False  # a CRD: PUT needs a resourceVersion

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _resources(v1_crds: bool, v3_crds: bool) -> dict[tuple[str, str, str], _Res]:
    out = [
        _Res("", "v1", "nodes", "Node", False),
        _Res("", "v1", "pods", "Pod", True),
        _Res("", "v1", "namespaces", "Namespace", False),
        _Res("", "v1", "serviceaccounts", "ServiceAccount", True),
        _Res("", "v1", "services", "Service", True),
        _Res("", "v1", "secrets", "Secret", True),
        _Res("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
        _Res("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
        _Res(
            "policy.networking.k8s.io",
            "v1alpha2",
            "clusternetworkpolicies",
            "ClusterNetworkPolicy",
            False,
        ),
    ]
    groups = []
    if v1_crds:
        groups.append(("crd.projectcalico.org", "v1", "ipamconfigs", "IPAMConfig"))
    if v3_crds:
        groups.append(("projectcalico.org", "v3", "ipamconfigurations", "IPAMConfiguration"))
    for group, version, cfg_plural, cfg_kind in groups:
        for plural, (kind, namespaced) in CALICO_PLURALS.items():
            out.append(_Res(group, version, plural, kind, namespaced, custom=True))
        out.append(_Res(group, version, cfg_plural, cfg_kind, False, custom=True))
    return {(r.group, r.version, r.plural): r for r in out}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, causes: list | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.causes = code, reason, message, causes

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.causes:
            body["details"] = {"causes": self.causes}
        return body


def _split_selector(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


_SET_RE = re.compile(r"^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$")


def label_match(selector: str, labels: dict[str, str]) -> bool:
    """Kubernetes label-selector semantics (the forms the client libraries send)."""
    for term in _split_selector(selector):
        if m := _SET_RE.match(term):
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if (op == "in") != (key in labels and labels[key] in vals):
                return False
        elif "!=" in term:
            key, val = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == val:
                return False
        elif "=" in term:
            key, val = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != val:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field_match(selector: str, obj: dict[str, Any]) -> bool:
    for term in _split_selector(selector):
        key, _, val = term.replace("==", "=").partition("=")
        meta = obj.get("metadata", {})
        if key == "metadata.name" and meta.get("name") != val:
            return False
        if key == "metadata.namespace" and meta.get("namespace", "") != val:
            return False
        if key == "spec.nodeName" and obj.get("spec", {}).get("nodeName") != val:
            return False
    return True


def strategic_merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """Maps merge recursively; ``null`` deletes; lists replace (enough for annotation patches)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            strategic_merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class _Event:
    rv: int
    res: _Res
    type: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None = None  # the object before (lists at an old RV undo events)


class FakeStore:
    """Objects, the global resourceVersion and the event history; all under one condition."""

    def __init__(self, resources: dict[tuple[str, str, str], _Res]) -> None:
        self.resources = resources
        self.cond = threading.Condition()
        self.rv = 100
        self.compacted = 0
        self.objects: dict[_Res, dict[tuple[str, str], dict[str, Any]]] = {
            r: {} for r in resources.values()
        }
        self.history: list[_Event] = []
        self.history_rvs: list[int] = []
        self._sorted: dict[_Res, list[tuple[str, str]]] = {}
        self.generation = 0  # bumped by drop_watches: live watch streams end
        self.expire_next_watches = 0

    def _emit(
        self, res: _Res, typ: str, obj: dict[str, Any], prev: dict[str, Any] | None = None
    ) -> None:
        self.history.append(_Event(self.rv, res, typ, copy.deepcopy(obj), prev))
        self.history_rvs.append(self.rv)
        self._sorted.pop(res, None)
        self.cond.notify_all()

    def since(self, rv: int) -> list[_Event]:
        """Events after ``rv`` (history is in rv order: bisect, not a scan)."""
        return self.history[bisect.bisect_right(self.history_rvs, rv) :]

    def _keys(self, res: _Res) -> list[tuple[str, str]]:
        """The collection's keys in list order, cached until its next write."""
        keys = self._sorted.get(res)
        if keys is None:
            keys = self._sorted[res] = sorted(self.objects[res])
        return keys

    def _stamp(self, res: _Res, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["apiVersion"] = res.api_version
        obj["kind"] = res.kind

    def create(self, res: _Res, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value: name is required")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name) or len(name) > 253:
            raise ApiError(422, "Invalid", f'metadata.name: Invalid value: "{name}"')
        if meta.get("resourceVersion"):
            raise ApiError(
                500, "InternalError", "resourceVersion should not be set on objects to be created"
            )
        with self.cond:
            store = self.objects[res]
            if (ns, name) in store:
                raise ApiError(
                    409, "AlreadyExists", f'{res.plural}.{res.group} "{name}" already exists'
                )
            if res.namespaced:
                meta["namespace"] = ns
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._stamp(res, obj)
            store[(ns, name)] = obj
            self._emit(res, "ADDED", obj)
            return copy.deepcopy(obj)

    def _current(self, res: _Res, ns: str, name: str) -> dict[str, Any]:
        try:
            return self.objects[res][(ns, name)]
        except KeyError:
            raise ApiError(
                404, "NotFound", f'{res.plural}.{res.group} "{name}" not found'
            ) from None

    def get(self, res: _Res, ns: str, name: str) -> dict[str, Any]:
        with self.cond:
            return copy.deepcopy(self._current(res, ns, name))

    def _preconditions(self, res: _Res, cur: dict[str, Any], rv: str, uid: str) -> None:
        if uid and uid != cur["metadata"]["uid"]:
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {cur['metadata']['uid']}",
            )
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on {res.plural}.{res.group} "
                f'"{cur["metadata"]["name"]}": the object has been modified; please apply your '
                "changes to the latest version and try again",
            )

    def replace(
        self, res: _Res, ns: str, name: str, obj: dict[str, Any], status: bool
    ) -> dict[str, Any]:
        meta = obj.get("metadata", {})
        rv = meta.get("resourceVersion", "")
        if res.custom and not rv:
            raise ApiError(
                422,
                "Invalid",
                f'{res.kind} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
                "must be specified for an update",
                [{"type": "FieldValueInvalid", "field": "metadata.resourceVersion"}],
            )
        with self.cond:
            cur = self._current(res, ns, name)
            self._preconditions(res, cur, rv, meta.get("uid", ""))
            new = copy.deepcopy(cur)
            if status:
                if "status" in obj:
                    new["status"] = obj["status"]
                if not res.custom:  # node/pod status endpoints also persist metadata
                    new["metadata"].update(
                        {k: v for k, v in meta.items() if k in ("labels", "annotations")}
                    )
            else:
                keep_status = cur.get("status")
                new = copy.deepcopy(obj)
                for field in ("uid", "creationTimestamp", "namespace", "name"):
                    if field in cur["metadata"]:
                        new["metadata"][field] = cur["metadata"][field]
                if res.kind in STATUS_KINDS or not res.custom:
                    if keep_status is None:
                        new.pop("status", None)
                    else:
                        new["status"] = keep_status
            self._stamp(res, new)
            self.objects[res][(ns, name)] = new
            self._emit(res, "MODIFIED", new, cur)
            return copy.deepcopy(new)

    def patch(self, res: _Res, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        with self.cond:
            cur = self._current(res, ns, name)
            meta = patch.get("metadata", {})
            if meta.get("uid") and meta["uid"] != cur["metadata"]["uid"]:
                raise ApiError(
                    422,
                    "Invalid",
                    f'{res.kind} "{name}" is invalid: metadata.uid: Invalid value',
                    [{"type": "FieldValueInvalid", "field": "metadata.uid"}],
                )
            self._preconditions(res, cur, meta.get("resourceVersion", ""), "")
            new = copy.deepcopy(cur)
            strategic_merge(new, patch)
            new["metadata"]["uid"] = cur["metadata"]["uid"]
            self._stamp(res, new)
            self.objects[res][(ns, name)] = new
            self._emit(res, "MODIFIED", new, cur)
            return copy.deepcopy(new)

    def delete(self, res: _Res, ns: str, name: str, pre: dict[str, Any]) -> dict[str, Any]:
        with self.cond:
            cur = self._current(res, ns, name)
            self._preconditions(res, cur, pre.get("resourceVersion", ""), pre.get("uid", ""))
            del self.objects[res][(ns, name)]
            gone = copy.deepcopy(cur)
            self._stamp(res, gone)
            self._emit(res, "DELETED", gone, cur)
            return gone

    def _state_at(self, res: _Res, rv: int) -> tuple[dict[tuple[str, str], Any], list]:
        """The collection (objects, sorted keys) as it was at ``rv``: the current state with
        the later events undone. Below the compaction point the history is gone: 410."""
        if rv < self.compacted:
            raise ApiError(
                410,
                "Expired",
                f"The resourceVersion for the provided list is too old: {rv} ({self.compacted})",
            )
        later = [e for e in self.since(rv) if e.res is res]
        if not later:
            return self.objects[res], self._keys(res)
        objects = dict(self.objects[res])
        for event in reversed(later):
            meta = event.obj["metadata"]
            ident = (meta.get("namespace", "") if res.namespaced else "", meta["name"])
            if event.prev is None:
                objects.pop(ident, None)
            else:
                objects[ident] = event.prev
        return objects, sorted(objects)

    def list(
        self,
        res: _Res,
        ns: str | None,
        labels: str,
        fields: str,
        start: int = 0,
        limit: int = 0,
        at: int | None = None,
    ) -> tuple[list[dict[str, Any]], str, bool]:
        """(page of matching objects, list RV, more after the page?); copies only the page.
        ``at``: the state at that RV (``resourceVersionMatch=Exact`` and continue tokens,
        which a real API server serves from etcd at the token's revision)."""
        with self.cond:
            if at is None or at >= self.rv:
                objects, keys, rv = self.objects[res], self._keys(res), self.rv
            else:
                (objects, keys), rv = self._state_at(res, at), at
            matching = [
                obj
                for (ons, name) in keys
                if (obj := objects[(ons, name)]) is not None
                and (ns is None or ons == ns)
                and (not labels or label_match(labels, obj["metadata"].get("labels") or {}))
                and (not fields or _field_match(fields, obj))
            ]
            end = start + limit if limit else len(matching)
            page = [copy.deepcopy(obj) for obj in matching[start:end]]
            return page, str(rv), end < len(matching)

    def compact(self, rv: int | None = None) -> None:
        with self.cond:
            self.compacted = self.rv if rv is None else rv
            self.history = self.since(self.compacted)
            self.history_rvs = [e.rv for e in self.history]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing ---------------------------------------------------------------------------

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _route(self) -> tuple[_Res | None, str | None, str, str, dict[str, list[str]]]:
        """(resource, namespace or None, name, subresource, query) for a resource URL."""
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = [p for p in url.path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", f"the server could not find {url.path}")
        ns: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        if not rest:
            raise ApiError(404, "NotFound", f"the server could not find {url.path}")
        res = self.server.store.resources.get((group, version, rest[0]))
        if res is None:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({url.path})"
            )
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return res, ns, name, sub, query

    def _handle(self, method: str) -> None:
        try:
            self.server.requests += 1
            path = urlsplit(self.path).path
            if method == "GET" and path in ("/api", "/apis", "/healthz", "/version"):
                self._discovery(path)
                return
            res, ns, name, sub, query = self._route()
            assert res is not None
            if res.namespaced and name and ns is None:
                raise ApiError(404, "NotFound", "namespace required")
            key_ns = ns or "" if res.namespaced else ""
            store = self.server.store
            if method == "GET" and not name:
                if query.get("watch", [""])[0] in ("true", "1"):
                    self._watch(res, ns, query)
                    return
                self._list(res, ns, query)
            elif method == "GET":
                self._send(200, store.get(res, key_ns, name))
            elif method == "POST" and not name:
                if res.namespaced and ns is None:
                    raise ApiError(404, "NotFound", "namespace required")
                self._send(201, store.create(res, key_ns, self._body()))
            elif method == "PUT" and name:
                self._send(200, store.replace(res, key_ns, name, self._body(), sub == "status"))
            elif method == "PATCH" and name:
                self._send(200, store.patch(res, key_ns, name, self._body()))
            elif method == "DELETE" and name:
                body = self._body()
                self._send(200, store.delete(res, key_ns, name, body.get("preconditions") or {}))
            else:
                raise ApiError(405, "MethodNotAllowed", f"{method} not allowed")
        except ApiError as exc:
            self._send(exc.code, exc.status())
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _discovery(self, path: str) -> None:
        if path == "/api":
            self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
        elif path == "/apis":
            groups = sorted({(r.group, r.version) for r in self.server.store.resources.values()})
            self._send(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {
                            "name": g,
                            "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                            "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
                        }
                        for g, v in groups
                        if g
                    ],
                },
            )
        elif path == "/version":
            self._send(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake"})
        else:
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(data)

    def _list(self, res: _Res, ns: str | None, query: dict[str, list[str]]) -> None:
        """Unset / ``0`` / NotOlderThan: the current state (this store is never stale);
        ``resourceVersionMatch=Exact``: the state at that RV; a continue token
        (``<rv>:<offset>``) pins the first page's RV, so pages form one snapshot."""
        limit = int(query.get("limit", ["0"])[0] or 0)
        token = query.get("continue", [""])[0]
        rv_text = query.get("resourceVersion", [""])[0]
        match = query.get("resourceVersionMatch", [""])[0]
        at: int | None = None
        start = 0
        if token:
            if rv_text:
                raise ApiError(
                    400,
                    "BadRequest",
                    "specifying resource version is not allowed when using continue",
                )
            at_text, _, start_text = token.partition(":")
            if not (at_text.isdigit() and start_text.isdigit()):
                raise ApiError(400, "BadRequest", f"continue key is not valid: {token}")
            at, start = int(at_text), int(start_text)
        elif match == "Exact":
            if not rv_text.isdigit() or rv_text == "0":
                raise ApiError(
                    400,
                    "BadRequest",
                    "resourceVersionMatch: Exact needs a non-zero resourceVersion",
                )
            at = int(rv_text)
        elif match not in ("", "NotOlderThan"):
            raise ApiError(400, "BadRequest", f"unsupported resourceVersionMatch {match!r}")
        items, rv, more = self.server.store.list(
            res,
            ns if res.namespaced else None,
            query.get("labelSelector", [""])[0],
            query.get("fieldSelector", [""])[0],
            start,
            limit,
            at,
        )
        meta: dict[str, Any] = {"resourceVersion": rv}
        if more:
            meta["continue"] = f"{rv}:{start + limit}"
        if self.server.on_list is not None:  # a test writes between this list and the next
            self.server.on_list(res)
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        self._send(
            200,
            {
                "kind": f"{res.kind}List",
                "apiVersion": res.api_version,
                "metadata": meta,
                "items": items,
            },
        )

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, res: _Res, ns: str | None, query: dict[str, list[str]]) -> None:
        store = self.server.store
        labels = query.get("labelSelector", [""])[0]
        fields = query.get("fieldSelector", [""])[0]
        bookmarks = query.get("allowWatchBookmarks", [""])[0] == "true"
        timeout = float(query.get("timeoutSeconds", ["0"])[0] or 0) or 1800.0
        rv_text = query.get("resourceVersion", [""])[0]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.server.watches += 1

        def wanted(event: _Event) -> bool:
            meta = event.obj["metadata"]
            return (
                event.res is res
                and (ns is None or not res.namespaced or meta.get("namespace") == ns)
                and (not labels or label_match(labels, meta.get("labels") or {}))
                and (not fields or _field_match(fields, event.obj))
            )

        try:
            with store.cond:
                generation = store.generation
                if store.expire_next_watches > 0:
                    store.expire_next_watches -= 1
                    expired = True
                else:
                    expired = bool(rv_text) and rv_text != "0" and int(rv_text) < store.compacted
                if expired:
                    pending: list[dict[str, Any]] = [
                        {
                            "type": "ERROR",
                            "object": ApiError(
                                410,
                                "Expired",
                                f"too old resource version: {rv_text} ({store.compacted})",
                            ).status(),
                        }
                    ]
                    cursor = -1
                elif not rv_text or rv_text == "0":
                    items, _, _ = store.list(res, ns if res.namespaced else None, labels, fields)
                    pending = [{"type": "ADDED", "object": o} for o in items]
                    cursor = store.rv
                else:
                    cursor = int(rv_text)
                    pending = []
            deadline = time.monotonic() + timeout
            last_mark = time.monotonic()
            while True:
                for event in pending:
                    self._chunk(event)
                if cursor < 0:
                    break
                pending = []
                with store.cond:
                    while True:
                        if store.generation != generation:
                            raise ConnectionResetError
                        new = store.since(cursor)
                        if new or time.monotonic() >= deadline:
                            break
                        if (
                            bookmarks
                            and time.monotonic() - last_mark >= self.server.bookmark_interval
                        ):
                            break
                        store.cond.wait(0.05)
                    for event in new:
                        if wanted(event):
                            pending.append({"type": event.type, "object": event.obj})
                        cursor = event.rv
                    if bookmarks and time.monotonic() - last_mark >= self.server.bookmark_interval:
                        last_mark = time.monotonic()
                        pending.append(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": res.kind,
                                    "apiVersion": res.api_version,
                                    "metadata": {"resourceVersion": str(max(cursor, store.rv))},
                                },
                            }
                        )
                        cursor = max(cursor, store.rv)
                if not pending and time.monotonic() >= deadline:
                    break
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ValueError):
            pass
        finally:
            self.close_connection = True

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    store: FakeStore
    bookmark_interval: float
    requests: int
    watches: int
    on_list: Any  # Callable[[_Res], None] | None: called after each list, before the answer


class FakeAPIServer:
    """``with FakeAPIServer() as api: api.url`` — a fresh, empty cluster on a free port."""

    def __init__(
        self,
        *,
        v1_crds: bool = True,
        v3_crds: bool = False,
        bookmark_interval: float = 1.0,
        host: str = "127.0.0.1",
    ) -> None:
        """``host``: the address to listen on (bound in the creating thread's namespace)."""
        self.store = FakeStore(_resources(v1_crds, v3_crds))
        self._server = _Server((host, 0), _Handler)
        self._server.store = self.store
        self._server.bookmark_interval = bookmark_interval
        self._server.requests = 0
        self._server.watches = 0
        self._server.on_list = None
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> int:
        return self._server.requests

    @property
    def watches(self) -> int:
        """Watch streams opened so far (reconnect tests count them)."""
        return self._server.watches

    def start(self) -> FakeAPIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.drop_watches()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test hooks -------------------------------------------------------------------------

    def drop_watches(self) -> None:
        """End every open watch stream abruptly (no terminating chunk): a lost connection."""
        with self.store.cond:
            self.store.generation += 1
            self.store.cond.notify_all()

    def compact(self, rv: int | None = None) -> None:
        self.store.compact(rv)

    def outage(self, seconds: float) -> None:
        """Stop serving for ``seconds`` (connections refused), then serve again on the same
        port with the same store: an API server restart."""
        host, port = self._server.server_address[:2]
        self.drop_watches()
        self._server.shutdown()
        self._server.server_close()
        time.sleep(seconds)
        server = _Server((host, port), _Handler)
        server.store = self.store
        server.bookmark_interval = self._server.bookmark_interval
        server.requests, server.watches = self._server.requests, self._server.watches
        server.on_list = self._server.on_list
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def on_list(self, hook: Any) -> None:
        """``hook(res)`` runs after each list is computed and before it is answered (None
        clears it): a write there lands between two collections' lists, deterministically."""
        self._server.on_list = hook

    def expire_next_watches(self, count: int = 1) -> None:
        """The next ``count`` watch requests get ERROR 410 Expired whatever their revision."""
        with self.store.cond:
            self.store.expire_next_watches += count

    def _res(self, group: str, version: str, plural: str) -> _Res:
        return self.store.resources[(group, version, plural)]

    def put_object(self, api_version: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create a native object (pods, namespaces...) as a test fixture would with kubectl."""
        group, _, version = api_version.rpartition("/")
        res = self._res(group, version, plural)
        ns = obj.get("metadata", {}).get("namespace", "") if res.namespaced else ""
        return self.store.create(res, ns, copy.deepcopy(obj))

    def update_object(self, api_version: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        group, _, version = api_version.rpartition("/")
        res = self._res(group, version, plural)
        meta = obj["metadata"]
        ns = meta.get("namespace", "") if res.namespaced else ""
        return self.store.replace(res, ns, meta["name"], copy.deepcopy(obj), False)

    def delete_object(self, api_version: str, plural: str, name: str, ns: str = "") -> None:
        group, _, version = api_version.rpartition("/")
        self.store.delete(self._res(group, version, plural), ns, name, {})

    def get_object(self, api_version: str, plural: str, name: str, ns: str = "") -> dict:
        group, _, version = api_version.rpartition("/")
        return self.store.get(self._res(group, version, plural), ns, name)


def populate(api: FakeAPIServer, pods: int, policies: int, namespaces: int, nodes: int) -> None:
    """A synthetic cluster, written straight into the store (benchmarks; no HTTP)."""
    for n in range(namespaces):
        api.put_object(
            "v1", "namespaces", {"metadata": {"name": f"ns{n}", "labels": {"team": f"t{n % 4}"}}}
        )
    for i in range(pods):
        ns = f"ns{i % namespaces}"
        api.put_object(
            "v1",
            "pods",
            {
                "metadata": {
                    "name": f"pod{i}",
                    "namespace": ns,
                    "labels": {"app": f"app{i % 50}", "tier": f"tier{i % 3}"},
                },
                "spec": {
                    "nodeName": f"node{i % nodes}",
                    "containers": [{"ports": [{"name": "http", "containerPort": 80}]}],
                },
                "status": {"podIP": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"},
            },
        )
    for k in range(policies):
        api.put_object(
            "networking.k8s.io/v1",
            "networkpolicies",
            {
                "metadata": {"name": f"np{k}", "namespace": f"ns{k % namespaces}"},
                "spec": {
                    "podSelector": {"matchLabels": {"app": f"app{k % 50}"}},
                    "ingress": [
                        {
                            "from": [{"podSelector": {"matchLabels": {"tier": f"tier{k % 3}"}}}],
                            "ports": [{"port": 80 + k % 5}, {"port": "http"}],
                        }
                    ],
                    "policyTypes": ["Ingress"],
                },
            },
        )


if __name__ == "__main__":  # a standalone server for benchmarks: prints its URL, runs until EOF
    import argparse
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=0)
    parser.add_argument("--policies", type=int, default=0)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=50)
    args = parser.parse_args()
    server = FakeAPIServer(bookmark_interval=60.0).start()
    populate(server, args.pods, args.policies, args.namespaces, args.nodes)
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()
