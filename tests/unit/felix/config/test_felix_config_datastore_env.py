"""Felix's datastore: libcalico environment < felix.cfg < FELIX_* (felix_datastore_config)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from calico.datastore import DatastoreConfigError
from calico.datastore.config import DatastoreConfig
from calico.felix.config import felix_datastore_config, local_sources, resolve
from calico.felix.daemon import FelixDaemon


def felix(env: dict[str, str], cfg_text: str | None, tmp_path: Path) -> DatastoreConfig:
    cfg = tmp_path / "felix.cfg"
    if cfg_text is not None:
        cfg.write_text(cfg_text)
    config = resolve(local_sources(env, str(cfg)), hostname="h1")
    return felix_datastore_config(config, env)


def test_libcalico_local_only(tmp_path: Path) -> None:
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": "/x/c.db"}
    ds = felix(env, None, tmp_path)
    assert (ds.datastore_type, ds.local_path) == ("local", "/x/c.db")


@pytest.mark.parametrize("prefix", ["", "CALICO_"])
def test_libcalico_etcd_only(tmp_path: Path, prefix: str) -> None:
    env = {f"{prefix}DATASTORE_TYPE": "etcdv3", f"{prefix}ETCD_ENDPOINTS": "http://e:2379"}
    ds = felix(env, None, tmp_path)
    assert (ds.datastore_type, ds.etcd_endpoints) == ("etcdv3", ("http://e:2379",))


def test_felix_env_overrides_libcalico(tmp_path: Path) -> None:
    env = {
        "DATASTORE_TYPE": "etcdv3",
        "ETCD_ENDPOINTS": "http://e:2379",
        "FELIX_DATASTORETYPE": "local",
        "FELIX_CALICODATASTOREPATH": "/felix.db",
    }
    ds = felix(env, None, tmp_path)
    assert (ds.datastore_type, ds.local_path) == ("local", "/felix.db")
    assert "DatastoreType from FELIX_* environment" in ds.source


def test_felix_env_endpoints_override_libcalico(tmp_path: Path) -> None:
    env = {**{"DATASTORE_TYPE": "local"}, "FELIX_ETCDENDPOINTS": "http://f:1"}
    ds = felix(env, None, tmp_path)
    assert (ds.datastore_type, ds.etcd_endpoints) == ("etcdv3", ("http://f:1",))


def test_config_file_overrides_libcalico(tmp_path: Path) -> None:
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": "/env.db"}
    text = "[global]\nEtcdEndpoints = http://file:1\nEtcdCaFile = /ca.pem\n"
    ds = felix(env, text, tmp_path)
    assert (ds.datastore_type, ds.etcd_endpoints) == ("etcdv3", ("http://file:1",))
    assert ds.etcd_ca_cert_file == "/ca.pem"
    assert "EtcdEndpoints from Felix config file" in ds.source


def test_felix_env_beats_config_file(tmp_path: Path) -> None:
    env = {"FELIX_ETCDENDPOINTS": "http://env:2"}
    ds = felix(env, "[global]\nEtcdEndpoints = http://file:1\n", tmp_path)
    assert ds.etcd_endpoints == ("http://env:2",)


def test_config_file_path_beats_libcalico_path(tmp_path: Path) -> None:
    env = {"CALICO_DATASTORE_PATH": "/env.db"}
    ds = felix(env, "CalicoDatastorePath = /file.db\n", tmp_path)
    assert ds.local_path == "/file.db"


def test_datastore_felix_configuration_cannot_override(tmp_path: Path) -> None:
    # The datastore's FelixConfiguration is never a source for the connection (local-only).
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": "/env.db"}
    config = resolve(local_sources(env, str(tmp_path / "none.cfg")), hostname="h1")
    config = config.with_datastore({"CalicoDatastorePath": "/global.db"}, {}, {})
    assert felix_datastore_config(config, env).local_path == "/env.db"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FELIX_ETCDENDPOINTS": "ftp://x:1"}, "invalid EtcdEndpoints 'ftp://x:1'"),
        ({"FELIX_ETCDADDR": "nope"}, "invalid EtcdAddr 'nope' (FELIX_* environment)"),
        ({"ETCD_ENDPOINTS": "ftp://x:1"}, "invalid etcd endpoint 'ftp://x:1'"),
        ({"DATASTORE_TYPE": "etcdv3"}, "needs etcd endpoints"),
        ({"CALICO_K8S_DISABLE_NODE_POLL": "nah"}, "CALICO_K8S_DISABLE_NODE_POLL"),
    ],
)
def test_bad_values_raise(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(DatastoreConfigError) as info:
        felix(env, None, tmp_path)
    assert message in str(info.value)


def test_daemon_exits_1_on_bad_datastore_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DATASTORE_TYPE", "etcdv3")
    monkeypatch.delenv("ETCD_ENDPOINTS", raising=False)
    monkeypatch.delenv("CALICO_ETCD_ENDPOINTS", raising=False)
    monkeypatch.setenv("FELIX_FELIXHOSTNAME", "h1")
    monkeypatch.setenv("FELIX_HEALTHENABLED", "false")
    with caplog.at_level(logging.ERROR):
        assert FelixDaemon(str(tmp_path / "felix.cfg")).run() == 1
    assert "Invalid datastore configuration, exiting" in caplog.text
    assert "needs etcd endpoints" in caplog.text
