"""Open the datastore a netconf points at, and refuse to work while Calico is not ready.

The environment (``DATASTORE_TYPE``, ``ETCD_ENDPOINTS``, ``CALICO_DATASTORE_PATH``…) is the base
and the netconf's ``datastore_type``/``etcd_*``/``datastore_path`` fields override it, as
upstream copies netconf fields into the environment before loading the client config; so do
the Kubernetes ones: ``kubernetes.kubeconfig`` (KUBECONFIG), ``kubernetes.k8s_api_root`` or
``policy.k8s_api_root`` (K8S_API_ENDPOINT), ``policy.k8s_auth_token`` (K8S_API_TOKEN),
``policy.k8s_client_certificate``/``k8s_client_key``/``k8s_certificate_authority`` and
``calico_api_group`` (CALICO_API_GROUP).

A call gets a :class:`Store`: the Backend at once, the typed client (pydantic, the v3 models)
only when something asks for it, since the lean ADD (:mod:`calico.cni.lean`) never does.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from calico.cni.errors import DATASTORE_FAILURE, INVALID_NETCONF, TRY_AGAIN_LATER, CNIError
from calico.cni.netconf import NetConf

if TYPE_CHECKING:
    from calico.datastore.backend import Backend
    from calico.datastore.client import Client

NOT_READY = "Calico is currently not ready to process requests"


def datastore_config(conf: NetConf) -> object:
    from calico.datastore.config import from_env
    from calico.datastore.errors import DatastoreConfigError

    try:
        cfg = from_env(os.environ)
        changes: dict[str, object] = {}
        if conf.datastore_type:
            changes["datastore_type"] = conf.datastore_type.lower()
        if conf.datastore_path:
            changes["local_path"] = conf.datastore_path
        if conf.etcd_endpoints:
            changes["etcd_endpoints"] = conf.etcd_endpoints
        for name in ("etcd_key_file", "etcd_cert_file", "etcd_ca_cert_file"):
            if getattr(conf, name):
                changes[name] = getattr(conf, name)
        if conf.kubeconfig:
            changes["kubeconfig"] = conf.kubeconfig
        extra = {
            spec: value
            for spec, value in (
                ("k8sAPIEndpoint", conf.k8s_api_root),
                ("k8sAPIToken", conf.k8s_auth_token),
                ("k8sCertFile", conf.k8s_client_certificate),
                ("k8sKeyFile", conf.k8s_client_key),
                ("k8sCAFile", conf.k8s_certificate_authority),
                ("calicoAPIGroup", conf.calico_api_group),
            )
            if value
        }
        if extra:
            changes["extra"] = {**cfg.extra, **extra}
        if changes:
            cfg = dataclasses.replace(cfg, **changes, source="netconf")  # type: ignore[arg-type]
        if cfg.datastore_type == "kubernetes":  # WorkloadEndpoint writes = pod patches
            cfg = dataclasses.replace(cfg, extra={**cfg.extra, "cniPatchMode": True})
        return cfg.validate()
    except DatastoreConfigError as exc:
        raise CNIError(INVALID_NETCONF, "invalid datastore configuration", str(exc)) from None


class Store:
    """One call's datastore: the Backend, and the typed client built on first use."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            from calico.datastore.client import Client

            self._client = Client(self.backend)
        return self._client

    def close(self) -> None:
        self.backend.close()


def open_store(conf: NetConf) -> Store:
    from calico.datastore.errors import DatastoreError
    from calico.datastore.factory import open_backend

    cfg = datastore_config(conf)
    try:
        backend = open_backend(cfg)  # type: ignore[arg-type]
    except DatastoreError as exc:
        raise CNIError(DATASTORE_FAILURE, "cannot connect to the datastore", str(exc)) from None
    return Store(backend)


def check_ready(backend: Backend) -> None:
    """Code 11 (try again later) unless ClusterInformation ``default`` says datastoreReady.

    Reads the one field straight from the stored JSON: the typed read would import and build
    the cluster models on every pod start just to look at a bool.
    """
    import json

    from calico.datastore.errors import DatastoreError, ResourceDoesNotExistError
    from calico.datastore.factory import CLUSTER_INFO_KEY

    try:
        doc = json.loads(backend.get(CLUSTER_INFO_KEY).value)
    except ResourceDoesNotExistError:
        raise CNIError(
            TRY_AGAIN_LATER, NOT_READY, "ClusterInformation default is missing"
        ) from None
    except DatastoreError as exc:
        raise CNIError(DATASTORE_FAILURE, "error getting ClusterInformation", str(exc)) from None
    except ValueError as exc:
        raise CNIError(DATASTORE_FAILURE, "error getting ClusterInformation", str(exc)) from None
    spec = doc.get("spec") if isinstance(doc, dict) else None
    if not (isinstance(spec, dict) and spec.get("datastoreReady") is True):
        raise CNIError(
            TRY_AGAIN_LATER, NOT_READY, "ClusterInformation default: datastoreReady false"
        )
