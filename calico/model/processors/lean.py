"""A stored WorkloadEndpoint read without pydantic, for the shape Felix meets by the hundred
thousand (design/performance.md "Full-Felix scale: the lean WorkloadEndpoint read").

Validating each endpoint through the v3 model was most of a Felix start at 250,000 remote
endpoints. :func:`lean_workload_endpoint` accepts only a plain, common shape (known fields,
exact JSON types, IPv4 host networks, named TCP/UDP/SCTP ports, no NATs, gateways, QoS or
spoofing prefixes) and checks every field with the validators the model calls; anything else,
valid or not, answers None and the caller validates through the model, which also owns every
error message. The view it returns has the attribute names the processor reads from the model
(``metadata.labels``, ``spec.ip_networks``...), so one function builds the v1 value from
either. ``tests/unit/model/test_lean_wep.py`` checks, over generated documents, that a lean
answer means the model accepts the document and the processor's output is equal. The
processor itself runs the one-pass equal of this read and the v1 build
(:mod:`calico.model.processors.lean_v1`); this two-step read is its reference.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from calico.api import validators as v
from calico.api.ruleparse import parse_protocol, supports_ports
from calico.model.resources import ResourceKey

API_VERSION = "projectcalico.org/v3"
KIND = "WorkloadEndpoint"
_ANNOTATIONS_MAX = 256 * 1024

_TOP = frozenset({"apiVersion", "kind", "metadata", "spec"})
# ObjectMeta fields that are plain strings on the wire (the others decline the lean read).
_META_STRINGS = frozenset(
    {"name", "namespace", "generateName", "uid", "creationTimestamp", "resourceVersion"}
)
_META = _META_STRINGS | {"labels", "annotations"}
# Spec fields that are DNS-1123 subdomains when not empty (WorkloadEndpointSpec._name_fields).
_SPEC_NAMES = frozenset(
    {"orchestrator", "workload", "node", "pod", "endpoint", "serviceAccountName"}
)
_SPEC = frozenset(_SPEC_NAMES) | {
    "containerID",
    "ipNetworks",
    "profiles",
    "interfaceName",
    "mac",
    "ports",
}
_PORT = frozenset({"name", "protocol", "port"})
# Spec names most endpoints share (the node's, the orchestrator's...): checked once each.
_SHARED_NAMES = frozenset({"orchestrator", "node", "endpoint", "serviceAccountName"})
_MEMO_MAX = 65536
_good_subdomains: set[str] = set()
_good_namespaces: set[str] = set()


def _remember(good: set[str], text: str) -> None:
    if len(good) >= _MEMO_MAX:
        good.clear()
    good.add(text)


def _subdomain(text: str) -> None:
    """``dns1123_subdomain`` for a value endpoints repeat, remembering the ones it accepted
    (a refusal raises afresh each time)."""
    if text not in _good_subdomains:
        v.dns1123_subdomain(text)
        _remember(_good_subdomains, text)


def _namespace(text: str) -> None:
    if text not in _good_namespaces:
        v.dns1123_label(text, "namespace")
        _remember(_good_namespaces, text)


class LeanPort(NamedTuple):
    """The fields of ``WorkloadEndpointPort`` the processor reads."""

    name: str
    protocol: int | str
    port: int


class LeanMeta(NamedTuple):
    labels: dict[str, str] | None
    annotations: dict[str, str] | None
    generate_name: str | None


class LeanSpec(NamedTuple):
    orchestrator: str | None
    service_account_name: str | None
    ip_networks: list[str] | None
    profiles: list[str] | None
    interface_name: str
    mac: str | None
    ports: list[LeanPort] | None
    ip_nats: None = None
    ipv4_gateway: None = None
    ipv6_gateway: None = None
    allow_spoofed_source_prefixes: None = None


class LeanWorkloadEndpoint(NamedTuple):
    metadata: LeanMeta
    spec: LeanSpec


def lean_workload_endpoint(key: ResourceKey, value: Any) -> LeanWorkloadEndpoint | None:
    """The view of a plain stored WorkloadEndpoint, or None: validate through the model."""
    if key.kind != KIND or not key.namespace or type(value) is not dict:
        return None
    if not value.keys() <= _TOP:
        return None
    if value.get("apiVersion", API_VERSION) != API_VERSION or value.get("kind", KIND) != KIND:
        return None
    meta, spec = value.get("metadata"), value.get("spec")
    if type(meta) is not dict or type(spec) is not dict:
        return None
    try:
        lean_meta = _meta(key, meta)
        lean_spec = _spec(spec)
    except (ValueError, KeyError):  # a validator's refusal or a missing field: the model says
        return None
    if lean_meta is None or lean_spec is None:
        return None
    return LeanWorkloadEndpoint(lean_meta, lean_spec)


def _meta(key: ResourceKey, meta: dict[str, Any]) -> LeanMeta | None:
    if not meta.keys() <= _META:
        return None
    for field in _META_STRINGS & meta.keys():
        if type(meta[field]) is not str:
            return None
    name = meta.get("name", key.name)
    namespace = meta.get("namespace", key.namespace)
    if not name or not namespace:  # the model's "name is required" / "" means unset
        return None
    v.dns1123_subdomain(name)
    _namespace(namespace)
    labels = meta.get("labels")
    if labels is not None:
        if type(labels) is not dict:
            return None
        for k, val in labels.items():
            if type(k) is not str or type(val) is not str:
                return None
            v.label_key(k)
            v.label_value(val)
    annotations = meta.get("annotations")
    if annotations is not None:
        if type(annotations) is not dict:
            return None
        total = 0
        for k, val in annotations.items():
            if type(k) is not str or type(val) is not str:
                return None
            total += len(k) + len(val)
            v.annotation_key(k)
        if total > _ANNOTATIONS_MAX:
            return None
    return LeanMeta(labels, annotations, meta.get("generateName"))


def _spec(spec: dict[str, Any]) -> LeanSpec | None:
    if not spec.keys() <= _SPEC:
        return None
    for field in _SPEC_NAMES & spec.keys():
        text = spec[field]
        if type(text) is not str:
            return None
        if text:
            if field in _SHARED_NAMES:
                _subdomain(text)
            else:
                v.dns1123_subdomain(text)
    cid = spec.get("containerID")
    if cid is not None:
        if type(cid) is not str:
            return None
        if cid:
            v.container_id(cid)
    iface = spec["interfaceName"]
    if type(iface) is not str or not iface:
        return None
    v.interface_name(iface)
    mac = spec.get("mac")
    if mac is not None:
        if type(mac) is not str:
            return None
        if mac:
            v.mac_address(mac)
    nets = _strings(spec.get("ipNetworks", ()))
    if nets is None or not all(v.is_ipv4_host_cidr(n) for n in nets):
        return None
    profiles = _strings(spec.get("profiles", ()))
    if profiles is None:
        return None
    for profile in profiles:
        _subdomain(profile)
    ports = _ports(spec.get("ports", ()))
    if ports is None:
        return None
    return LeanSpec(
        orchestrator=spec.get("orchestrator"),
        service_account_name=spec.get("serviceAccountName"),
        ip_networks=nets if "ipNetworks" in spec else None,
        profiles=profiles if "profiles" in spec else None,
        interface_name=iface,
        mac=mac,
        ports=ports if "ports" in spec else None,
    )


def _strings(items: Any) -> list[str] | None:
    if type(items) is tuple:  # the caller's default for an absent field
        return []
    if type(items) is not list or any(type(item) is not str for item in items):
        return None
    return items


def _ports(items: Any) -> list[LeanPort] | None:
    if type(items) is tuple:
        return []
    if type(items) is not list:
        return None
    out: list[LeanPort] = []
    for item in items:
        if type(item) is not dict or item.keys() != _PORT:
            return None  # hostPort / hostIP, or a port without a name: the model decides
        name, port = item["name"], item["port"]
        if type(name) is not str or not name or type(port) is not int or not 1 <= port <= 65535:
            return None
        v.port_name(name)
        protocol = parse_protocol(item["protocol"])
        if not supports_ports(protocol):
            return None
        out.append(LeanPort(name, protocol, port))
    return out
