"""Kubernetes datastore configuration: kubeconfig, K8S_* overrides, in-cluster, --context."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from calico.datastore.config import DatastoreConfig, from_env
from calico.datastore.errors import DatastoreConfigError
from calico.datastore.kubernetes.kubeconfig import api_group, client_configuration


def _kubeconfig(path: Path) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "one", "cluster": {"server": "http://127.0.0.1:1111"}},
            {"name": "two", "cluster": {"server": "http://127.0.0.1:2222"}},
        ],
        "users": [{"name": "u", "user": {"token": "sekret"}}],
        "contexts": [
            {"name": "c1", "context": {"cluster": "one", "user": "u"}},
            {"name": "c2", "context": {"cluster": "two", "user": "u"}},
        ],
        "current-context": "c1",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubeconfig_current_context_and_override(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kc")
    cfg = client_configuration(from_env({"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": str(kc)}))
    assert cfg.host == "http://127.0.0.1:1111"
    assert cfg.api_key["BearerToken"] == "Bearer sekret"
    env = {"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": str(kc), "K8S_CURRENT_CONTEXT": "c2"}
    assert client_configuration(from_env(env)).host == "http://127.0.0.1:2222"
    env["K8S_API_ENDPOINT"] = "http://127.0.0.1:3333"
    env["CALICO_K8SAPITOKEN"] = "other"
    cfg = client_configuration(from_env(env))
    assert cfg.host == "http://127.0.0.1:3333"
    assert cfg.api_key["BearerToken"] == "Bearer other"


def test_kubeconfig_path_list_skips_missing_files(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kc")
    config = DatastoreConfig("kubernetes", kubeconfig=f"{tmp_path}/missing:{kc}")
    assert client_configuration(config).host == "http://127.0.0.1:1111"


def test_bad_configs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DatastoreConfigError, match=r"kubeconfig .*missing does not exist"):
        client_configuration(DatastoreConfig("kubernetes", kubeconfig=str(tmp_path / "missing")))
    bad = tmp_path / "bad"
    bad.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    with pytest.raises(DatastoreConfigError, match="invalid kubeconfig"):
        client_configuration(DatastoreConfig("kubernetes", kubeconfig=str(bad)))
    kc = _kubeconfig(tmp_path / "kc")
    with pytest.raises(DatastoreConfigError, match="invalid kubeconfig"):
        client_configuration(
            DatastoreConfig("kubernetes", kubeconfig=str(kc), extra={"k8sCurrentContext": "nope"})
        )
    with pytest.raises(DatastoreConfigError, match="invalid Kubernetes API endpoint"):
        client_configuration(DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": "ftp://x"}))
    with pytest.raises(DatastoreConfigError, match=r"ca\.pem does not exist"):
        client_configuration(
            DatastoreConfig(
                "kubernetes",
                extra={"k8sAPIEndpoint": "https://x:6443", "k8sCAFile": str(tmp_path / "ca.pem")},
            )
        )


def test_tls_files_and_insecure(tmp_path: Path) -> None:
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("x")
    env = {
        "DATASTORE_TYPE": "kubernetes",
        "K8S_API_ENDPOINT": "https://10.0.0.1:6443",
        "K8S_CA_FILE": str(tmp_path / "ca.pem"),
        "K8S_CERT_FILE": str(tmp_path / "cert.pem"),
        "K8S_KEY_FILE": str(tmp_path / "key.pem"),
        "K8S_INSECURE_SKIP_TLS_VERIFY": "true",
    }
    cfg = client_configuration(from_env(env))
    assert (cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file) == tuple(
        str(tmp_path / n) for n in ("ca.pem", "cert.pem", "key.pem")
    )
    assert cfg.verify_ssl is False


def test_home_kubeconfig_then_in_cluster(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    _kubeconfig(home / ".kube" / "config")
    config = DatastoreConfig("kubernetes")
    assert client_configuration(config, env={"HOME": str(home)}).host == "http://127.0.0.1:1111"
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("pod-token\n")
    (sa / "ca.crt").write_text("x")
    env = {
        "HOME": str(tmp_path),
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    cfg = client_configuration(config, env=env, sa_dir=sa)
    assert cfg.host == "https://10.96.0.1:443"
    assert cfg.api_key["BearerToken"] == "Bearer pod-token"
    assert cfg.ssl_ca_cert == str(sa / "ca.crt")
    with pytest.raises(DatastoreConfigError, match="no Kubernetes API configured"):
        client_configuration(config, env={"HOME": str(tmp_path)}, sa_dir=tmp_path / "none")


def test_api_group_choice() -> None:
    assert api_group(DatastoreConfig("kubernetes")) is None
    for value, mode in (
        ("projectcalico.org/v3", "v3"),
        ("ProjectCalico.org/V3", "v3"),
        ("crd.projectcalico.org/v1", "v1"),
        ("other", "v1"),
    ):
        assert (
            api_group(from_env({"DATASTORE_TYPE": "kubernetes", "CALICO_API_GROUP": value})) == mode
        )


def test_calicoctl_cfg_selects_kubernetes(tmp_path: Path) -> None:
    from calico.datastore.config import from_file

    kc = _kubeconfig(tmp_path / "kc")
    cfg_file = tmp_path / "calicoctl.cfg"
    cfg_file.write_text(
        "apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nmetadata: {}\n"
        f"spec:\n  datastoreType: kubernetes\n  kubeconfig: {kc}\n  k8sCurrentContext: c2\n"
    )
    assert client_configuration(from_file(str(cfg_file))).host == "http://127.0.0.1:2222"
