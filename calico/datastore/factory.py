"""Open the Backend a DatastoreConfig names."""

from __future__ import annotations

import json

from calico.datastore.backend import Backend
from calico.datastore.config import DatastoreConfig
from calico.datastore.errors import DatastoreConfigError, ResourceDoesNotExistError
from calico.model.resources import ResourceKey

# The keys ``Client.ensure_initialized`` creates (the tiers: ``calico.api.policy.BUILT_IN_TIERS``,
# named here so that opening a file needs no model code).
CLUSTER_INFO_KEY = ResourceKey("ClusterInformation", "default").default_path()
BUILT_IN_TIER_KEYS = tuple(
    ResourceKey("Tier", name).default_path() for name in ("default", "kube-admin", "kube-baseline")
)


def open_backend(config: DatastoreConfig, initialize: bool = True) -> Backend:
    """``local`` -> LocalBackend(path), ``etcdv3`` -> EtcdBackend(endpoints, TLS files),
    ``kubernetes`` -> KubernetesBackend (kubeconfig / K8S_* settings).

    Backends are imported lazily so a process only loads (and needs) the one it uses. A local
    datastore is initialised on open (ClusterInformation ``default``, the built-in tiers), so
    every component works on a brand-new file out of the box; on an initialised file that is one
    read. etcd is initialised by node startup, as upstream.
    """
    config.validate()
    if config.datastore_type == "local":
        from calico.datastore.local import LocalBackend

        backend = LocalBackend(config.local_path)
        if initialize:
            _ensure_initialized(backend)
        return backend
    if config.datastore_type == "etcdv3":
        from calico.datastore.etcd import EtcdBackend

        return EtcdBackend(
            list(config.etcd_endpoints),
            key_file=config.etcd_key_file,
            cert_file=config.etcd_cert_file,
            ca_file=config.etcd_ca_cert_file,
        )
    if config.datastore_type == "kubernetes":
        from calico.datastore.kubernetes import KubernetesBackend

        # No initialisation here either: in a cluster the CRDs and ClusterInformation are
        # installed (and calicoctl / node startup call ensure_initialized, as upstream).
        return KubernetesBackend(config)
    raise DatastoreConfigError(f"unknown datastore type {config.datastore_type!r}")


def is_initialized(backend: Backend) -> bool:
    """True when ``ensure_initialized`` would change nothing: four key reads, no model code.

    The common case for every process opening a file (one per pod start for the CNI plugin):
    it skips the typed client, the Tier write attempt and the package-version lookup.
    """
    try:
        info = json.loads(backend.get(CLUSTER_INFO_KEY).value)
        for key in BUILT_IN_TIER_KEYS:
            backend.get(key)
    except (ResourceDoesNotExistError, ValueError):
        return False
    spec = info.get("spec") if isinstance(info, dict) else None
    return (
        isinstance(spec, dict)
        and bool(spec.get("clusterGUID"))
        and spec.get("datastoreReady") is not None
    )


def _ensure_initialized(backend: Backend) -> None:
    try:
        if is_initialized(backend):
            return
    except BaseException:
        backend.close()
        raise
    import calico
    from calico.datastore.client import Client

    try:
        Client(backend).ensure_initialized(calico.__version__)
    except BaseException:
        backend.close()
        raise
