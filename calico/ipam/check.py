"""``calicoctl ipam check``: cross-check IPAM records against what is actually using addresses.

Users of an address are WorkloadEndpoints (``ipNetworks``) and Nodes (IPIP/VXLAN/WireGuard
tunnel addresses). Kubernetes LoadBalancer services are not consulted: this implementation has
no Kubernetes client. The JSON report (``-o``) has upstream's shape so ``ipam release
--from-report`` can act on it: only addresses flagged ``inUse: false`` in every given report,
and handles unchanged across them, are released.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from typing import Any, TextIO

from calico.api.cluster import Node
from calico.api.endpoints import WorkloadEndpoint
from calico.datastore.client import Client
from calico.datastore.errors import ResourceDoesNotExistError
from calico.ipam.blocks import Block
from calico.ipam.pools import list_pools
from calico.ipam.store import IPAMStore

TOP_NODES = 20


@dataclass
class Allocation:
    ip: str
    handle: str = ""
    sequence_number: int | None = None
    pod: str = ""
    namespace: str = ""
    node: str = ""
    type: str = ""
    creation_timestamp: str = ""
    in_use: bool = False
    borrowed: bool = False
    owners: list[str] = field(default_factory=list)
    attrs: str = ""  # "Main:<handle> Extra:k=v,..." for the printed lines

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ip": self.ip}
        for key, value in (
            ("handle", self.handle),
            ("sequenceNumber", self.sequence_number),
            ("pod", self.pod),
            ("namespace", self.namespace),
            ("node", self.node),
            ("type", self.type),
            ("creationTimestamp", self.creation_timestamp),
        ):
            if value not in ("", None):
                out[key] = value
        out["inUse"] = self.in_use
        if self.borrowed:
            out["borrowed"] = True
        out["owners"] = self.owners or None
        return out


@dataclass
class HandleInfo:
    id: str
    uid: str | None
    revision: str

    def to_json(self) -> dict[str, Any]:
        return {"ID": self.id, "UID": self.uid, "Revision": self.revision}


@dataclass
class CheckReport:
    version: str
    cluster_guid: str = ""
    datastore_locked: bool = False
    cluster_info_revision: str = ""
    cluster_type: str = ""
    allocations: dict[str, list[Allocation]] = field(default_factory=dict)
    leaked_handles: list[HandleInfo] = field(default_factory=list)
    problems: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "clusterGUID": self.cluster_guid,
            "datastoreLocked": self.datastore_locked,
            "clusterInformationRevision": self.cluster_info_revision,
            "clusterType": self.cluster_type,
            "allocations": {ip: [a.to_json() for a in al] for ip, al in self.allocations.items()},
        }
        if self.leaked_handles:
            out["leakedHandles"] = [h.to_json() for h in self.leaked_handles]
        return out


def format_attrs(handle: str | None, secondary: dict[str, str] | None) -> str:
    extra = ",".join(f"{k}={v}" for k, v in sorted((secondary or {}).items()))
    return f"Main:{handle or '<none>'} Extra:{extra}"


def _normalise(addr: str) -> str:
    return str(ipaddress.ip_interface(addr).ip)


def _node_ips(node: Node) -> list[str]:
    spec = node.spec
    ips = [spec.ipv4_vxlan_tunnel_addr]
    if spec.wireguard is not None:
        ips.append(spec.wireguard.interface_ipv4_address)
    if spec.bgp is not None:
        ips.append(spec.bgp.ipv4_ipip_tunnel_addr)
    return [_normalise(str(ip)) for ip in ips if ip]


class Checker:
    def __init__(
        self, client: Client, out: TextIO, show_all: bool, show_problems: bool, version: str
    ) -> None:
        self.client = client
        self.out = out
        self.show_all = show_all
        self.show_problems = show_all or show_problems
        self.report = CheckReport(version)
        self.in_use: dict[str, list[str]] = {}
        self.in_use_handles: set[str] = set()
        self.by_node: dict[str, list[Allocation]] = {}

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def run(self) -> CheckReport:
        self.say("Checking IPAM for inconsistencies...")
        self.say()
        self._cluster_info()
        self._blocks()
        active = self._pools()
        self._nodes()
        self._workloads()
        handles = self._handles()
        self._top_nodes()
        self._scan(active, handles)
        return self.report

    def _cluster_info(self) -> None:
        try:
            cinfo = self.client.get("ClusterInformation", "default")
        except ResourceDoesNotExistError:
            return
        spec = cinfo.spec  # type: ignore[attr-defined]
        self.report.cluster_guid = spec.cluster_guid or ""
        self.report.cluster_type = spec.cluster_type or ""
        self.report.cluster_info_revision = cinfo.metadata.resource_version or ""
        self.report.datastore_locked = spec.datastore_ready is False

    def _blocks(self) -> None:
        self.say("Loading all IPAM blocks...")
        blocks = IPAMStore(self.client).list_blocks()
        self.say(f"Found {len(blocks)} IPAM blocks.")
        count = 0
        for stored in blocks:
            block = stored.block
            self.say(f" IPAM block {block.cidr} affinity={block.affinity or '<none>'}:")
            for ordinal, idx in enumerate(block.allocations):
                if idx is not None:
                    count += 1
                    self._record_allocation(block, ordinal)
        self.say(f"IPAM blocks record {count} allocations.")
        self.say()

    def _record_allocation(self, block: Block, ordinal: int) -> None:
        ip = str(block.ip(ordinal))
        attr = block.attr_of(ordinal)
        assert attr is not None
        owner_node = block.host() or ""
        alloc = Allocation(ip, sequence_number=block.seq_of(ordinal), node=owner_node)
        if attr.handle_id:
            alloc.handle = attr.handle_id
            self.in_use_handles.add(attr.handle_id)
        sec = attr.secondary or {}
        alloc.node = sec.get("node") or alloc.node
        alloc.pod = sec.get("pod", "")
        alloc.namespace = sec.get("namespace", "")
        alloc.type = sec.get("type", "")
        alloc.creation_timestamp = sec.get("timestamp", "")
        alloc.borrowed = alloc.node != owner_node
        alloc.attrs = format_attrs(attr.handle_id, attr.secondary)
        self.report.allocations.setdefault(ip, []).append(alloc)
        self.by_node.setdefault(alloc.node, []).append(alloc)
        if self.show_all:
            self.say(f"  {ip} allocated; attrs {alloc.attrs}")

    def _record_in_use(self, ip: str, owner: str) -> None:
        if self.show_all:
            self.say(f"  {ip} belongs to {owner}")
        self.in_use.setdefault(ip, []).append(owner)
        for alloc in self.report.allocations.get(ip, []):
            alloc.in_use = True
            alloc.owners.append(owner)

    def _pools(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        self.say("Loading all IPAM pools...")
        active = []
        for pool in list_pools(self.client):
            if pool.disabled:
                continue
            self.say(f"  {pool.cidr}")
            active.append(pool.cidr)
        self.say(f"Found {len(active)} active IP pools.")
        self.say()
        return active

    def _nodes(self) -> None:
        self.say("Loading all nodes.")
        count = 0
        for node in self.client.list(Node).items:
            for ip in _node_ips(node):  # type: ignore[arg-type]
                self._record_in_use(ip, f"Node({node.metadata.name})")
                count += 1
        self.say(f"Found {count} node tunnel IPs.")
        self.say()

    def _workloads(self) -> None:
        self.say("Loading all workload endpoints.")
        count = 0
        for wep in self.client.list(WorkloadEndpoint).items:
            for net in wep.spec.ip_networks or []:  # type: ignore[attr-defined]
                owner = f"Workload({wep.metadata.namespace}/{wep.metadata.name})"
                self._record_in_use(_normalise(net), owner)
                count += 1
        self.say(f"Found {count} workload IPs.")
        self.say(f"Workloads and nodes are using {len(self.in_use)} IPs.")
        self.say()

    def _handles(self) -> dict[str, HandleInfo]:
        self.say("Loading all handles")
        return {
            h.spec.handle_id: HandleInfo(
                h.spec.handle_id, h.metadata.uid, h.metadata.resource_version or ""
            )
            for h in IPAMStore(self.client).list_handles()
        }

    def _top_nodes(self) -> None:
        self.say(f"Looking for top (up to {TOP_NODES}) nodes by allocations...")
        nodes = sorted(self.by_node, key=lambda n: len(self.by_node[n]), reverse=True)
        for node in nodes[:TOP_NODES]:
            self.say(f"  {node} has {len(self.by_node[node])} allocations")
        if nodes:
            most = len(self.by_node[nodes[0]])
            median = len(self.by_node[nodes[len(nodes) // 2]])
            self.say(f"Node with most allocations has {most}; median is {median}")
        self.say()

    def _scan(self, active: list[Any], handles: dict[str, HandleInfo]) -> None:
        problems = 0
        self.say("Scanning for IPs that are allocated but not actually in use...")
        leaked = 0
        for ip, allocs in self.report.allocations.items():
            if ip not in self.in_use:
                if self.show_problems:
                    for alloc in allocs:
                        self.say(f"  {ip} leaked; attrs {alloc.attrs}")
                leaked += 1
        problems += leaked
        self.say(f"Found {leaked} IPs that are allocated in IPAM but not actually in use.")
        self.say(
            "Scanning for IPs that are in use by a workload or node but not allocated in IPAM..."
        )
        outside = unallocated = 0
        for ip, owners in self.in_use.items():
            if self.show_problems and len(owners) > 1:
                self.say(f"  {ip} has multiple owners.")
            if ip in self.report.allocations:
                continue
            addr = ipaddress.ip_address(ip)
            if not any(addr.version == n.version and addr in n for n in active):
                if self.show_problems:
                    for owner in owners:
                        self.say(f"  {ip} in use by {owner} is not in any active IP pool.")
                outside += 1
                continue
            if self.show_problems:
                for owner in owners:
                    self.say(
                        f"  {ip} in use by {owner} and in active IPAM pool but has no IPAM "
                        "allocation."
                    )
            unallocated += 1
        problems += outside + unallocated
        self.say(f"Found {outside} in-use IPs that are not in active IP pools.")
        self.say(
            f"Found {unallocated} in-use IPs that are in active IP pools but have no "
            "corresponding IPAM allocation."
        )
        self.say()
        self.say("Scanning for IPAM handles with no matching IPs...")
        good = 0
        for handle_id, info in handles.items():
            if handle_id in self.in_use_handles:
                good += 1
                continue
            if self.show_all:
                self.say(f"  {handle_id} doesn't have any active IPs.")
            self.report.leaked_handles.append(info)
        problems += len(self.report.leaked_handles)
        self.say(
            f"Found {len(self.report.leaked_handles)} handles with no matching IPs (and {good} "
            "handles with matches)."
        )
        self.say("Scanning for IPs with missing handle...")
        missing = [h for h in sorted(self.in_use_handles) if h not in handles]
        if self.show_problems:
            for handle_id in missing:
                self.say(f"  {handle_id} is in use in a block but doesn't exist.")
        self.say(
            f"Found {len(missing)} handles mentioned in blocks with no matching handle resource."
        )
        self.say(f"Check complete; found {problems} problems.")
        self.report.problems = problems


def run_check(
    client: Client,
    out: TextIO,
    *,
    show_all_ips: bool = False,
    show_problem_ips: bool = False,
    version: str = "",
) -> CheckReport:
    return Checker(client, out, show_all_ips, show_problem_ips, version).run()


def write_report(report: CheckReport, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(report.to_json(), fh, indent=2)


def load_report(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
