"""``allocate-tunnel-addrs``: give this node a tunnel address from IPAM for each tunnel type
its pools ask for, record it on the Node, and give it back when no pool wants it any more
(upstream node/pkg/allocateip; design/node.md "Tunnel addresses").

Types handled: VXLAN (v4), VXLAN (v6) and IPIP. WireGuard addresses are left out: upstream
assigns them only to nodes that publish a WireGuard public key, which this dataplane never
does (no ``wireguard`` module). Each type has upstream's IPAM handle
``<type>-tunnel-addr-<node>`` and attributes ``{node, type}``; the assignment is IPAM
auto-assign with intended use ``Tunnel`` from the eligible pools (enabled, not being
deleted, ``allowedUses`` includes Tunnel, node selector matches, the type's mode Always or
CrossSubnet, right family).

Beyond upstream (the issue asks for it): a VXLAN address comes with the node's VTEP MAC on the
Node (``vxlanTunnelMACAddr(V6)``), the derived MAC Felix would use anyway, so the Node shows
the whole VTEP; it is cleared with the address, and a MAC someone else set is never touched.

One pass (:func:`reconcile`) is what ``--run-once`` does; the daemon (:func:`run_daemon`)
runs a pass after the tunnel-IP-allocation syncer's first InSync and after every pool change
(or a change to this Node's tunnel fields made by someone else). Any error ends the daemon
(runit restarts it), as upstream.
"""

from __future__ import annotations

import ipaddress
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from calico.api.cluster import Node, NodeBGPSpec
from calico.api.ipam import IPPool
from calico.datastore.client import Client
from calico.datastore.errors import (
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.ipam import IPAMClient, IPAMError, ReleaseOptions
from calico.model.vtep import default_vtep_mac
from calico.node.errors import NodeError
from calico.selector import parse as parse_selector
from calico.syncer.api import SyncStatus, Update

log = logging.getLogger(__name__)

TUNNEL_USE = "Tunnel"
UPDATE_RETRIES = 5


@dataclass(frozen=True)
class TunnelType:
    """One kind of tunnel address: its handle prefix, IPAM ``type`` attribute, family and
    the pool mode that asks for it."""

    name: str
    handle_prefix: str
    attr_type: str
    version: int
    mode_field: str  # "vxlan_mode" | "ipip_mode"

    def handle(self, node: str) -> str:
        return f"{self.handle_prefix}-tunnel-addr-{node}"

    def attrs(self, node: str) -> dict[str, str]:
        return {"node": node, "type": self.attr_type}


VXLAN = TunnelType("vxlan", "vxlan", "vxlanTunnelAddress", 4, "vxlan_mode")
VXLAN_V6 = TunnelType("vxlanV6", "vxlan-v6", "vxlanV6TunnelAddress", 6, "vxlan_mode")
IPIP = TunnelType("ipip", "ipip", "ipipTunnelAddress", 4, "ipip_mode")
TYPES = (VXLAN, VXLAN_V6, IPIP)


# -- the Node's fields per type ------------------------------------------------------------


def get_addr(node: Node, kind: TunnelType) -> str:
    spec = node.spec
    if kind is VXLAN:
        return spec.ipv4_vxlan_tunnel_addr or ""
    if kind is VXLAN_V6:
        return spec.ipv6_vxlan_tunnel_addr or ""
    return (spec.bgp.ipv4_ipip_tunnel_addr or "") if spec.bgp else ""


def set_addr(node: Node, kind: TunnelType, addr: str) -> None:
    """Set (or with "" clear) the type's address; a VXLAN address also sets/clears the
    derived VTEP MAC unless someone else put a different MAC there."""
    spec = node.spec
    name = node.metadata.name or ""
    value = addr or None
    if kind is IPIP:
        if spec.bgp is None:
            if value is None:
                return
            spec.bgp = NodeBGPSpec()
        spec.bgp.ipv4_ipip_tunnel_addr = value
        if value is None and spec.bgp == NodeBGPSpec():
            spec.bgp = None  # upstream nils an emptied spec.bgp
        return
    derived = default_vtep_mac(name, kind.version)
    mac_field = "vxlan_tunnel_mac_addr" if kind is VXLAN else "vxlan_tunnel_mac_addr_v6"
    addr_field = "ipv4_vxlan_tunnel_addr" if kind is VXLAN else "ipv6_vxlan_tunnel_addr"
    setattr(spec, addr_field, value)
    current_mac = getattr(spec, mac_field)
    if value is not None and not current_mac:
        setattr(spec, mac_field, derived)
    elif value is None and current_mac == derived:
        setattr(spec, mac_field, None)


# -- pools ---------------------------------------------------------------------------------


def eligible_pools(pools: list[IPPool], kind: TunnelType, labels: dict[str, str]) -> list[IPPool]:
    out = []
    for pool in pools:
        spec = pool.spec
        net = ipaddress.ip_network(spec.cidr, strict=False)
        if net.version != kind.version or spec.disabled or pool.metadata.deletion_timestamp:
            continue
        if getattr(spec, kind.mode_field) not in ("Always", "CrossSubnet"):
            continue
        if spec.allowed_uses and TUNNEL_USE not in spec.allowed_uses:
            continue
        if not parse_selector(spec.node_selector or "all()").evaluate(labels):
            continue
        out.append(pool)
    return out


def _in_pools(addr: str, pools: list[IPPool]) -> bool:
    ip = ipaddress.ip_address(addr)
    return any(ip in ipaddress.ip_network(p.spec.cidr, strict=False) for p in pools)


# -- one pass ------------------------------------------------------------------------------


class _Pass:
    """State of one reconcile pass: what it allocated (released again if the pass fails)."""

    def __init__(self, ipam: IPAMClient, node: str) -> None:
        self.ipam = ipam
        self.node = node
        self.assigned: list[tuple[str, str]] = []  # (ip, handle)

    def assign(self, kind: TunnelType, pools: list[IPPool]) -> str:
        handle = kind.handle(self.node)
        cidrs = [str(p.spec.cidr) for p in pools]
        v4, v6 = self.ipam.auto_assign(
            1 if kind.version == 4 else 0,
            1 if kind.version == 6 else 0,
            handle,
            kind.attrs(self.node),
            self.node,
            ipv4_pools=cidrs if kind.version == 4 else None,
            ipv6_pools=cidrs if kind.version == 6 else None,
            intended_use=TUNNEL_USE,
        )
        got = (v4 or v6)[0]
        addr = str(got.ip)
        self.assigned.append((addr, handle))
        log.info("Assigned %s tunnel address %s to node %s", kind.name, addr, self.node)
        return addr

    def ensure(self, kind: TunnelType, current: str, pools: list[IPPool]) -> str:
        """The address this type should have (keeping ``current`` when it is still ours)."""
        handle = kind.handle(self.node)
        if not current:
            self.ipam.release_by_handle(handle)
            return self.assign(kind, pools)
        try:
            owner_handle, attrs = self.ipam.get_assignment_attributes(current)
        except ResourceDoesNotExistError:
            log.info("%s tunnel address %s is not allocated; reassigning", kind.name, current)
            self.ipam.release_by_handle(handle)
            return self.assign(kind, pools)
        if attrs.get("type") == kind.attr_type and attrs.get("node") == self.node:
            if _in_pools(current, pools):
                return current
            log.info("%s tunnel address %s is in no eligible pool; replacing", kind.name, current)
            self.ipam.release_ips([ReleaseOptions(current, owner_handle)])
            return self.assign(kind, pools)
        if not attrs and owner_handle:
            log.warning(
                "%s tunnel address %s belongs to a workload; assigning another", kind.name, current
            )
            return self.assign(kind, pools)
        if not attrs:  # legacy allocation: re-claim the same address with handle + attrs
            self.ipam.release_ips([current])
            try:
                self.ipam.assign_ip(current, handle, kind.attrs(self.node), self.node)
            except IPAMError:
                return self.assign(kind, pools)
            self.assigned.append((current, handle))
            return current
        log.warning(
            "%s tunnel address %s belongs to %s; assigning another", kind.name, current, attrs
        )
        return self.assign(kind, pools)

    def remove(self, kind: TunnelType, current: str) -> None:
        handle = kind.handle(self.node)
        released = self.ipam.release_by_handle(handle)
        if released or not current:
            if released:
                log.info("Released %s tunnel address(es) %s", kind.name, released)
            return
        try:
            owner_handle, attrs = self.ipam.get_assignment_attributes(current)
        except ResourceDoesNotExistError:
            return
        if (not owner_handle and not attrs) or owner_handle == handle:
            self.ipam.release_ips([current])
            log.info("Released %s tunnel address %s", kind.name, current)
        else:
            log.warning(
                "Not releasing %s tunnel address %s: it belongs to %s/%s",
                kind.name,
                current,
                owner_handle,
                attrs,
            )

    def undo(self) -> None:
        for addr, handle in self.assigned:
            try:
                self.ipam.release_ips([ReleaseOptions(addr, handle)])
            except Exception as e:  # best effort; IPAM GC catches leftovers
                log.warning("Could not release %s after a failed pass: %s", addr, e)


def reconcile(client: Client, node_name: str, types: tuple[TunnelType, ...] = TYPES) -> Node:
    """One pass; returns the Node as stored afterwards. Raises :class:`NodeError`."""
    ipam = IPAMClient(client)
    for attempt in range(UPDATE_RETRIES):
        try:
            node: Node = client.get(Node, node_name)  # type: ignore[assignment]
        except ResourceDoesNotExistError:
            raise NodeError(f"node {node_name} does not exist in the datastore") from None
        pools: list[IPPool] = list(client.list(IPPool).items)  # type: ignore[arg-type]
        labels = dict(node.metadata.labels or {})
        work = _Pass(ipam, node_name)
        before = node.model_dump(by_alias=True)
        try:
            for kind in types:
                current = get_addr(node, kind)
                eligible = eligible_pools(pools, kind, labels)
                if eligible:
                    set_addr(node, kind, work.ensure(kind, current, eligible))
                else:
                    if current:
                        log.info(
                            "No pool wants %s tunnel addresses; removing %s", kind.name, current
                        )
                    set_addr(node, kind, "")
                    work.remove(kind, current)
            if node.model_dump(by_alias=True) == before:
                return node
            return client.update(node)  # type: ignore[return-value]
        except UpdateConflictError:
            work.undo()
            log.info(
                "Node %s changed during the pass (attempt %d); retrying", node_name, attempt + 1
            )
            continue
        except IPAMError as e:
            work.undo()
            raise NodeError(f"tunnel address allocation for node {node_name} failed: {e}") from e
        except BaseException:
            work.undo()
            raise
    raise NodeError(f"could not update node {node_name}: too much contention")


# -- the daemon ----------------------------------------------------------------------------


class _Trigger:
    """Syncer callbacks: a reconcile request after InSync and on each relevant change."""

    def __init__(self, node: str) -> None:
        self._node = node
        self.requests: queue.Queue[str] = queue.Queue()
        self._in_sync = False
        self._node_fields: Any = None

    def note_written(self, node: Node) -> None:
        """Our own write comes back through the syncer: not a change to react to."""
        self._node_fields = _tunnel_fields(node)

    def on_status_updated(self, status: SyncStatus) -> None:
        if status is SyncStatus.IN_SYNC and not self._in_sync:
            self._in_sync = True
            self.requests.put("in-sync")

    def on_updates(self, updates: list[Update]) -> None:
        why = None
        for update in updates:
            kind = getattr(update.key, "kind", None)
            if kind == "Node" and getattr(update.key, "name", None) == self._node:
                fields = _tunnel_fields(update.value)
                if fields != self._node_fields:
                    self._node_fields = fields
                    why = why or "node changed"
            elif kind != "Node":
                why = "pool changed"
        if why and self._in_sync:
            self.requests.put(why)


def _tunnel_fields(node: Node | None) -> Any:
    if node is None:
        return None
    spec = node.spec
    return (
        *(get_addr(node, k) for k in TYPES),
        spec.vxlan_tunnel_mac_addr,
        spec.vxlan_tunnel_mac_addr_v6,
    )


def run_daemon(
    client: Client,
    node_name: str,
    stop: threading.Event,
    *,
    syncer_factory: Callable[..., Any] | None = None,
) -> None:
    """Reconcile on syncer triggers until ``stop``; an error raises (the process exits)."""
    from calico.syncer.definitions import tunnel_ip_allocation_syncer

    trigger = _Trigger(node_name)
    factory = syncer_factory or tunnel_ip_allocation_syncer
    syncer = factory(client.backend, trigger, node_name)
    syncer.start()
    try:
        while not stop.is_set():
            try:
                why = trigger.requests.get(timeout=0.5)
            except queue.Empty:
                continue
            while not trigger.requests.empty():  # coalesce a burst into one pass
                trigger.requests.get_nowait()
            log.info("Reconciling tunnel addresses (%s)", why)
            trigger.note_written(reconcile(client, node_name))
    finally:
        syncer.stop(2.0)


__all__ = [
    "IPIP",
    "TYPES",
    "VXLAN",
    "VXLAN_V6",
    "TunnelType",
    "eligible_pools",
    "reconcile",
    "run_daemon",
]
