"""The datastore a daemon opens: the libcalico environment first, then the daemon's own
parameters on top (design/datastore.md "Daemons").

Upstream's daemons (Felix, Typha) build their client config with libcalico's
``LoadClientConfigFromEnvironment`` and then let their own ``DatastoreType``/``Etcd*``
parameters, when set in their config file or environment, override it; calico-node's manifests
rely on this, configuring Felix with ``DATASTORE_TYPE``/``ETCD_ENDPOINTS`` only. One loader
serves every daemon: each passes its own parameter layers in one call::

    ds = daemon_datastore_config(("typha.cfg", file_params), ("TYPHA_* environment", env_params))

Layers are ``(where, {name: raw text})``, lowest priority first; names match case-insensitively
with underscores ignored, other names are skipped and empty values count as unset. Rules, as
upstream's ``DatastoreConfig()``:

- ``DatastoreType`` replaces the type (``local``, ``etcdv3`` or ``kubernetes``);
- ``EtcdEndpoints`` (non-empty) replaces the endpoints *and selects etcdv3*, even over the
  daemon's own ``DatastoreType``; otherwise ``EtcdAddr`` (``host:port``) does the same with
  ``EtcdScheme`` (default ``http``);
- ``EtcdKeyFile``/``EtcdCertFile``/``EtcdCaFile`` replace the TLS files (``none`` clears one);
- ``CalicoDatastorePath`` (our extension) replaces the local SQLite file.

Every bad value raises DatastoreConfigError naming the parameter and its layer; the merged
result is validated like any other config.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from calico.datastore.config import (
    DATASTORE_TYPES,
    DatastoreConfig,
    endpoint_target,
    env_config,
    split_endpoints,
)
from calico.datastore.errors import DatastoreConfigError

#: The daemon parameters that override the environment (Felix's and Typha's spellings).
DAEMON_PARAMS = (
    "DatastoreType",
    "EtcdEndpoints",
    "EtcdAddr",
    "EtcdScheme",
    "EtcdKeyFile",
    "EtcdCertFile",
    "EtcdCaFile",
    "CalicoDatastorePath",
)
_FILE_PARAMS = {
    "EtcdKeyFile": "etcd_key_file",
    "EtcdCertFile": "etcd_cert_file",
    "EtcdCaFile": "etcd_ca_cert_file",
}
_AUTHORITY = re.compile(r"[^:/\s]+:\d+")

Layer = tuple[str, Mapping[str, str]]


def _key(name: str) -> str:
    return name.replace("_", "").lower()


_BY_KEY = {_key(name): name for name in DAEMON_PARAMS}


def _merge(layers: tuple[Layer, ...]) -> dict[str, tuple[str, str]]:
    """``{canonical name: (text, where)}``; a later layer wins."""
    out: dict[str, tuple[str, str]] = {}
    for where, params in layers:
        for raw_name, value in params.items():
            name = _BY_KEY.get(_key(raw_name))
            text = value.strip() if isinstance(value, str) else ""
            if name is not None and text:
                out[name] = (text, where)
    return out


def daemon_datastore_config(
    *layers: Layer, env: Mapping[str, str] | None = None
) -> DatastoreConfig:
    """The validated config: ``env`` (``os.environ`` when None) overridden by ``layers``."""
    base = env_config(env)
    params = _merge(layers)
    used: list[str] = []
    changes: dict[str, Any] = {}

    def bad(name: str, reason: str) -> DatastoreConfigError:
        text, where = params[name]
        return DatastoreConfigError(f"invalid {name} {text!r} ({where}): {reason}")

    def take(name: str) -> str | None:
        if name not in params:
            return None
        used.append(f"{name} from {params[name][1]}")
        return params[name][0]

    dtype = take("DatastoreType")
    if dtype is not None:
        if dtype.lower() not in DATASTORE_TYPES:
            raise bad("DatastoreType", f"expected one of {', '.join(DATASTORE_TYPES)}")
        changes["datastore_type"] = dtype.lower()

    scheme = params.get("EtcdScheme", ("http", ""))[0].lower()
    if scheme == "none":
        scheme = "http"
    if scheme not in ("http", "https"):
        raise bad("EtcdScheme", "expected http or https")
    addr = params.get("EtcdAddr", ("none", ""))[0]
    if addr.lower() != "none" and not _AUTHORITY.fullmatch(addr):
        raise bad("EtcdAddr", "expected host:port, e.g. 127.0.0.1:2379")
    endpoints = params.get("EtcdEndpoints", ("none", ""))[0]
    items = () if endpoints.lower() == "none" else split_endpoints(endpoints)
    for item in items:
        try:
            endpoint_target(item)
        except DatastoreConfigError as exc:
            raise bad("EtcdEndpoints", str(exc)) from None
    if items:
        take("EtcdEndpoints")
        changes.update(etcd_endpoints=items, datastore_type="etcdv3")
    elif addr.lower() != "none":
        take("EtcdAddr")
        if "EtcdScheme" in params:
            take("EtcdScheme")
        changes.update(etcd_endpoints=(f"{scheme}://{addr}",), datastore_type="etcdv3")

    for name, attr in _FILE_PARAMS.items():
        path = take(name)
        if path is not None:
            changes[attr] = None if path.lower() == "none" else path
    path = take("CalicoDatastorePath")
    if path is not None:
        changes["local_path"] = "" if path.lower() == "none" else path

    source = base.source if not used else f"{base.source}; {', '.join(used)}"
    return dataclasses.replace(base, **changes, source=source).validate()
