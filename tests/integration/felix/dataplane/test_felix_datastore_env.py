"""``calico component felix`` configured with ONLY the libcalico datastore variables (as
calico-node's manifests configure it): no ``FELIX_DATASTORETYPE``/``FELIX_ETCDENDPOINTS``/
``FELIX_CALICODATASTOREPATH``. It must open the datastore those variables name and program a
workload from it — on a local file at a non-default path and on a real etcd (run inside the
Felix host namespace, so Felix reaches it on that namespace's loopback). A bad value exits 1
with a clear message.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from felix_dp_fixtures import need_root
from harness import (
    CALICO,
    POOL,
    Datastore,
    Felix,
    Workload,
    eventually,
    in_ns,
    namespace_profile,
    netns,
    nft_table,
    wep_doc,
    workload,
)
from netns_support import NetnsWorker

from calico.datastore.etcd.server import ETCD_BINARY, EtcdServer

pytestmark = pytest.mark.root

CALICOCTL = str(Path(CALICO).parent / "calicoctl")
# Felix's own datastore parameters: none of them may reach this Felix.
FELIX_DATASTORE_VARS = {
    "FELIX_DATASTORETYPE",
    "FELIX_CALICODATASTOREPATH",
    "FELIX_ETCDENDPOINTS",
    "FELIX_ETCDADDR",
    "FELIX_ETCDSCHEME",
    "FELIX_ETCDKEYFILE",
    "FELIX_ETCDCERTFILE",
    "FELIX_ETCDCAFILE",
}
LIBCALICO_NAMES = (
    "DATASTORE_TYPE",
    "DATASTORE_PATH",
    "ETCD_ENDPOINTS",
    "ETCD_KEY_FILE",
    "ETCD_CERT_FILE",
    "ETCD_CA_CERT_FILE",
    "KUBECONFIG",
)


def clean_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without any datastore setting (Felix's or libcalico's, either spelling)."""
    drop = set(FELIX_DATASTORE_VARS)
    drop |= set(LIBCALICO_NAMES) | {f"CALICO_{n}" for n in LIBCALICO_NAMES}
    return {k: v for k, v in env.items() if k.upper() not in drop and not k.startswith("K8S_")}


@dataclass
class LibcalicoFelix(Felix):
    """The harness's Felix, but its datastore comes from ``libcalico`` variables only."""

    libcalico: dict[str, str] = field(default_factory=dict)

    def full_env(self) -> dict[str, str]:
        env = clean_env(super().full_env())
        env.update(self.libcalico)
        assert not FELIX_DATASTORE_VARS & {k.upper() for k in env}
        return env


def route_dev(host: str, ip: str) -> str:
    """The device of the route to ``ip`` in ``host`` ("" when there is none)."""
    routes = json.loads(in_ns(host, "ip", "-j", "route", "show", ip).stdout or "[]")
    return str(routes[0].get("dev", "")) if routes else ""


def workload_chain(host: str, w: Workload) -> bool:
    """Felix's to-workload chain for ``w``'s interface exists in the ``inet calico`` table."""
    want = f"filter-cali-tw-{w.iface}"
    return any("chain" in o and o["chain"]["name"] == want for o in nft_table(host))


def assert_programs(felix: Felix, host: str, w: Workload) -> None:
    felix.wait_ready()
    eventually(lambda: route_dev(host, w.ip), w.iface, timeout=30)
    eventually(lambda: workload_chain(host, w), True, timeout=30)


# --- local datastore ----------------------------------------------------------------------------


def test_local_datastore_from_libcalico_variables_only(tmp_path: Path) -> None:
    need_root()
    db = tmp_path / "elsewhere" / "cluster.db"  # not Felix's default path
    db.parent.mkdir()
    with netns("fxenvl") as host:
        ds = Datastore(str(db))
        felix = LibcalicoFelix(
            host,
            tmp_path,
            libcalico={"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(db)},
        )
        try:
            ds.apply({"kind": "IPPool", "metadata": {"name": "pool1"}, "spec": {"cidr": POOL}})
            namespace_profile(ds, "ns1")
            with workload(host, ds, "web", "10.65.0.7") as w:
                felix.start()
                assert_programs(felix, host, w)
                assert f"Datastore: local {db}" in felix.log()
        finally:
            felix.kill()
            ds.close()


# --- etcd ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def etcd_in(host: str, data_dir: Path) -> Iterator[EtcdServer]:
    """A real etcd started from a thread inside ``host``: it listens on that loopback."""
    if shutil.which(ETCD_BINARY) is None:
        pytest.skip(f"no {ETCD_BINARY!r} binary (apt install etcd-server)")
    worker = NetnsWorker(host)
    data_dir.mkdir(parents=True, exist_ok=True)
    server = EtcdServer(str(data_dir))
    try:
        worker.call(server.start)
        yield server
    finally:
        server.cleanup()
        worker.close()


def calicoctl_apply(host: str, env: dict[str, str], docs: list[dict[str, Any]], tmp: Path) -> None:
    """Write ``docs`` with the real calicoctl, from inside ``host`` (where etcd is)."""
    path = tmp / "resources.json"
    items = [{"apiVersion": "projectcalico.org/v3", **d} for d in docs]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    in_ns(host, CALICOCTL, "apply", "-f", str(path), env={**clean_env(dict(os.environ)), **env})


def test_etcd_from_libcalico_variables_only(tmp_path: Path) -> None:
    need_root()
    with netns("fxenve") as host, etcd_in(host, tmp_path / "etcd") as etcd:
        libcalico = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": etcd.endpoints}
        felix = LibcalicoFelix(host, tmp_path, libcalico=libcalico)
        try:
            with workload(host, None, "web", "10.65.0.8") as w:
                pool = {"kind": "IPPool", "metadata": {"name": "pool1"}, "spec": {"cidr": POOL}}
                profile = {
                    "kind": "Profile",
                    "metadata": {"name": "kns.ns1"},
                    "spec": {"ingress": [{"action": "Allow"}], "egress": [{"action": "Allow"}]},
                }
                calicoctl_apply(host, libcalico, [pool, profile, wep_doc(w)], tmp_path)
                felix.start()
                assert_programs(felix, host, w)
                assert f"Datastore: etcdv3 {etcd.endpoints}" in felix.log()
                assert not (tmp_path / "calico.db").exists()  # the harness's local default
        finally:
            felix.kill()


# --- bad values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("libcalico", "message"),
    [
        ({"DATASTORE_TYPE": "etcdv3"}, "needs etcd endpoints"),
        ({"CALICO_DATASTORE_TYPE": "consul"}, "unknown datastore type 'consul'"),
        ({"ETCD_ENDPOINTS": "ftp://10.0.0.1:2379"}, "invalid etcd endpoint 'ftp://10.0.0.1:2379'"),
        ({"ETCD_USERNAME": "admin"}, "ETCD_USERNAME is not supported"),
    ],
)
def test_bad_libcalico_values_exit_1_with_a_clear_error(
    tmp_path: Path, libcalico: dict[str, str], message: str
) -> None:
    need_root()
    with netns("fxenvb") as host:
        felix = LibcalicoFelix(host, tmp_path, libcalico=libcalico)
        felix.start()
        assert felix.wait_exit(timeout=30) == 1
        out = felix.log()
        assert "Invalid datastore configuration, exiting" in out
        assert message in out
        assert "Traceback" not in out
        assert nft_table(host) == []
