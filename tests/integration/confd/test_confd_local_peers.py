"""Local workload peers end to end in confd: endpoint status files under
``CALICO_ENDPOINT_STATUS_PATH_PREFIX`` naming a ``localWorkloadSelector`` BGPPeer become
``Local_Workload_`` protocols that BIRD accepts, follow the files as they appear, change and go,
and ``--run-once`` through the CLI picks them up (design/confd.md "Local workload peers")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confd_render_support import NODE, make_renderer

from calico.api.io import load_documents
from calico.confd.daemon import Confd
from calico.confd.localpeers import StatusDir, StatusDirWatcher
from calico.datastore.client import Client
from calico.datastore.daemon_config import daemon_datastore_config
from calico.datastore.factory import open_backend

pytestmark = pytest.mark.skipif(shutil.which("bird") is None, reason="BIRD not installed")

CONFD = (sys.executable, "-m", "calico.cli.main", "component", "confd")
CLUSTER = """
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {nodeToNodeMeshEnabled: false}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: kube-master}
spec: {bgp: {ipv4Address: 10.192.0.2/16}}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: in-cluster-router}
spec: {localWorkloadSelector: app == 'router', asNumber: 65100}
"""


def _wait(cond: Callable[[], object], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _status(prefix: Path, pod: str, ip: str, peer: str = "in-cluster-router") -> None:
    d = prefix / "endpoint-status"
    d.mkdir(parents=True, exist_ok=True)
    doc = {"ifaceName": "cali1", "ipv4Nets": [f"{ip}/32"], "bgpPeerName": peer}
    tmp = d / f".tmp.{pod}"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, d / f"k8s default%2F{pod} eth0")  # atomically, as Felix writes them


def _datastore(tmp_path: Path) -> dict[str, str]:
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "calico.db")}
    backend = open_backend(daemon_datastore_config(env=env))
    for res in load_documents(CLUSTER):
        Client(backend).apply(res)
    backend.close()
    return env


def test_daemon_follows_endpoint_status_files(tmp_path: Path) -> None:
    env = _datastore(tmp_path)
    prefix = tmp_path / "run"
    _status(prefix, "r1", "10.244.0.5")
    confdir = tmp_path / "confd"
    renderer = make_renderer(confdir, {"NODENAME": NODE})
    backend = open_backend(daemon_datastore_config(env=env))
    confd = Confd(backend, renderer, NODE, {"NODENAME": NODE})
    confd.workloads = StatusDirWatcher(
        StatusDir(prefix / "endpoint-status"), confd.workloads_changed, interval=0.05
    )
    thread = threading.Thread(target=confd.run, kwargs={"poll": 0.05}, daemon=True)
    thread.start()
    bird_cfg = confdir / "config" / "bird.cfg"
    try:
        _wait(bird_cfg.exists)
        text = bird_cfg.read_text()  # present from the first render (scanned before it)
        assert "protocol bgp Local_Workload_10_244_0_5 from bgp_template {" in text
        assert "neighbor 10.244.0.5 as 65100;" in text
        _status(prefix, "r2", "10.244.0.6")
        _wait(lambda: "Local_Workload_10_244_0_6" in bird_cfg.read_text())
        _status(prefix, "r1", "10.244.0.7")  # the pod's address changed
        _wait(lambda: "Local_Workload_10_244_0_7" in bird_cfg.read_text())
        assert "Local_Workload_10_244_0_5" not in bird_cfg.read_text()
        (prefix / "endpoint-status" / "k8s default%2Fr2 eth0").unlink()
        _wait(lambda: "Local_Workload_10_244_0_6" not in bird_cfg.read_text())
        # The BGPPeer goes: so do its local peers, though the files stay.
        Client(backend).delete("BGPPeer", "in-cluster-router")
        _wait(lambda: "Local_Workload_" not in bird_cfg.read_text())
        assert "# No BGP peers configured for this node" in bird_cfg.read_text()
    finally:
        confd.stop_event.set()
        thread.join(10)
        backend.close()


def test_run_once_reads_the_status_dir_from_the_environment(tmp_path: Path) -> None:
    env = _datastore(tmp_path)
    prefix = tmp_path / "run"
    _status(prefix, "r1", "10.244.0.9")
    confdir = tmp_path / "confd"
    make_renderer(confdir, {})
    for toml in (confdir / "conf.d").glob("*.toml"):  # no BIRD to reload here
        lines = toml.read_text().splitlines()
        toml.write_text("\n".join(ln for ln in lines if not ln.startswith("reload_cmd")))
    res = subprocess.run(
        [*CONFD, "--run-once", "--confdir", str(confdir)],
        env={
            **os.environ,
            **env,
            "NODENAME": NODE,
            "CALICO_ENDPOINT_STATUS_PATH_PREFIX": str(prefix),
            "CALICO_CONFD_STATUS_FILE": str(tmp_path / "st.json"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert "Local_Workload_10_244_0_9" in (confdir / "config" / "bird.cfg").read_text()


ROUTER_POD = """
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata:
  name: kube--master-k8s-router1-eth0
  namespace: default
  labels: {{app: {app}, projectcalico.org/namespace: default, projectcalico.org/orchestrator: k8s}}
spec:
  node: kube-master
  orchestrator: k8s
  pod: router1
  endpoint: eth0
  interfaceName: caliroute1
  ipNetworks: [10.244.0.7/32]
"""


def test_felix_names_the_peer_in_its_status_file_and_confd_peers_with_the_workload(
    tmp_path: Path,
) -> None:
    """Felix's side (syncer -> calc graph -> endpoint status reporter) writes ``bgpPeerName``
    for a workload the BGPPeer's localWorkloadSelector matches; confd reads that file."""
    from calico.felix.calc.calc_graph import build_felix_calc_pipeline
    from calico.felix.dataplane.endpoint_status import (
        EndpointStatusContent,
        EndpointStatusFileReporter,
        EndpointStatusFiles,
    )
    from calico.felix.messages import WorkloadEndpointRemove, WorkloadEndpointUpdate
    from calico.syncer.definitions import felix_syncer

    env = _datastore(tmp_path)
    backend = open_backend(daemon_datastore_config(env=env))
    client = Client(backend)
    for res in load_documents(ROUTER_POD.format(app="router")):
        client.apply(res)
    prefix = tmp_path / "run"
    reporter = EndpointStatusFileReporter(EndpointStatusFiles(prefix))
    reporter.mark_in_sync()

    def sink(batch: list[object]) -> None:  # the dataplane's part: endpoint up -> status file
        for msg in batch:
            if isinstance(msg, WorkloadEndpointUpdate):
                reporter.endpoint_up(msg.id, EndpointStatusContent.from_endpoint(msg.endpoint))
            elif isinstance(msg, WorkloadEndpointRemove):
                reporter.endpoint_down(msg.id)
        assert reporter.reconcile() == []

    graph = build_felix_calc_pipeline(NODE, sink)
    graph.start()
    syncer = felix_syncer(backend, graph)
    syncer.start()
    watched = StatusDir(prefix / "endpoint-status")

    def peers() -> list[tuple[str, str]]:
        watched.scan()
        return [(w.bgp_peer_name, w.ipv4) for w in watched.active()]

    try:
        _wait(lambda: peers() == [("in-cluster-router", "10.244.0.7")])
        confdir = tmp_path / "confd"
        make_renderer(confdir, {})
        for toml in (confdir / "conf.d").glob("*.toml"):  # no BIRD to reload here
            lines = toml.read_text().splitlines()
            toml.write_text("\n".join(ln for ln in lines if not ln.startswith("reload_cmd")))
        res = subprocess.run(
            [*CONFD, "--run-once", "--confdir", str(confdir)],
            env={
                **os.environ,
                **env,
                "NODENAME": NODE,
                "CALICO_ENDPOINT_STATUS_PATH_PREFIX": str(prefix),
                "CALICO_CONFD_STATUS_FILE": str(tmp_path / "st.json"),
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr
        assert (
            "protocol bgp Local_Workload_10_244_0_7"
            in (confdir / "config" / "bird.cfg").read_text()
        )
        # Relabelled out of the selector: Felix drops the name, the file stays (still up).
        for res in load_documents(ROUTER_POD.format(app="web")):
            client.apply(res)
        _wait(lambda: peers() == [])
        assert len(list((prefix / "endpoint-status").iterdir())) == 1
        # A BGPPeer selecting the new label brings it back under that peer's name.
        for res in load_documents(
            "apiVersion: projectcalico.org/v3\nkind: BGPPeer\nmetadata: {name: web-peer}\n"
            "spec: {localWorkloadSelector: app == 'web', asNumber: 65200}\n"
        ):
            client.apply(res)
        _wait(lambda: peers() == [("web-peer", "10.244.0.7")])
    finally:
        syncer.stop()
        graph.stop()
        backend.close()
