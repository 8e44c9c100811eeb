"""DatastoreConfig: environment and CalicoAPIConfig file parsing, precedence, errors, factory."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.datastore import DatastoreConfigError
from calico.datastore.config import (
    DEFAULT_LOCAL_PATH,
    DatastoreConfig,
    env_lookup,
    from_env,
    from_file,
    load,
)
from calico.datastore.etcd import EtcdBackend
from calico.datastore.factory import open_backend

ETCD_FILE = """\
apiVersion: projectcalico.org/v3
kind: CalicoAPIConfig
metadata: {}
spec:
  datastoreType: etcdv3
  etcdEndpoints: "http://10.0.0.1:2379, http://10.0.0.2:2379"
  etcdKeyFile: /etc/calico/key.pem
  etcdCertFile: /etc/calico/cert.pem
  etcdCACertFile: /etc/calico/ca.pem
"""


def write(tmp_path: Path, text: str, name: str = "calicoctl.cfg") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- environment -----------------------------------------------------------------------------


def test_env_defaults_to_local() -> None:
    config = from_env({})
    assert config.datastore_type == "local"
    assert config.local_path == DEFAULT_LOCAL_PATH
    assert config.etcd_endpoints == ()


def test_env_local_path() -> None:
    config = from_env({"CALICO_DATASTORE_PATH": "/tmp/x.db"})
    assert (config.datastore_type, config.local_path) == ("local", "/tmp/x.db")


def test_env_etcd() -> None:
    config = from_env(
        {
            "DATASTORE_TYPE": "etcdv3",
            "ETCD_ENDPOINTS": "http://a:2379,https://b:2379,",
            "ETCD_KEY_FILE": "/k",
            "ETCD_CERT_FILE": "/c",
            "ETCD_CA_CERT_FILE": "/ca",
        }
    )
    assert config.datastore_type == "etcdv3"
    assert config.etcd_endpoints == ("http://a:2379", "https://b:2379")
    assert (config.etcd_key_file, config.etcd_cert_file, config.etcd_ca_cert_file) == (
        "/k",
        "/c",
        "/ca",
    )


def test_env_calico_prefix_wins() -> None:
    config = from_env(
        {
            "DATASTORE_TYPE": "kubernetes",
            "CALICO_DATASTORE_TYPE": "etcdv3",
            "CALICO_ETCD_ENDPOINTS": "http://x:2379",
            "KUBECONFIG": "/kc",
        }
    )
    assert (config.datastore_type, config.etcd_endpoints) == ("etcdv3", ("http://x:2379",))
    assert config.kubeconfig == "/kc"


# Every upstream variable: (name without CALICO_, value, attribute or extra key, expected).
ENV_VARS = [
    ("DATASTORE_TYPE", "etcdv3", "datastore_type", "etcdv3"),
    ("ETCD_ENDPOINTS", "http://e:2379", "etcd_endpoints", ("http://e:2379",)),
    ("ETCD_KEY_FILE", "/k.pem", "etcd_key_file", "/k.pem"),
    ("ETCD_CERT_FILE", "/c.pem", "etcd_cert_file", "/c.pem"),
    ("ETCD_CA_CERT_FILE", "/ca.pem", "etcd_ca_cert_file", "/ca.pem"),
    ("KUBECONFIG", "/kc", "kubeconfig", "/kc"),
    ("K8S_API_ENDPOINT", "https://k:6443", "k8sAPIEndpoint", "https://k:6443"),
    ("K8S_KEY_FILE", "/kk", "k8sKeyFile", "/kk"),
    ("K8S_CERT_FILE", "/kcert", "k8sCertFile", "/kcert"),
    ("K8S_CA_FILE", "/kca", "k8sCAFile", "/kca"),
    ("K8S_CURRENT_CONTEXT", "ctx", "k8sCurrentContext", "ctx"),
    ("K8S_INSECURE_SKIP_TLS_VERIFY", "true", "k8sInsecureSkipTLSVerify", True),
    ("K8S_DISABLE_NODE_POLL", "0", "k8sDisableNodePoll", False),
    ("USE_POD_CIDR", "T", "usePodCIDR", True),
    ("CALICO_API_GROUP", "projectcalico.org/v3", "calicoAPIGroup", "projectcalico.org/v3"),
]
# Values that keep the config valid alongside each variable (TLS needs both halves).
_COMPANIONS = {
    "ETCD_KEY_FILE": {"ETCD_CERT_FILE": "/c.pem"},
    "ETCD_CERT_FILE": {"ETCD_KEY_FILE": "/k.pem"},
    "DATASTORE_TYPE": {"ETCD_ENDPOINTS": "http://e:2379"},
}


def _value(config: DatastoreConfig, attr: str) -> object:
    return getattr(config, attr) if hasattr(config, attr) else config.extra.get(attr)


@pytest.mark.parametrize(("name", "value", "attr", "expected"), ENV_VARS)
@pytest.mark.parametrize("prefixed", [False, True], ids=["bare", "CALICO_"])
def test_env_every_variable_in_both_spellings(
    name: str, value: str, attr: str, expected: object, prefixed: bool
) -> None:
    var = f"CALICO_{name}" if prefixed else name
    config = from_env({var: value, **_COMPANIONS.get(name, {})})
    assert _value(config, attr) == expected
    assert var in config.source


@pytest.mark.parametrize(("name", "value", "attr", "expected"), ENV_VARS)
def test_env_prefixed_spelling_wins(name: str, value: str, attr: str, expected: object) -> None:
    other = {"etcdv3": "local", "true": "false", "0": "1", "T": "F"}.get(value, value + "x")
    if name == "ETCD_ENDPOINTS":
        other = "http://other:1"
    env = {name: other, f"CALICO_{name}": value, **_COMPANIONS.get(name, {})}
    assert _value(from_env(env), attr) == expected


@pytest.mark.parametrize(("name", "value", "attr", "expected"), ENV_VARS)
def test_env_present_but_empty_prefixed_spelling_masks_the_bare_one(
    name: str, value: str, attr: str, expected: object
) -> None:
    # Upstream's envconfig falls back to the bare name only when CALICO_X is absent.
    config = from_env({f"CALICO_{name}": "", name: value})
    unset = DatastoreConfig()
    assert _value(config, attr) == _value(unset, attr)


def test_env_datastore_path_has_only_the_prefixed_spelling() -> None:
    assert from_env({"DATASTORE_PATH": "/tmp/y.db"}).local_path == DEFAULT_LOCAL_PATH
    assert from_env({"CALICO_DATASTORE_PATH": " /tmp/y.db "}).local_path == "/tmp/y.db"


def test_env_type_detected_from_endpoints() -> None:
    assert from_env({"ETCD_ENDPOINTS": "http://e:1"}).datastore_type == "etcdv3"
    assert from_env({"CALICO_ETCD_ENDPOINTS": "http://e:1"}).datastore_type == "etcdv3"
    assert from_env({"ETCD_ENDPOINTS": " , "}).datastore_type == "local"
    config = from_env({"DATASTORE_TYPE": "local", "ETCD_ENDPOINTS": "http://e:1"})
    assert config.datastore_type == "local"


def test_env_type_is_case_insensitive() -> None:
    assert from_env({"DATASTORE_TYPE": " LOCAL "}).datastore_type == "local"


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_env_go_booleans_true(value: str) -> None:
    assert from_env({"K8S_DISABLE_NODE_POLL": value}).extra["k8sDisableNodePoll"] is True


@pytest.mark.parametrize("value", ["0", "f", "F", "FALSE", "false", "False"])
def test_env_go_booleans_false(value: str) -> None:
    assert from_env({"K8S_DISABLE_NODE_POLL": value}).extra["k8sDisableNodePoll"] is False


@pytest.mark.parametrize("value", ["yes", "on", "tRUE", "2"])
def test_env_bad_boolean_names_the_variable(value: str) -> None:
    with pytest.raises(DatastoreConfigError) as info:
        from_env({"CALICO_K8S_INSECURE_SKIP_TLS_VERIFY": value})
    assert str(info.value) == (
        f"invalid value {value!r} for CALICO_K8S_INSECURE_SKIP_TLS_VERIFY: expected true or false"
    )


@pytest.mark.parametrize("name", ["ETCD_DISCOVERY_SRV", "ETCD_USERNAME", "ETCD_PASSWORD"])
@pytest.mark.parametrize("prefix", ["", "CALICO_"])
def test_env_unsupported_variables_are_refused(name: str, prefix: str) -> None:
    with pytest.raises(DatastoreConfigError, match=f"^{prefix}{name} is not supported"):
        from_env({prefix + name: "x"})
    assert from_env({prefix + name: ""}).datastore_type == "local"  # empty = unset


@pytest.mark.parametrize("endpoint", ["ftp://e:1", "http://e:port", "http://:1"])
def test_env_bad_endpoint_names_it_and_the_variable(endpoint: str) -> None:
    with pytest.raises(DatastoreConfigError) as info:
        from_env({"ETCD_ENDPOINTS": f"http://ok:1,{endpoint}"})
    assert f"invalid etcd endpoint {endpoint!r}" in str(info.value)
    assert "ETCD_ENDPOINTS" in str(info.value)


def test_env_unknown_type_names_variable() -> None:
    with pytest.raises(DatastoreConfigError, match=r"'etcdv2'.*DATASTORE_TYPE"):
        from_env({"DATASTORE_TYPE": "etcdv2"})


def test_env_etcd_without_endpoints() -> None:
    with pytest.raises(DatastoreConfigError, match="ETCD_ENDPOINTS"):
        from_env({"DATASTORE_TYPE": "etcdv3"})


def test_env_key_without_cert() -> None:
    with pytest.raises(DatastoreConfigError, match="key file and the certificate"):
        from_env({"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://a", "ETCD_KEY_FILE": "/k"})


def test_env_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATASTORE_TYPE", "kubernetes")
    monkeypatch.delenv("CALICO_DATASTORE_TYPE", raising=False)
    assert from_env().datastore_type == "kubernetes"


# -- file ------------------------------------------------------------------------------------


def test_file_etcd(tmp_path: Path) -> None:
    path = write(tmp_path, ETCD_FILE)
    config = from_file(path)
    assert config.datastore_type == "etcdv3"
    assert config.etcd_endpoints == ("http://10.0.0.1:2379", "http://10.0.0.2:2379")
    assert config.etcd_ca_cert_file == "/etc/calico/ca.pem"
    assert config.source == str(path)


def test_file_json_and_local_extension(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"apiVersion": "projectcalico.org/v3", "kind": "CalicoAPIConfig",'
        ' "spec": {"localDatastorePath": "/data/c.db"}}',
    )
    config = from_file(path)
    assert (config.datastore_type, config.local_path) == ("local", "/data/c.db")


def test_file_endpoint_list_and_k8s_extras(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec:\n"
        "  datastoreType: kubernetes\n  kubeconfig: /root/.kube/config\n"
        "  k8sAPIEndpoint: https://1.2.3.4:6443\n  etcdEndpoints: [http://a:1, http://b:2]\n",
    )
    config = from_file(path)
    assert config.kubeconfig == "/root/.kube/config"
    assert config.extra == {"k8sAPIEndpoint": "https://1.2.3.4:6443"}
    assert config.etcd_endpoints == ("http://a:1", "http://b:2")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spec: [\n", "not valid YAML"),
        ("- a\n- b\n", "expected a CalicoAPIConfig document"),
        ("apiVersion: projectcalico.org/v3\nkind: IPPool\nspec: {}\n", "kind must be"),
        ("apiVersion: v1\nkind: CalicoAPIConfig\nspec: {}\n", "apiVersion must be"),
        ("apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec: 3\n", "spec must be"),
        (
            "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec: {etcdEndpont: x}\n",
            "unknown field spec.etcdEndpont",
        ),
        (
            "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec: {etcdUsername: u}\n",
            "spec.etcdUsername is not supported",
        ),
        (
            "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec: {etcdKeyFile: 3}\n",
            "spec.etcdKeyFile must be a string",
        ),
        (
            "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\n"
            "spec: {datastoreType: etcdv2}\n",
            "unknown datastore type 'etcdv2'",
        ),
        (
            "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\n"
            "spec: {datastoreType: etcdv3}\n",
            "needs etcd endpoints",
        ),
        ("apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nextra: 1\n", "top-level"),
    ],
)
def test_file_errors_name_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(DatastoreConfigError) as info:
        from_file(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatastoreConfigError, match="cannot read datastore config file"):
        from_file(tmp_path / "nope.cfg")


# -- precedence ------------------------------------------------------------------------------

ENV = {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://env:2379"}


def test_load_explicit_file_wins(tmp_path: Path) -> None:
    explicit = write(tmp_path, ETCD_FILE, "explicit.cfg")
    default = write(
        tmp_path,
        "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec: {}\n",
        "default.cfg",
    )
    config = load(str(explicit), ENV, default_file=default)
    assert config.etcd_endpoints[0] == "http://10.0.0.1:2379"


def test_load_default_file_over_env(tmp_path: Path) -> None:
    default = write(tmp_path, ETCD_FILE)
    assert load(None, ENV, default_file=default).source == str(default)


def test_load_env_when_no_file(tmp_path: Path) -> None:
    config = load(None, ENV, default_file=tmp_path / "absent.cfg")
    assert config.etcd_endpoints == ("http://env:2379",)


def test_load_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DatastoreConfigError, match=r"absent\.cfg"):
        load(str(tmp_path / "absent.cfg"), ENV, default_file=tmp_path / "none")


# -- factory ---------------------------------------------------------------------------------


def test_factory_kubernetes_opens_the_kubernetes_backend() -> None:
    from calico.datastore.kubernetes import KubernetesBackend

    with pytest.raises(DatastoreConfigError, match="invalid Kubernetes API endpoint"):
        open_backend(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": "ftp://x"}))
    # Nothing listens on port 1: discovery fails, so the default group (v1) is used.
    extra = {"k8sAPIEndpoint": "http://127.0.0.1:1"}
    backend = open_backend(DatastoreConfig("kubernetes", extra=extra))
    assert isinstance(backend, KubernetesBackend) and backend.mode == "v1"
    backend.close()


def test_factory_unknown_type() -> None:
    with pytest.raises(DatastoreConfigError, match="unknown datastore type"):
        open_backend(DatastoreConfig(datastore_type="consul"))


def test_factory_etcd_is_lazy_and_does_not_connect() -> None:
    backend = open_backend(DatastoreConfig(datastore_type="etcdv3", etcd_endpoints="http://a:1"))
    try:
        assert isinstance(backend, EtcdBackend)
        assert backend.endpoints == ["http://a:1"]
    finally:
        backend.close()


def test_factory_local(tmp_path: Path) -> None:
    backend = open_backend(DatastoreConfig(local_path=str(tmp_path / "c.db")))
    try:
        assert backend.apply("/k", "1").value == "1"
    finally:
        backend.close()


def test_bad_endpoint_url() -> None:
    with pytest.raises(DatastoreConfigError, match="invalid etcd endpoint"):
        EtcdBackend("ftp://x:1")


# -- the two spellings, as a property -----------------------------------------------------------

_SETTING = st.one_of(st.none(), st.just(""), st.just("  "), st.sampled_from(["a", " b ", "c"]))


@given(bare=_SETTING, prefixed=_SETTING)
def test_env_lookup_matches_upstream_envconfig(bare: str | None, prefixed: str | None) -> None:
    env = {k: v for k, v in (("X", bare), ("CALICO_X", prefixed)) if v is not None}
    # envconfig: the prefixed key if present (even empty), else the bare one; we strip and
    # treat empty as unset.
    var = "CALICO_X" if prefixed is not None else "X"
    raw = env.get(var)
    expected = (var, raw.strip()) if raw is not None and raw.strip() else None
    assert env_lookup(env, "X") == expected
