"""Helpers for driving calicoctl's real command line against each datastore.

``ctl`` runs ``calico ctl ...`` in-process with click's runner (fast); ``ctl_bin`` runs the
installed ``calicoctl`` console script in a subprocess (the exact entry point users run). Both are
parametrised over ``local`` (a fresh SQLite file per test) and ``etcdv3`` (the shared test etcd
from ``tests/integration/datastore/etcd_fixture.py``; every key under ``/calico/`` is deleted
before each test, which leaves the datastore suite's ``/calico-test-*`` prefixes alone).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

HERE = Path(__file__).resolve().parent
DATASTORE_TESTS = HERE.parent / "datastore"
if str(DATASTORE_TESTS) not in sys.path:
    sys.path.insert(0, str(DATASTORE_TESTS))

from calico.cli.root import cli  # noqa: E402
from calico.datastore.etcd import EtcdBackend  # noqa: E402

CALICOCTL = Path(sys.executable).parent / "calicoctl"
ENV_KEYS = (
    "DATASTORE_TYPE",
    "CALICO_DATASTORE_TYPE",
    "ETCD_ENDPOINTS",
    "CALICO_ETCD_ENDPOINTS",
    "CALICO_DATASTORE_PATH",
    "ETCD_KEY_FILE",
    "ETCD_CERT_FILE",
    "ETCD_CA_CERT_FILE",
    "KUBECONFIG",
)


@dataclass
class Run:
    code: int
    out: str
    err: str

    def __repr__(self) -> str:
        return f"Run(code={self.code}, out={self.out!r}, err={self.err!r})"


def wipe_etcd(endpoints: str) -> None:
    """Delete every key under /calico/ (this suite's keyspace) on the shared test etcd."""
    backend = EtcdBackend(endpoints)
    try:
        for kv in backend.list("/calico/").kvs:
            backend.delete(kv.key)
    finally:
        backend.close()


def datastore_env(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    if kind == "local":
        return {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "calico.db")}
    server = request.getfixturevalue("etcd_server")
    wipe_etcd(server.endpoints)
    return {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": server.endpoints}


def invoke(env: Mapping[str, str], *args: str, stdin: str | None = None) -> Run:
    """``calico ctl ARGS`` in-process with ``env`` as the datastore environment."""
    full_env: dict[str, str | None] = dict.fromkeys(ENV_KEYS)
    full_env.update(env)
    result = CliRunner().invoke(cli, ["ctl", *args], input=stdin, env=full_env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


def run_bin(
    env: Mapping[str, str], *args: str, stdin: str | None = None, timeout: float = 30
) -> Run:
    """The installed ``calicoctl`` script in a subprocess."""
    full = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and k != "CNI_COMMAND"}
    full.update(env)
    proc = subprocess.run(
        [str(CALICOCTL), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
        check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


Ctl = Callable[..., Run]


def set_cluster_version(env: Mapping[str, str], version: str) -> None:
    """Set ClusterInformation's calicoVersion as calico/node does (calicoctl may not)."""
    from calico.datastore import config as dsconfig
    from calico.datastore.client import Client
    from calico.datastore.factory import open_backend

    backend = open_backend(dsconfig.from_env(dict(env)))
    try:
        client = Client(backend)
        info = client.get("ClusterInformation", "default")
        spec = info.spec.model_copy(update={"calico_version": version})  # type: ignore[attr-defined]
        client.update(info.model_copy(update={"spec": spec}))
    finally:
        backend.close()
