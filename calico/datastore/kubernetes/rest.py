"""JSON requests over the official client's ApiClient (its TLS, auth and connection pool).

The generated per-kind methods deserialise into model classes; the datastore needs raw JSON
(conversions read annotations and unknown fields verbatim) and one code path for CRDs and core
kinds alike, so every call goes through ``ApiClient.param_serialize`` + ``call_api`` with the
path built here. Watches get the raw urllib3 response to read line by line.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

from calico.datastore.errors import ConnectionFailedError
from calico.datastore.kubernetes.errors import parse_status

JSON = "application/json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class Rest:
    def __init__(self, configuration: Configuration, timeout: float = 30.0) -> None:
        self.configuration = configuration
        self.api = ApiClient(configuration)
        self.timeout = timeout

    def close(self) -> None:
        self.api.close()

    def _call(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: Any,
    ) -> Any:
        params = [(k, v) for k, v in (query or {}).items() if v not in (None, "")]
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        m, url, hdrs, data, post = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            return self.api.call_api(
                m, url, header_params=hdrs, body=data, post_params=post, _request_timeout=timeout
            )
        except (urllib3.exceptions.HTTPError, OSError, ApiException) as exc:
            raise ConnectionFailedError(
                f"cannot connect to the Kubernetes API at {self.configuration.host}: {exc}"
            ) from None

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        resp = self._call(method, path, query, body, content_type, self.timeout)
        data = resp.read()
        if resp.status >= 400:
            raise parse_status(resp.status, data, f"{method} {path}")
        return json.loads(data) if data else {}

    def stream(self, path: str, query: dict[str, Any], read_timeout: float) -> Any:
        """A watch: the open urllib3 response (caller reads lines and releases it)."""
        resp = self._call("GET", path, query, None, JSON, (self.timeout, read_timeout))
        if resp.status >= 400:
            raise parse_status(resp.status, resp.read(), f"GET {path}")
        return resp.response

    def get_status(self, path: str, timeout: float | None = None) -> int:
        """The HTTP status of a GET on a plain-text endpoint (kube-controllers' ``/healthz``
        check); connection failures raise ConnectionFailedError."""
        resp = self._call("GET", path, None, None, JSON, timeout or self.timeout)
        resp.read()
        return int(resp.status)
