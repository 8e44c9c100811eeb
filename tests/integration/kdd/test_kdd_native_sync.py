"""Native Kubernetes objects through the Kubernetes backend: the felix syncer's view of pods,
namespaces, service accounts and NetworkPolicies, and calicoctl's read-only views of them."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from k8s_fake_apiserver import FakeAPIServer

from calico.datastore.config import DatastoreConfig
from calico.datastore.kubernetes import KubernetesBackend
from calico.model.keys import PolicyKey, ProfileRulesKey, WorkloadEndpointKey
from calico.syncer.api import Update
from calico.syncer.definitions import felix_syncer


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    with FakeAPIServer(bookmark_interval=0.5) as server:
        yield server


def _pod(name: str, ns: str, ip: str | None, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": "node1", "containers": []},
        "status": {"podIP": ip} if ip else {},
    }


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[Any, Any] = {}

    def on_status_updated(self, status: Any) -> None:
        pass

    def on_updates(self, updates: list[Update]) -> None:
        with self.lock:
            for u in updates:
                if u.value is None:
                    self.values.pop(u.key, None)
                else:
                    self.values[u.key] = u.value

    def get(self, key: Any) -> Any:
        with self.lock:
            return self.values.get(key)


def _wait(pred: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_felix_syncer_sees_pods_profiles_and_k8s_policies(api: FakeAPIServer) -> None:
    api.put_object("v1", "namespaces", {"metadata": {"name": "x", "labels": {"team": "a"}}})
    api.put_object("v1", "pods", _pod("a", "x", "10.0.0.1", {"pod": "a"}))
    api.put_object("v1", "pods", _pod("pending", "x", None, {"pod": "p"}))
    api.put_object(
        "networking.k8s.io/v1",
        "networkpolicies",
        {"metadata": {"name": "deny", "namespace": "x"}, "spec": {"podSelector": {}}},
    )
    backend = KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url}))
    state = _State()
    syncer = felix_syncer(backend, state)
    syncer.start()
    wep_a = WorkloadEndpointKey("node1", "k8s", "x/a", "eth0")
    policy = PolicyKey("KubernetesNetworkPolicy", "x", "deny")
    try:
        assert _wait(
            lambda: (
                state.get(wep_a) is not None
                and state.get(policy) is not None
                and state.get(ProfileRulesKey("kns.x")) is not None
                and state.get(ProfileRulesKey("projectcalico-default-allow")) is not None
            )
        )
        assert state.get(WorkloadEndpointKey("node1", "k8s", "x/pending", "eth0")) is None
        assert state.get(wep_a).labels["pod"] == "a"
        assert state.get(policy).selector.startswith("(projectcalico.org/orchestrator == 'k8s')")
        # A label change, a new pod and a deleted policy all arrive through the watches.
        pod = api.get_object("v1", "pods", "a", "x")
        pod["metadata"]["labels"]["pod"] = "changed"
        api.update_object("v1", "pods", pod)
        api.put_object("v1", "pods", _pod("b", "x", "10.0.0.2", {"pod": "b"}))
        api.delete_object("networking.k8s.io/v1", "networkpolicies", "deny", "x")
        wep_b = WorkloadEndpointKey("node1", "k8s", "x/b", "eth0")
        assert _wait(
            lambda: (
                state.get(wep_a) is not None
                and state.get(wep_a).labels["pod"] == "changed"
                and state.get(wep_b) is not None
                and state.get(policy) is None
            )
        )
        api.delete_object("v1", "pods", "b", "x")
        assert _wait(lambda: state.get(wep_b) is None)
    finally:
        syncer.stop()
        backend.close()


def _ctl(calico_bin: str, api: FakeAPIServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CALICO_", "DATASTORE"))}
    env.update({"DATASTORE_TYPE": "kubernetes", "K8S_API_ENDPOINT": api.url})
    return subprocess.run(
        [calico_bin, "ctl", *args, "--allow-version-mismatch"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_calicoctl_reads_native_kinds_and_refuses_writes(
    api: FakeAPIServer, calico_bin: str, tmp_path: Any
) -> None:
    api.put_object("v1", "namespaces", {"metadata": {"name": "x"}})
    api.put_object("v1", "pods", _pod("a", "x", "10.0.0.1", {"pod": "a"}))
    out = _ctl(calico_bin, api, "get", "workloadendpoints", "-n", "x")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[1].split() == [
        "x",
        "a",
        "node1",
        "10.0.0.1/32",
        "cali456b416f2bf",
    ]
    out = _ctl(calico_bin, api, "get", "profiles")
    assert out.returncode == 0, out.stderr
    assert "kns.x" in out.stdout and "projectcalico-default-allow" in out.stdout
    out = _ctl(calico_bin, api, "delete", "profile", "kns.x")
    assert out.returncode != 0
    assert "operation Delete is not supported on Profile(kns.x)" in out.stdout + out.stderr
    # Calico kinds are full CRUD over the CRDs.
    pool = tmp_path / "pool.yaml"
    pool.write_text(
        "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p1}\n"
        "spec: {cidr: 10.9.0.0/16}\n"
    )
    out = _ctl(calico_bin, api, "create", "-f", str(pool))
    assert out.returncode == 0, out.stderr
    assert api.get_object("crd.projectcalico.org/v1", "ippools", "p1")["spec"]["cidr"] == (
        "10.9.0.0/16"
    )


def test_cluster_network_policies_reach_felix_and_tombstones_delete(api: FakeAPIServer) -> None:
    cnp = {
        "metadata": {"name": "admin-deny"},
        "spec": {
            "tier": "Admin",
            "priority": 5,
            "subject": {"namespaces": {}},
            "ingress": [{"action": "Deny", "from": [{"namespaces": {}}]}],
        },
    }
    api.put_object("policy.networking.k8s.io/v1alpha2", "clusternetworkpolicies", cnp)
    backend = KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url}))
    state = _State()
    syncer = felix_syncer(backend, state)
    syncer.start()
    key = PolicyKey("KubernetesClusterNetworkPolicy", "", "admin-deny")
    try:
        assert _wait(lambda: state.get(key) is not None)
        assert state.get(key).tier == "kube-admin" and state.get(key).order == 5.0
        current = api.get_object(
            "policy.networking.k8s.io/v1alpha2", "clusternetworkpolicies", "admin-deny"
        )
        current["spec"]["tier"] = "Unknown"  # now a tombstone: the policy must go away
        api.update_object("policy.networking.k8s.io/v1alpha2", "clusternetworkpolicies", current)
        assert _wait(lambda: state.get(key) is None)
    finally:
        syncer.stop()
        backend.close()


def test_services_and_endpoint_slices_feed_the_service_sets(api: FakeAPIServer) -> None:
    """Services and EndpointSlices reach Felix raw (KDD only), and a policy rule with
    ``services:`` resolves, through the calc graph, to the slices' addresses (+ports)."""
    from calico.felix.calc.calc_graph import build_felix_calc_pipeline
    from calico.felix.messages import IPSetUpdate
    from calico.model import ResourceKey
    from calico.selector import make_unique_id
    from calico.syncer.api import SyncStatus, UpdateType

    api.put_object(
        "v1",
        "services",
        {"metadata": {"name": "web", "namespace": "x"}, "spec": {"ports": [{"port": 80}]}},
    )
    slice_ = {
        "metadata": {
            "name": "web-abc",
            "namespace": "x",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}],
        "ports": [{"port": 8080, "protocol": "TCP"}],
    }
    api.put_object("discovery.k8s.io/v1", "endpointslices", slice_)
    api.put_object(
        "crd.projectcalico.org/v1",
        "globalnetworkpolicies",
        {
            "metadata": {"name": "to-web"},
            "spec": {
                "selector": "all()",
                "egress": [
                    {
                        "action": "Allow",
                        "destination": {"services": {"name": "web", "namespace": "x"}},
                    }
                ],
            },
        },
    )
    backend = KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url}))
    state = _State()
    syncer = felix_syncer(backend, state)
    syncer.start()
    svc_key = ResourceKey("KubernetesService", "web", "x")
    eps_key = ResourceKey("KubernetesEndpointSlice", "web-abc", "x")
    try:
        assert _wait(lambda: state.get(svc_key) is not None and state.get(eps_key) is not None)
        assert state.get(eps_key)["endpoints"] == [{"addresses": ["10.0.0.1"]}]
        slice_ = api.get_object("discovery.k8s.io/v1", "endpointslices", "web-abc", "x")
        slice_["endpoints"].append({"addresses": ["10.0.0.2"]})
        api.update_object("discovery.k8s.io/v1", "endpointslices", slice_)
        assert _wait(lambda: len(state.get(eps_key)["endpoints"]) == 2)
        assert _wait(lambda: any(isinstance(k, PolicyKey) for k in list(state.values)))
        with state.lock:
            snapshot = dict(state.values)
    finally:
        syncer.stop()
        backend.close()
    batches: list[Any] = []
    pipe = build_felix_calc_pipeline("node1", batches.append, synchronous=True)
    pipe.on_updates([Update(k, v, "1", UpdateType.NEW) for k, v in snapshot.items()])
    from calico.model import values as v1

    wep = v1.WorkloadEndpoint.from_json(
        {"state": "active", "name": "cali1", "profile_ids": [], "ipv4_nets": ["10.1.0.1/32"]}
    )
    wep_key = WorkloadEndpointKey("node1", "k8s", "x/p", "eth0")
    pipe.on_updates([Update(wep_key, wep, "1", UpdateType.NEW)])
    pipe.on_status_updated(SyncStatus.IN_SYNC)
    pipe.flush()
    sets = {m.id: m for b in batches for m in b if isinstance(m, IPSetUpdate)}
    assert sets[make_unique_id("svc", "x/web")].members == (
        "10.0.0.1,tcp:8080",
        "10.0.0.2,tcp:8080",
    )


def test_felix_status_reports_are_skipped_on_kubernetes(
    api: FakeAPIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Upstream skips Felix's status keys in KDD silently: no thread, no request, no warning."""
    import logging

    from calico.felix.status import StatusReporter

    backend = KubernetesBackend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": api.url}))
    before = api.requests
    reporter = StatusReporter(backend, "node1", interval=0.01)
    with caplog.at_level(logging.INFO, logger="calico.felix.status"):
        reporter.start()
    try:
        assert reporter._thread is None
        assert api.requests == before
        assert [r.levelname for r in caplog.records] == ["INFO"]
        assert "Kubernetes datastore" in caplog.records[0].getMessage()
    finally:
        reporter.stop()
        backend.close()
