"""A stored Node read without pydantic, for Felix's start-up config load and its syncer
(design/performance.md "Cold start: no pydantic on a clean start"): every real cluster has
one per host, and the Node processor's model validation imported pydantic at every start.

The contract is ``leanpolicy``'s: a plain Node (plain ObjectMeta; ``spec`` with BGP
addresses, tunnel addresses and MACs, WireGuard interface addresses, ``addresses`` and
``orchRefs``; ``status`` with the WireGuard keys and pod CIDRs; exact JSON types, no nulls) is
checked with the validators the model runs; anything else answers None and the processor
decides. The value under the Node's ``ResourceKey`` is a ``leanview.LeanResource`` with the
model's attribute names (the model built only when something reads beyond them, or Typha
encodes it), and the v1 keys are built by the processor's own ``config.node_output``.
``tests/unit/model/test_lean_node_profile.py`` checks the outputs and every attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calico.api import validators as v
from calico.model.processors.common import Output
from calico.model.processors.config import node_output, node_pod_cidr_output
from calico.model.processors.leanmeta import Decline, name_of, top
from calico.model.processors.leanview import LeanResource, LeanView
from calico.model.resources import ResourceKey

_TOP = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
_META_ATTRS = (
    ("name", "name"),
    ("namespace", "namespace"),
    ("labels", "labels"),
    ("annotations", "annotations"),
    ("resourceVersion", "resource_version"),
    ("uid", "uid"),
    ("creationTimestamp", "creation_timestamp"),
)


def _ip(version: int) -> Callable[[str], Any]:
    return lambda s: v.ip_address(s, version)


def _cidr(version: int | None) -> Callable[[str], Any]:
    return lambda s: v.cidr(s, version)


#: JSON name -> (attribute, check) of the string fields of each part.
_BGP = {
    "ipv4Address": ("ipv4_address", _cidr(4)),
    "ipv6Address": ("ipv6_address", _cidr(6)),
    "ipv4IPIPTunnelAddr": ("ipv4_ipip_tunnel_addr", _ip(4)),
    "routeReflectorClusterID": ("route_reflector_cluster_id", _ip(4)),
}
_SPEC_STRINGS = {
    "ipv4VXLANTunnelAddr": ("ipv4_vxlan_tunnel_addr", _ip(4)),
    "vxlanTunnelMACAddr": ("vxlan_tunnel_mac_addr", v.mac_address),
    "ipv6VXLANTunnelAddr": ("ipv6_vxlan_tunnel_addr", _ip(6)),
    "vxlanTunnelMACAddrV6": ("vxlan_tunnel_mac_addr_v6", v.mac_address),
}
_WIREGUARD = {
    "interfaceIPv4Address": ("interface_ipv4_address", _ip(4)),
    "interfaceIPv6Address": ("interface_ipv6_address", _ip(6)),
}
_STATUS_STRINGS = {
    "wireguardPublicKey": ("wireguard_public_key", None),
    "wireguardPublicKeyV6": ("wireguard_public_key_v6", None),
}
_SPEC = frozenset({*_SPEC_STRINGS, "bgp", "wireguard", "addresses", "orchRefs"})
_STATUS = frozenset({*_STATUS_STRINGS, "podCIDRs"})
_ADDRESS_TYPES = frozenset({"CalicoNodeIP", "InternalIP", "ExternalIP"})


def lean_node(key: ResourceKey, value: Any) -> Output | None:
    """The Node processor's output for a plain stored Node, or None."""
    res = lean_node_resource(key, value)
    return None if res is None else node_output(key, res)


def lean_node_pod_cidr(key: ResourceKey, value: Any) -> Output | None:
    """The same for the host-local IPAM processor (``node_pod_cidr``)."""
    res = lean_node_resource(key, value)
    return None if res is None else node_pod_cidr_output(key, res)


def lean_node_resource(key: ResourceKey, value: Any) -> LeanResource | None:
    """The Node as a view with the model's attributes, or None (the model decides)."""
    try:
        if type(value) is not dict or not value.keys() <= _TOP:
            return None
        body = {k: value[k] for k in value.keys() - {"status"}}
        meta, spec = top(key, body, "Node", namespaced=False)
        name = name_of(key, meta)
        v.dns1123_subdomain(name)
        status = _status(value)
        attrs = _spec(spec)
    except (Decline, ValueError):
        return None
    res = LeanResource(key, value, _node_class, {})
    model = res.model
    meta_view = LeanView(
        {attr: meta.get(js) for js, attr in _META_ATTRS} | {"name": name},
        lambda: model().metadata,
    )
    spec_view = LeanView(attrs(model), lambda: model().spec)
    status_view = None if status is None else LeanView(status, lambda: model().status)
    res.__dict__.update(
        api_version="projectcalico.org/v3",
        kind="Node",
        metadata=meta_view,
        spec=spec_view,
        status=status_view,
    )
    return res


def _node_class() -> type:
    from calico.api.cluster import Node

    return Node


def _strings(obj: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for js, (attr, check) in fields.items():
        text = obj.get(js)
        if text is None:
            if js in obj:
                raise Decline
        elif type(text) is not str:
            raise Decline
        elif check is not None:
            check(text)
        out[attr] = text
    return out


def _part(spec: dict[str, Any], field: str, fields: dict[str, Any]) -> dict[str, Any] | None:
    if field not in spec:
        return None
    obj = spec[field]
    if type(obj) is not dict or not obj.keys() <= fields.keys():
        raise Decline
    return _strings(obj, fields)


def _spec(spec: dict[str, Any]) -> Callable[[Any], dict[str, Any]]:
    """The spec's checks now; its view's attributes once the model fallback exists."""
    if not spec.keys() <= _SPEC:
        raise Decline
    strings = _strings(spec, _SPEC_STRINGS)
    bgp = _part(spec, "bgp", _BGP)
    if bgp is not None:
        bgp["as_number"] = None
    wireguard = _part(spec, "wireguard", _WIREGUARD)
    addresses = _list(spec, "addresses", _address)
    orch_refs = _list(spec, "orchRefs", _orch_ref)

    def attrs(model: Callable[[], Any]) -> dict[str, Any]:
        def sub(name: str) -> Callable[[], Any]:
            return lambda: getattr(model().spec, name)

        def items(name: str, rows: list[dict[str, Any]] | None) -> list[LeanView] | None:
            if rows is None:
                return None
            return [
                LeanView(row, lambda i=i: getattr(model().spec, name)[i])
                for i, row in enumerate(rows)
            ]

        return strings | {
            "bgp": None if bgp is None else LeanView(bgp, sub("bgp")),
            "wireguard": None if wireguard is None else LeanView(wireguard, sub("wireguard")),
            "addresses": items("addresses", addresses),
            "orch_refs": items("orch_refs", orch_refs),
            "interfaces": None,
        }

    return attrs


def _list(spec: dict[str, Any], field: str, row: Callable[[Any], dict[str, Any]]) -> Any:
    if field not in spec:
        return None
    items = spec[field]
    if type(items) is not list:
        raise Decline
    return [row(item) for item in items]


def _address(item: Any) -> dict[str, Any]:
    if type(item) is not dict or not item.keys() <= {"address", "type"}:
        raise Decline
    address, kind = item.get("address"), item.get("type")
    if type(address) is not str:
        raise Decline
    v.cidr(address)
    if kind is not None and (type(kind) is not str or kind not in _ADDRESS_TYPES):
        raise Decline
    if kind is None and "type" in item:
        raise Decline
    return {"address": address, "type": kind}


def _orch_ref(item: Any) -> dict[str, Any]:
    if type(item) is not dict or not item.keys() <= {"nodeName", "orchestrator"}:
        raise Decline
    node, orch = item.get("nodeName"), item.get("orchestrator")
    if type(orch) is not str or (node is not None and type(node) is not str):
        raise Decline
    if node is None and "nodeName" in item:
        raise Decline
    return {"node_name": node, "orchestrator": orch}


def _status(value: dict[str, Any]) -> dict[str, Any] | None:
    if "status" not in value:
        return None
    status = value["status"]
    if type(status) is not dict or not status.keys() <= _STATUS:
        raise Decline
    out = _strings(status, _STATUS_STRINGS)
    cidrs = status.get("podCIDRs")
    if cidrs is not None and (type(cidrs) is not list or any(type(c) is not str for c in cidrs)):
        raise Decline
    if cidrs is None and "podCIDRs" in status:
        raise Decline
    out["pod_cidrs"] = cidrs
    return out
