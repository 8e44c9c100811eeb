"""The etcd-mode controllers: Kubernetes objects in the fake API server, Calico data in a real
etcd. From a hypothesis-generated start state (stale, missing and changed objects, plus
unrelated ones that must survive) one reconcile converges and a second writes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from etcd_fixture import make_etcd_backend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from k8s_fake_apiserver import FakeAPIServer
from kc_support import add_node, kdd_config, wait_for

from calico.api import parse_resource
from calico.datastore.client import Client
from calico.datastore.factory import open_backend
from calico.kube_controllers.kubecache import KubeCache
from calico.kube_controllers.sync import (
    KNP_PREFIX,
    PodController,
    PolicyController,
    ProfileController,
)

NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
LABELS = st.dictionaries(st.sampled_from(["app", "team", "tier"]), st.sampled_from(["x", "y"]))
FATE = st.sampled_from(["missing", "same", "labels", "spec"])


@pytest.fixture(scope="module")
def kube_world() -> Iterator[tuple[FakeAPIServer, Callable[[], KubeCache]]]:
    """The fake API server and a factory for a Kubernetes view listed afresh per example.

    Each example starts its own view (and the factory stops the previous one): the test is
    about the controllers converging from an arbitrary Calico-side start state. A view kept
    across examples was seen, about one run in ten, to bring back a profile deleted with the
    previous example (a watch-ordering fault in the Kubernetes datastore, recorded in
    design/kube-controllers.md), which is not what this test measures.
    """
    with FakeAPIServer(bookmark_interval=0.2) as api:
        backend = open_backend(kdd_config(api))
        views: list[KubeCache] = []

        def fresh() -> KubeCache:
            while views:
                views.pop().stop()
            kube = KubeCache(backend)
            kube.start()
            views.append(kube)
            return kube

        try:
            yield api, fresh
        finally:
            while views:
                views.pop().stop()
            backend.close()


def _reset(api: FakeAPIServer) -> None:
    for (_group, _version, plural), res in api.store.resources.items():
        if plural not in ("namespaces", "serviceaccounts", "networkpolicies", "pods", "nodes"):
            continue
        for ns, name in list(api.store.objects.get(res, {})):
            api.store.delete(res, ns, name, {})


def _etcd_client(etcd_server: Any) -> Client:
    return Client(make_etcd_backend(etcd_server.endpoints, f"/kc-{uuid.uuid4().hex[:12]}"))


def _mutate(obj: dict[str, Any], fate: str) -> dict[str, Any] | None:
    obj = json.loads(json.dumps(obj))
    if fate == "missing":
        return None
    if fate == "labels":
        obj["metadata"]["labels"] = {"stale": "label"}
    if fate == "spec":
        if obj["kind"] == "Profile":
            obj["spec"]["labelsToApply"] = {"pcns.stale": "1"}
        else:
            obj["spec"]["selector"] = "stale == 'x'"
    return obj


def _stored(client: Client, kind: str, prefix: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for res in client.list(kind).items:
        if res.metadata.name.startswith(prefix):
            d = res.model_dump(by_alias=True, exclude_none=True, mode="json")
            out[(res.metadata.namespace or "", res.metadata.name)] = d
    return out


def _essence(d: dict[str, Any]) -> tuple[Any, Any]:
    return (d["metadata"].get("labels"), d["spec"])


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    namespaces=st.dictionaries(NAMES, LABELS, max_size=4),
    sas=st.dictionaries(st.tuples(NAMES, NAMES), LABELS, max_size=4),
    fates=st.lists(FATE, min_size=12, max_size=12),
    stale=st.lists(st.sampled_from(["kns.zz", "ksa.zz.q", "kns.old"]), unique=True),
)
def test_profile_controllers_converge_and_are_idempotent(
    kube_world: tuple[FakeAPIServer, Callable[[], KubeCache]],
    etcd_server: Any,
    namespaces: dict[str, dict[str, str]],
    sas: dict[tuple[str, str], dict[str, str]],
    fates: list[str],
    stale: list[str],
) -> None:
    api, fresh_view = kube_world
    _reset(api)
    for ns, labels in namespaces.items():
        api.put_object("v1", "namespaces", {"metadata": {"name": ns, "labels": labels}})
    for (ns, sa), labels in sas.items():
        api.put_object(
            "v1", "serviceaccounts", {"metadata": {"name": sa, "namespace": ns, "labels": labels}}
        )
    kube = fresh_view()  # lists the state just written
    wait_for(
        lambda: (
            kube.in_sync
            and {
                n: v["spec"].get("labelsToApply")
                for (_, n), v in kube.snapshot("Profile").items()
                if n.startswith(("kns.", "ksa."))
            }
            == {
                **{
                    f"kns.{ns}": {f"pcns.{k}": v for k, v in lab.items()}
                    | {"pcns.projectcalico.org/name": ns}
                    for ns, lab in namespaces.items()
                },
                **{
                    f"ksa.{ns}.{sa}": {f"pcsa.{k}": v for k, v in lab.items()}
                    | {"pcsa.projectcalico.org/name": sa}
                    for (ns, sa), lab in sas.items()
                },
            }
        ),
        what="profiles in the view",
    )
    client = _etcd_client(etcd_server)
    ctrls = [
        ProfileController("namespace", client, kube, "kns."),
        ProfileController("serviceaccount", client, kube, "ksa."),
    ]
    desired = {}
    for ctrl in ctrls:
        desired.update(ctrl.desired())
    for (_ident, obj), fate in zip(sorted(desired.items()), fates, strict=False):
        start = _mutate(obj, fate)
        if start is not None:
            client.create(parse_resource(start))
    for name in stale:
        kind = {"apiVersion": "projectcalico.org/v3", "kind": "Profile"}
        client.create(parse_resource({**kind, "metadata": {"name": name}, "spec": {}}))
    client.create(
        parse_resource(
            {"apiVersion": "projectcalico.org/v3", "kind": "Profile", "metadata": {"name": "mine"}}
        )
    )
    for ctrl in ctrls:
        ctrl.reconcile()
    for ctrl in ctrls:
        stored = _stored(client, "Profile", ctrl.prefix)
        want = {k: v for k, v in desired.items() if k[1].startswith(ctrl.prefix)}
        assert set(stored) == set(want)
        for ident, obj in want.items():
            assert _essence(stored[ident]) == _essence(
                parse_resource(obj).model_dump(by_alias=True, exclude_none=True, mode="json")
            )
    assert client.get("Profile", "mine") is not None  # not ours: untouched
    assert [ctrl.reconcile() for ctrl in ctrls] == [0, 0]  # idempotent


def _np(name: str, ns: str, app: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "podSelector": {"matchLabels": {"app": app}},
            "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 80}]}],
        },
    }


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    policies=st.dictionaries(st.tuples(NAMES, NAMES), st.sampled_from(["x", "y"]), max_size=5),
    fates=st.lists(FATE, min_size=5, max_size=5),
    stale=st.lists(st.tuples(NAMES, NAMES), max_size=3, unique=True),
)
def test_policy_controller_converges_and_is_idempotent(
    kube_world: tuple[FakeAPIServer, Callable[[], KubeCache]],
    etcd_server: Any,
    policies: dict[tuple[str, str], str],
    fates: list[str],
    stale: list[tuple[str, str]],
) -> None:
    api, fresh_view = kube_world
    _reset(api)
    for (ns, name), app in policies.items():
        api.put_object("networking.k8s.io/v1", "networkpolicies", _np(name, ns, app))
    kube = fresh_view()  # lists the state just written
    wait_for(
        lambda: (
            kube.in_sync
            and {
                k: v["spec"]["selector"]
                for k, v in kube.snapshot("KubernetesNetworkPolicy").items()
            }
            == {
                k: f"projectcalico.org/orchestrator == 'k8s' && app == '{app}'"
                for k, app in policies.items()
            }
        ),
        what="policies in the view",
    )
    client = _etcd_client(etcd_server)
    ctrl = PolicyController(client, kube)
    desired = ctrl.desired()
    assert all(name.startswith(KNP_PREFIX) for _, name in desired)
    for (_, obj), fate in zip(sorted(desired.items()), fates, strict=False):
        start = _mutate(obj, fate)
        if start is not None:
            client.create(parse_resource(start))
    for ns, name in stale:
        if (ns, KNP_PREFIX + name) in desired:
            continue
        client.create(parse_resource(_mutate(_clean_np(ns, KNP_PREFIX + name), "same")))
    client.create(parse_resource(_clean_np("a", "mine")))
    ctrl.reconcile()
    stored = _stored(client, "NetworkPolicy", KNP_PREFIX)
    assert set(stored) == set(desired)
    for ident, obj in desired.items():
        got = stored[ident]
        assert got["spec"]["order"] == 1000
        assert _essence(got) == _essence(
            parse_resource(obj).model_dump(by_alias=True, exclude_none=True, mode="json")
        )
    assert client.get("NetworkPolicy", "mine", "a") is not None
    assert ctrl.reconcile() == 0


def _clean_np(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "projectcalico.org/v3",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": "all()", "order": 5},
    }


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pods=st.dictionaries(NAMES, st.tuples(LABELS, st.sampled_from(["", "sa1", "sa2"])), max_size=4),
    fates=st.lists(st.sampled_from(["missing", "same", "labels", "sa"]), min_size=4, max_size=4),
)
def test_pod_controller_converges_and_is_idempotent(
    kube_world: tuple[FakeAPIServer, Callable[[], KubeCache]],
    etcd_server: Any,
    pods: dict[str, tuple[dict[str, str], str]],
    fates: list[str],
) -> None:
    api, fresh_view = kube_world
    _reset(api)
    add_node(api, "node-1")
    for name, (labels, sa) in pods.items():
        spec: dict[str, Any] = {"nodeName": "node-1", "containers": [{}]}
        if sa:
            spec["serviceAccountName"] = sa
        api.put_object(
            "v1",
            "pods",
            {
                "metadata": {"name": name, "namespace": "ns1", "labels": labels},
                "spec": spec,
                "status": {"podIP": "10.0.0.1"},
            },
        )
    kube = fresh_view()  # lists the state just written
    wait_for(
        lambda: (
            kube.in_sync
            and {
                v["spec"]["pod"]: (
                    {k: x for k, x in v["metadata"]["labels"].items() if "projectcalico" not in k},
                    v["spec"].get("serviceAccountName", ""),
                )
                for v in kube.snapshot("WorkloadEndpoint").values()
            }
            == pods
        ),
        what="pods in the view",
    )
    client = _etcd_client(etcd_server)
    views = {v["spec"]["pod"]: v for v in kube.snapshot("WorkloadEndpoint").values()}
    for (_pod, view), fate in zip(sorted(views.items()), fates, strict=False):
        if fate == "missing":
            continue  # no endpoint: the controller must not create one
        start = json.loads(json.dumps(view))
        start["metadata"] = {
            "name": view["metadata"]["name"],
            "namespace": "ns1",
            "labels": view["metadata"]["labels"],
        }
        if fate == "labels":
            start["metadata"]["labels"] = {"old": "x"}
        if fate == "sa":
            start["spec"]["serviceAccountName"] = "old"
            start["spec"]["profiles"] = ["kns.ns1", "ksa.ns1.old"]
        client.create(parse_resource(start))
    orphan = json.loads(json.dumps(next(iter(views.values()), None) or {}))
    if orphan:  # an endpoint whose pod is gone is left alone (CNI's to delete)
        orphan["metadata"] = {
            "name": "node--1-k8s-ghost-eth0",
            "namespace": "ns1",
            "labels": {"keep": "me"},
        }
        orphan["spec"]["pod"] = "ghost"
        client.create(parse_resource(orphan))
    ctrl = PodController(client.backend, kube)
    ctrl.reconcile()
    stored = {w.spec.pod: w for w in client.list("WorkloadEndpoint").items}
    for (pod, view), fate in zip(sorted(views.items()), fates, strict=False):
        if fate == "missing":
            assert pod not in stored
            continue
        wep = stored[pod]
        assert wep.metadata.labels == view["metadata"]["labels"]
        assert wep.spec.service_account_name == view["spec"].get("serviceAccountName")
        assert wep.spec.profiles == view["spec"]["profiles"]
    if orphan:
        assert stored["ghost"].metadata.labels == {"keep": "me"}
    assert ctrl.reconcile() == 0
