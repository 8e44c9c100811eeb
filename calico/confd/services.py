"""Per-service advertisement: which Services this node advertises as /32 (/128) static routes
(design/confd.md "Per-service advertisement").

Upstream's route generator decides per Service: never on a node labelled
``node.kubernetes.io/exclude-from-external-load-balancers=true``; only ClusterIP, NodePort and
LoadBalancer Services with a cluster IP; with ``externalTrafficPolicy: Cluster`` only when a
load-balancer IP or an external IP falls in a single-address (/32, /128) entry of
``serviceLoadBalancerIPs`` / ``serviceExternalIPs`` (the ranges themselves are global routes);
with ``Local`` when this node has a ready endpoint of the cluster IP's family. An advertised
Service contributes its cluster IP (when cluster IPs are advertised at all), its allowed
external IPs and its allowed load-balancer ingress IPs. Upstream keeps reference counts as
events arrive; here the set is recomputed from the whole picture, which gives the same routes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

Net = ipaddress.IPv4Network | ipaddress.IPv6Network
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
ADVERTISED_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")


def _ip(text: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(str(text))
    except ValueError:
        return None


def _within(ip: Any, nets: Iterable[Net], single_only: bool = False) -> bool:
    addr = _ip(ip) if ip else None
    if addr is None:
        return False
    return any(
        addr in n and (not single_only or n.prefixlen == n.max_prefixlen)
        for n in nets
        if n.version == addr.version
    )


def _host_route(ip: str) -> str:
    addr = ipaddress.ip_address(ip)
    return f"{addr}/{addr.max_prefixlen}"


def _lb_ips(svc: Mapping[str, Any]) -> list[str]:
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return [str(i["ip"]) for i in ingress if i.get("ip")]


def _has_local_endpoint(slices: Iterable[Mapping[str, Any]], node: str, cluster_ip: str) -> bool:
    v6 = ":" in cluster_ip
    for sl in slices:
        for ep in sl.get("endpoints") or []:
            ready = (ep.get("conditions") or {}).get("ready")
            if ep.get("nodeName") != node or ready is False:
                continue
            if any((":" in str(a)) == v6 for a in ep.get("addresses") or []):
                return True
    return False


def advertise(
    svc: Mapping[str, Any],
    slices: Iterable[Mapping[str, Any]],
    node: str,
    external_nets: list[Net],
    lb_nets: list[Net],
) -> bool:
    spec = svc.get("spec") or {}
    if (spec.get("type") or "ClusterIP") not in ADVERTISED_TYPES:
        return False
    cluster_ip = spec.get("clusterIP") or ""
    if cluster_ip in ("", "None"):
        return False
    policy = spec.get("externalTrafficPolicy") or ""
    if policy == "Cluster":
        if spec.get("type") == "LoadBalancer" and any(
            _within(ip, lb_nets, single_only=True)
            for ip in [spec.get("loadBalancerIP"), *_lb_ips(svc)]
        ):
            return True
        if any(
            _within(ip, external_nets, single_only=True) for ip in spec.get("externalIPs") or []
        ):
            return True
    if policy != "Local":
        return False
    return _has_local_endpoint(slices, node, cluster_ip)


def routes(
    svc: Mapping[str, Any],
    advertise_cluster_ips: bool,
    external_nets: list[Net],
    lb_nets: list[Net],
) -> list[str]:
    spec = svc.get("spec") or {}
    out = []
    if advertise_cluster_ips and _ip(spec.get("clusterIP")):
        out.append(_host_route(spec["clusterIP"]))
    out += [_host_route(ip) for ip in spec.get("externalIPs") or [] if _within(ip, external_nets)]
    out += [_host_route(ip) for ip in _lb_ips(svc) if _within(ip, lb_nets)]
    return out


def service_routes(
    services: Mapping[str, Mapping[str, Any]],
    slices: Mapping[str, Mapping[str, Any]],
    node: str,
    cluster_cidrs: list[str],
    external_cidrs: list[str],
    lb_cidrs: list[str],
    excluded: bool,
) -> set[str]:
    """Every per-service host route this node advertises (``services``/``slices`` keyed
    ``<namespace>/<name>``, raw API objects)."""
    if excluded:
        return set()
    ext = [ipaddress.ip_network(c, strict=False) for c in external_cidrs]
    lbs = [ipaddress.ip_network(c, strict=False) for c in lb_cidrs]
    by_service: dict[str, list[Mapping[str, Any]]] = {}
    for sl in slices.values():
        meta = sl.get("metadata") or {}
        name = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if name:
            by_service.setdefault(f"{meta.get('namespace', '')}/{name}", []).append(sl)
    out: set[str] = set()
    for key, svc in services.items():
        if advertise(svc, by_service.get(key, []), node, ext, lbs):
            out.update(routes(svc, bool(cluster_cidrs), ext, lbs))
    return out
