"""The installed ``calicoctl`` script end to end: exit codes, streams, config sources."""

from __future__ import annotations

import time
from pathlib import Path

from ctl_helpers import Ctl, run_bin

DATA = Path(__file__).resolve().parent / "data"


def test_script_create_get_delete(ctl_bin: Ctl) -> None:
    r = ctl_bin("create", "-f", str(DATA / "pools.yaml"))
    assert (r.code, r.out, r.err) == (0, "Successfully created 2 'IPPool' resource(s)\n", "")
    r = ctl_bin("get", "ippool", "-o", "wide")
    assert r.code == 0 and r.out.startswith("NAME    CIDR          NAT     IPIPMODE")
    r = ctl_bin("create", "-f", "-", stdin=(DATA / "pools.yaml").read_text())
    assert r.code == 1 and r.out == ""
    assert r.err.startswith("failed to create any 'IPPool' resources: [resource already exists")
    assert ctl_bin("delete", "ippool", "pool1", "pool2").code == 0


def test_datastore_down_fails_fast_with_one_message() -> None:
    env = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://127.0.0.1:1"}
    for args in (["get", "ippool"], ["apply", "-f", str(DATA / "pools.yaml")]):
        start = time.monotonic()
        r = run_bin(env, *args)
        assert time.monotonic() - start < 10
        assert r.code == 1 and r.out == ""
        assert r.err.startswith("failed to connect to the datastore: cannot connect to etcd at ")
        assert "http://127.0.0.1:1" in r.err and "Traceback" not in r.err
        assert r.err.count("\n") == 1
    r = run_bin(env, "version")
    assert r.code == 1 and r.out.startswith("Client Version:")
    assert r.err.startswith("Unable to retrieve Cluster Version or Type: ")


def test_config_file_wins_over_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "calicoctl.cfg"
    db = tmp_path / "from-file.db"
    cfg.write_text(
        "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nmetadata: {}\n"
        f"spec:\n  datastoreType: local\n  localDatastorePath: {db}\n"
    )
    env = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://127.0.0.1:1"}
    r = run_bin(env, "apply", "-c", str(cfg), "-f", str(DATA / "pools.yaml"))
    assert r.code == 0, r
    assert db.exists()
    r = run_bin(env, "get", "ippool", "--config", str(cfg))
    assert "pool1" in r.out
    r = run_bin(env, "get", "ippool", "-c", str(tmp_path / "missing.cfg"))
    assert r.code == 1 and "missing.cfg" in r.err


def test_usage_errors_and_log_level(tmp_path: Path) -> None:
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "c.db")}
    r = run_bin(env, "-l", "loud", "get", "ippool")
    assert (r.code, r.err) == (
        1,
        "unknown log level: loud, expected one of: panic, fatal, error, warn, info, debug\n",
    )
    r = run_bin(env, "create")
    assert r.code == 1 and "--filename" in r.err
    r = run_bin(env, "get", "ippool", "-l", "debug")
    assert r.code == 0
    r = run_bin(env, "--help")
    assert r.code == 0 and "datastore" in r.out and "patch" in r.out
