"""The node controller's IPAM garbage collector (design/kube-controllers.md "IPAM GC").

Upstream's rules (``pkg/controllers/node/ipam.go``), one pass over every block:

- an allocation whose node (the ``node`` attribute, else the block's affinity) no longer
  exists is released at once — workload addresses and tunnel addresses alike — and the dead
  node's affinities are released (its blocks deleted when empty, others' borrowed addresses
  kept in an unaffine block);
- an allocation naming a pod (``namespace`` + ``pod`` attributes) on a live node is a *leak
  candidate* while that pod does not exist or does not carry the address; a candidate is
  released once it has been one for ``leakGracePeriod`` (0 disables leak collection), and
  stops being one if the pod shows up with the address. Candidates are remembered by
  (address, handle, sequence number), so a reallocation restarts the clock, and released with
  that handle and sequence number, so a racing reallocation is left alone;
- allocations without pod attributes on a live node are never judged.

The pass also computes upstream's ``ipam_*`` gauges (calico.kube_controllers.metrics).
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from calico.datastore.errors import (
    DatastoreError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.ipam import BadSequenceNumber, IPAMClient, ReleaseOptions
from calico.ipam.blocks import IPNetwork
from calico.ipam.errors import IPAMError
from calico.ipam.pools import list_pools

log = logging.getLogger(__name__)

RELEASE_WORKERS = 8

# (address, handle, sequence number): one allocation's identity across passes.
AllocID = tuple[str, str, int]


@dataclass
class PassResult:
    released: list[str] = field(default_factory=list)  # addresses freed this pass
    candidates: int = 0  # leak candidates still inside their grace period
    released_affinities: list[str] = field(default_factory=list)  # "<node>/<cidr>"
    # (pool, node) -> counts, for the metrics
    in_use: dict[tuple[str, str], int] = field(default_factory=dict)
    borrowed: dict[tuple[str, str], int] = field(default_factory=dict)
    gc_candidates: dict[tuple[str, str], int] = field(default_factory=dict)
    reclaimed: dict[tuple[str, str], int] = field(default_factory=dict)
    blocks: dict[tuple[str, str], int] = field(default_factory=dict)
    pool_sizes: dict[str, int] = field(default_factory=dict)


def _bump(counts: dict[tuple[str, str], int], key: tuple[str, str], n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


class IPAMGarbageCollector:
    """Keeps the leak candidates between passes; ``run_pass`` is called by the node
    controller after every change and every reconciler period."""

    def __init__(
        self,
        ipam: IPAMClient,
        leak_grace_period: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ipam = ipam
        self.grace = leak_grace_period
        self.clock = clock
        self.leaks: dict[AllocID, float] = {}  # candidate -> when first seen

    def run_pass(
        self,
        live_nodes: set[str],
        pod_ips: dict[tuple[str, str], set[str]],
        dead_nodes_known: bool = True,
    ) -> PassResult:
        """``live_nodes``: nodes whose allocations stay; ``pod_ips``: (namespace, pod) ->
        its addresses. ``dead_nodes_known`` False (the node cache is not in sync) skips
        node-deletion releases."""
        now = self.clock()
        result = PassResult()
        pools = list_pools(self.ipam.client)
        for pool in pools:
            result.pool_sizes[pool.name] = pool.cidr.num_addresses
        release: list[tuple[ReleaseOptions, tuple[str, str], IPNetwork]] = []
        seen: set[AllocID] = set()
        dead_affinities: list[tuple[str, str]] = []
        for stored in self.ipam.store.list_blocks():
            block = stored.block
            host = block.host()
            pool = next((p.name for p in pools if block.cidr.subnet_of(p.cidr)), "")  # type: ignore[arg-type]
            _bump(result.blocks, (pool, host or ""))
            if host is not None and dead_nodes_known and host not in live_nodes:
                dead_affinities.append((host, str(block.cidr)))
            for ordinal in range(block.size):
                attr = block.attr_of(ordinal)
                if attr is None or attr.released_at is not None or attr.handle_id is None:
                    continue
                owner = dict(attr.secondary or {})
                node = owner.get("node") or host or ""
                addr = str(block.ip(ordinal))
                alloc: AllocID = (addr, attr.handle_id, block.seq_of(ordinal))
                key = (pool, node)
                _bump(result.in_use, key)
                if host is not None and node != host:
                    _bump(result.borrowed, key)
                opt = ReleaseOptions(addr, attr.handle_id, alloc[2])
                if node and dead_nodes_known and node not in live_nodes:
                    release.append((opt, key, block.cidr))
                    continue
                ns, pod = owner.get("namespace"), owner.get("pod")
                if not ns or not pod or not node:
                    continue
                if addr in pod_ips.get((ns, pod), ()):
                    continue
                seen.add(alloc)
                first = self.leaks.setdefault(alloc, now)
                if self.grace > 0 and now - first >= self.grace:
                    log.info("Releasing leaked IP %s (pod %s/%s gone)", addr, ns, pod)
                    release.append((opt, key, block.cidr))
                else:
                    result.candidates += 1
                    _bump(result.gc_candidates, key)
        self.leaks = {a: t for a, t in self.leaks.items() if a in seen}
        self._release(release, result)
        for node, cidr in dead_affinities:
            self._release_affinity(node, cidr, result)
        return result

    def _release(
        self, release: list[tuple[ReleaseOptions, tuple[str, str], IPNetwork]], result: PassResult
    ) -> None:
        """Release block by block, blocks in parallel (every write is a CAS, and each pod has
        its own handle, so concurrent blocks do not contend)."""
        by_block: dict[IPNetwork, list[ReleaseOptions]] = {}
        keys: dict[str, tuple[str, str]] = {}
        for opt, key, cidr in release:
            by_block.setdefault(cidr, []).append(opt)
            keys[opt.address] = key
        if not by_block:
            return
        with ThreadPoolExecutor(min(RELEASE_WORKERS, len(by_block))) as pool:
            done = list(pool.map(self._release_block, by_block.items()))
        for freed in done:
            for opt in freed:
                result.released.append(opt.address)
                _bump(result.reclaimed, keys[opt.address])
                self.leaks.pop((opt.address, opt.handle or "", opt.sequence_number or 0), None)

    def _release_block(self, item: tuple[IPNetwork, list[ReleaseOptions]]) -> list[ReleaseOptions]:
        cidr, opts = item
        try:
            try:
                missing = set(self.ipam.release_from_block(cidr, opts))
            except BadSequenceNumber:  # one was reallocated since the scan: one by one
                missing = set()
                for opt in opts:
                    try:
                        missing.update(self.ipam.release_from_block(cidr, [opt]))
                    except BadSequenceNumber:
                        missing.add(opt.address)
        except (IPAMError, DatastoreError) as exc:
            log.warning("Could not release leaked addresses in %s: %s", cidr, exc)
            return []
        return [opt for opt in opts if opt.address not in missing]

    def _release_affinity(self, node: str, cidr: str, result: PassResult) -> None:
        try:
            self.ipam.release_affinity(cidr, node, require_empty=False)
            result.released_affinities.append(f"{node}/{ipaddress.ip_network(cidr)}")
        except (IPAMError, UpdateConflictError, ResourceDoesNotExistError) as exc:
            log.warning("Could not release block %s of deleted node %s: %s", cidr, node, exc)
