"""Endpoint-side kinds -> the v1 values Felix's label index and endpoint managers consume:
WorkloadEndpoint, HostEndpoint, Profile, NetworkSet and GlobalNetworkSet.

Namespace membership becomes a label (``projectcalico.org/namespace``), always set from where
the resource lives, so a workload or network set cannot claim another namespace by labelling
itself; user ``pcns.``/``pcsa.`` labels on workloads are dropped for the same reason.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from calico.model import values as v1
from calico.model.keys import HostEndpointKey, NetworkSetKey, ProfileLabelsKey, ProfileRulesKey
from calico.model.names import wep_key_from_v3
from calico.model.processors.common import (
    NAMESPACE_LABEL,
    NAMESPACE_PROFILE_PREFIX,
    Output,
    decode,
    endpoint_ports,
    ip_str,
    mac_str,
    net_str,
    share,
    split_by_version,
    wep_labels_v1,
)
from calico.model.processors.lean import LeanPort, LeanWorkloadEndpoint, lean_workload_endpoint
from calico.model.processors.lean_v1 import lean_wep_output
from calico.model.processors.rules import rules_v1
from calico.model.resources import ResourceKey
from calico.model.values.builder import frozen_builder

if TYPE_CHECKING:
    from calico.api.endpoints import WorkloadEndpoint


def _model(kind: str) -> Any:
    """The v3 model class of ``kind``, imported on first use: the lean readers (``lean_v1``,
    ``leanprofile``) build values with this module's functions without pydantic."""
    from calico.api import endpoints

    return getattr(endpoints, kind)


_LABELS_MEMO_MAX = 16384
_labels_memo: dict[tuple[Any, ...], dict[str, str]] = {}


def _wep_labels(res: WorkloadEndpoint | LeanWorkloadEndpoint, namespace: str) -> dict[str, str]:
    """The endpoint's v1 labels, a fresh dict each time; endpoints of one workload carry the
    same labels, so the result for each (labels, namespace, orchestrator, service account)
    is remembered (bounded) and copied."""
    raw = res.metadata.labels or {}
    memo_key = (namespace, res.spec.orchestrator, res.spec.service_account_name, *raw.items())
    labels = _labels_memo.get(memo_key)
    if labels is None:
        labels = _wep_labels_uncached(raw, namespace, res.spec)
        if len(_labels_memo) >= _LABELS_MEMO_MAX:
            _labels_memo.clear()
        _labels_memo[memo_key] = labels
    return dict(labels)


_ports_memo: dict[tuple[LeanPort, ...], tuple[v1.EndpointPort, ...]] = {}


def _wep_ports(ports: list[Any] | None) -> tuple[v1.EndpointPort, ...]:
    """The v1 named ports; a lean read's (hashable) ports are converted once per distinct
    list and the frozen values shared (bounded like the labels)."""
    if not ports or type(ports[0]) is not LeanPort:
        return endpoint_ports(ports, named_only=True)
    memo_key = tuple(ports)
    out = _ports_memo.get(memo_key)
    if out is None:
        out = endpoint_ports(ports, named_only=True)
        if len(_ports_memo) >= _LABELS_MEMO_MAX:
            _ports_memo.clear()
        _ports_memo[memo_key] = out
    return out


def _wep_labels_uncached(raw: dict[str, str], namespace: str, spec: Any) -> dict[str, str]:
    return wep_labels_v1(raw, namespace, spec.orchestrator, spec.service_account_name)


def workload_endpoint(key: ResourceKey, value: Any) -> Output:
    """model.WorkloadEndpoint. A WEP without IPs is not sent: Felix could not render rules
    for it yet (the CNI plugin fills the IPs in a moment later). A plain endpoint is read
    without the model (:func:`calico.model.processors.lean_v1.lean_wep_output`), anything
    else through it."""
    out = lean_wep_output(key, value)
    if out is not None:
        return out
    return workload_endpoint_v1(key, decode_wep(key, value))


def workload_endpoint_lean(key: ResourceKey, value: Any) -> Output | None:
    """``workload_endpoint``'s output for a document the lean read accepts, else None. The
    lean read type-checks every leaf it keeps as a string or an integer, so the syncer may
    hand this orjson's decode (``calico.syncer.jsondecode``). One pass
    (:func:`calico.model.processors.lean_v1.lean_wep_output`); the two-step reference is
    :func:`workload_endpoint_lean_reference`."""
    return lean_wep_output(key, value)


def workload_endpoint_lean_reference(key: ResourceKey, value: Any) -> Output | None:
    """The lean read's view, then its v1 build: what ``lean_wep_output`` must equal."""
    res = lean_workload_endpoint(key, value)
    return None if res is None else lean_workload_endpoint_v1(key, res)


def decode_wep(key: ResourceKey, value: Any) -> WorkloadEndpoint:
    """The reference read: the stored value validated through the v3 model."""
    return decode(key, value, _model("WorkloadEndpoint"))


def workload_endpoint_v1(key: ResourceKey, res: WorkloadEndpoint | LeanWorkloadEndpoint) -> Output:
    """The v1 key and value of a read endpoint, whichever way it was read."""
    spec = res.spec
    if not spec.ip_networks:
        return {}
    v4_nets, v6_nets = split_by_version(spec.ip_networks, net_str)
    nats: dict[int, list[v1.IPNAT]] = {4: [], 6: []}
    for nat in spec.ip_nats or []:
        int_ip = ip_str(nat.internal_ip)
        nats[6 if ":" in int_ip else 4].append(v1.IPNAT(int_ip, ip_str(nat.external_ip)))
    endpoint = v1.WorkloadEndpoint(
        state="active",
        name=spec.interface_name or "",
        mac=mac_str(spec.mac) if spec.mac else None,
        profile_ids=tuple(share(p) for p in spec.profiles or ()),
        ipv4_nets=v4_nets,
        ipv6_nets=v6_nets,
        ipv4_nat=tuple(nats[4]),
        ipv6_nat=tuple(nats[6]),
        labels=_wep_labels(res, key.namespace),
        ipv4_gateway=ip_str(spec.ipv4_gateway) if spec.ipv4_gateway else None,
        ipv6_gateway=ip_str(spec.ipv6_gateway) if spec.ipv6_gateway else None,
        ports=_wep_ports(spec.ports),
        generate_name=res.metadata.generate_name or "",
        allow_spoofed_source_ips=tuple(
            net_str(p) for p in spec.allow_spoofed_source_prefixes or ()
        ),
        annotations=dict(res.metadata.annotations or {}),
    )
    return {wep_key_from_v3(key.namespace, key.name): endpoint}


_build_wep = frozen_builder(v1.WorkloadEndpoint)
_intern = sys.intern


def lean_workload_endpoint_v1(key: ResourceKey, res: LeanWorkloadEndpoint) -> Output:
    """:func:`workload_endpoint_v1` for a lean read, which has no NATs, gateways or spoofing
    prefixes and only canonical IPv4 ``/32`` networks (``net_str`` gives each back as it is),
    so those fields are constants and the networks the IPv4 ones; the value is built without
    the frozen dataclass ``__init__`` (``frozen_builder``). ``tests/unit/model/test_lean_wep.py``
    checks it equals the general build and the model path."""
    spec, meta = res.spec, res.metadata
    nets = spec.ip_networks
    if not nets:
        return {}
    endpoint = _build_wep(
        "active",  # state
        spec.interface_name,  # name
        "",  # active_instance_id
        mac_str(spec.mac) if spec.mac else None,
        tuple(map(_intern, spec.profiles)) if spec.profiles else (),
        tuple(nets),  # ipv4_nets
        (),  # ipv6_nets
        (),  # ipv4_nat
        (),  # ipv6_nat
        _wep_labels(res, key.namespace),
        None,  # ipv4_gateway
        None,  # ipv6_gateway
        _wep_ports(spec.ports),
        meta.generate_name or "",
        (),  # allow_spoofed_source_ips
        dict(meta.annotations) if meta.annotations else {},
    )
    return {wep_key_from_v3(key.namespace, key.name): endpoint}


def host_endpoint(key: ResourceKey, value: Any) -> Output:
    """model.HostEndpoint, filed under the node the endpoint belongs to."""
    res = decode(key, value, _model("HostEndpoint"))
    spec = res.spec
    v4, v6 = split_by_version(spec.expected_ips or [], ip_str)
    endpoint = v1.HostEndpoint(
        name=spec.interface_name or "",
        expected_ipv4_addrs=v4,
        expected_ipv6_addrs=v6,
        labels=dict(res.metadata.labels or {}),
        profile_ids=tuple(spec.profiles or ()),
        ports=endpoint_ports(spec.ports, named_only=False),
    )
    return {HostEndpointKey(spec.node or "", key.name): endpoint}


def profile(key: ResourceKey, value: Any) -> Output:
    """Rules and labels as the v1 profile keys, plus the v3 Profile itself (Felix's
    ProfileDecoder reads namespace/service-account labels from it)."""
    res = decode(key, value, _model("Profile"))
    return profile_output(key, res, res.spec.ingress, res.spec.egress)


def profile_output(key: ResourceKey, res: Any, ingress: Any, egress: Any) -> Output:
    """``profile``'s output from a read Profile (the model, or ``leanprofile``'s view and
    its rules read without the model)."""
    out: Output = {
        ProfileRulesKey(key.name): v1.ProfileRules(
            inbound_rules=rules_v1(ingress), outbound_rules=rules_v1(egress)
        )
    }
    if res.spec.labels_to_apply:
        out[ProfileLabelsKey(key.name)] = v1.ProfileLabels(dict(res.spec.labels_to_apply))
    out[key] = res
    return out


def network_set(key: ResourceKey, value: Any) -> Output:
    """Namespaced sets are named ``<ns>/<name>``, carry the namespace label and inherit the
    namespace's labels through its ``kns.<ns>`` profile."""
    res = decode(key, value, _model("NetworkSet"))
    labels = dict(res.metadata.labels or {})
    labels[NAMESPACE_LABEL] = key.namespace
    netset = v1.NetworkSet(
        nets=tuple(net_str(n) for n in res.spec.nets or ()),
        labels=labels,
        profile_ids=(NAMESPACE_PROFILE_PREFIX + key.namespace,),
    )
    return {NetworkSetKey(f"{key.namespace}/{key.name}"): netset}


def global_network_set(key: ResourceKey, value: Any) -> Output:
    res = decode(key, value, _model("GlobalNetworkSet"))
    netset = v1.NetworkSet(
        nets=tuple(net_str(n) for n in res.spec.nets or ()),
        labels=dict(res.metadata.labels or {}),
    )
    return {NetworkSetKey(key.name): netset}
