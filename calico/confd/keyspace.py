"""The flattened v1 key space confd's templates watch (design/confd.md "Key space").

Upstream confd keeps an etcd-v1-style map of ``/calico/...`` keys built from the v3 resources;
each template watches some prefixes and re-renders only when a key under them changes. The
map is rebuilt from :class:`calico.confd.state.BGPState` after every batch of updates and
diffed against the previous one, so a resource change that alters no key renders nothing.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from typing import Any

from calico.confd import services as svc_routes
from calico.confd.localpeers import LocalWorkload
from calico.confd.peers import (
    DEFAULT_AS,
    NodeInfo,
    PasswordLookup,
    PeerComputer,
    no_passwords,
    password_for,
)
from calico.confd.state import BGPState

KeySpace = dict[str, str]
EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"


def seg(cidr: str) -> str:
    return cidr.replace("/", "-")


def _loglevel(severity: str | None) -> str:
    if severity is None:
        return "info"
    level = severity.lower()
    return level if level in ("debug", "info") else "none"


def node_info(name: str, node: Any) -> NodeInfo:
    bgp = node.spec.bgp
    v4 = (bgp.ipv4_address or "") if bgp else ""
    v6 = (bgp.ipv6_address or "") if bgp else ""
    return NodeInfo(
        name=name,
        labels=dict(node.metadata.labels or {}),
        ipv4=v4.split("/")[0],
        ipv6=str(ipaddress.ip_interface(v6).ip) if v6 else "",
        asn=str(bgp.as_number) if bgp and bgp.as_number is not None else "",
        rr_cluster_id=(bgp.route_reflector_cluster_id or "") if bgp else "",
        listen_port=0,
    )


def _prefix_advertisements(spec: Any, version: int) -> str | None:
    if not spec.prefix_advertisements:
        return None
    names = {c.name: c.value for c in spec.communities or []}
    out = []
    for adv in spec.prefix_advertisements:
        if ipaddress.ip_network(adv.cidr, strict=False).version != version:
            continue
        values = sorted({names.get(c, c) for c in adv.communities})
        out.append({"cidr": adv.cidr, "communities": values})
    return json.dumps(out) if out else None


def _service_cidrs(spec: Any | None) -> tuple[list[str], list[str], list[str]]:
    """(cluster, external, load balancer) CIDR ranges; single IPs are per-service upstream."""
    if spec is None:
        return [], [], []

    def cidrs(blocks: Any, ranges_only: bool) -> list[str]:
        out = []
        for b in blocks or []:
            net = ipaddress.ip_network(b.cidr, strict=False)
            if ranges_only and net.prefixlen == net.max_prefixlen:
                continue
            out.append(str(net))
        return out

    return (
        cidrs(spec.service_cluster_ips, False),
        cidrs(spec.service_external_ips, True),
        cidrs(spec.service_load_balancer_ips, True),
    )


def advertised_cidrs(spec: Any | None, env: Mapping[str, str]) -> tuple[list[str], ...]:
    """(cluster, external, load balancer) CIDRs as configured, single IPs included, with
    ``CALICO_ADVERTISE_CLUSTER_IPS`` overriding ``serviceClusterIPs``."""
    cluster = [b.cidr for b in (spec.service_cluster_ips or [])] if spec else []
    if env.get("CALICO_ADVERTISE_CLUSTER_IPS"):
        cluster = [c.strip() for c in env["CALICO_ADVERTISE_CLUSTER_IPS"].split(",") if c.strip()]
    external = [b.cidr for b in (spec.service_external_ips or [])] if spec else []
    lbs = [b.cidr for b in (spec.service_load_balancer_ips or [])] if spec else []
    return cluster, external, lbs


def build(
    state: BGPState,
    nodename: str,
    env: Mapping[str, str] | None = None,
    passwords: PasswordLookup = no_passwords,
    workloads: list[LocalWorkload] | None = None,
    k8s_services: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
) -> KeySpace:
    """Every key confd's templates may read, for node ``nodename``; ``passwords`` resolves
    ``secretKeyRef`` passwords (BGPPeer ``password``, BGPConfiguration ``nodeMeshPassword``),
    ``workloads`` are this node's local workload peers (endpoint status files),
    ``k8s_services`` the (Services, EndpointSlices) for per-service advertisement."""
    env = env or {}
    ks: KeySpace = {}
    g = "/calico/bgp/v1/global"
    default = state.global_config()
    gspec = default.spec if default is not None else None
    ks["/calico/bgpconfig"] = json.dumps(gspec.to_wire() if gspec else {}, sort_keys=True)
    global_as = str(gspec.as_number) if gspec and gspec.as_number is not None else DEFAULT_AS
    mesh = gspec.node_to_node_mesh_enabled if gspec else None
    ks[f"{g}/as_num"] = global_as
    ks[f"{g}/node_mesh"] = json.dumps({"enabled": mesh is not False})
    ks[f"{g}/loglevel"] = _loglevel(gspec.log_severity_screen if gspec else None)
    global_port = gspec.listen_port if gspec and gspec.listen_port else 0
    mesh_password = password_for(gspec.node_mesh_password, passwords) if gspec else None
    if mesh_password is not None:
        ks[f"{g}/node_mesh_password"] = mesh_password
    if global_port:
        ks[f"{g}/listen_port"] = str(global_port)
    for version in (4, 6):
        adv = _prefix_advertisements(gspec, version) if gspec else None
        if adv is not None:
            ks[f"{g}/prefix_advertisements/ip_v{version}"] = adv

    infos: dict[str, NodeInfo] = {}
    for name, node in state.nodes.items():
        info = node_info(name, node)
        h = f"/calico/bgp/v1/host/{name}"
        bgp = node.spec.bgp
        ks[f"{h}/ip_addr_v4"] = info.ipv4
        ks[f"{h}/ip_addr_v6"] = info.ipv6
        for version, cidr in (
            (4, bgp.ipv4_address if bgp else None),
            (6, bgp.ipv6_address if bgp else None),
        ):
            if cidr:
                ks[f"{h}/network_v{version}"] = str(ipaddress.ip_interface(cidr).network)
        if info.asn:
            ks[f"{h}/as_num"] = info.asn
        ks[f"{h}/rr_cluster_id"] = info.rr_cluster_id
        wg = node.spec.wireguard
        ks[f"{h}/wireguard_addr_v4"] = (wg.interface_ipv4_address or "") if wg else ""
        ks[f"{h}/wireguard_addr_v6"] = (wg.interface_ipv6_address or "") if wg else ""
        per_node = state.bgp_configs.get(f"node.{name}")
        port = 0
        if per_node is not None:
            nspec = per_node.spec
            if nspec.listen_port:
                port = nspec.listen_port
                ks[f"{h}/listen_port"] = str(port)
            if nspec.log_severity_screen is not None:
                ks[f"{h}/loglevel"] = _loglevel(nspec.log_severity_screen)
            for version in (4, 6):
                adv = _prefix_advertisements(nspec, version)
                if adv is not None:
                    ks[f"{h}/prefix_advertisements/ip_v{version}"] = adv
        infos[name] = NodeInfo(**{**info.__dict__, "listen_port": port})

    computed = PeerComputer(infos, global_as, global_port, passwords, workloads).compute(
        state.peers
    )
    for version, tables in computed.items():
        for owner, peers in tables.items():
            base = (
                f"{g}/peer_v{version}"
                if owner == "global"
                else (f"/calico/bgp/v1/host/{owner}/peer_v{version}")
            )
            for key, peer in peers.items():
                ks[f"{base}/{key}"] = json.dumps(peer, sort_keys=True)

    for cidr, aff in state.affinities.items():
        version = ipaddress.ip_network(cidr).version
        ks[f"/calico/ipam/v2/host/{nodename}/ipv{version}/block/{seg(cidr)}"] = json.dumps(
            {"state": aff.state, "deleted": aff.deleted}, sort_keys=True
        )
    for cidr, pool in state.pools.items():
        version = ipaddress.ip_network(cidr).version
        ks[f"/calico/v1/ipam/v{version}/pool/{seg(cidr)}"] = json.dumps(
            pool.to_json(), sort_keys=True
        )

    cluster, external, lbs = _service_cidrs(gspec)
    if env.get("CALICO_ADVERTISE_CLUSTER_IPS"):
        cluster = [c.strip() for c in env["CALICO_ADVERTISE_CLUSTER_IPS"].split(",") if c.strip()]
    me = state.nodes.get(nodename)
    excluded = me is not None and (me.metadata.labels or {}).get(EXCLUDE_LB_LABEL) == "true"
    for cidr in sorted(set(cluster + external)):
        v6 = ipaddress.ip_network(cidr).version == 6
        if not excluded:
            ks[f"/calico/staticroutes{'v6' if v6 else ''}/{seg(cidr)}"] = cidr
    for cidr in sorted(set(cluster + external + lbs)):
        v6 = ipaddress.ip_network(cidr).version == 6
        ks[f"/calico/rejectcidrs{'v6' if v6 else ''}/{seg(cidr)}"] = cidr
    if k8s_services is not None:
        node_ref = env.get("CALICO_K8S_NODE_REF") or nodename
        c_all, e_all, l_all = advertised_cidrs(gspec, env)
        per_service = svc_routes.service_routes(
            k8s_services[0], k8s_services[1], node_ref, c_all, e_all, l_all, excluded
        )
        for cidr in sorted(per_service):
            v6 = ipaddress.ip_network(cidr).version == 6
            ks[f"/calico/staticroutes{'v6' if v6 else ''}/{seg(cidr)}"] = cidr

    for name, res in state.filters.items():
        ks[f"/calico/resources/v3/projectcalico.org/bgpfilters/{name}"] = json.dumps(
            res.spec.to_wire(), sort_keys=True
        )
    return ks


def changed_keys(old: Mapping[str, str], new: Mapping[str, str]) -> set[str]:
    keys = {k for k, v in new.items() if old.get(k) != v}
    keys.update(k for k in old if k not in new)
    return keys


def under(ks: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The keys below ``prefix`` (a directory: ``prefix/...``), sorted by key."""
    p = prefix.rstrip("/") + "/"
    return {k: ks[k] for k in sorted(ks) if k.startswith(p)}
