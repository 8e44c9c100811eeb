"""The lean WorkloadEndpoint read and its v1 build in one pass (design/performance.md "In-sync
at 250,000: the fused WorkloadEndpoint read and cached key hashes").

:func:`lean_wep_output` answers exactly what the two-step reference answers
(:func:`calico.model.processors.lean.lean_workload_endpoint`, then
``endpoints.lean_workload_endpoint_v1``): None for every document the lean read declines, else
the same v1 key and value, or the same error from the v1 key. It makes the same checks on the
decoded JSON without building the intermediate views, and remembers the work endpoints of one
workload repeat: a labels map (with the namespace, orchestrator and service account) is
validated and turned into its v1 form once, and so is a ports list. ``tests/unit/model/
test_lean_v1.py`` checks it against the reference over generated documents and names.
"""

from __future__ import annotations

import sys
from typing import Any

from calico.api import validators as v
from calico.api.ruleparse import parse_protocol, supports_ports
from calico.model import values as v1
from calico.model.names import wep_key_fast
from calico.model.processors.common import Output, endpoint_ports, mac_str, wep_labels_v1
from calico.model.processors.lean import (
    _ANNOTATIONS_MAX,
    _META,
    _META_STRINGS,
    _PORT,
    _SHARED_NAMES,
    _SPEC,
    _SPEC_NAMES,
    _TOP,
    API_VERSION,
    KIND,
    LeanPort,
    _good_namespaces,
    _good_subdomains,
    _namespace,
    _subdomain,
)
from calico.model.resources import ResourceKey
from calico.model.values.builder import frozen_builder

_MEMO_MAX = 16384
# (namespace, orchestrator, service account, *label items) -> the v1 labels. An entry is
# made only after every key and value was checked to be a valid string, so a hit is that
# check's answer too (a non-string never equals a string; an unhashable one raises
# TypeError before any hit).
_labels_memo: dict[tuple[Any, ...], dict[str, str]] = {}
# ((name, protocol, port), ...) with exact str / str-or-int / int types -> the v1 ports.
_ports_memo: dict[tuple[tuple[Any, Any, Any], ...], tuple[v1.EndpointPort, ...]] = {}

_build_wep = frozen_builder(v1.WorkloadEndpoint)
_intern = sys.intern
_subdomain_check = v.dns1123_subdomain
_str = str


class _Decline(Exception):
    """The lean read does not take this document (the model decides)."""


def lean_wep_output(key: ResourceKey, value: Any) -> Output | None:
    """The v1 output of a plain stored WorkloadEndpoint, or None: validate through the model."""
    if key.kind != KIND or not key.namespace or type(value) is not dict:
        return None
    if not value.keys() <= _TOP:
        return None
    get = value.get
    if get("apiVersion", API_VERSION) != API_VERSION or get("kind", KIND) != KIND:
        return None
    meta, spec = get("metadata"), get("spec")
    if type(meta) is not dict or type(spec) is not dict:
        return None
    try:
        fields = _read(key, meta, spec)
    except (ValueError, KeyError, _Decline):
        return None
    if fields is None:
        return {}
    return {wep_key_fast(key.namespace, key.name): _build_wep(*fields)}


def _read(key: ResourceKey, meta: dict[str, Any], spec: dict[str, Any]) -> tuple[Any, ...] | None:
    """The v1 value's fields, None for an endpoint without networks (not sent); raises
    ValueError, KeyError or _Decline where the lean read answers None."""
    # metadata, but the labels (they need the spec's orchestrator and service account)
    if not meta.keys() <= _META:
        raise _Decline
    for field, text in meta.items():
        if type(text) is not _str and field in _META_STRINGS:
            raise _Decline
    mget = meta.get
    name = mget("name", key.name)
    namespace = mget("namespace", key.namespace)
    if not name or not namespace:
        raise _Decline
    _subdomain_check(name)
    if namespace not in _good_namespaces:  # the memo's test inline: one call fewer
        _namespace(namespace)
    annotations = mget("annotations")
    if annotations is not None:
        _annotations(annotations)

    # spec
    if not spec.keys() <= _SPEC:
        raise _Decline
    sget = spec.get
    checked = None
    for field in _SPEC_NAMES & spec.keys():
        text = spec[field]
        if type(text) is not _str:
            raise _Decline
        if text:
            if field in _SHARED_NAMES:
                if text not in _good_subdomains:
                    _subdomain(text)
            elif text != checked:  # pod and workload: one name, checked once
                _subdomain_check(text)
                checked = text
    cid = sget("containerID")
    if cid is not None:
        if type(cid) is not _str:
            raise _Decline
        if cid:
            v.container_id(cid)
    iface = spec["interfaceName"]
    if type(iface) is not _str or not iface:
        raise _Decline
    v.interface_name(iface)
    mac = sget("mac")
    if mac is not None:
        if type(mac) is not _str:
            raise _Decline
        if mac:
            v.mac_address(mac)
    nets = sget("ipNetworks")
    if nets is not None or "ipNetworks" in spec:
        _strings(nets)
        for net in nets:
            if not v.is_ipv4_host_cidr(net):
                raise _Decline
    profiles = sget("profiles")
    if profiles is not None or "profiles" in spec:
        _strings(profiles)
        for profile in profiles:
            if profile not in _good_subdomains:
                _subdomain(profile)
    ports = _ports(sget("ports"), "ports" in spec)

    orch, account = sget("orchestrator"), sget("serviceAccountName")
    labels = _labels(mget("labels"), key.namespace, orch, account)
    if not nets:
        return None
    return (
        "active",  # state
        iface,  # name
        "",  # active_instance_id
        mac_str(mac) if mac else None,
        tuple(map(_intern, profiles)) if profiles else (),
        tuple(nets),  # ipv4_nets
        (),  # ipv6_nets
        (),  # ipv4_nat
        (),  # ipv6_nat
        labels,
        None,  # ipv4_gateway
        None,  # ipv6_gateway
        ports,
        mget("generateName") or "",
        (),  # allow_spoofed_source_ips
        dict(annotations) if annotations else {},
    )


def _strings(items: Any) -> None:
    if type(items) is not list:
        raise _Decline
    for item in items:
        if type(item) is not _str:
            raise _Decline


def _annotations(annotations: Any) -> None:
    if type(annotations) is not dict:
        raise _Decline
    total = 0
    for k, val in annotations.items():
        if type(k) is not _str or type(val) is not _str:
            raise _Decline
        total += len(k) + len(val)
        v.annotation_key(k)
    if total > _ANNOTATIONS_MAX:
        raise _Decline


def _labels(raw: Any, namespace: str, orch: Any, account: Any) -> dict[str, str]:
    """A fresh copy of the endpoint's v1 labels, checking the stored ones on a memo miss."""
    if raw is None:
        raw = {}
    elif type(raw) is not dict:
        raise _Decline
    memo_key = (namespace, orch, account, *raw.items())
    try:
        labels = _labels_memo.get(memo_key)
    except TypeError:  # an unhashable value: not a string, so the check below declines
        labels = None
    if labels is None:
        for k, val in raw.items():
            if type(k) is not _str or type(val) is not _str:
                raise _Decline
            v.label_key(k)
            v.label_value(val)
        labels = wep_labels_v1(raw, namespace, orch, account)
        if len(_labels_memo) >= _MEMO_MAX:
            _labels_memo.clear()
        _labels_memo[memo_key] = labels
    return dict(labels)


def _ports(items: Any, present: bool) -> tuple[v1.EndpointPort, ...]:
    """The v1 named ports; each distinct list is checked and converted once."""
    if not present:
        return ()
    if type(items) is not list:
        raise _Decline
    if not items:
        return ()
    memo_key: list[tuple[Any, Any, Any]] = []
    for item in items:
        if type(item) is not dict or item.keys() != _PORT:
            raise _Decline
        name, protocol, port = item["name"], item["protocol"], item["port"]
        if type(name) is not _str or not name or type(port) is not int or not 1 <= port <= 65535:
            raise _Decline
        if type(protocol) is not _str and type(protocol) is not int:
            protocol = parse_protocol(protocol)  # refuses every other type (bool included)
        memo_key.append((name, protocol, port))
    frozen = tuple(memo_key)
    out = _ports_memo.get(frozen)
    if out is None:
        lean: list[LeanPort] = []
        for name, protocol, port in frozen:
            v.port_name(name)
            parsed = parse_protocol(protocol)
            if not supports_ports(parsed):
                raise _Decline
            lean.append(LeanPort(name, parsed, port))
        out = endpoint_ports(lean, named_only=True)
        if len(_ports_memo) >= _MEMO_MAX:
            _ports_memo.clear()
        _ports_memo[frozen] = out
    return out
