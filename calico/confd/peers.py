"""BGPPeer resources -> the v1 peerings of each node (design/confd.md "Peerings").

Mirrors upstream confd's ``updatePeersV1``: pass 1 emits global peerings (no ``node`` and no
``nodeSelector``), pass 2 the node-specific ones; the first writer of a key wins and a
node-specific peering is dropped when a global one to the same ip/port exists. Peers come from
``peerSelector`` (every matching node's addresses) or ``peerIP``; unless ``reversePeering:
Manual``, nodes matched that way get the peering back to the local side. ``localWorkloadSelector``
peers are this node's workloads Felix matched to the BGPPeer (endpoint status files,
``calico.confd.localpeers``): passive, no source address, never reversed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from calico import selector
from calico.confd.localpeers import LocalWorkload
from calico.durations import parse_duration

DEFAULT_AS = "64512"

# (Secret name, key) -> the password, or None when the Secret or the key is missing.
PasswordLookup = Callable[[str, str], str | None]


def no_passwords(name: str, key: str) -> None:
    """The lookup without a Secret source (no Kubernetes API): every password is missing."""
    return None


def password_for(ref: Any, lookup: PasswordLookup) -> str | None:
    """A ``BGPPassword`` resolved through ``lookup`` (None: no password line)."""
    if ref is None or ref.secret_key_ref is None:
        return None
    return lookup(ref.secret_key_ref.name, ref.secret_key_ref.key)


@dataclass(frozen=True)
class NodeInfo:
    """The BGP facts of one Node that peerings need."""

    name: str
    labels: dict[str, str]
    ipv4: str  # "" when unset
    ipv6: str
    asn: str  # "" -> global AS
    rr_cluster_id: str
    listen_port: int  # 0 -> global/none

    def ip(self, version: int) -> str:
        return self.ipv4 if version == 4 else self.ipv6


def peer_key(ip: str, port: int) -> str:
    """``<ip>`` for the default port, ``<ip>-<port>`` otherwise."""
    return ip if port in (0, 179) else f"{ip}-{port}"


def parse_peer_ip(text: str) -> tuple[str, int]:
    """``ip``, ``ip:port`` or ``[v6]:port`` -> (canonical ip, port or 0)."""
    text = text.strip()
    if text.startswith("["):
        host, _, port = text[1:].partition("]:")
        return str(ipaddress.ip_address(host)), int(port)
    if text.count(":") == 1:
        host, port = text.split(":")
        return str(ipaddress.ip_address(host)), int(port)
    return str(ipaddress.ip_address(text)), 0


def _seconds(text: str | None) -> str:
    return "" if not text else str(round(parse_duration(text)))


def _matches(expr: str | None, labels: dict[str, str]) -> bool:
    return expr is not None and selector.parse(expr).evaluate(labels)


class PeerComputer:
    """Computes ``{"global": {key: peer}, "<node>": {key: peer}}`` per IP version."""

    def __init__(
        self,
        nodes: dict[str, NodeInfo],
        global_as: str,
        global_port: int,
        passwords: PasswordLookup = no_passwords,
        workloads: list[LocalWorkload] | None = None,
    ) -> None:
        self.nodes = nodes
        self.passwords = passwords
        self.workloads = workloads or []
        self.global_as = global_as
        self.global_port = global_port
        self._by_ip = {ip: n for n in nodes.values() for ip in (n.ipv4, n.ipv6) if ip}

    def node_as(self, node: NodeInfo) -> str:
        return node.asn or self.global_as

    def node_port(self, node: NodeInfo) -> int:
        return node.listen_port or self.global_port

    def compute(self, peers: dict[str, Any]) -> dict[int, dict[str, dict[str, dict[str, Any]]]]:
        out: dict[int, dict[str, dict[str, dict[str, Any]]]] = {4: {}, 6: {}}
        ordered = sorted(peers.items())
        for global_pass in (True, False):
            for name, res in ordered:
                spec = res.spec
                is_global = spec.node is None and spec.node_selector is None
                if is_global != global_pass:
                    continue
                self._add(out, name, spec, is_global)
        return out

    def _local_nodes(self, spec: Any) -> list[NodeInfo]:
        if spec.node is None and spec.node_selector is None:
            return sorted(self.nodes.values(), key=lambda n: n.name)
        return [
            n
            for n in sorted(self.nodes.values(), key=lambda n: n.name)
            if n.name == spec.node or _matches(spec.node_selector, n.labels)
        ]

    def _remote(self, name: str, spec: Any) -> Iterator[tuple[dict[str, Any], NodeInfo | None]]:
        """Each peer this BGPPeer points at: (v1 peer fields, the Calico node when it is one)."""
        if spec.local_workload_selector is not None:
            asn = str(spec.as_number) if spec.as_number is not None else ""
            for w in self.workloads:
                if w.bgp_peer_name != name:
                    continue
                for ip in (w.ipv4, w.ipv6):
                    if ip:
                        yield self._workload_peer(ip, asn), None
            return
        if spec.peer_selector is not None:
            for node in sorted(self.nodes.values(), key=lambda n: n.name):
                if not _matches(spec.peer_selector, node.labels):
                    continue
                for ip in (node.ipv4, node.ipv6):
                    if ip:
                        yield self._node_peer(node, ip), node
            return
        if not spec.peer_ip:
            return
        ip, port = parse_peer_ip(spec.peer_ip)
        asn = str(spec.as_number) if spec.as_number is not None else ""
        node = self._by_ip.get(ip)
        if node is not None and asn != self.node_as(node):
            node = None  # same IP but another AS: not that Calico node
        if port == 0 and node is not None:
            port = self.node_port(node)
        yield (
            {
                "ip": ip,
                "port": port,
                "as_num": asn,
                "rr_cluster_id": node.rr_cluster_id if node else "",
                "calico_node": node is not None or ip in self._by_ip,
            },
            node,
        )

    @staticmethod
    def _workload_peer(ip: str, asn: str) -> dict[str, Any]:
        return {
            "ip": ip,
            "port": 0,
            "as_num": asn,
            "rr_cluster_id": "",
            "calico_node": False,
            "source_addr": "None",
            "passive_mode": True,
            "local_bgp_peer": True,
        }

    def _node_peer(self, node: NodeInfo, ip: str) -> dict[str, Any]:
        return {
            "ip": ip,
            "port": self.node_port(node),
            "as_num": self.node_as(node),
            "rr_cluster_id": node.rr_cluster_id,
            "calico_node": True,
        }

    def _common(self, spec: Any) -> dict[str, Any]:
        next_hop = spec.next_hop_mode or ""
        return {
            "local_as_num": str(spec.local_as_number) if spec.local_as_number else "",
            "password": password_for(spec.password, self.passwords),
            "source_addr": spec.source_address or "UseNodeIP",
            "restart_time": _seconds(spec.max_restart_time),
            "keepalive_time": _seconds(spec.keepalive_time),
            "keep_next_hop": bool(spec.keep_original_next_hop) and not next_hop,
            "next_hop_mode": next_hop,
            "num_allow_local_as": spec.num_allowed_local_as_numbers or 0,
            "ttl_security": spec.ttl_security or 0,
            "filters": list(spec.filters or []),
            "reachable_by": spec.reachable_by or "",
            "passive_mode": False,
            "local_bgp_peer": False,
        }

    def _add(self, out: dict[int, Any], name: str, spec: Any, is_global: bool) -> None:
        common = self._common(spec)
        locals_ = self._local_nodes(spec)
        reverse = spec.reverse_peering != "Manual"
        for remote, remote_node in self._remote(name, spec):
            version = ipaddress.ip_address(remote["ip"]).version
            if common["reachable_by"] and (
                ipaddress.ip_address(common["reachable_by"]).version != version
            ):
                continue
            peer = {**common, **remote}
            key = peer_key(peer["ip"], peer["port"])
            table = out[version]
            if is_global:
                table.setdefault("global", {}).setdefault(key, peer)
            else:
                for local in locals_:
                    if key in table.get("global", {}):
                        continue
                    table.setdefault(local.name, {}).setdefault(key, peer)
            if reverse and remote_node is not None:
                self._reverse(out, common, version, remote_node, locals_)

    def _reverse(
        self,
        out: dict[int, Any],
        common: dict[str, Any],
        version: int,
        remote: NodeInfo,
        locals_: list[NodeInfo],
    ) -> None:
        table = out[version]
        for local in locals_:
            ip = local.ip(version)
            if not ip or local.name == remote.name:
                continue
            back = {**common, **self._node_peer(local, ip)}
            key = peer_key(ip, back["port"])
            if key in table.get("global", {}):
                continue
            table.setdefault(remote.name, {}).setdefault(key, back)
