"""confd through a real Typha (``CONFD_``/``FELIX_``/``CALICO_TYPHA*``, upstream's names): its
``--run-once`` renders byte-for-byte what a direct datastore connection renders, with no
datastore reachable, and keeps only this node's block affinities out of Typha's all-hosts
bgp stream."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typha_helpers import TyphaProcess, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit"))
from confd_render_support import FILES, NODE, make_renderer

from calico.api.io import load_documents
from calico.datastore.client import Client
from calico.datastore.daemon_config import daemon_datastore_config
from calico.datastore.factory import open_backend

CLUSTER = f"""
apiVersion: projectcalico.org/v3
kind: Node
metadata: {{name: {NODE}}}
spec: {{bgp: {{ipv4Address: 10.192.0.2/16}}}}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {{name: kube-node-1}}
spec: {{bgp: {{ipv4Address: 10.192.0.3/16}}}}
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {{name: pool1}}
spec: {{cidr: 192.168.0.0/16, ipipMode: Never}}
---
apiVersion: projectcalico.org/v3
kind: BlockAffinity
metadata: {{name: {NODE}-192-168-1-0-26}}
spec: {{node: {NODE}, cidr: 192.168.1.0/26, state: confirmed, deleted: "false"}}
---
apiVersion: projectcalico.org/v3
kind: BlockAffinity
metadata: {{name: kube-node-1-192-168-2-0-26}}
spec: {{node: kube-node-1, cidr: 192.168.2.0/26, state: confirmed, deleted: "false"}}
"""


def _confdir(path: Path) -> Path:
    make_renderer(path, {})
    for toml in (path / "conf.d").glob("*.toml"):  # no BIRD to reload here
        lines = toml.read_text().splitlines()
        toml.write_text("\n".join(x for x in lines if not x.startswith("reload_cmd")))
    return path


def _run_once(confdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ETCD_", "DATASTORE_", "CALICO_", "CONFD_", "FELIX_"))
    }
    cmd = [sys.executable, "-m", "calico.cli.main", "component", "confd", "--run-once"]
    return subprocess.run(
        [*cmd, "--confdir", str(confdir)],
        # The status file beside the confdir, not the host's /var/run/calico.
        env={
            **base,
            "NODENAME": NODE,
            "CALICO_CONFD_STATUS_FILE": str(confdir / "status.json"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.fixture(scope="module")
def typha(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    work = tmp_path_factory.mktemp("confd-typha")
    ds = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(work / "calico.db")}
    backend = open_backend(daemon_datastore_config(env=ds))
    client = Client(backend)
    for res in load_documents(CLUSTER):
        client.apply(res)
    backend.close()
    proc = TyphaProcess(work, ds)
    proc.start()
    try:
        proc.wait_ready()
        yield proc, ds
    finally:
        proc.kill()


@pytest.mark.parametrize("prefix", ["CONFD_", "FELIX_", "CALICO_"])
def test_run_once_through_typha_renders_what_direct_renders(
    typha, prefix: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    proc, ds = typha
    direct = _run_once(_confdir(tmp_path / "direct"), ds)
    assert direct.returncode == 0, direct.stderr
    dead_etcd = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": f"http://127.0.0.1:{free_port()}"}
    via = _run_once(_confdir(tmp_path / "typha"), {**dead_etcd, f"{prefix}TYPHAADDR": proc.addr})
    assert via.returncode == 0, via.stderr
    assert f"Syncing through Typha at {proc.addr}" in via.stderr
    for name in FILES:
        want = (tmp_path / "direct" / "config" / name).read_text()
        assert (tmp_path / "typha" / "config" / name).read_text() == want, name
    ipam = (tmp_path / "typha" / "config" / "bird_ipam.cfg").read_text()
    aggr = (tmp_path / "typha" / "config" / "bird_aggr.cfg").read_text()
    assert "192.168.1.0/26" in aggr  # this node's block
    assert "192.168.2.0/26" not in aggr + ipam  # another host's, dropped from Typha's stream
    assert (
        "protocol bgp Mesh_10_192_0_3" in (tmp_path / "typha" / "config" / "bird.cfg").read_text()
    )


def test_confd_prefix_wins_and_bad_typha_setting_is_one_clear_error(typha, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc, _ = typha
    # CONFD_ beats FELIX_ (a dead address): the run succeeds only through the CONFD_ one
    good = _run_once(
        _confdir(tmp_path / "a"),
        {"CONFD_TYPHAADDR": proc.addr, "FELIX_TYPHAADDR": f"127.0.0.1:{free_port()}"},
    )
    assert good.returncode == 0, good.stderr
    bad = _run_once(
        _confdir(tmp_path / "b"),
        {"CONFD_TYPHAADDR": proc.addr, "FELIX_TYPHAREADTIMEOUT": "soon"},
    )
    assert bad.returncode == 1
    assert "FELIX_TYPHAREADTIMEOUT='soon' is not a number of seconds" in bad.stderr
    assert "Traceback" not in bad.stderr
