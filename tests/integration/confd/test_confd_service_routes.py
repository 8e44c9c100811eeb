"""Per-service advertisement against the fake Kubernetes API server: the collection watcher
(paged list, watch, lost connection, 410 relist) and confd on the Kubernetes datastore
advertising a Local service's /32 while this node has a ready endpoint for it and withdrawing
it when the endpoint moves (design/confd.md "Per-service advertisement")."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confd_render_support import NODE, make_renderer
from k8s_fake_apiserver import FakeAPIServer

from calico.api.io import load_documents
from calico.confd.daemon import Confd
from calico.confd.routegen import RouteGenerator
from calico.datastore.client import Client
from calico.datastore.daemon_config import daemon_datastore_config
from calico.datastore.factory import open_backend
from calico.datastore.kubernetes.collection import CollectionWatcher
from calico.datastore.kubernetes.rest import Rest
from calico.datastore.kubernetes.secrets import api_configuration


def _wait(cond: Callable[[], object], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    server = FakeAPIServer(bookmark_interval=60.0).start()
    yield server
    server.stop()


def _env(api: FakeAPIServer) -> dict[str, str]:
    return {"DATASTORE_TYPE": "kubernetes", "K8S_API_ENDPOINT": api.url}


def _rest(api: FakeAPIServer) -> Rest:
    return Rest(api_configuration(daemon_datastore_config(env=_env(api)), {}), timeout=5.0)


def _svc(name: str, ns: str = "default", **spec: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def test_collection_watcher_follows_a_collection(api: FakeAPIServer) -> None:
    for i in range(5):
        api.put_object("v1", "services", _svc(f"s{i}", ns=f"ns{i % 2}", clusterIP=f"10.0.0.{i}"))
    changes = threading.Semaphore(0)
    w = CollectionWatcher(_rest(api), "/api/v1/services", changes.release, backoff=(0.05, 0.2))
    w.page = 2  # three pages
    w.start()
    try:
        _wait(lambda: w.synced)
        assert set(w.objects()) == {f"ns{i % 2}/s{i}" for i in range(5)}
        api.put_object("v1", "services", _svc("new", clusterIP="10.0.0.9"))
        _wait(lambda: "default/new" in w.objects())
        api.update_object("v1", "services", _svc("new", clusterIP="10.0.0.10"))
        _wait(lambda: w.objects()["default/new"]["spec"]["clusterIP"] == "10.0.0.10")
        watches = api.watches
        api.drop_watches()
        _wait(lambda: api.watches > watches)
        api.delete_object("v1", "services", "s0", "ns0")
        _wait(lambda: "ns0/s0" not in w.objects())
        api.expire_next_watches(1)
        api.drop_watches()
        api.delete_object("v1", "services", "s1", "ns1")
        _wait(lambda: "ns1/s1" not in w.objects())
        assert len(w.objects()) == 4
    finally:
        w.stop()


CONFIG = """
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {serviceClusterIPs: [{cidr: 10.101.0.0/16}]}
"""


def _slice(node: str, ready: bool = True) -> dict:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-1",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.0.0.5"], "nodeName": node, "conditions": {"ready": ready}}
        ],
    }


@pytest.mark.skipif(shutil.which("bird") is None, reason="BIRD not installed")
def test_confd_advertises_a_local_service_while_it_has_a_local_endpoint(
    api: FakeAPIServer, tmp_path: Path
) -> None:
    api.put_object(
        "v1",
        "nodes",
        {
            "metadata": {
                "name": NODE,
                "annotations": {"projectcalico.org/IPv4Address": "10.192.0.2/16"},
            }
        },
    )
    backend = open_backend(daemon_datastore_config(env=_env(api)))
    for res in load_documents(CONFIG):
        Client(backend).apply(res)
    api.put_object(
        "v1",
        "services",
        _svc("web", type="NodePort", clusterIP="10.101.0.10", externalTrafficPolicy="Local"),
    )
    api.put_object("discovery.k8s.io/v1", "endpointslices", _slice(NODE))
    confdir = tmp_path / "confd"
    renderer = make_renderer(confdir, {"NODENAME": NODE})
    confd = Confd(backend, renderer, NODE, {"NODENAME": NODE}, status_path=tmp_path / "st.json")
    rest = _rest(api)
    confd.routegen = RouteGenerator(
        lambda path, cb: CollectionWatcher(rest, path, cb, backoff=(0.05, 0.2)),
        confd.services_changed,
        wait=30.0,
    )
    aggr = confdir / "config" / "bird_aggr.cfg"
    thread = threading.Thread(target=confd.run, kwargs={"poll": 0.05}, daemon=True)
    thread.start()
    try:
        _wait(aggr.exists)
        # Held until Services and EndpointSlices were listed: the first render has the /32.
        assert "route 10.101.0.10/32 blackhole;" in aggr.read_text()
        assert "route 10.101.0.0/16 blackhole;" in aggr.read_text()
        api.update_object("discovery.k8s.io/v1", "endpointslices", _slice("kube-node-1"))
        _wait(lambda: "10.101.0.10/32" not in aggr.read_text())
        assert "route 10.101.0.0/16 blackhole;" in aggr.read_text()
        api.update_object("discovery.k8s.io/v1", "endpointslices", _slice(NODE, ready=False))
        api.update_object("discovery.k8s.io/v1", "endpointslices", _slice(NODE))
        _wait(lambda: "route 10.101.0.10/32 blackhole;" in aggr.read_text())
        api.delete_object("v1", "services", "web", "default")
        _wait(lambda: "10.101.0.10/32" not in aggr.read_text())
    finally:
        confd.stop_event.set()
        thread.join(10)
        backend.close()
