"""Datastore connection settings: libcalico's environment variables or a calicoctl
``CalicoAPIConfig`` file (design/datastore.md "Configuration").

Environment, read as upstream's ``apiconfig.LoadClientConfigFromEnvironment`` reads it: each
variable ``X`` may also be spelled ``CALICO_X``, and the prefixed spelling wins whenever it is
*present* (even empty, which then means unset). ``DATASTORE_TYPE`` (``local``, ``etcdv3``,
``kubernetes``; unset: ``etcdv3`` when etcd endpoints are given, else ``local`` — this product's
default), ``ETCD_ENDPOINTS`` (comma-separated URLs), ``ETCD_KEY_FILE``, ``ETCD_CERT_FILE``,
``ETCD_CA_CERT_FILE``, ``KUBECONFIG``, ``K8S_API_ENDPOINT``, ``K8S_KEY_FILE``, ``K8S_CERT_FILE``,
``K8S_CA_FILE``, ``K8S_CURRENT_CONTEXT``, ``K8S_INSECURE_SKIP_TLS_VERIFY`` and
``K8S_DISABLE_NODE_POLL`` (booleans), ``USE_POD_CIDR``, ``CALICO_API_GROUP``; plus our extension
``CALICO_DATASTORE_PATH`` (the local SQLite file; not an upstream variable, so only the prefixed
spelling exists). A daemon's own parameters are layered on top by
``calico.datastore.daemon_config``.

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
from urllib.parse import urlsplit

from calico.datastore.errors import DatastoreConfigError
from calico.gobool import go_bool

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
    "k8sCurrentContext",
    "kubeconfigInline",
    "usePodCIDR",
    "calicoAPIGroup",
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


def endpoint_target(raw: str) -> tuple[str, bool]:
    """``http(s)://host[:port]`` (or a bare ``host[:port]``, taken as http) -> (``host:port`` for
    gRPC, whether TLS is on); the port defaults to 2379. The one place the endpoint rules live:
    config validation and the etcd connection both use it."""
    url = raw if "://" in raw else f"http://{raw}"
    try:
        parts = urlsplit(url)
        port = parts.port or 2379
    except ValueError as exc:
        raise DatastoreConfigError(f"invalid etcd endpoint {raw!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DatastoreConfigError(f"invalid etcd endpoint {raw!r}: expected http(s)://host:port")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}", parts.scheme == "https"


def split_endpoints(value: str | Sequence[str] | None) -> tuple[str, ...]:
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
        object.__setattr__(self, "etcd_endpoints", split_endpoints(self.etcd_endpoints))

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
                f"datastore type etcdv3 needs etcd endpoints ({where}: set ETCD_ENDPOINTS, "
                "spec.etcdEndpoints or a daemon's EtcdEndpoints, e.g. http://127.0.0.1:2379)"
            )
        for endpoint in self.etcd_endpoints:
            try:
                endpoint_target(endpoint)
            except DatastoreConfigError as exc:
                raise DatastoreConfigError(f"{exc} ({where})") from None
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


# Upstream's environment variables (without the CALICO_ prefix) -> ``extra`` spec field names.
_K8S_ENV = {
    "K8S_API_ENDPOINT": "k8sAPIEndpoint",
    "K8S_KEY_FILE": "k8sKeyFile",
    "K8S_CERT_FILE": "k8sCertFile",
    "K8S_CA_FILE": "k8sCAFile",
    "K8S_CURRENT_CONTEXT": "k8sCurrentContext",
    "CALICO_API_GROUP": "calicoAPIGroup",
    # Upstream reads the token only as CALICO_K8SAPITOKEN (an envconfig tag quirk); the CNI
    # plugin exports K8S_API_TOKEN, which the issue asks us to honour too.
    "K8S_API_TOKEN": "k8sAPIToken",
    "K8SAPITOKEN": "k8sAPIToken",  # later wins: upstream's spelling
}
_K8S_BOOL_ENV = {
    "K8S_INSECURE_SKIP_TLS_VERIFY": "k8sInsecureSkipTLSVerify",
    "K8S_DISABLE_NODE_POLL": "k8sDisableNodePoll",
    "USE_POD_CIDR": "usePodCIDR",
}
# Upstream variables whose feature this implementation lacks: refuse rather than ignore.
_UNSUPPORTED_ENV = ("ETCD_DISCOVERY_SRV", "ETCD_USERNAME", "ETCD_PASSWORD")


def env_lookup(env: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """(variable actually used, stripped value) for ``name``, or None when unset or empty.

    ``CALICO_<name>`` wins whenever it is present, even empty (upstream's envconfig looks the
    unprefixed spelling up only when the prefixed one is absent).
    """
    prefixed = f"CALICO_{name}"
    var = prefixed if prefixed in env else name
    value = env.get(var, "").strip()
    return (var, value) if value else None


def _parse_bool(var: str, value: str) -> bool:
    if (flag := go_bool(value)) is not None:  # upstream's envconfig: Go's strconv.ParseBool
        return flag
    raise DatastoreConfigError(f"invalid value {value!r} for {var}: expected true or false")


def env_config(env: Mapping[str, str] | None = None) -> DatastoreConfig:
    """The environment's settings, *not yet validated* (``from_env`` validates; the daemon
    loader validates after applying its overrides, which may supply what is missing here)."""
    env = os.environ if env is None else env
    used: list[str] = []

    def get(name: str) -> str | None:
        found = env_lookup(env, name)
        if found is None:
            return None
        used.append(found[0])
        return found[1]

    for name in _UNSUPPORTED_ENV:
        found = env_lookup(env, name)
        if found is not None:
            raise DatastoreConfigError(f"{found[0]} is not supported by this implementation")
    dtype = get("DATASTORE_TYPE")
    endpoints = split_endpoints(get("ETCD_ENDPOINTS"))
    local_path = env.get("CALICO_DATASTORE_PATH", "").strip()
    if local_path:
        used.append("CALICO_DATASTORE_PATH")
    extra: dict[str, Any] = {}
    for name, spec_field in _K8S_ENV.items():
        value = get(name)
        if value is not None:
            extra[spec_field] = value
    for name, spec_field in _K8S_BOOL_ENV.items():
        found = env_lookup(env, name)
        if found is not None:
            extra[spec_field] = _parse_bool(*found)
            used.append(found[0])
    # Unset: upstream detects etcdv3 from the endpoints; its fallback is kubernetes, ours local.
    detected = "etcdv3" if endpoints else DEFAULT_DATASTORE_TYPE
    return DatastoreConfig(
        datastore_type=dtype.lower() if dtype else detected,
        local_path=local_path or DEFAULT_LOCAL_PATH,
        etcd_endpoints=endpoints,
        etcd_key_file=get("ETCD_KEY_FILE"),
        etcd_cert_file=get("ETCD_CERT_FILE"),
        etcd_ca_cert_file=get("ETCD_CA_CERT_FILE"),
        kubeconfig=get("KUBECONFIG"),
        extra=extra,
        source=f"environment ({', '.join(used)})" if used else "environment",
    )


def from_env(env: Mapping[str, str] | None = None) -> DatastoreConfig:
    """The libcalico environment (``os.environ`` when ``env`` is None), validated."""
    return env_config(env).validate()


def from_file(path: str | os.PathLike[str]) -> DatastoreConfig:
    """Parse a calicoctl ``CalicoAPIConfig`` file; every problem names the file."""
    import yaml  # here, not at module level: the CNI plugin's ADD reads no file and skips it

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
