"""Datastore connection settings: environment variables or a calicoctl ``CalicoAPIConfig`` file.

Environment (each name may also carry a ``CALICO_`` prefix, which wins, as upstream allows):
``DATASTORE_TYPE`` (``local`` — this product's default —, ``etcdv3`` or ``kubernetes``),
``ETCD_ENDPOINTS`` (comma-separated URLs), ``ETCD_KEY_FILE``, ``ETCD_CERT_FILE``,
``ETCD_CA_CERT_FILE``, ``KUBECONFIG`` and ``CALICO_DATASTORE_PATH`` (the local SQLite file).

File (YAML or JSON)::

    apiVersion: projectcalico.org/v3
    kind: CalicoAPIConfig
    metadata: {}
    spec:
      datastoreType: etcdv3
      etcdEndpoints: http://127.0.0.1:2379
      etcdKeyFile: /etc/calico/key.pem          # optional, with etcdCertFile
      etcdCertFile: /etc/calico/cert.pem
      etcdCACertFile: /etc/calico/ca.pem
      kubeconfig: /root/.kube/config
      localDatastorePath: /var/lib/calico/calico.db   # our extension, for datastoreType local
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from calico.datastore.errors import DatastoreConfigError

DATASTORE_TYPES = ("local", "etcdv3", "kubernetes")
DEFAULT_DATASTORE_TYPE = "local"
DEFAULT_LOCAL_PATH = "/var/lib/calico/calico.db"
DEFAULT_CONFIG_FILE = "/etc/calico/calicoctl.cfg"
API_VERSION = "projectcalico.org/v3"
KIND = "CalicoAPIConfig"

# spec field -> DatastoreConfig attribute
_SPEC_FIELDS = {
    "datastoreType": "datastore_type",
    "etcdEndpoints": "etcd_endpoints",
    "etcdKeyFile": "etcd_key_file",
    "etcdCertFile": "etcd_cert_file",
    "etcdCACertFile": "etcd_ca_cert_file",
    "kubeconfig": "kubeconfig",
    "localDatastorePath": "local_path",
}
# Upstream fields we accept and keep in ``extra`` for the Kubernetes datastore.
_KEPT_SPEC_FIELDS = {
    "k8sAPIEndpoint",
    "k8sKeyFile",
    "k8sCertFile",
    "k8sCAFile",
    "k8sAPIToken",
    "k8sInsecureSkipTLSVerify",
    "k8sDisableNodePoll",
    "k8sClientQPS",
    "kubeconfigInline",
}
# Upstream fields this implementation cannot honour: refuse rather than silently ignore.
_UNSUPPORTED_SPEC_FIELDS = {
    "etcdDiscoverySrv",
    "etcdUsername",
    "etcdPassword",
    "etcdKey",
    "etcdCert",
    "etcdCACert",
}


def _split_endpoints(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(s.strip() for s in items if isinstance(s, str) and s.strip())


@dataclass(frozen=True)
class DatastoreConfig:
    """Which datastore to open and how to reach it."""

    datastore_type: str = DEFAULT_DATASTORE_TYPE
    local_path: str = DEFAULT_LOCAL_PATH
    etcd_endpoints: tuple[str, ...] = ()
    etcd_key_file: str | None = None
    etcd_cert_file: str | None = None
    etcd_ca_cert_file: str | None = None
    kubeconfig: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    source: str = field(default="defaults", compare=False)  # "environment" or a file path

    def __post_init__(self) -> None:
        # Accept "a,b" or a list for convenience; store a tuple so the config stays hashable.
        object.__setattr__(self, "etcd_endpoints", _split_endpoints(self.etcd_endpoints))

    def validate(self) -> DatastoreConfig:
        """Raise DatastoreConfigError naming ``source`` for an unusable config; returns self."""
        where = self.source
        if self.datastore_type not in DATASTORE_TYPES:
            raise DatastoreConfigError(
                f"unknown datastore type {self.datastore_type!r} in {where}: "
                f"expected one of {', '.join(DATASTORE_TYPES)}"
            )
        if self.datastore_type == "etcdv3" and not self.etcd_endpoints:
            raise DatastoreConfigError(
                f"datastore type etcdv3 needs etcd endpoints ({where}: set "
                "ETCD_ENDPOINTS or spec.etcdEndpoints, e.g. http://127.0.0.1:2379)"
            )
        if self.datastore_type == "local" and not self.local_path:
            raise DatastoreConfigError(f"empty local datastore path in {where}")
        if bool(self.etcd_key_file) != bool(self.etcd_cert_file):
            raise DatastoreConfigError(
                f"etcd client TLS in {where} needs both the key file and the certificate file"
            )
        return self

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DatastoreConfig:
        return from_env(env)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> DatastoreConfig:
        return from_file(path)


def _getenv(env: Mapping[str, str], name: str) -> str | None:
    for candidate in (f"CALICO_{name}", name):
        value = env.get(candidate, "").strip()
        if value:
            return value
    return None


def from_env(env: Mapping[str, str] | None = None) -> DatastoreConfig:
    """Read the upstream environment variables (``os.environ`` when ``env`` is None)."""
    env = os.environ if env is None else env
    dtype = _getenv(env, "DATASTORE_TYPE")
    return DatastoreConfig(
        datastore_type=dtype.lower() if dtype else DEFAULT_DATASTORE_TYPE,
        local_path=env.get("CALICO_DATASTORE_PATH", "").strip() or DEFAULT_LOCAL_PATH,
        etcd_endpoints=_split_endpoints(_getenv(env, "ETCD_ENDPOINTS")),
        etcd_key_file=_getenv(env, "ETCD_KEY_FILE"),
        etcd_cert_file=_getenv(env, "ETCD_CERT_FILE"),
        etcd_ca_cert_file=_getenv(env, "ETCD_CA_CERT_FILE"),
        kubeconfig=_getenv(env, "KUBECONFIG"),
        source="environment (DATASTORE_TYPE)" if dtype else "environment",
    ).validate()


def from_file(path: str | os.PathLike[str]) -> DatastoreConfig:
    """Parse a calicoctl ``CalicoAPIConfig`` file; every problem names the file."""
    where = os.fspath(path)
    try:
        with open(where, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as exc:
        raise DatastoreConfigError(
            f"cannot read datastore config file {where}: {exc.strerror}"
        ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise DatastoreConfigError(
            f"datastore config file {where} is not valid YAML: {exc}"
        ) from None

    def bad(msg: str) -> DatastoreConfigError:
        return DatastoreConfigError(f"invalid datastore config file {where}: {msg}")

    if not isinstance(doc, dict):
        raise bad(f"expected a {KIND} document (apiVersion, kind, metadata, spec)")
    if doc.get("kind") != KIND:
        raise bad(f"kind must be {KIND!r}, got {doc.get('kind')!r}")
    if doc.get("apiVersion") != API_VERSION:
        raise bad(f"apiVersion must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    unknown_top = set(doc) - {"apiVersion", "kind", "metadata", "spec"}
    if unknown_top:
        raise bad(f"unknown top-level field(s): {', '.join(sorted(unknown_top))}")
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        raise bad("spec must be a mapping")

    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, value in spec.items():
        if name in _SPEC_FIELDS:
            if value is None:
                continue
            if name == "etcdEndpoints":
                if not isinstance(value, str | list):
                    raise bad("spec.etcdEndpoints must be a comma-separated string or a list")
            elif not isinstance(value, str):
                raise bad(f"spec.{name} must be a string, got {type(value).__name__}")
            values[_SPEC_FIELDS[name]] = value
        elif name in _KEPT_SPEC_FIELDS:
            extra[name] = value
        elif name in _UNSUPPORTED_SPEC_FIELDS:
            raise bad(f"spec.{name} is not supported by this implementation")
        else:
            known = sorted({*_SPEC_FIELDS, *_KEPT_SPEC_FIELDS})
            raise bad(f"unknown field spec.{name} (known: {', '.join(known)})")
    if "datastore_type" in values:
        values["datastore_type"] = values["datastore_type"].strip().lower()
    return DatastoreConfig(**values, extra=extra, source=where).validate()


def load(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    default_file: str | os.PathLike[str] = DEFAULT_CONFIG_FILE,
) -> DatastoreConfig:
    """calicoctl's precedence: an explicit ``-c`` file (which must exist), else the default
    ``/etc/calico/calicoctl.cfg`` when present, else the environment."""
    if config_file:
        return from_file(config_file)
    if os.path.exists(default_file):
        return from_file(default_file)
    return from_env(env)
