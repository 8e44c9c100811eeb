"""Shared helpers for the kube-controllers tests: Kubernetes objects in the fake API server."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from k8s_fake_apiserver import FakeAPIServer

from calico.api import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig


def kdd_config(api: FakeAPIServer) -> DatastoreConfig:
    return DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url})


def add_node(api: FakeAPIServer, name: str, labels: dict[str, str] | None = None) -> None:
    api.put_object("v1", "nodes", {"metadata": {"name": name, "labels": labels or {}}})


def add_pod(
    api: FakeAPIServer, ns: str, name: str, node: str, ip: str | None, **labels: str
) -> None:
    status: dict[str, Any] = {"podIP": ip} if ip else {}
    api.put_object(
        "v1",
        "pods",
        {
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"nodeName": node, "containers": [{}]},
            "status": status,
        },
    )


def add_pool(client: Client, name: str, cidr: str, block_size: int = 26) -> None:
    client.create(
        parse_resource(
            {
                "apiVersion": "projectcalico.org/v3",
                "kind": "IPPool",
                "metadata": {"name": name},
                "spec": {"cidr": cidr, "blockSize": block_size},
            }
        )
    )


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def set_pod_status(api: FakeAPIServer, ns: str, name: str, status: dict[str, Any]) -> None:
    """What the kubelet does: a PUT on the pod's status subresource."""
    pod = api.get_object("v1", "pods", name, ns)
    pod["status"] = status
    api.store.replace(api.store.resources[("", "v1", "pods")], ns, name, pod, True)
