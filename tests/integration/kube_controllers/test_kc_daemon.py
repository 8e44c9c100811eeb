"""``calico component kube-controllers`` as a process against the fake API server: the
default KubeControllersConfiguration, env overrides in its status, health on the health port
(the ``calico health`` probe) and in the status file, ipam_* metrics, node-deletion GC end to
end, the exit-129 restart on a config change, and bad configuration failing cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from k8s_fake_apiserver import FakeAPIServer
from kc_support import add_node, add_pool, kdd_config, wait_for

from calico.api import parse_resource
from calico.datastore.client import Client
from calico.datastore.errors import ResourceDoesNotExistError
from calico.datastore.factory import open_backend
from calico.ipam import IPAMClient
from calico.kube_controllers.runconfig import get_or_create

CALICO = str(Path(sys.executable).with_name("calico"))
KCC = ("crd.projectcalico.org/v1", "kubecontrollersconfigurations")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.p = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.wait(5)


def _env(api: FakeAPIServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "KUBECONFIG"))}
    env.update(DATASTORE_TYPE="kubernetes", K8S_API_ENDPOINT=api.url, **extra)
    return env


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    with FakeAPIServer(bookmark_interval=0.2) as server:
        yield server


def _kcc(api: FakeAPIServer) -> dict[str, Any]:
    return api.get_object(*KCC, "default")


def _spec(kcc: dict[str, Any]) -> dict[str, Any]:
    """The v3 spec of the stored v1 CR (spec is stored as is)."""
    return kcc["spec"]


def test_defaults_status_health_metrics_gc_and_restart(api: FakeAPIServer, tmp_path: Path) -> None:
    backend = open_backend(kdd_config(api))
    client = Client(backend)
    add_pool(client, "pool1", "10.0.0.0/16", block_size=29)
    add_node(api, "node-a")
    add_node(api, "node-b")
    ipam = IPAMClient(client)
    a, _ = ipam.auto_assign(1, 0, "ipip-tunnel-addr-node-a", {"node": "node-a"}, "node-a")
    b, _ = ipam.auto_assign(1, 0, "ipip-tunnel-addr-node-b", {"node": "node-b"}, "node-b")
    health_port, metrics_port = _free_port(), _free_port()
    kcc = get_or_create(client)  # upstream's defaults, but metrics on a free port
    kcc.spec.prometheus_metrics_port = metrics_port
    client.update(kcc)
    status_file = tmp_path / "status.json"
    proc = Proc(
        [
            CALICO,
            "component",
            "kube-controllers",
            "--health-port",
            str(health_port),
            "--status-file",
            str(status_file),
        ],
        _env(api, ENABLED_CONTROLLERS="node"),
    )
    try:
        status = wait_for(lambda: _kcc(api).get("status"), what="KCC status")
        assert status["environmentVars"] == {
            "DATASTORE_TYPE": "kubernetes",
            "ENABLED_CONTROLLERS": "node",
        }
        running = status["runningConfig"]
        assert set(running["controllers"]) == {"node"}
        assert running["controllers"]["node"]["syncLabels"] == "Disabled"  # forced in KDD

        probe = [CALICO, "health", "--port", str(health_port), "--type", "readiness"]
        wait_for(
            lambda: subprocess.run(probe, capture_output=True).returncode == 0,
            timeout=20,
            what="ready",
        )
        readiness = json.loads(status_file.read_text())["Readiness"]
        assert readiness == {
            "Startup": {"Ready": True, "Reason": ""},
            "CalicoDatastore": {"Ready": True, "Reason": ""},
            "KubeAPIServer": {"Ready": True, "Reason": ""},
        }

        api.delete_object("v1", "nodes", "node-a")
        wait_for(
            lambda: _handle(ipam, str(a[0].ip)) is None,
            timeout=20,
            what="node-a's tunnel address released",
        )
        assert _handle(ipam, str(b[0].ip)) == "ipip-tunnel-addr-node-b"

        # a config change -> exit 129 -> restarted by wrap_self
        metrics_port = _free_port()
        kcc = _kcc(api)
        kcc["spec"]["prometheusMetricsPort"] = metrics_port
        api.update_object(*KCC, kcc)
        wait_for(
            lambda: "Received exit status 129, restarting" in proc.output,
            timeout=30,
            what="restart",
        )
        body = wait_for(
            lambda: _try(lambda: requests.get(f"http://127.0.0.1:{metrics_port}/metrics").text),
            timeout=30,
            what="metrics",
        )
        wait_for(
            lambda: (
                'ipam_allocations_in_use{ippool="pool1",node="node-b"} 1.0'
                in requests.get(f"http://127.0.0.1:{metrics_port}/metrics").text
            ),
            timeout=20,
            what="ipam metrics: " + proc.output[-3000:],
        )
        assert "ipam_ippool_size" in body, body
        assert _kcc(api)["status"]["runningConfig"]["prometheusMetricsPort"] == metrics_port
        # a change the environment overrides restarts nothing
        restarts = proc.output.count("Received exit status 129")
        kcc = _kcc(api)
        kcc["spec"]["controllers"]["policy"] = {"reconcilerPeriod": "1m"}
        api.update_object(*KCC, kcc)
        time.sleep(7)
        assert proc.output.count("Received exit status 129") == restarts
        assert proc.p.poll() is None
    finally:
        code = proc.stop()
        backend.close()
    assert code == 0, proc.output


def test_default_configuration_is_created_with_upstreams_defaults(api: FakeAPIServer) -> None:
    backend = open_backend(kdd_config(api))
    try:
        get_or_create(Client(backend))
        get_or_create(Client(backend))  # idempotent
    finally:
        backend.close()
    spec = _spec(_kcc(api))
    assert spec == {
        "logSeverityScreen": "Info",
        "healthChecks": "Enabled",
        "etcdV3CompactionPeriod": "10m0s",
        "prometheusMetricsPort": 9094,
        "controllers": {
            "node": {
                "reconcilerPeriod": "5m0s",
                "syncLabels": "Enabled",
                "hostEndpoint": {"autoCreate": "Disabled"},
                "leakGracePeriod": "15m0s",
            },
            "policy": {"reconcilerPeriod": "5m0s"},
            "workloadEndpoint": {"reconcilerPeriod": "5m0s"},
            "serviceAccount": {"reconcilerPeriod": "5m0s"},
            "namespace": {"reconcilerPeriod": "5m0s"},
            "loadBalancer": {"assignIPs": "AllServices"},
            "policyMigration": {"enabled": "Enabled"},
        },
    }


def _handle(ipam: IPAMClient, ip: str) -> str | None:
    try:
        return ipam.get_assignment_attributes(ip)[0]
    except ResourceDoesNotExistError:
        return None


def _try(fn: Any) -> Any:
    try:
        return fn()
    except Exception:
        return None


def test_unknown_controller_is_a_clean_error(api: FakeAPIServer, tmp_path: Path) -> None:
    proc = subprocess.run(
        [CALICO, "component", "kube-controllers", "--status-file", ""],
        env=_env(api, ENABLED_CONTROLLERS="node,bogus"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "invalid controller 'bogus' in ENABLED_CONTROLLERS" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_bad_datastore_config_is_a_clean_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "DATASTORE"))}
    proc = subprocess.run(
        [CALICO, "component", "kube-controllers", "--status-file", ""],
        env=env,  # etcdv3 by default, no endpoints
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "etcd endpoints" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_loadbalancer_controller_end_to_end(api: FakeAPIServer) -> None:
    """A LoadBalancer Service created before any LoadBalancer pool gets its address once
    the pool appears (the pool poll), and loses it when deleted (the Service watch)."""
    client = Client(open_backend(kdd_config(api)))
    api.put_object(
        "v1",
        "services",
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ipFamilies": ["IPv4"]},
        },
    )
    proc = Proc(
        [CALICO, "component", "kube-controllers", "--status-file", ""],
        _env(api, ENABLED_CONTROLLERS="loadbalancer"),
    )

    def ingress() -> list[str]:
        svc = api.get_object("v1", "services", "web", "default")
        return [i["ip"] for i in svc.get("status", {}).get("loadBalancer", {}).get("ingress", [])]

    try:
        wait_for(lambda: "Running with" in proc.output, timeout=30, what="start")
        add_pool(client, "pods", "10.0.0.0/16")
        client.create(
            parse_resource(
                {
                    "apiVersion": "projectcalico.org/v3",
                    "kind": "IPPool",
                    "metadata": {"name": "lb"},
                    "spec": {"cidr": "172.30.0.0/24", "allowedUses": ["LoadBalancer"]},
                }
            )
        )
        (ip,) = wait_for(ingress, timeout=40, what="LB address: " + proc.output[-2000:])
        assert ip.startswith("172.30.0.")
        ipam = IPAMClient(client)
        assert ipam.get_assignment_attributes(ip)[1]["service"] == "web"
        api.delete_object("v1", "services", "web", "default")

        def released() -> bool:
            try:
                ipam.get_assignment_attributes(ip)
            except ResourceDoesNotExistError:
                return True
            return False

        wait_for(released, timeout=40, what="release: " + proc.output[-2000:])
    finally:
        code = proc.stop()
    assert code == 0, proc.output
