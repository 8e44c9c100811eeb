"""Kubernetes Nodes <-> Calico Nodes through ``projectcalico.org/*`` annotations.

Reads: Calico labels/annotations from the JSON annotations, then every Kubernetes label on top
(Kubernetes wins; its label map is remembered in ``projectcalico.org/kube-labels``); BGP, VXLAN,
WireGuard and interface fields from their annotations (invalid values ignored); orchRefs and
addresses derived; with host-local IPAM (``usePodCIDR``) the IPIP tunnel address comes from the
pod CIDR. Writes touch only annotations (GET + PUT ``nodes/<n>/status``), never the
Kubernetes labels or spec; there is no create or delete.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import logging
from typing import Any

log = logging.getLogger(__name__)

A = "projectcalico.org/"
LABELS = A + "labels"
ANNOTATIONS = A + "annotations"
KUBE_LABELS = A + "kube-labels"
BGP_FIELDS = {  # spec.bgp field -> annotation
    "ipv4Address": A + "IPv4Address",
    "ipv6Address": A + "IPv6Address",
    "routeReflectorClusterID": A + "RouteReflectorClusterID",
    "asNumber": A + "ASNumber",
    "ipv4IPIPTunnelAddr": A + "IPv4IPIPTunnelAddr",
}
SPEC_FIELDS = {
    "ipv4VXLANTunnelAddr": A + "IPv4VXLANTunnelAddr",
    "vxlanTunnelMACAddr": A + "VXLANTunnelMACAddr",
    "ipv6VXLANTunnelAddr": A + "IPv6VXLANTunnelAddr",
    "vxlanTunnelMACAddrV6": A + "VXLANTunnelMACAddrV6",
}
WG_FIELDS = {
    "interfaceIPv4Address": A + "IPv4WireguardInterfaceAddr",
    "interfaceIPv6Address": A + "IPv6WireguardInterfaceAddr",
}
STATUS_FIELDS = {
    "wireguardPublicKey": A + "WireguardPublicKey",
    "wireguardPublicKeyV6": A + "WireguardPublicKeyV6",
}
WG_PUBLIC_KEY = STATUS_FIELDS["wireguardPublicKey"]
INTERFACES = A + "Interfaces"


def _valid(field: str, value: str) -> bool:
    try:
        if field in ("ipv4Address", "ipv6Address"):
            net = ipaddress.ip_interface(value)
            return net.version == (4 if field == "ipv4Address" else 6)
        if field in ("routeReflectorClusterID", "ipv4IPIPTunnelAddr"):
            return ipaddress.ip_address(value).version == 4
        if field == "asNumber":
            return 0 <= int(value) <= 4294967295
    except ValueError:
        return False
    return True


def _json_map(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        out = json.loads(text)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def host_local_tunnel_addr(pod_cidr: str) -> str:
    """Upstream's static IPIP tunnel address in host-local mode: the pod CIDR's network
    address with its last byte + 1 (``10.0.0.0/24`` -> ``10.0.0.1``); "" for IPv6 or junk."""
    try:
        net = ipaddress.ip_network(pod_cidr, strict=False)
    except ValueError:
        return ""
    if net.version != 4:
        return ""
    packed = bytearray(net.network_address.packed)
    packed[3] = (packed[3] + 1) % 256
    return str(ipaddress.IPv4Address(bytes(packed)))


def k8s_node_to_calico(node: dict[str, Any], use_pod_cidr: bool = False) -> dict[str, Any]:
    """``use_pod_cidr`` (host-local IPAM): the IPIP tunnel address comes from
    ``spec.podCIDR`` (and doubles as the WireGuard IPv4 address once a public key is set)
    instead of the annotations, as upstream."""
    meta = node.get("metadata") or {}
    ann = meta.get("annotations") or {}
    k8s_labels = dict(meta.get("labels") or {})
    labels = {**_json_map(ann.get(LABELS)), **k8s_labels}
    annotations = _json_map(ann.get(ANNOTATIONS))
    annotations[KUBE_LABELS] = json.dumps(k8s_labels, sort_keys=True, separators=(",", ":"))
    out_meta: dict[str, Any] = {
        "name": meta.get("name", ""),
        "labels": labels,
        "annotations": annotations,
    }
    for field in ("uid", "creationTimestamp"):
        if meta.get(field):
            out_meta[field] = meta[field]
    spec: dict[str, Any] = {}
    bgp: dict[str, Any] = {}
    for field, key in BGP_FIELDS.items():
        value = ann.get(key)
        if value and _valid(field, value):
            bgp[field] = int(value) if field == "asNumber" else value
        elif value:
            log.info("Ignoring invalid %s %r on node %s", key, value, meta.get("name"))
    pod_cidr = (node.get("spec") or {}).get("podCIDR") or ""
    host_local = use_pod_cidr and bool(pod_cidr)
    if host_local:
        bgp.pop("ipv4IPIPTunnelAddr", None)
        if tunnel := host_local_tunnel_addr(pod_cidr):
            bgp["ipv4IPIPTunnelAddr"] = tunnel
    if bgp:
        spec["bgp"] = bgp
    for field, key in SPEC_FIELDS.items():
        if ann.get(key):
            spec[field] = ann[key]
    wg = {f: ann[k] for f, k in WG_FIELDS.items() if ann.get(k)}
    if host_local:
        wg = {}
        if ann.get(WG_PUBLIC_KEY) and bgp.get("ipv4IPIPTunnelAddr"):
            wg["interfaceIPv4Address"] = bgp["ipv4IPIPTunnelAddr"]
    if wg:
        spec["wireguard"] = wg
    if INTERFACES in ann:
        try:
            spec["interfaces"] = [
                {
                    "name": i.get("name", ""),
                    "addresses": [a for a in i.get("addresses") or [] if _is_ip(a)],
                }
                for i in json.loads(ann[INTERFACES])
            ]
        except (ValueError, AttributeError, TypeError):
            log.info("Ignoring invalid %s on node %s", INTERFACES, meta.get("name"))
    spec["orchRefs"] = [{"nodeName": meta.get("name", ""), "orchestrator": "k8s"}]
    addresses = [
        {"address": bgp[f], "type": "CalicoNodeIP"}
        for f in ("ipv4Address", "ipv6Address")
        if f in bgp
    ]
    for addr in (node.get("status") or {}).get("addresses") or []:
        if addr.get("type") in ("InternalIP", "ExternalIP") and _is_ip(addr.get("address", "")):
            addresses.append({"address": addr["address"], "type": addr["type"]})
    if addresses:
        spec["addresses"] = addresses
    status: dict[str, Any] = {f: ann[k] for f, k in STATUS_FIELDS.items() if ann.get(k)}
    pod_cidrs = (node.get("spec") or {}).get("podCIDRs")
    if pod_cidrs:
        status["podCIDRs"] = list(pod_cidrs)
    out: dict[str, Any] = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "Node",
        "metadata": out_meta,
        "spec": spec,
    }
    if status:
        out["status"] = status
    return out


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_interface(text)
    except ValueError:
        return False
    return True


def merge_calico_into_k8s(node: dict[str, Any], calico: dict[str, Any]) -> dict[str, Any]:
    """The Kubernetes Node with ``calico``'s labels, annotations and fields as annotations."""
    out = copy.deepcopy(node)
    meta = out.setdefault("metadata", {})
    ann = dict(meta.get("annotations") or {})
    cmeta = calico.get("metadata") or {}
    kube_labels = set(_json_map((cmeta.get("annotations") or {}).get(KUBE_LABELS)))
    kube_labels |= set(meta.get("labels") or {})
    labels = {}
    for key, value in (cmeta.get("labels") or {}).items():
        if key in kube_labels:
            if (meta.get("labels") or {}).get(key) != value:
                log.warning("Calico label %s=%s is shadowed by the Kubernetes label", key, value)
            continue
        labels[key] = value
    annotations = {k: v for k, v in (cmeta.get("annotations") or {}).items() if k != KUBE_LABELS}
    for key, value in ((LABELS, labels), (ANNOTATIONS, annotations)):
        if value:
            ann[key] = json.dumps(value, sort_keys=True, separators=(",", ":"))
        else:
            ann.pop(key, None)
    spec = calico.get("spec") or {}
    bgp = spec.get("bgp") or {}
    for field, key in BGP_FIELDS.items():
        _set(ann, key, bgp.get(field))
    for field, key in SPEC_FIELDS.items():
        _set(ann, key, spec.get(field))
    wg = spec.get("wireguard") or {}
    for field, key in WG_FIELDS.items():
        _set(ann, key, wg.get(field))
    status = calico.get("status") or {}
    for field, key in STATUS_FIELDS.items():
        _set(ann, key, status.get(field))
    interfaces = spec.get("interfaces")
    _set(ann, INTERFACES, json.dumps(interfaces, separators=(",", ":")) if interfaces else None)
    meta["annotations"] = ann
    return out


def _set(ann: dict[str, str], key: str, value: Any) -> None:
    if value in (None, "", [], {}):
        ann.pop(key, None)
    else:
        ann[key] = str(value)
