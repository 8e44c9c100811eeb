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


MODULES_AT_EXIT = """
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["calicoctl", *sys.argv[1:]]
from calico.cli.main import main
sys.exit(main())
"""


def test_get_of_one_kind_imports_only_that_kinds_models(tmp_path: Path) -> None:
    """``get wep`` as a table: only the endpoint models (an alias is resolved from the kind
    table), no PyYAML (printer: YAML output only), no importlib.metadata (pydantic's plugin
    loader stand-in); ``-o yaml`` still quotes as Go does (design/performance.md "Start-up")."""
    import json
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "DATASTORE_TYPE": "local",
        "CALICO_DATASTORE_PATH": str(tmp_path / "c.db"),
        "MODULES_OUT": str(tmp_path / "modules.json"),
    }
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    wep = (
        "apiVersion: projectcalico.org/v3\nkind: WorkloadEndpoint\nmetadata:\n  name: "
        "node1-k8s-pod1-eth0\n  namespace: ns1\n  labels: {app: 'yes'}\nspec:\n  node: node1\n"
        "  orchestrator: k8s\n  pod: pod1\n  endpoint: eth0\n  interfaceName: cali1\n"
        "  ipNetworks: [10.0.0.1/32]\n"
    )
    r = run_bin(env, "apply", "-f", "-", stdin=wep)
    assert r.code == 0, r

    def ctl(*args: str) -> tuple[str, list[str]]:
        proc = subprocess.run(
            [sys.executable, "-c", MODULES_AT_EXIT, *args],
            env=env,
            cwd=tmp_path,  # sys.path[0] is the cwd: not the checkout (its egg-info)
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return proc.stdout, json.loads((tmp_path / "modules.json").read_text())

    out, loaded = ctl("get", "wep", "-n", "ns1")
    assert "pod1" in out and "10.0.0.1/32" in out
    assert "calico.api.endpoints" in loaded
    unwanted = ("yaml", "importlib.metadata", "calico.api.bgp", "calico.api.ipam",
                "calico.api.felixconfig", "calico.api.cluster")  # fmt: skip
    assert [m for m in unwanted if m in loaded] == []
    out, loaded = ctl("get", "wep", "-n", "ns1", "-o", "yaml")
    assert "yaml" in loaded and 'app: "yes"' in out
