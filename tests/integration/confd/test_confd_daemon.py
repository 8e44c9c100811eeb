"""confd against a real datastore (embedded SQLite and a real etcd) and the real BIRD parser:
renders once in sync, re-renders on a relevant change, renders nothing on an unrelated one,
and never installs a configuration BIRD rejects (the old one stays, the error is reported)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confd_render_support import FILES, NODE, make_renderer

from calico import birdctl
from calico.api.io import load_documents
from calico.confd.daemon import Confd
from calico.datastore.client import Client
from calico.datastore.daemon_config import daemon_datastore_config
from calico.datastore.factory import open_backend

pytestmark = pytest.mark.skipif(shutil.which("bird") is None, reason="BIRD not installed")

CLUSTER = """
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: kube-master}
spec: {bgp: {ipv4Address: 10.192.0.2/16}}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: kube-node-1}
spec: {bgp: {ipv4Address: 10.192.0.3/16}}
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: pool1}
spec: {cidr: 192.168.0.0/16, ipipMode: Never}
"""


def _apply(client: Client, text: str) -> None:
    for res in load_documents(text):
        client.apply(res)


@pytest.fixture
def client(datastore_env: dict[str, str]) -> Iterator[Client]:
    backend = open_backend(daemon_datastore_config(env=datastore_env))
    c = Client(backend)
    yield c
    for kind in (
        "BGPPeer",
        "BGPConfiguration",
        "Node",
        "IPPool",
        "BlockAffinity",
        "FelixConfiguration",
    ):
        for res in c.list(kind).items:
            c.delete(kind, res.metadata.name, res.metadata.namespace)
    backend.close()


def _wait(cond, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _settled(renderer, quiet: float = 0.5, timeout: float = 15.0) -> int:  # type: ignore[no-untyped-def]
    """The render count once the daemon has been idle for ``quiet`` seconds: one change can
    dirty several templates, and a file appearing only means its own template is done."""
    deadline = time.monotonic() + timeout
    last, since = renderer.renders, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if renderer.renders != last:
            last, since = renderer.renders, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return last
    raise AssertionError("confd never went idle")


def test_run_once_command(client: Client, datastore_env: dict[str, str], tmp_path: Path) -> None:
    """``calico component confd --run-once`` renders the six files and exits 0."""
    _apply(client, CLUSTER)
    confdir = tmp_path / "confd"
    make_renderer(confdir, {})
    for toml in (confdir / "conf.d").glob("*.toml"):  # no BIRD to reload here
        toml.write_text(
            "\n".join(
                line for line in toml.read_text().splitlines() if not line.startswith("reload_cmd")
            )
        )
    env = {
        **os.environ,
        **datastore_env,
        "NODENAME": NODE,
        "CALICO_CONFD_STATUS_FILE": str(tmp_path / "status.json"),
    }
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "calico.cli.main",
            "component",
            "confd",
            "--run-once",
            "--confdir",
            str(confdir),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    for name in FILES:
        assert (confdir / "config" / name).is_file()
    assert "protocol bgp Mesh_10_192_0_3" in (confdir / "config" / "bird.cfg").read_text()
    assert birdctl.read_status(tmp_path / "status.json") == {}


def test_run_once_needs_nodename(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NODENAME"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "calico.cli.main",
            "component",
            "confd",
            "--run-once",
            "--confdir",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    assert "NODENAME is not set" in res.stderr
    assert "Traceback" not in res.stderr


def test_daemon_rerenders_only_on_relevant_change(
    client: Client, datastore_env: dict[str, str], tmp_path: Path
) -> None:
    _apply(client, CLUSTER)
    confdir = tmp_path / "confd"
    renderer = make_renderer(confdir, {"NODENAME": NODE})
    backend = open_backend(daemon_datastore_config(env=datastore_env))
    confd = Confd(backend, renderer, NODE, {"NODENAME": NODE}, status_path=tmp_path / "st.json")
    thread = threading.Thread(target=confd.run, kwargs={"poll": 0.05}, daemon=True)
    thread.start()
    bird_cfg = confdir / "config" / "bird.cfg"
    try:
        _wait(lambda: all((confdir / "config" / n).exists() for n in FILES))
        first = _settled(renderer)
        assert first == 6
        # A relevant change: a third node joins the mesh -> bird.cfg gains a peer.
        _apply(client, CLUSTER.replace("kube-node-1", "kube-node-9").replace("0.3/16", "0.9/16"))
        _wait(lambda: "Mesh_10_192_0_9" in bird_cfg.read_text())
        after_node = _settled(renderer)
        # A node joining changes /bgp/v1/host, which every template watches.
        assert after_node == first + 6
        # Unrelated: a Node label no selector uses, another node's block affinity, a
        # FelixConfiguration (not a BGP syncer kind at all).
        _apply(
            client, CLUSTER.replace("{name: kube-node-1}", "{name: kube-node-1, labels: {x: y}}")
        )
        _apply(
            client,
            """
apiVersion: projectcalico.org/v3
kind: BlockAffinity
metadata: {name: kube-node-1-10-3-0-0-26}
spec: {node: kube-node-1, cidr: 10.3.0.0/26, state: confirmed, deleted: "false"}
---
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: default}
spec: {logSeverityScreen: Debug}
""",
        )
        time.sleep(1.0)
        assert renderer.renders == after_node
        # A config BIRD rejects: an ignored interface with a quote breaks the direct protocol.
        before = bird_cfg.read_text()
        _apply(
            client,
            """
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {ignoredInterfaces: ['bad"name']}
""",
        )
        status = tmp_path / "st.json"
        _wait(lambda: "bird" in birdctl.read_status(status))
        assert bird_cfg.read_text() == before
        assert "bird.cfg" in birdctl.read_status(status)["bird"]
        # Fixing it installs the new config and clears the error (the retry loop picks it up).
        _apply(
            client,
            """
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {ignoredInterfaces: ['eth9']}
""",
        )
        _wait(lambda: '-"eth9"' in bird_cfg.read_text())
        _wait(lambda: birdctl.read_status(status) == {})
    finally:
        confd.stop_event.set()
        thread.join(10)
        backend.close()


@pytest.mark.parametrize(
    ("extra", "confdir", "message"),
    [
        ({"DATASTORE_TYPE": "bogus"}, None, "unknown datastore type 'bogus'"),
        ({}, "/nonexistent-confd", "no template resources (*.toml) in /nonexistent-confd/conf.d"),
    ],
)
def test_bad_setup_is_one_clear_error(
    extra: dict[str, str], confdir: str | None, message: str, tmp_path: Path
) -> None:
    if confdir is None:
        confdir = str(tmp_path / "confd")
        make_renderer(Path(confdir), {})
    env = {**os.environ, "NODENAME": NODE, "CALICO_DATASTORE_PATH": str(tmp_path / "c.db"), **extra}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "calico.cli.main",
            "component",
            "confd",
            "--run-once",
            "--confdir",
            confdir,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    assert message in res.stderr and "Traceback" not in res.stderr
