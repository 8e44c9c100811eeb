"""The key space -> everything one IP version's templates print (design/confd.md "Rendering").

Upstream computes a ``BirdBGPConfig`` in Go and its templates only lay it out; so do we. Only
watched keys (and the default BGPConfiguration, whose whole spec is the ``/bgpconfig`` key) are
read, which is what makes skipping unchanged templates safe.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from calico.confd import filters as bgpfilters
from calico.confd.keyspace import KeySpace, under

log = logging.getLogger(__name__)

BIRD_INT_MAX = 2147483647
OVERRIDE_PREFERENCE = 200
NORMAL_ROUTE_PRIORITY = 1024
G = "/calico/bgp/v1/global"


def hash_router_id(nodename: str) -> str:
    """``CALICO_ROUTER_ID=hash``: the first 4 bytes of SHA-256(nodename), first octet kept
    below 224 (not multicast/reserved)."""
    b = list(hashlib.sha256(nodename.encode()).digest()[:4])
    if b[0] > 223:
        b[0] -= 32
    return ".".join(str(x) for x in b)


@dataclass
class Peer:
    name: str
    lines: list[str]


@dataclass
class BirdConfig:
    version: int
    node_ip: str  # this version's address ("" = family disabled)
    router_id: str
    as_number: str
    debug_mode: str  # "all", "{ states }" or ""
    peer_debug: str
    direct_interfaces: str
    listen_address: str = ""
    listen_port: str = ""
    communities: list[tuple[str, list[str]]] = field(default_factory=list)
    filter_lines: list[str] = field(default_factory=list)
    peers: list[Peer] = field(default_factory=list)
    # bird_ipam.cfg
    export_disabled_pools: list[str] = field(default_factory=list)
    ibgp_reject: list[str] = field(default_factory=list)
    static_accepts: list[str] = field(default_factory=list)
    rr_service_accepts: list[str] = field(default_factory=list)
    export_enabled_pools: list[str] = field(default_factory=list)
    reject_cidrs: list[str] = field(default_factory=list)
    metric_lines: list[str] = field(default_factory=list)
    wireguard_lines: list[str] = field(default_factory=list)
    kernel_pools: list[str] = field(default_factory=list)
    # bird_aggr.cfg
    static_routes: list[str] = field(default_factory=list)
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (cidr, comment)
    normal_priority: int = NORMAL_ROUTE_PRIORITY


def _get(ks: Mapping[str, str], nodename: str, suffix: str) -> str | None:
    v = ks.get(f"/calico/bgp/v1/host/{nodename}/{suffix}")
    return v if v is not None else ks.get(f"{G}/{suffix}")


def _cluster_policy(value: str | None) -> tuple[bool, bool]:
    """(BIRD programs IPIP pools, BIRD programs no-encap pools)."""
    table = {
        "Disabled": (False, False),
        "Enabled": (True, True),
        "EnabledIPIPOnly": (True, False),
        "EnabledNoEncapOnly": (False, True),
    }
    if value is not None and value not in table:
        log.warning("Unrecognised BGPConfiguration.programClusterRoutes %r; using default", value)
    return table.get(value or "EnabledNoEncapOnly", (False, True))


def _stmt(cidr: str, action: str, extra: str = "", comment: str = "") -> str:
    body = f"{extra} {action}" if extra else action
    s = f"if (net ~ {cidr}) then {{ {body}; }}"
    return f"{s} # {comment}" if comment else s


class Builder:
    def __init__(
        self,
        ks: KeySpace,
        gspec: Any | None,
        filters: dict[str, Any],
        nodename: str,
        env: Mapping[str, str],
        krt_tunnel: bool,
    ) -> None:
        self.ks, self.gspec, self.filters = ks, gspec, filters
        self.nodename, self.env, self.krt_tunnel = nodename, env, krt_tunnel
        self.host = f"/calico/bgp/v1/host/{nodename}"

    def build(self, version: int) -> BirdConfig:
        ks, gspec = self.ks, self.gspec
        ipv4 = ks.get(f"{self.host}/ip_addr_v4", "")
        node_ip = ipv4 if version == 4 else ks.get(f"{self.host}/ip_addr_v6", "")
        rid = self.env.get("CALICO_ROUTER_ID", "")
        router_id = hash_router_id(self.nodename) if rid == "hash" else (rid or ipv4)
        level = _get(ks, self.nodename, "loglevel") or ""
        debug, peer_debug = {
            "none": ("", ""),
            "debug": ("all", "debug all;"),
        }.get(level, ("{ states }", "debug { states, routes, filters, events };"))
        ignored = list(gspec.ignored_interfaces or []) if gspec else []
        ifaces = [f'-"{i}"' for i in ignored] + ['-"cali*"', '-"kube-ipvs*"', '"*"']
        cfg = BirdConfig(
            version=version,
            node_ip=node_ip,
            router_id=router_id,
            as_number=_get(ks, self.nodename, "as_num") or "64512",
            debug_mode=debug,
            peer_debug=peer_debug,
            direct_interfaces=", ".join(ifaces),
            listen_port=_get(ks, self.nodename, "listen_port") or "",
        )
        if gspec is not None and gspec.bind_mode == "NodeIP":
            cfg.listen_address = node_ip
        cfg.metric_lines = [
            "if (defined(source) && (source = RTS_BGP) && !defined(krt_metric)) then {",
            f"  krt_metric = {cfg.normal_priority};",
            "  if (defined(bgp_local_pref)) then {",
            f"    krt_metric = {BIRD_INT_MAX} - bgp_local_pref;",
            "  }",
            f"  if (krt_metric < {cfg.normal_priority}) then {{",
            f"    preference = {OVERRIDE_PREFERENCE};",
            "  }",
            "}",
        ]
        self._communities(cfg)
        cfg.filter_lines = bgpfilters.bird_functions(self.filters, version)
        self._peers(cfg)
        self._pools(cfg)
        self._services(cfg)
        self._wireguard(cfg)
        self._aggr(cfg)
        return cfg

    # ---- bird.cfg ---------------------------------------------------------------------

    def _communities(self, cfg: BirdConfig) -> None:
        node_key = f"{self.host}/prefix_advertisements/ip_v{cfg.version}"
        raw = self.ks.get(node_key) or self.ks.get(f"{G}/prefix_advertisements/ip_v{cfg.version}")
        for adv in json.loads(raw) if raw else []:
            stmts = []
            for c in adv["communities"]:
                parts = c.split(":")
                attr = "bgp_community" if len(parts) == 2 else "bgp_large_community"
                stmts.append(f"{attr}.add(({', '.join(parts)}));")
            if stmts:
                cfg.communities.append((adv["cidr"], stmts))

    def _import(self, names: list[str], same_as: bool, cfg: BirdConfig) -> list[str]:
        calls = bgpfilters.filter_calls(self.filters, names, "import", cfg.version, same_as)
        return [
            *calls,
            "if (defined(bgp_local_pref)&&(bgp_local_pref > "
            f"{BIRD_INT_MAX - cfg.normal_priority})) then",
            f"  preference = {OVERRIDE_PREFERENCE};",
            "accept;",
        ]

    def _export(self, names: list[str], same_as: bool, cfg: BirdConfig) -> list[str]:
        calls = bgpfilters.filter_calls(self.filters, names, "export", cfg.version, same_as)
        return [
            "if (defined(source) && source = RTS_BGP && defined(bgp_local_pref)) then {",
            f"  krt_metric = {BIRD_INT_MAX} - bgp_local_pref;",
            "} else {",
            f"  if (!defined(krt_metric)) then {{ krt_metric = {cfg.normal_priority}; }}",
            f"  bgp_local_pref = {BIRD_INT_MAX} - krt_metric;",
            "}",
            *calls,
            f"calico_export_to_bgp_peers({'true' if same_as else 'false'});",
            "reject;",
        ]

    def _peer_lines(self, cfg: BirdConfig, p: dict[str, Any], kind: str, node_as: str) -> list[str]:
        lines = []
        if p.get("local_as_num"):
            lines.append(f"local as {p['local_as_num']};")
        port = f"port {p['port']} " if p.get("port") else ""
        lines.append(f"neighbor {p['ip']} {port}as {p['as_num']};")
        if p.get("source_addr"):
            lines.append(f"source address {p['source_addr']};")
        ttl = p.get("ttl_security") or 0
        if ttl:
            lines += ["ttl security on;", f"multihop {ttl};"]
        else:
            lines += ["ttl security off;", "multihop;"]
        same_as = p["as_num"] == node_as
        names = p.get("filters") or []
        lines.append("import filter {")
        lines += [f"  {s}" for s in self._import(names, same_as, cfg)]
        lines.append("};")
        lines.append("export filter {")
        lines += [f"  {s}" for s in self._export(names, same_as, cfg)]
        lines.append("};")
        if p.get("passive"):
            lines.append("passive on;")
        if p.get("restart_time"):
            lines.append(f"graceful restart time {p['restart_time']};")
        if p.get("keepalive_time"):
            lines.append(f"keepalive time {p['keepalive_time']};")
        if p.get("rr_client"):
            lines += ["rr client;", f"rr cluster id {p['rr_client']};"]
        if p.get("password"):
            lines.append(f'password "{p["password"]}";')
        if p.get("next_hop") == "keep":
            lines.append("next hop keep;")
        elif p.get("next_hop") == "self":
            lines.append("next hop self;")
        if p.get("num_allow_local_as"):
            lines.append(f"allow local as {p['num_allow_local_as']};")
        return lines

    def _peers(self, cfg: BirdConfig) -> None:
        if not cfg.node_ip:
            return
        ks, v = self.ks, cfg.version
        cluster_id = ks.get(f"{self.host}/rr_cluster_id", "")
        peers: list[Peer] = []
        mesh = json.loads(ks.get(f"{G}/node_mesh", '{"enabled": true}')).get("enabled")
        if mesh and not cluster_id:
            hosts = sorted({k.split("/")[5] for k in under(ks, "/calico/bgp/v1/host")})
            for host in hosts:
                ip = ks.get(f"/calico/bgp/v1/host/{host}/ip_addr_v{v}", "")
                if not ip or ip == cfg.node_ip:
                    continue
                if ks.get(f"/calico/bgp/v1/host/{host}/rr_cluster_id", ""):
                    continue
                p = {
                    "ip": ip,
                    "port": _get(ks, host, "listen_port") or "",
                    "as_num": _get(ks, host, "as_num") or cfg.as_number,
                    "source_addr": cfg.node_ip,
                    "passive": ip > cfg.node_ip,
                    "restart_time": self._mesh_restart(),
                    "password": ks.get(f"{G}/node_mesh_password", ""),
                }
                name = "Mesh_" + ip.replace("." if v == 4 else ":", "_")
                peers.append(Peer(name, self._peer_lines(cfg, p, "mesh", cfg.as_number)))
        for prefix, base in (
            ("Global", f"{G}/peer_v{v}"),
            ("Node", f"{self.host}/peer_v{v}"),
        ):
            for raw in under(ks, base).values():
                peer = self._explicit(cfg, json.loads(raw), prefix, cluster_id)
                if peer is not None:
                    peers.append(peer)
        cfg.peers = sorted(peers, key=lambda p: p.name)

    def _mesh_restart(self) -> str:
        t = self.gspec.node_mesh_max_restart_time if self.gspec else None
        if not t:
            return ""
        from calico.durations import parse_duration

        return str(round(parse_duration(t)))

    def _explicit(
        self, cfg: BirdConfig, d: dict[str, Any], prefix: str, cluster_id: str
    ) -> Peer | None:
        ip = d["ip"]
        if not ip or ip == cfg.node_ip:
            return None
        if d.get("local_bgp_peer"):
            prefix = "Local_Workload"
        name = f"{prefix}_" + ip.replace("." if cfg.version == 4 else ":", "_")
        port = int(d.get("port") or 0)
        if port > 0:
            name += f"_port_{port}"
        node_as = d.get("local_as_num") or cfg.as_number
        p: dict[str, Any] = {
            "ip": ip,
            "port": str(port) if port else "",
            "as_num": d["as_num"],
            "local_as_num": d.get("local_as_num", ""),
            "source_addr": cfg.node_ip if d.get("source_addr") == "UseNodeIP" else "",
            "ttl_security": d.get("ttl_security", 0),
            "filters": d.get("filters") or [],
            "restart_time": d.get("restart_time", ""),
            "keepalive_time": d.get("keepalive_time", ""),
            "password": d.get("password") or "",
            "passive": bool(d.get("passive_mode")),
            "num_allow_local_as": d.get("num_allow_local_as", 0),
        }
        mode = d.get("next_hop_mode") or ""
        if mode == "Self":
            p["next_hop"] = "self"
        elif mode == "Keep" or (d.get("keep_next_hop") and d["as_num"] != node_as):
            p["next_hop"] = "keep"
        if d["as_num"] == node_as and cluster_id and d.get("rr_cluster_id", "") != cluster_id:
            p["rr_client"] = cluster_id
        if prefix == "Global" and not p["passive"] and d.get("calico_node") and ip > cfg.node_ip:
            p["passive"] = True
        return Peer(name, self._peer_lines(cfg, p, prefix.lower(), node_as))

    # ---- bird_ipam.cfg ----------------------------------------------------------------

    def _pools(self, cfg: BirdConfig) -> None:
        v = cfg.version
        ipip, noencap = _cluster_policy(self.gspec.program_cluster_routes if self.gspec else None)
        patterns = ["*.cali", "*.calico"] + ([] if ipip else ["tunl0"])
        conds = " || ".join(f'(ifname ~ "{p}")' for p in patterns)
        cfg.ibgp_reject = [
            "if (defined(ifname)) then {",
            f"  if ({conds}) then {{",
            "    reject;",
            "  }",
            "}",
        ]
        subnet = self.ks.get(f"{self.host}/network_v{v}")
        felix_owned: list[str] = []
        for raw in under(self.ks, f"/calico/v1/ipam/v{v}/pool").values():
            pool = json.loads(raw)
            cidr = pool["cidr"]
            vxlan = pool.get("vxlan_mode") in ("always", "cross-subnet")
            ipip_pool = pool.get("ipip_mode") in ("always", "cross-subnet")
            bird_owns = not vxlan and (ipip if ipip_pool else noencap)
            no_export = bool(pool.get("disableBGPExport"))
            if not bird_owns and not no_export:
                felix_owned.append(cidr)
            if no_export:
                cfg.export_disabled_pools.append(
                    _stmt(cidr, "reject", comment="BGP export is disabled.")
                )
            else:
                cfg.export_enabled_pools.append(_stmt(cidr, "accept"))
            if v == 4 and subnet is None:
                continue
            kernel = self._kernel_stmt(cidr, pool, vxlan, ipip_pool, bird_owns, subnet or "")
            if kernel and (v == 4 or " reject; }" in kernel):
                cfg.kernel_pools.append(kernel)
        cfg.kernel_pools.sort()
        cfg.export_disabled_pools.sort()
        cfg.export_enabled_pools.sort()
        if felix_owned:
            cfg.ibgp_reject += [
                "if (defined(source) && (source = RTS_INHERIT) && "
                "((dest = RTD_ROUTER) || (dest = RTD_MULTIPATH))) then {",
                "  # Cluster routes for these pools are Felix's to program, "
                "and the owning node's to advertise.",
                *[f"  {_stmt(c, 'reject')}" for c in sorted(felix_owned)],
                "}",
            ]

    def _kernel_stmt(
        self, cidr: str, pool: dict[str, Any], vxlan: bool, ipip: bool, bird_owns: bool, subnet: str
    ) -> str:
        if vxlan:
            return _stmt(cidr, "reject", comment="VXLAN routes are handled by Felix.")
        if not bird_owns:
            return _stmt(cidr, "reject", comment="Cluster routes are handled by Felix.")
        if ipip and ipaddress.ip_network(cidr).version == 4:
            if not self.krt_tunnel:
                # Debian's BIRD has no krt_tunnel (Calico's fork only): it cannot program an
                # IPIP route, so it must not program a plain one in its place.
                log.warning(
                    "IPIP pool %s: this BIRD cannot program IPIP routes (no krt_tunnel); "
                    "leaving its cluster routes to Felix",
                    cidr,
                )
                return _stmt(
                    cidr,
                    "reject",
                    comment="IPIP routes need krt_tunnel; BIRD does not program them.",
                )
            if pool.get("ipip_mode") == "always":
                return _stmt(cidr, "accept", extra='krt_tunnel="tunl0";')
            extra = (
                f'if (defined(bgp_next_hop)&&(bgp_next_hop ~ {subnet})) then krt_tunnel=""; '
                'else krt_tunnel="tunl0";'
            )
            return _stmt(cidr, "accept", extra=extra)
        return _stmt(cidr, "accept")

    def _services(self, cfg: BirdConfig) -> None:
        sfx = "v6" if cfg.version == 6 else ""
        statics = list(under(self.ks, f"/calico/staticroutes{sfx}").values())
        cfg.static_accepts = [_stmt(c, "accept") for c in statics]
        cfg.static_routes = statics
        cfg.reject_cidrs = [
            _stmt(c, "reject") for c in under(self.ks, f"/calico/rejectcidrs{sfx}").values()
        ]
        if self.ks.get(f"{self.host}/rr_cluster_id") and self.gspec is not None:
            ranges = []
            for blocks in (self.gspec.service_external_ips, self.gspec.service_load_balancer_ips):
                for b in blocks or []:
                    net = ipaddress.ip_network(b.cidr, strict=False)
                    if net.version == cfg.version:
                        ranges.append(str(net))
            cfg.rr_service_accepts = [_stmt(c, "accept") for c in sorted(set(ranges))]

    def _wireguard(self, cfg: BirdConfig) -> None:
        v = cfg.version
        if not self.ks.get(f"{self.host}/wireguard_addr_v{v}"):
            return
        hosts = sorted({k.split("/")[5] for k in under(self.ks, "/calico/bgp/v1/host")})
        for host in hosts:
            if host == self.nodename:
                continue
            h = f"/calico/bgp/v1/host/{host}"
            ip = self.ks.get(f"{h}/ip_addr_v{v}", "")
            if ip and self.ks.get(f"{h}/wireguard_addr_v{v}"):
                cfg.wireguard_lines.append(
                    f"if (defined(bgp_next_hop) && bgp_next_hop = {ip}) then {{ reject; }} "
                    "# WireGuard routes handled by Felix."
                )
        cfg.wireguard_lines.sort()

    # ---- bird_aggr.cfg ----------------------------------------------------------------

    def _aggr(self, cfg: BirdConfig) -> None:
        base = f"/calico/ipam/v2/host/{self.nodename}/ipv{cfg.version}/block"
        for key, raw in under(self.ks, base).items():
            cidr = key.rsplit("/", 1)[1].replace("-", "/")
            state = json.loads(raw).get("state") or ""
            comment = f"Block {cidr} is {'confirmed' if state else 'implicitly confirmed'}"
            if state and state != "confirmed":
                comment = f"Block {cidr} is {state}"
            cfg.blocks.append((str(ipaddress.ip_network(cidr)), comment))

    def reachable_routes(self, cfg: BirdConfig) -> list[str]:
        """``route <peer>/32 via <reachable_by>;`` for this node's peers with ``reachableBy``."""
        out = []
        for base in (f"{G}/peer_v{cfg.version}", f"{self.host}/peer_v{cfg.version}"):
            for raw in under(self.ks, base).values():
                d = json.loads(raw)
                if d.get("reachable_by") and d["ip"] != cfg.node_ip:
                    plen = 32 if cfg.version == 4 else 128
                    out.append(f"route {d['ip']}/{plen} via {d['reachable_by']};")
        return sorted(set(out))
