"""Build the official client's Configuration from a DatastoreConfig, as libcalico does.

Order, as libcalico: the kubeconfig (``KUBECONFIG``, a path or an OS path list, or
the file-only ``kubeconfigInline``) with its context (``K8S_CURRENT_CONTEXT`` / calicoctl
``--context``), then the explicit overrides ``K8S_API_ENDPOINT``, ``K8S_CERT_FILE``,
``K8S_KEY_FILE``, ``K8S_CA_FILE``, the token, ``K8S_INSECURE_SKIP_TLS_VERIFY``. With neither a
kubeconfig nor an endpoint: ``$HOME/.kube/config`` when it exists, else the in-cluster service
account (``KUBERNETES_SERVICE_HOST``/``PORT`` and ``/var/run/secrets/kubernetes.io/
serviceaccount``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from kubernetes.client import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import load_kube_config

from calico.datastore.config import DatastoreConfig
from calico.datastore.errors import DatastoreConfigError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def _in_cluster(env: Mapping[str, str], sa_dir: Path) -> Configuration:
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    token_file = sa_dir / "token"
    if not host or not port or not token_file.exists():
        raise DatastoreConfigError(
            "no Kubernetes API configured: set KUBECONFIG or K8S_API_ENDPOINT (or run in a pod "
            "with a service account)"
        )
    cfg = Configuration()
    host = f"[{host}]" if ":" in host else host
    cfg.host = f"https://{host}:{port}"
    cfg.api_key = {"BearerToken": "Bearer " + token_file.read_text().strip()}
    ca = sa_dir / "ca.crt"
    if ca.exists():
        cfg.ssl_ca_cert = str(ca)
    return cfg


def _from_kubeconfig(path: str, context: str | None, source: str) -> Configuration:
    cfg = Configuration()
    existing = [p for p in path.split(os.pathsep) if p and Path(p).exists()]
    if not existing:
        raise DatastoreConfigError(f"kubeconfig {path} does not exist ({source})")
    try:
        load_kube_config(
            config_file=os.pathsep.join(existing),
            context=context,
            client_configuration=cfg,
            persist_config=False,
        )
    except (ConfigException, OSError, ValueError, KeyError) as exc:
        raise DatastoreConfigError(f"invalid kubeconfig {path} ({source}): {exc}") from None
    return cfg


def config_from_flags(
    kubeconfig: str, env: Mapping[str, str] | None = None, sa_dir: Path = SERVICE_ACCOUNT_DIR
) -> Configuration:
    """client-go's ``BuildConfigFromFlags("", kubeconfig)`` for components that talk to the
    API beside their datastore (Typha's rebalancing): the kubeconfig when given, else the
    in-cluster service account (DatastoreConfigError when neither works)."""
    env = os.environ if env is None else env
    if kubeconfig:
        return _from_kubeconfig(kubeconfig, None, "KUBECONFIG")
    return _in_cluster(env, sa_dir)


def client_configuration(
    config: DatastoreConfig,
    env: Mapping[str, str] | None = None,
    sa_dir: Path = SERVICE_ACCOUNT_DIR,
) -> Configuration:
    """The client Configuration ``config`` describes (DatastoreConfigError when it can't)."""
    env = os.environ if env is None else env
    extra = dict(config.extra)
    endpoint = extra.get("k8sAPIEndpoint") or ""
    context = extra.get("k8sCurrentContext") or None
    inline = extra.get("kubeconfigInline") or ""
    kubeconfig = config.kubeconfig or ""
    if inline:
        with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as fh:
            fh.write(inline)
        try:
            cfg = _from_kubeconfig(fh.name, context, config.source)
        finally:
            os.unlink(fh.name)
    elif kubeconfig:
        cfg = _from_kubeconfig(kubeconfig, context, config.source)
    elif endpoint:
        cfg = Configuration()
    else:
        home = Path(env.get("HOME", "~")).expanduser() / ".kube" / "config"
        if home.exists():
            cfg = _from_kubeconfig(str(home), context, config.source)
        else:
            cfg = _in_cluster(env, sa_dir)
    if endpoint:
        cfg.host = endpoint.rstrip("/")
    if extra.get("k8sCertFile"):
        cfg.cert_file = extra["k8sCertFile"]
    if extra.get("k8sKeyFile"):
        cfg.key_file = extra["k8sKeyFile"]
    if extra.get("k8sCAFile"):
        cfg.ssl_ca_cert = extra["k8sCAFile"]
    if extra.get("k8sAPIToken"):
        cfg.api_key = {"BearerToken": "Bearer " + str(extra["k8sAPIToken"])}
    if extra.get("k8sInsecureSkipTLSVerify"):
        cfg.verify_ssl = False
    for name in ("cert_file", "key_file", "ssl_ca_cert"):
        path = getattr(cfg, name, None)
        if path and not Path(path).exists():
            raise DatastoreConfigError(
                f"{name.replace('_', ' ')} {path} does not exist ({config.source})"
            )
    # One long-lived watch per collection a syncer follows (Felix: ~20) plus requests: the
    # client's default pool (5 per CPU) would keep discarding connections.
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 64)
    if not cfg.host or not cfg.host.startswith(("http://", "https://")):
        raise DatastoreConfigError(
            f"invalid Kubernetes API endpoint {cfg.host!r} ({config.source}): expected "
            "http(s)://host[:port]"
        )
    return cfg


def api_group(config: DatastoreConfig) -> str | None:
    """``CALICO_API_GROUP``: ``projectcalico.org/v3`` (any case) selects v3 CRDs, anything
    else set selects v1; None = decide by discovery."""
    value = dict(config.extra).get("calicoAPIGroup") or ""
    if not value:
        return None
    return "v3" if value.lower() == "projectcalico.org/v3" else "v1"
