"""Parse and validate what the runtime hands a CNI plugin: the netconf on stdin and CNI_* env.

Every problem becomes a :class:`CNIError` with the spec's code (6 undecodable JSON, 1 unsupported
version, 7 invalid network config, 4 invalid environment), so the runtime sees *why* before any
datastore or netlink work starts. Field names and defaults follow upstream's netconf.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from calico.cni.errors import (
    DECODE_FAILURE,
    INCOMPATIBLE_VERSION,
    INVALID_ENV,
    INVALID_NETCONF,
    CNIError,
)
from calico.cni.types import SUPPORTED_VERSIONS

DEFAULT_NODENAME_FILE = "/var/lib/calico/nodename"
DEFAULT_MTU_FILE = "/var/lib/calico/mtu"
DEFAULT_ENDPOINT_STATUS_DIR = "/var/run/calico/endpoint-status"
DEFAULT_IPAM_LOCK_FILE = "/var/run/calico/ipam.lock"
DEFAULT_NETWORK_NAME = "k8s-pod-network"

_NETWORK_NAME = re.compile(r"^[a-zA-Z0-9_.\-]+$")
_IFNAME = re.compile(r"^[^/\s:]{1,15}$")
_CONTAINER_ID = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$")
_KNOWN_ARGS = frozenset(
    {
        "IgnoreUnknown",
        "K8S_POD_NAMESPACE",
        "K8S_POD_NAME",
        "K8S_POD_INFRA_CONTAINER_ID",
        "K8S_POD_UID",
        "IP",
        "MAC",
    }
)
COMMANDS = ("ADD", "DEL", "CHECK", "VERSION", "GC", "STATUS")


def _bad(msg: str, details: str = "") -> CNIError:
    return CNIError(INVALID_NETCONF, msg, details)


def _str(doc: Mapping[str, Any], key: str, default: str = "") -> str:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _bad(f"netconf field {key!r} must be a string, got {type(value).__name__}")
    return value


def _int(doc: Mapping[str, Any], key: str, default: int = 0, minimum: int = 0) -> int:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"netconf field {key!r} must be an integer, got {json.dumps(value)}")
    if value < minimum:
        raise _bad(f"netconf field {key!r} must be >= {minimum}, got {value}")
    return value


def _bool(doc: Mapping[str, Any], key: str, default: bool = False) -> bool:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(f"netconf field {key!r} must be true or false, got {json.dumps(value)}")
    return value


def _strbool(doc: Mapping[str, Any], key: str, default: bool) -> bool:
    """``assign_ipv4``/``assign_ipv6`` are strings upstream ("true"/"false"); accept bools too."""
    value = doc.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise _bad(f'netconf field "ipam.{key}" must be "true" or "false", got {json.dumps(value)}')


def _dict(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(f"netconf field {key!r} must be an object")
    return value


def _str_list(doc: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"netconf field {where!r} must be a list of strings")
    return list(value)


@dataclass
class IPAMConf:
    type: str = ""
    subnet: str = ""
    assign_ipv4: bool = True
    assign_ipv6: bool = False
    ipv4_pools: list[str] = field(default_factory=list)
    ipv6_pools: list[str] = field(default_factory=list)


@dataclass
class NetConf:
    cni_version: str
    name: str
    type: str
    ipam: IPAMConf
    mtu: int = 0
    num_queues: int = 1
    nodename: str = ""
    nodename_file: str = DEFAULT_NODENAME_FILE
    nodename_file_optional: bool = False
    ipam_lock_file: str = DEFAULT_IPAM_LOCK_FILE
    datastore_type: str = ""
    datastore_path: str = ""  # our extension: the local (SQLite) datastore file
    etcd_endpoints: str = ""
    etcd_key_file: str = ""
    etcd_cert_file: str = ""
    etcd_ca_cert_file: str = ""
    # The Kubernetes datastore, as upstream's plugin reads them (KubernetesConf / PolicyConf).
    kubeconfig: str = ""  # kubernetes.kubeconfig
    k8s_api_root: str = ""  # kubernetes.k8s_api_root, else policy.k8s_api_root (no /api suffix)
    k8s_auth_token: str = ""  # policy.k8s_auth_token
    k8s_client_certificate: str = ""  # policy.k8s_client_certificate
    k8s_client_key: str = ""  # policy.k8s_client_key
    k8s_certificate_authority: str = ""  # policy.k8s_certificate_authority
    calico_api_group: str = ""
    log_level: str = "info"
    log_file_path: str = ""
    policy_type: str = ""
    allow_ip_forwarding: bool = False
    floating_ips: bool = False  # feature_control.floating_ips
    include_default_routes: bool = False
    device_type: str = ""
    policy_setup_timeout_seconds: int = 0
    endpoint_status_dir: str = DEFAULT_ENDPOINT_STATUS_DIR
    require_mtu_file: bool = False
    mtu_file: str = DEFAULT_MTU_FILE  # our extension: per-node MTU file (several nodes, one host)
    mesos_labels: dict[str, str] = field(default_factory=dict)
    prev_result: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)  # as received (for exec'd IPAM plugins)


def api_root(url: str) -> str:
    """``policy.k8s_api_root`` as the server URL: upstream strips a trailing ``/api/...``
    (old configs spell it ``https://host:6443/api/v1/``)."""
    cut = url.find("/api/")
    return url[:cut] if cut >= 0 else url.rstrip("/")


def decode(stdin: bytes | str) -> dict[str, Any]:
    """The netconf JSON object; code 6 when it is not one."""
    try:
        doc = json.loads(stdin)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CNIError(
            DECODE_FAILURE, "failed to decode the network configuration", str(exc)
        ) from None
    if not isinstance(doc, dict):
        raise CNIError(
            DECODE_FAILURE, "failed to decode the network configuration", "not a JSON object"
        )
    return doc


def check_version(doc: Mapping[str, Any]) -> str:
    version = doc.get("cniVersion")
    if not isinstance(version, str) or version not in SUPPORTED_VERSIONS:
        shown = json.dumps(version) if version not in (None, "") else "missing (0.2.0 assumed)"
        raise CNIError(
            INCOMPATIBLE_VERSION,
            "incompatible CNI versions",
            f"config is {shown}, plugin supports {list(SUPPORTED_VERSIONS)}",
        )
    return version


def _mesos_labels(doc: Mapping[str, Any]) -> dict[str, str]:
    info = (((doc.get("args") or {}).get("org.apache.mesos") or {}).get("network_info")) or {}
    labels = (info.get("labels") or {}).get("labels") or []
    out: dict[str, str] = {}
    for item in labels if isinstance(labels, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = str(item.get("value", ""))
    return out


def parse(stdin: bytes | str, *, need_ipam_type: bool = True) -> NetConf:
    """Full validation of the netconf of the ``calico`` (or ``calico-ipam``) plugin."""
    doc = decode(stdin)
    version = check_version(doc)
    name = _str(doc, "name")
    if not name:
        raise _bad('netconf field "name" is required')
    if not _NETWORK_NAME.match(name):
        raise _bad(f"invalid network name {name!r}: use letters, digits, '_', '.' and '-'")
    ipam_doc = _dict(doc, "ipam")
    ipam = IPAMConf(
        type=_str(ipam_doc, "type"),
        subnet=_str(ipam_doc, "subnet"),
        assign_ipv4=_strbool(ipam_doc, "assign_ipv4", True),
        assign_ipv6=_strbool(ipam_doc, "assign_ipv6", False),
        ipv4_pools=_str_list(ipam_doc, "ipv4_pools", "ipam.ipv4_pools"),
        ipv6_pools=_str_list(ipam_doc, "ipv6_pools", "ipam.ipv6_pools"),
    )
    if need_ipam_type and not ipam.type:
        raise _bad('netconf field "ipam.type" is required (e.g. "calico-ipam")')
    if need_ipam_type and not _NETWORK_NAME.match(ipam.type):
        raise _bad(f"invalid IPAM plugin name {ipam.type!r}")
    device_type = _str(doc, "device_type")
    if device_type not in ("", "veth"):
        raise _bad(f'unsupported device_type {device_type!r}: only "veth" is supported')
    policy = _dict(doc, "policy")
    kube = _dict(doc, "kubernetes")
    settings = _dict(doc, "container_settings")
    features = _dict(doc, "feature_control")
    prev = doc.get("prevResult")
    conf = NetConf(
        cni_version=version,
        name=name,
        type=_str(doc, "type"),
        ipam=ipam,
        mtu=_int(doc, "mtu"),
        num_queues=_int(doc, "num_queues", 1, minimum=1),
        nodename=_str(doc, "nodename"),
        nodename_file=_str(doc, "nodename_file") or DEFAULT_NODENAME_FILE,
        nodename_file_optional=_bool(doc, "nodename_file_optional"),
        ipam_lock_file=_str(doc, "ipam_lock_file") or DEFAULT_IPAM_LOCK_FILE,
        datastore_type=_str(doc, "datastore_type"),
        datastore_path=_str(doc, "datastore_path"),
        etcd_endpoints=_str(doc, "etcd_endpoints"),
        etcd_key_file=_str(doc, "etcd_key_file"),
        etcd_cert_file=_str(doc, "etcd_cert_file"),
        etcd_ca_cert_file=_str(doc, "etcd_ca_cert_file"),
        kubeconfig=_str(kube, "kubeconfig"),
        k8s_api_root=_str(kube, "k8s_api_root") or api_root(_str(policy, "k8s_api_root")),
        k8s_auth_token=_str(policy, "k8s_auth_token"),
        k8s_client_certificate=_str(policy, "k8s_client_certificate"),
        k8s_client_key=_str(policy, "k8s_client_key"),
        k8s_certificate_authority=_str(policy, "k8s_certificate_authority"),
        calico_api_group=_str(doc, "calico_api_group"),
        log_level=_str(doc, "log_level") or "info",
        log_file_path=_str(doc, "log_file_path"),
        policy_type=_str(policy, "type"),
        allow_ip_forwarding=_bool(settings, "allow_ip_forwarding"),
        floating_ips=_bool(features, "floating_ips"),
        include_default_routes=_bool(doc, "include_default_routes"),
        device_type=device_type,
        policy_setup_timeout_seconds=_int(doc, "policy_setup_timeout_seconds"),
        endpoint_status_dir=_str(doc, "endpoint_status_dir") or DEFAULT_ENDPOINT_STATUS_DIR,
        require_mtu_file=_bool(doc, "require_mtu_file"),
        mtu_file=_str(doc, "mtu_file") or DEFAULT_MTU_FILE,
        mesos_labels=_mesos_labels(doc),
        prev_result=prev if isinstance(prev, dict) else None,
        raw=doc,
    )
    if conf.policy_type not in ("", "k8s"):
        raise _bad(f'unsupported policy.type {conf.policy_type!r}: use "k8s" or leave it empty')
    return conf


@dataclass(frozen=True)
class CNIEnv:
    """The CNI_* environment of one invocation."""

    command: str
    container_id: str = ""
    netns: str = ""
    ifname: str = ""
    args: Mapping[str, str] = field(default_factory=dict)
    path: tuple[str, ...] = ()

    @property
    def k8s_namespace(self) -> str:
        return self.args.get("K8S_POD_NAMESPACE", "")

    @property
    def k8s_pod(self) -> str:
        return self.args.get("K8S_POD_NAME", "")


def parse_args(text: str) -> dict[str, str]:
    """``CNI_ARGS`` (``K=V;K=V``); unknown keys are an error unless ``IgnoreUnknown`` is true."""
    out: dict[str, str] = {}
    for pair in (p for p in text.split(";") if p):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CNIError(INVALID_ENV, "invalid CNI_ARGS", f"pair {pair!r} is not KEY=VALUE")
        out[key] = value
    ignore = out.get("IgnoreUnknown", "").lower() in ("1", "true")
    unknown = sorted(set(out) - _KNOWN_ARGS)
    if unknown and not ignore:
        raise CNIError(INVALID_ENV, "invalid CNI_ARGS", f"unknown key(s) {', '.join(unknown)}")
    return out


def parse_env(env: Mapping[str, str]) -> CNIEnv:
    """Validate the variables the command needs (the spec's list; CNI_NETNS may be empty on DEL)."""
    command = env.get("CNI_COMMAND", "")
    if command not in COMMANDS:
        raise CNIError(INVALID_ENV, f"unknown CNI_COMMAND {command!r}", f"expected {COMMANDS}")
    if command in ("VERSION", "GC", "STATUS"):
        return CNIEnv(command=command, path=_split_path(env.get("CNI_PATH", "")))
    required = ["CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"]
    if command != "DEL":
        required.append("CNI_NETNS")
    missing = [name for name in required if not env.get(name)]
    if missing:
        raise CNIError(INVALID_ENV, f"required env variables [{', '.join(missing)}] missing")
    cid = env["CNI_CONTAINERID"]
    if not _CONTAINER_ID.match(cid):
        raise CNIError(INVALID_ENV, f"invalid CNI_CONTAINERID {cid!r}")
    ifname = env["CNI_IFNAME"]
    if not _IFNAME.match(ifname) or ifname in (".", ".."):
        raise CNIError(INVALID_ENV, f"invalid CNI_IFNAME {ifname!r}")
    return CNIEnv(
        command=command,
        container_id=cid,
        netns=env.get("CNI_NETNS", ""),
        ifname=ifname,
        args=parse_args(env.get("CNI_ARGS", "")),
        path=_split_path(env["CNI_PATH"]),
    )


def _split_path(value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(":") if p)
