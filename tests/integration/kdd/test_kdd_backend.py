"""KubernetesBackend against the fake API server: group modes, IPAM soft delete, watches that
lose their connection or get 410, and the felix syncer converging over them."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from k8s_fake_apiserver import ApiError, FakeAPIServer

from calico.api import parse_resource
from calico.datastore import EventType, ResourceDoesNotExistError, UpdateConflictError
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend
from calico.datastore.kubernetes import KubernetesBackend
from calico.model.ipam_keys import IPPoolKey
from calico.syncer.api import SyncStatus, Update
from calico.syncer.definitions import felix_syncer

P = "/calico/resources/v3/projectcalico.org/"


def _config(api: FakeAPIServer, **extra: Any) -> DatastoreConfig:
    return DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url, **extra})


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    with FakeAPIServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def backend(api: FakeAPIServer) -> Iterator[KubernetesBackend]:
    b = open_backend(_config(api))
    assert isinstance(b, KubernetesBackend)
    yield b
    b.close()


def _pool(name: str, cidr: str) -> Any:
    return parse_resource(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": "IPPool",
            "metadata": {"name": name},
            "spec": {"cidr": cidr},
        }
    )


def test_v3_mode_by_discovery_and_by_variable() -> None:
    with FakeAPIServer(v1_crds=False, v3_crds=True) as api:
        b = KubernetesBackend(_config(api))
        assert b.mode == "v3"
        Client(b).create(_pool("p1", "10.1.0.0/16"))
        cr = api.get_object("projectcalico.org/v3", "ippools", "p1")
        assert "annotations" not in cr["metadata"]  # stored as the v3 object itself
        assert Client(b).get("IPPool", "p1").metadata.uid == cr["metadata"]["uid"]
        b.close()
    with FakeAPIServer(v1_crds=True, v3_crds=True) as api:  # aggregated API server: v1
        assert KubernetesBackend(_config(api)).mode == "v1"
        assert KubernetesBackend(_config(api, calicoAPIGroup="projectcalico.org/v3")).mode == "v3"


def test_v1_uid_is_the_converted_server_uid(api: FakeAPIServer, backend: KubernetesBackend) -> None:
    from calico.datastore.kubernetes.uids import convert_uid

    Client(backend).create(_pool("p1", "10.1.0.0/16"))
    cr = api.get_object("crd.projectcalico.org/v1", "ippools", "p1")
    assert Client(backend).get("IPPool", "p1").metadata.uid == convert_uid(cr["metadata"]["uid"])


def _block_value(cidr: str) -> str:
    return json.dumps(
        {
            "apiVersion": "projectcalico.org/v3",
            "kind": "IPAMBlock",
            "metadata": {"name": "x"},
            "spec": {"cidr": cidr, "allocations": [None] * 4, "unallocated": [0, 1, 2, 3]},
        }
    )


def test_ipam_delete_is_a_soft_delete_then_a_uid_delete(
    api: FakeAPIServer, backend: KubernetesBackend
) -> None:
    key = P + "ipamblocks/10-0-1-0-30"
    first = backend.create(key, _block_value("10.0.1.0/30"))
    second = backend.update(key, _block_value("10.0.1.0/30"), first.revision)
    with pytest.raises(UpdateConflictError):
        backend.delete(key, first.revision)  # stale: the CAS soft-delete is refused
    assert backend.get(key).revision == second.revision
    watch = backend.watch(P + "ipamblocks/", backend.current_revision())
    try:
        deleted = backend.delete(key, second.revision)
        assert deleted.revision == second.revision
        events = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            event = watch.next(0.3)
            if event is not None and event.type is not EventType.BOOKMARK:
                events.append(event)
        assert [(e.type, e.key) for e in events] == [(EventType.DELETED, key)]  # once
    finally:
        watch.stop()
    with pytest.raises(ApiError, match="not found"):
        api.get_object("crd.projectcalico.org/v1", "ipamblocks", "10-0-1-0-30")


def test_a_half_done_soft_delete_is_finished_by_readers(
    api: FakeAPIServer, backend: KubernetesBackend
) -> None:
    key = P + "ipamhandles/h1"
    value = json.dumps(
        {"kind": "IPAMHandle", "metadata": {}, "spec": {"handleID": "H1", "block": {}}}
    )
    backend.create(key, value)
    cr = api.get_object("crd.projectcalico.org/v1", "ipamhandles", "h1")
    cr["spec"]["deleted"] = True  # another client died between its two steps
    api.update_object("crd.projectcalico.org/v1", "ipamhandles", cr)
    assert backend.list(P + "ipamhandles/").kvs == []
    with pytest.raises(ResourceDoesNotExistError):
        backend.get(key)
    with pytest.raises(ApiError, match="not found"):
        api.get_object("crd.projectcalico.org/v1", "ipamhandles", "h1")


def test_bookmarks_and_reconnect_after_a_lost_connection(
    api: FakeAPIServer, backend: KubernetesBackend
) -> None:
    watch = backend.watch(P + "ippools/", backend.current_revision())
    try:
        event = watch.next(3)
        assert event is not None and event.type is EventType.BOOKMARK
        opened = api.watches
        api.drop_watches()
        Client(backend).create(_pool("p1", "10.1.0.0/16"))
        deadline = time.monotonic() + 5
        seen = None
        while time.monotonic() < deadline and seen is None:
            e = watch.next(0.5)
            if e is not None and e.type is EventType.ADDED:
                seen = e
        assert seen is not None and seen.key == P + "ippools/p1"
        assert api.watches > opened  # it re-watched (from the last revision: no replay gap)
    finally:
        watch.stop()


def test_410_ends_the_watch_with_too_old(api: FakeAPIServer, backend: KubernetesBackend) -> None:
    start = backend.current_revision()
    Client(backend).create(_pool("p1", "10.1.0.0/16"))
    api.compact()
    watch = backend.watch(P + "ippools/", start)
    try:
        event = watch.next(3)
        assert event is not None and event.type is EventType.ERROR
        assert "too old" in str(event.error)
        assert watch.next(0.2) is None
    finally:
        watch.stop()


class _Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: dict[Any, Any] = {}
        self.statuses: list[SyncStatus] = []

    def on_status_updated(self, status: SyncStatus) -> None:
        self.statuses.append(status)

    def on_updates(self, updates: list[Update]) -> None:
        with self.lock:
            for u in updates:
                if u.value is None:
                    self.state.pop(u.key, None)
                else:
                    self.state[u.key] = u.value

    def pools(self) -> set[str]:
        with self.lock:
            return {str(k.cidr) for k in self.state if isinstance(k, IPPoolKey)}


def _wait(pred: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_felix_syncer_converges_after_connection_loss_and_410(
    api: FakeAPIServer, backend: KubernetesBackend
) -> None:
    client = Client(backend)
    client.create(_pool("p1", "10.1.0.0/16"))
    rec = _Recorder()
    syncer = felix_syncer(backend, rec)
    syncer.start()
    try:
        assert _wait(lambda: rec.pools() == {"10.1.0.0/16"} and SyncStatus.IN_SYNC in rec.statuses)
        # 1. The connection drops; a pool is added meanwhile: the re-watch picks it up.
        api.drop_watches()
        client.create(_pool("p2", "10.2.0.0/16"))
        assert _wait(lambda: rec.pools() == {"10.1.0.0/16", "10.2.0.0/16"})
        # 2. History is compacted and the next watch gets 410: the syncer relists and the
        #    delete that happened while it was cut off arrives as a synthetic delete.
        api.expire_next_watches(len(syncer._caches))
        api.drop_watches()
        client.delete("IPPool", "p1")
        client.create(_pool("p3", "10.3.0.0/16"))
        api.compact()
        assert _wait(lambda: rec.pools() == {"10.2.0.0/16", "10.3.0.0/16"})
    finally:
        syncer.stop()


def test_status_kinds_write_spec_and_status(api: FakeAPIServer, backend: KubernetesBackend) -> None:
    key = P + "caliconodestatuses/n1"
    spec = {"node": "n1", "classes": ["Agent"], "updatePeriodSeconds": 10}
    created = backend.create(key, json.dumps({"metadata": {}, "spec": spec}))
    value = {"metadata": {}, "spec": spec, "status": {"lastUpdated": "2026-01-01T00:00:00Z"}}
    updated = backend.update(key, json.dumps(value), created.revision)
    cr = api.get_object("crd.projectcalico.org/v1", "caliconodestatuses", "n1")
    assert cr["status"] == {"lastUpdated": "2026-01-01T00:00:00Z"}  # through /status
    assert updated.revision == int(cr["metadata"]["resourceVersion"])
    with pytest.raises(UpdateConflictError):
        backend.update(key, json.dumps(value), created.revision)


def test_calicoctl_context_picks_the_kubeconfig_context(tmp_path: Any, calico_bin: str) -> None:
    import subprocess

    import yaml

    with FakeAPIServer() as one, FakeAPIServer() as two:
        for server, cidr in ((one, "10.1.0.0/16"), (two, "10.2.0.0/16")):
            b = KubernetesBackend(_config(server))
            Client(b).create(_pool("p", cidr))
            b.close()
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "one",
                    "clusters": [
                        {"name": n, "cluster": {"server": s.url}}
                        for n, s in (("one", one), ("two", two))
                    ],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [
                        {"name": n, "context": {"cluster": n, "user": "u"}} for n in ("one", "two")
                    ],
                }
            )
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CALICO_", "K8S_"))}
        env.update({"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": str(kubeconfig)})

        def cidr(*flags: str) -> str:
            out = subprocess.run(
                [
                    calico_bin,
                    "ctl",
                    "get",
                    "ippool",
                    "p",
                    "-o",
                    "yaml",
                    "--allow-version-mismatch",
                    *flags,
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
            return yaml.safe_load(out.stdout)["spec"]["cidr"]

        assert cidr() == "10.1.0.0/16"
        assert cidr("--context", "two") == "10.2.0.0/16"


def test_a_collection_the_server_does_not_serve_is_empty_not_an_error() -> None:
    with FakeAPIServer(v1_crds=False, v3_crds=False) as api:  # no Calico CRDs at all
        b = KubernetesBackend(_config(api, calicoAPIGroup="crd.projectcalico.org/v1"))
        try:
            assert b.list(P + "ippools/").kvs == []
            watch = b.watch(P + "ippools/", 0)
            assert watch.next(0.5) is None  # quiet: no ERROR, so no relist storm
            watch.stop()
        finally:
            b.close()


def test_watch_rides_out_an_api_server_outage(
    api: FakeAPIServer, backend: KubernetesBackend
) -> None:
    watch = backend.watch(P + "ippools/", backend.current_revision())
    try:
        api.outage(1.5)  # refused connections meanwhile: the watch backs off and retries
        api.store.create(
            api._res("crd.projectcalico.org", "v1", "ippools"),
            "",
            {"metadata": {"name": "after"}, "spec": {"cidr": "10.7.0.0/16"}},
        )
        deadline = time.monotonic() + 10
        seen = None
        while time.monotonic() < deadline and seen is None:
            e = watch.next(0.5)
            if e is not None and e.type is EventType.ADDED:
                seen = e
        assert seen is not None and seen.key == P + "ippools/after"
    finally:
        watch.stop()
