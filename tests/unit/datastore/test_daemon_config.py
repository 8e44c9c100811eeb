"""daemon_datastore_config: the libcalico environment, then a daemon's own parameter layers."""

from __future__ import annotations

import pytest

from calico.datastore import DatastoreConfigError
from calico.datastore.config import DEFAULT_LOCAL_PATH, DatastoreConfig
from calico.datastore.daemon_config import DAEMON_PARAMS, daemon_datastore_config

ETCD_ENV = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://env:2379"}


def load(env: dict[str, str], *layers: dict[str, str]) -> DatastoreConfig:
    named = [(f"layer{i}", layer) for i, layer in enumerate(layers)]
    return daemon_datastore_config(*named, env=env)


# -- the environment alone ---------------------------------------------------------------------


def test_nothing_set_is_the_default_local_file() -> None:
    config = load({})
    assert (config.datastore_type, config.local_path) == ("local", DEFAULT_LOCAL_PATH)


def test_environment_alone_local() -> None:
    config = load({"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": "/d/c.db"})
    assert (config.datastore_type, config.local_path) == ("local", "/d/c.db")


@pytest.mark.parametrize("prefix", ["", "CALICO_"])
def test_environment_alone_etcd_with_tls(prefix: str) -> None:
    env = {
        f"{prefix}DATASTORE_TYPE": "etcdv3",
        f"{prefix}ETCD_ENDPOINTS": "https://a:2379,https://b:2379",
        f"{prefix}ETCD_KEY_FILE": "/k",
        f"{prefix}ETCD_CERT_FILE": "/c",
        f"{prefix}ETCD_CA_CERT_FILE": "/ca",
    }
    config = load(env, {"LogSeverityScreen": "debug"})  # unrelated daemon params are skipped
    assert config.datastore_type == "etcdv3"
    assert config.etcd_endpoints == ("https://a:2379", "https://b:2379")
    assert (config.etcd_key_file, config.etcd_cert_file, config.etcd_ca_cert_file) == (
        "/k",
        "/c",
        "/ca",
    )
    assert f"{prefix}ETCD_ENDPOINTS" in config.source


def test_kubernetes_environment_is_carried() -> None:
    env = {"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/kc", "K8S_API_ENDPOINT": "https://k"}
    config = load(env)
    assert (config.datastore_type, config.kubeconfig) == ("kubernetes", "/kc")
    assert config.extra == {"k8sAPIEndpoint": "https://k"}


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CALICO_DATASTORE_TYPE", "CALICO_ETCD_ENDPOINTS", "ETCD_ENDPOINTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATASTORE_TYPE", "local")
    monkeypatch.setenv("CALICO_DATASTORE_PATH", "/from/os.db")
    assert daemon_datastore_config().local_path == "/from/os.db"


# -- each daemon parameter overrides the environment -------------------------------------------


def test_datastore_type_overrides() -> None:
    config = load({"DATASTORE_TYPE": "etcdv3"}, {"DatastoreType": "LOCAL"})
    assert config.datastore_type == "local"
    assert "DatastoreType from layer0" in config.source


def test_etcd_endpoints_override_and_select_etcd() -> None:
    config = load({"DATASTORE_TYPE": "local"}, {"EtcdEndpoints": "http://d1:1, http://d2:2"})
    assert config.datastore_type == "etcdv3"
    assert config.etcd_endpoints == ("http://d1:1", "http://d2:2")


def test_etcd_endpoints_select_etcd_even_over_the_daemons_own_type() -> None:
    # As upstream: the endpoints override is applied after DatastoreType.
    config = load({}, {"DatastoreType": "kubernetes", "EtcdEndpoints": "http://d:1"})
    assert config.datastore_type == "etcdv3"


def test_etcd_addr_and_scheme_make_the_endpoint() -> None:
    config = load(ETCD_ENV, {"EtcdAddr": "10.0.0.9:4001", "EtcdScheme": "HTTPS"})
    assert config.etcd_endpoints == ("https://10.0.0.9:4001",)
    assert load({}, {"EtcdAddr": "h:1"}).etcd_endpoints == ("http://h:1",)
    assert load({}, {"EtcdAddr": "h:1"}).datastore_type == "etcdv3"


def test_etcd_endpoints_win_over_etcd_addr_whatever_the_layer() -> None:
    # Merged per parameter first (as upstream resolves each one), then applied.
    config = load({}, {"EtcdEndpoints": "http://file:1"}, {"EtcdAddr": "env:2"})
    assert config.etcd_endpoints == ("http://file:1",)
    assert "EtcdAddr" not in config.source


def test_scheme_alone_changes_nothing() -> None:
    assert load(ETCD_ENV, {"EtcdScheme": "https"}).etcd_endpoints == ("http://env:2379",)


@pytest.mark.parametrize(
    ("param", "attr"),
    [
        ("EtcdKeyFile", "etcd_key_file"),
        ("EtcdCertFile", "etcd_cert_file"),
        ("EtcdCaFile", "etcd_ca_cert_file"),
    ],
)
def test_tls_files_override(param: str, attr: str) -> None:
    env = {**ETCD_ENV, "ETCD_KEY_FILE": "/ek", "ETCD_CERT_FILE": "/ec", "ETCD_CA_CERT_FILE": "/eca"}
    config = load(env, {param: "/daemon.pem"})
    assert getattr(config, attr) == "/daemon.pem"
    assert f"{param} from layer0" in config.source


def test_none_clears_a_tls_file() -> None:
    env = {**ETCD_ENV, "ETCD_CA_CERT_FILE": "/eca"}
    assert load(env, {"EtcdCaFile": "none"}).etcd_ca_cert_file is None


def test_datastore_path_overrides() -> None:
    config = load({"CALICO_DATASTORE_PATH": "/env.db"}, {"CalicoDatastorePath": "/daemon.db"})
    assert config.local_path == "/daemon.db"


def test_every_param_is_recognised_in_any_case_and_with_underscores() -> None:
    assert len(DAEMON_PARAMS) == 8
    config = load(
        {},
        {
            "datastoretype": "etcdv3",
            "ETCD_ENDPOINTS": "http://x:1",
            "etcdkeyfile": "/k",
            "EtcdCertFile": "/c",
            "ETCDCAFILE": "/ca",
            "calico_datastore_path": "/p.db",
        },
    )
    assert (config.datastore_type, config.etcd_endpoints) == ("etcdv3", ("http://x:1",))
    assert (config.etcd_key_file, config.etcd_cert_file, config.etcd_ca_cert_file) == (
        "/k",
        "/c",
        "/ca",
    )
    assert config.local_path == "/p.db"


def test_later_layer_wins_per_parameter() -> None:
    file_layer = {"DatastoreType": "etcdv3", "EtcdEndpoints": "http://file:1", "EtcdCaFile": "/f"}
    env_layer = {"etcdendpoints": "http://env:2"}
    config = load({}, file_layer, env_layer)
    assert config.etcd_endpoints == ("http://env:2",)
    assert config.etcd_ca_cert_file == "/f"
    assert "EtcdEndpoints from layer1" in config.source
    assert "EtcdCaFile from layer0" in config.source


def test_empty_values_are_unset() -> None:
    config = load(ETCD_ENV, {"DatastoreType": "", "EtcdEndpoints": "  "})
    assert config.etcd_endpoints == ("http://env:2379",)
    assert config.source == "environment (DATASTORE_TYPE, ETCD_ENDPOINTS)"


def test_override_supplies_what_the_environment_lacks() -> None:
    # DATASTORE_TYPE=etcdv3 without endpoints is invalid alone, valid with the daemon's.
    with pytest.raises(DatastoreConfigError, match="needs etcd endpoints"):
        load({"DATASTORE_TYPE": "etcdv3"})
    config = load({"DATASTORE_TYPE": "etcdv3"}, {"EtcdEndpoints": "http://d:1"})
    assert config.etcd_endpoints == ("http://d:1",)


def test_override_fixes_a_bad_environment_type() -> None:
    with pytest.raises(DatastoreConfigError, match="'consul'"):
        load({"DATASTORE_TYPE": "consul"})
    assert load({"DATASTORE_TYPE": "consul"}, {"DatastoreType": "local"}).datastore_type == "local"


# -- bad values: a clear error naming the parameter and where it came from ----------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"DatastoreType": "etcdv2"}, "invalid DatastoreType 'etcdv2' (layer0): expected one of"),
        ({"DatastoreType": "none"}, "invalid DatastoreType 'none' (layer0)"),
        ({"EtcdEndpoints": "ftp://x:1"}, "invalid EtcdEndpoints 'ftp://x:1' (layer0): invalid"),
        ({"EtcdEndpoints": "http://x:port"}, "invalid EtcdEndpoints 'http://x:port' (layer0)"),
        ({"EtcdAddr": "http://x:1"}, "invalid EtcdAddr 'http://x:1' (layer0): expected host:port"),
        ({"EtcdAddr": "x"}, "invalid EtcdAddr 'x' (layer0)"),
        ({"EtcdAddr": "x:1", "EtcdScheme": "grpc"}, "invalid EtcdScheme 'grpc' (layer0)"),
        ({"CalicoDatastorePath": "none"}, "empty local datastore path"),
        ({"EtcdEndpoints": "http://x:1", "EtcdKeyFile": "/k"}, "needs both the key file"),
        ({"DatastoreType": "etcdv3"}, "needs etcd endpoints"),
    ],
)
def test_bad_values(params: dict[str, str], message: str) -> None:
    with pytest.raises(DatastoreConfigError) as info:
        load({}, params)
    assert message in str(info.value)


def test_bad_environment_value_is_reported_even_with_overrides() -> None:
    with pytest.raises(DatastoreConfigError, match="K8S_DISABLE_NODE_POLL"):
        load({"K8S_DISABLE_NODE_POLL": "maybe"}, {"DatastoreType": "local"})


def test_tls_pair_error_names_both_sources() -> None:
    with pytest.raises(DatastoreConfigError) as info:
        load({**ETCD_ENV, "ETCD_KEY_FILE": "/k"}, {"EtcdCaFile": "/ca"})
    assert "environment (DATASTORE_TYPE, ETCD_ENDPOINTS, ETCD_KEY_FILE)" in str(info.value)
    assert "EtcdCaFile from layer0" in str(info.value)
