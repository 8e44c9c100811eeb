"""A list-then-watch view of the Kubernetes datastore must equal a fresh list, whatever
writes land while the list runs (design/datastore-kubernetes.md "Watches").

The Profile kind merges two collections (namespaces and serviceaccounts), and a list of a
wider prefix many more; a list of several collections that took the newest list's
resourceVersion for all of them lost the earlier collections' writes in between, so a
long-lived view kept a deleted ``ksa.`` profile forever (design/kube-controllers.md). The
fake API server's ``on_list`` hook runs writes between the collections' lists
deterministically; hypothesis picks the writes and where they land.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from k8s_fake_apiserver import ApiError, FakeAPIServer

from calico.datastore import EventType
from calico.datastore.config import DatastoreConfig
from calico.datastore.kubernetes import KubernetesBackend

P = "/calico/resources/v3/projectcalico.org/"
PROFILES = P + "profiles/"
NAMESPACES = ("n0", "n1", "n2")
ACCOUNTS = ("s0", "s1")

# (action, namespace index, account index, label value)
Op = tuple[str, int, int, str]
op_strategy = st.tuples(
    st.sampled_from(
        ["ns+", "ns-", "ns~", "sa+", "sa-", "sa~", "sa-ns+", "pool+", "pool-", "pool~"]
    ),
    st.integers(0, len(NAMESPACES) - 1),
    st.integers(0, len(ACCOUNTS) - 1),
    st.sampled_from(["a", "b"]),
)


def apply_op(api: FakeAPIServer, op: Op) -> None:
    """One write (skipped when it does not apply to the current state)."""
    action, n, s, label = op
    ns, sa = NAMESPACES[n], ACCOUNTS[s]
    meta: dict[str, Any] = {"name": ns, "labels": {"v": label}}
    sa_meta: dict[str, Any] = {"name": sa, "namespace": ns, "labels": {"v": label}}
    pool = {
        "metadata": {"name": f"pool{n}", "labels": {"v": label}},
        "spec": {"cidr": f"10.{n}.0.0/16"},
    }
    try:
        if action == "ns+":
            api.put_object("v1", "namespaces", {"metadata": meta})
        elif action == "ns-":
            api.delete_object("v1", "namespaces", ns)
        elif action == "ns~":
            api.update_object("v1", "namespaces", {"metadata": meta})
        elif action == "sa+":
            api.put_object("v1", "serviceaccounts", {"metadata": sa_meta})
        elif action == "sa-":
            api.delete_object("v1", "serviceaccounts", sa, ns)
        elif action == "sa~":
            api.update_object("v1", "serviceaccounts", {"metadata": sa_meta})
        elif action == "sa-ns+":  # an account goes, its namespace is (re)labelled at once
            api.delete_object("v1", "serviceaccounts", sa, ns)
            api.update_object("v1", "namespaces", {"metadata": meta})
        elif action == "pool+":
            api.put_object("crd.projectcalico.org/v1", "ippools", pool)
        elif action == "pool-":
            api.delete_object("crd.projectcalico.org/v1", "ippools", f"pool{n}")
        else:
            cur = api.get_object("crd.projectcalico.org/v1", "ippools", f"pool{n}")
            cur["metadata"]["labels"] = {"v": label}
            api.update_object("crd.projectcalico.org/v1", "ippools", cur)
    except ApiError:
        pass


@dataclass
class View:
    """A watcher cache in miniature: list, then apply watch events per key."""

    backend: KubernetesBackend
    prefix: str
    state: dict[str, tuple[str, int]] = field(default_factory=dict)
    bookmark: int = 0

    def __post_init__(self) -> None:
        listed = self.backend.list(self.prefix)
        self.state = {kv.key: (kv.value, kv.revision) for kv in listed.kvs}
        self.bookmark = listed.revision  # (bookmarks come only once the revision moves)
        self.watch = self.backend.watch(self.prefix, listed.revision)

    def catch_up(self, revision: int, timeout: float = 30.0) -> None:
        """Apply events until a bookmark at or past ``revision`` (every collection of the
        merged watch has delivered everything up to it)."""
        deadline = time.monotonic() + timeout
        while self.bookmark < revision:
            assert time.monotonic() < deadline, f"no bookmark reached {revision}"
            event = self.watch.next(timeout=0.2)
            if event is None:
                continue
            assert event.type is not EventType.ERROR, event.error
            if event.type is EventType.BOOKMARK:
                self.bookmark = max(self.bookmark, event.revision)
            elif event.type is EventType.DELETED:
                self.state.pop(event.key, None)
            else:
                assert event.value is not None
                self.state[event.key] = (event.value, event.revision)


def fresh(backend: KubernetesBackend, prefix: str) -> dict[str, tuple[str, int]]:
    return {kv.key: (kv.value, kv.revision) for kv in backend.list(prefix).kvs}


class World:
    def __init__(self) -> None:
        self.api = FakeAPIServer(bookmark_interval=0.05).start()
        config = DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": self.api.url})
        self.backend = KubernetesBackend(config)
        self.during: list[Op] = []
        self.lock = threading.Lock()
        self.api.on_list(self._hook)
        # Lives across every example, as kube-controllers' view does.
        self.long_lived = View(self.backend, PROFILES)

    def _hook(self, _res: Any) -> None:
        with self.lock:
            op = self.during.pop(0) if self.during else None
        if op is not None:
            apply_op(self.api, op)

    def close(self) -> None:
        self.long_lived.watch.stop()
        self.backend.close()
        self.api.stop()


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    w = World()
    yield w
    w.close()


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    before=st.lists(op_strategy, max_size=6),
    during=st.lists(op_strategy, min_size=1, max_size=6),
    after=st.lists(op_strategy, max_size=6),
    wide=st.booleans(),
)
def test_a_view_listed_during_writes_converges_to_a_fresh_list(
    world: World, before: list[Op], during: list[Op], after: list[Op], wide: bool
) -> None:
    for op in before:
        apply_op(world.api, op)
    with world.lock:
        world.during = list(during)
    view = View(world.backend, P if wide else PROFILES)  # its list runs the `during` writes
    with world.lock:
        world.during = []
    try:
        for op in after:
            apply_op(world.api, op)
        end = world.backend.current_revision()
        view.catch_up(end)
        world.long_lived.catch_up(end)
        assert view.state == fresh(world.backend, view.prefix)
        assert world.long_lived.state == fresh(world.backend, PROFILES)
    finally:
        view.watch.stop()


def test_paged_list_is_one_snapshot(world: World) -> None:
    """Pages after the first are served at the first page's resourceVersion (continue
    tokens pin it, as a real API server's do): a write between pages changes nothing."""
    api = world.api
    for i in range(7):
        api.put_object("v1", "namespaces", {"metadata": {"name": f"page{i}"}})
    before = fresh(world.backend, PROFILES)
    from calico.datastore.kubernetes import backend as backend_mod

    writes = iter(["page0", "page6"])

    def delete_one(res: Any) -> None:
        if res.plural == "namespaces" and (name := next(writes, None)):
            api.delete_object("v1", "namespaces", name)

    old_page = backend_mod.PAGE
    backend_mod.PAGE = 2
    api.on_list(delete_one)
    try:
        listed = world.backend.list(PROFILES)
    finally:
        api.on_list(world._hook)
        backend_mod.PAGE = old_page
    assert {kv.key: (kv.value, kv.revision) for kv in listed.kvs} == before
    assert PROFILES + "kns.page0" in before and PROFILES + "kns.page6" in before
    after = fresh(world.backend, PROFILES)
    assert PROFILES + "kns.page0" not in after and PROFILES + "kns.page6" not in after


def test_exact_list_below_the_compaction_point_is_410() -> None:
    from calico.datastore.kubernetes.errors import KubeAPIError

    with FakeAPIServer() as api:
        backend = KubernetesBackend(
            DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url})
        )
        api.put_object("v1", "namespaces", {"metadata": {"name": "compact-a"}})
        old = backend.current_revision()
        api.put_object("v1", "namespaces", {"metadata": {"name": "compact-b"}})
        query = {"resourceVersion": str(old), "resourceVersionMatch": "Exact"}
        page = backend.rest.request("GET", "/api/v1/namespaces", query=query)
        assert [i["metadata"]["name"] for i in page["items"]] == ["compact-a"]  # the past
        api.compact()
        with pytest.raises(KubeAPIError) as info:
            backend.rest.request("GET", "/api/v1/namespaces", query=query)
        assert info.value.code == 410
        # a multi-collection list still works (its snapshot is at the current revision)
        assert PROFILES + "kns.compact-b" in fresh(backend, PROFILES)
        backend.close()


def test_a_snapshot_compacted_mid_list_is_listed_again() -> None:
    """Compaction between the namespaces list and the serviceaccounts list at its RV: the
    exact list gets 410 and the whole snapshot is taken again (once here)."""
    with FakeAPIServer() as api:
        backend = KubernetesBackend(
            DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url})
        )
        api.put_object("v1", "namespaces", {"metadata": {"name": "a"}})
        lists: list[str] = []

        def compact_once(res: Any) -> None:
            lists.append(res.plural)
            if len(lists) == 1:
                api.put_object("v1", "namespaces", {"metadata": {"name": "b"}})
                api.compact()

        api.on_list(compact_once)
        listed = backend.list(PROFILES)
        api.on_list(None)
        assert lists == ["namespaces", "namespaces", "serviceaccounts"]  # (the 410 lists nothing)
        names = [kv.key.rsplit("/", 1)[1] for kv in listed.kvs]
        assert names == ["kns.a", "kns.b", "projectcalico-default-allow"]
        assert listed.revision == backend.current_revision()
        backend.close()
