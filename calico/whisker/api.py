"""The HTTP side of whisker-backend: upstream's REST endpoints, Server-Sent Events, the UI.

One thread per request (``ThreadingHTTPServer``) over one shared, thread-safe gRPC channel to
Goldmane. ``/flows?watch=true`` relays ``Flows.Stream``: a reader thread feeds a queue and the
request thread writes each flow as ``data: <json>`` — or a ``: keepalive`` comment every
KEEPALIVE seconds, which is also how a closed browser tab is noticed and its Goldmane stream
cancelled. Paths answer with and without upstream's ``/whisker-backend`` proxy prefix, so the UI
works both served from here and behind a proxy.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import grpc

from calico.proto.goldmane import api_pb2 as pb
from calico.proto.goldmane import api_pb2_grpc as pb_grpc
from calico.whisker import convert
from calico.whisker.convert import RequestError

log = logging.getLogger(__name__)

KEEPALIVE = 10.0
GRPC_TIMEOUT = 30.0
PREFIX = "/whisker-backend"
_ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}
_END = object()


def _asset(name: str) -> bytes:
    return resources.files("calico.whisker").joinpath("ui", name).read_bytes()


class _GrpcError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _http_error(exc: grpc.RpcError) -> _GrpcError:
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return _GrpcError(400, details or "invalid argument")
    log.error("Goldmane call failed: %s %s", code, details)
    return _GrpcError(500, "Internal Server Error")


class WhiskerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], channel: grpc.Channel, family: int) -> None:
        self.address_family = family  # type: ignore[misc]
        self.flows = pb_grpc.FlowsStub(channel)
        self.stopping = threading.Event()
        super().__init__(address, Handler)


class Handler(BaseHTTPRequestHandler):
    server: WhiskerServer
    server_version = "whisker-backend"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        if path.startswith(PREFIX + "/"):
            path = path[len(PREFIX) :]
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            if path == "/flows":
                self._flows(query)
            elif path == "/flows-filter-hints":
                self._json(200, self._hints(query))
            elif path == "/health":
                self._json(200, {"status": "ok"})
            elif path in _ASSETS:
                name, content_type = _ASSETS[path]
                self._send(200, _asset(name), content_type)
            else:
                self._json(404, {"error": "Not Found"})
        except RequestError as exc:
            self._json(400, {"error": str(exc)})
        except _GrpcError as exc:
            self._json(exc.status, {"error": str(exc)})
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, body: object) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    @staticmethod
    def _one(query: dict[str, list[str]], name: str) -> str | None:
        values = query.get(name)
        return values[-1] if values else None

    def _flows(self, query: dict[str, list[str]]) -> None:
        flt = convert.parse_filter(self._one(query, "filters"))
        gte = convert.parse_time(self._one(query, "startTimeGte"), "startTimeGte")
        if convert.parse_bool(self._one(query, "watch"), "watch"):
            self._stream(pb.FlowStreamRequest(start_time_gte=gte, filter=flt))
            return
        request = pb.FlowListRequest(
            start_time_gte=gte,
            start_time_lt=convert.parse_time(self._one(query, "startTimeLt"), "startTimeLt"),
            sort_by=convert.parse_sort(query.get("sortBy", [])),
            filter=flt,
            page=convert.parse_int(self._one(query, "page"), "page"),
            page_size=convert.parse_int(self._one(query, "pageSize"), "pageSize"),
        )
        try:
            result = self.server.flows.List(request, timeout=GRPC_TIMEOUT)
        except grpc.RpcError as exc:
            raise _http_error(exc) from None
        self._json(200, self._page(result.meta, [convert.flow_json(r.flow) for r in result.flows]))

    @staticmethod
    def _page(meta: pb.ListMetadata, items: list[Any]) -> dict[str, Any]:
        # totalResults is ours (upstream sends totalPages only); the denied counter reads it.
        return {
            "total": {"totalPages": meta.totalPages, "totalResults": meta.totalResults},
            "items": items,
        }

    def _hints(self, query: dict[str, list[str]]) -> dict[str, Any]:
        hint_type = convert.parse_hint_type(self._one(query, "type"))
        request = pb.FilterHintsRequest(
            type=hint_type,  # type: ignore[arg-type]
            filter=convert.parse_filter(self._one(query, "filters")),
            start_time_gte=convert.parse_time(self._one(query, "startTimeGte"), "startTimeGte"),
            start_time_lt=convert.parse_time(self._one(query, "startTimeLt"), "startTimeLt"),
            page=convert.parse_int(self._one(query, "page"), "page"),
            page_size=convert.parse_int(self._one(query, "pageSize"), "pageSize"),
        )
        try:
            result = self.server.flows.FilterHints(request, timeout=GRPC_TIMEOUT)
        except grpc.RpcError as exc:
            raise _http_error(exc) from None
        names = hint_type in (pb.FilterTypeSourceName, pb.FilterTypeDestName)
        items = [
            {"value": convert.display_name(h.value) if names else h.value} for h in result.hints
        ]
        return self._page(result.meta, items)

    def _stream(self, request: pb.FlowStreamRequest) -> None:
        call = self.server.flows.Stream(request)
        events: queue.Queue[object] = queue.Queue()

        def read() -> None:
            try:
                for result in call:
                    events.put(result)
                events.put(_END)
            except grpc.RpcError as exc:
                events.put(exc)

        reader = threading.Thread(target=read, name="whisker-stream", daemon=True)
        reader.start()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Accel-Buffering", "no")
        self.end_headers()
        try:
            self.wfile.write(b": stream open\n\n")
            self.wfile.flush()
            while not self.server.stopping.is_set():
                try:
                    item = events.get(timeout=KEEPALIVE)
                except queue.Empty:
                    self.wfile.write(b": keepalive\n\n")
                    self.wfile.flush()
                    continue
                if item is _END:
                    return
                if isinstance(item, grpc.RpcError):
                    if isinstance(item, grpc.Call) and item.code() == grpc.StatusCode.CANCELLED:
                        return
                    message = str(_http_error(item))
                    if isinstance(item, grpc.Call) and item.code() in (
                        grpc.StatusCode.INVALID_ARGUMENT,
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                    ):
                        message = item.details() or message
                    self.wfile.write(f"error: {message}\n\n".encode())
                    return
                assert isinstance(item, pb.FlowResult)
                line = json.dumps(convert.flow_json(item.flow))
                self.wfile.write(f"data: {line}\n\n".encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            log.debug("Stream client went away")
        finally:
            call.cancel()
            reader.join(timeout=5)
