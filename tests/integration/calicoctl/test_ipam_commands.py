"""`calicoctl ipam ...` through the installed script, on the local datastore."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from calico.datastore.client import Client
from calico.datastore.local import LocalBackend
from calico.ipam import IPAMClient

CALICOCTL = str(Path(sys.executable).parent / "calicoctl")

POOL = (
    "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p1}\n"
    "spec: {cidr: 10.5.0.0/24}\n"
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = dict(os.environ)
    e.pop("CNI_COMMAND", None)
    e.update(DATASTORE_TYPE="local", CALICO_DATASTORE_PATH=str(tmp_path / "calico.db"))
    return e


def ctl(env: dict[str, str], *args: str, stdin: str | None = None):
    return subprocess.run(
        [CALICOCTL, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
    )


def test_ipam_show_release_configure(env: dict[str, str]) -> None:
    assert ctl(env, "create", "-f", "-", stdin=POOL).returncode == 0
    backend = LocalBackend(env["CALICO_DATASTORE_PATH"])
    try:
        v4, _ = IPAMClient(Client(backend)).auto_assign(3, 0, "h1", {}, "node1")
    finally:
        backend.close()
    addrs = [str(a.ip) for a in v4]

    res = ctl(env, "ipam", "show")
    assert res.returncode == 0, res.stderr
    assert "| IP Pool  | 10.5.0.0/24 |       256 |     3 (1%) |" in res.stdout

    res = ctl(env, "ipam", "show", "--ip", addrs[0])
    assert res.returncode == 0 and "in use" in res.stdout.lower()

    res = ctl(env, "ipam", "release", "--ip", addrs[1])
    assert (res.returncode, res.stdout.strip()) == (
        0,
        f"Successfully released IP address {addrs[1]}",
    )
    res = ctl(env, "ipam", "release", "--ip", addrs[1])
    assert res.returncode == 1
    assert res.stderr.strip() == f"IP address {addrs[1]} is not assigned"  # bare, no "Error:"

    res = ctl(env, "ipam", "configure", "--strictaffinity=true")
    assert res.returncode == 0 and "StrictAffinity" in res.stdout
    res = ctl(env, "ipam", "show", "--show-configuration")
    assert "| StrictAffinity               | true  |" in res.stdout

    res = ctl(env, "ipam", "check")
    assert res.returncode == 0
    assert "Found 1 IPAM blocks." in res.stdout


def test_ipam_datastore_down_is_one_line(tmp_path: Path) -> None:
    e = dict(os.environ, DATASTORE_TYPE="etcdv3", ETCD_ENDPOINTS="http://127.0.0.1:1")
    res = ctl(e, "ipam", "show")
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    assert "127.0.0.1:1" in res.stderr
