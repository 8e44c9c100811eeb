"""The netconf's Kubernetes fields (``kubernetes.*``, ``policy.k8s_*``, ``calico_api_group``)
become the Kubernetes datastore's configuration, over the environment, as upstream's plugin
exports them before loading its client config (``calico.cni.store``)."""

from __future__ import annotations

import json

import pytest

from calico.cni.errors import CNIError
from calico.cni.netconf import api_root, parse
from calico.cni.store import datastore_config
from calico.datastore.kubernetes.kubeconfig import client_configuration

BASE = {"cniVersion": "1.0.0", "name": "net1", "type": "calico", "ipam": {"type": "calico-ipam"}}


def conf(**changes: object) -> str:
    return json.dumps({**BASE, "datastore_type": "kubernetes", **changes})


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("https://10.0.0.1:6443", "https://10.0.0.1:6443"),
        ("https://10.0.0.1:6443/", "https://10.0.0.1:6443"),
        ("https://10.0.0.1:6443/api/v1/", "https://10.0.0.1:6443"),
        ("http://k8s/api/", "http://k8s"),
        ("", ""),
    ],
)
def test_policy_api_root_loses_its_api_suffix(url: str, root: str) -> None:
    assert api_root(url) == root


def test_kubernetes_fields_override_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("DATASTORE_TYPE", "local")
    monkeypatch.setenv("K8S_API_ENDPOINT", "https://from-env:6443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    c = parse(
        conf(
            kubernetes={"kubeconfig": "/etc/cni/net.d/calico-kubeconfig", "k8s_api_root": ""},
            policy={
                "type": "k8s",
                "k8s_api_root": "https://10.96.0.1:443/api/v1/",
                "k8s_auth_token": "tok",
                "k8s_client_certificate": "/c.pem",
                "k8s_client_key": "/k.pem",
                "k8s_certificate_authority": "/ca.pem",
            },
            calico_api_group="projectcalico.org/v3",
        )
    )
    cfg = datastore_config(c)
    assert cfg.datastore_type == "kubernetes"  # type: ignore[attr-defined]
    assert cfg.kubeconfig == "/etc/cni/net.d/calico-kubeconfig"  # type: ignore[attr-defined]
    extra = dict(cfg.extra)  # type: ignore[attr-defined]
    assert extra["k8sAPIEndpoint"] == "https://10.96.0.1:443"  # policy's, suffix stripped
    assert (extra["k8sAPIToken"], extra["k8sCertFile"]) == ("tok", "/c.pem")
    assert (extra["k8sKeyFile"], extra["k8sCAFile"]) == ("/k.pem", "/ca.pem")
    assert extra["calicoAPIGroup"] == "projectcalico.org/v3"
    assert extra["cniPatchMode"] is True


def test_kubernetes_api_root_wins_and_reaches_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("KUBECONFIG", "K8S_API_ENDPOINT", "K8S_API_TOKEN", "CALICO_K8SAPITOKEN"):
        monkeypatch.delenv(var, raising=False)
    c = parse(
        conf(
            kubernetes={"k8s_api_root": "http://127.0.0.1:8080"},
            policy={"type": "k8s", "k8s_api_root": "http://other:1/api/", "k8s_auth_token": "t"},
        )
    )
    cfg = datastore_config(c)
    client = client_configuration(cfg)  # type: ignore[arg-type]
    assert client.host == "http://127.0.0.1:8080"
    assert client.api_key.get("BearerToken", "").endswith("t")


def test_no_kubernetes_fields_leave_the_environment_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K8S_API_ENDPOINT", "https://from-env:6443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    cfg = datastore_config(parse(conf()))
    assert dict(cfg.extra)["k8sAPIEndpoint"] == "https://from-env:6443"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "changes",
    [{"kubernetes": "x"}, {"kubernetes": {"kubeconfig": 3}}, {"policy": {"k8s_auth_token": 1}}],
)
def test_bad_kubernetes_fields_are_netconf_errors(changes: dict[str, object]) -> None:
    with pytest.raises(CNIError) as info:
        parse(conf(**changes))
    assert info.value.code == 7  # invalid network config
