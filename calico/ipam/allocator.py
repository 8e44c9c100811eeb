"""IPAMClient: assign and release addresses, block affinities, IPAM configuration.

Many allocators (threads, processes, hosts) share one datastore and never lock it: each step
reads a record, changes a copy, and writes it back with the resourceVersion it read. A lost race
shows up as a conflict and the step is redone from a fresh read, up to ``DATASTORE_RETRIES``
times. Uniqueness of addresses rests on exactly one thing: an ordinal moves from the free queue
to ``allocations`` only inside a successful compare-and-swap of its block.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from calico.api.ipamalloc import BlockAffinity, IPAMConfiguration, IPAMConfigurationSpec
from calico.datastore.client import Client
from calico.datastore.errors import (
    ResourceAlreadyExistsError,
    ResourceDoesNotExistError,
    UpdateConflictError,
)
from calico.ipam.blocks import (
    Block,
    IPAddress,
    IPNetwork,
    block_cidr_for,
    block_walk,
    format_time,
    walk_position,
)
from calico.ipam.errors import (
    AddressInUseError,
    IPAMError,
    NoFreeAddressesError,
    TooMuchContentionError,
)
from calico.ipam.handles import HandleBook
from calico.ipam.pools import (
    HOST,
    LOAD_BALANCER,
    VIRTUAL,
    WORKLOAD,
    Pool,
    Reservations,
    list_pools,
    node_labels,
    pool_for_ip,
    usable_pools,
)
from calico.ipam.store import IPAMStore, Stored

log = logging.getLogger(__name__)

DATASTORE_RETRIES = 100
DEFAULT_MAX_BLOCKS_PER_HOST = 20

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface


@dataclass(frozen=True)
class ReleaseOptions:
    """One address to release; ``handle`` and ``sequence_number`` guard against stale callers."""

    address: str
    handle: str | None = None
    sequence_number: int | None = None


def _utcnow() -> datetime:
    return datetime.now(UTC)


class IPAMClient:
    """Calico IPAM over a typed datastore :class:`Client` (any Backend)."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Callable[[], datetime] = _utcnow,
        retries: int = DATASTORE_RETRIES,
    ) -> None:
        self.client = client
        self.store = IPAMStore(client)
        self.handles = HandleBook(self.store, retries)
        self.clock = clock
        self.retries = retries

    # -- configuration ---------------------------------------------------------------------

    def get_ipam_config(self) -> IPAMConfigurationSpec:
        """The stored configuration, or the defaults when there is none."""
        res = self.store.get_config()
        return res.spec if res is not None else IPAMConfigurationSpec()

    def set_ipam_config(self, spec: IPAMConfigurationSpec) -> IPAMConfigurationSpec:
        """Validate (cross-field rules included) and store ``default``."""
        spec = IPAMConfigurationSpec.model_validate(spec.model_dump(by_alias=True))
        res = IPAMConfiguration(spec=spec)
        res.metadata.name = "default"
        for _ in range(self.retries):
            current = self.store.get_config()
            try:
                if current is None:
                    return self.client.create(res).spec  # type: ignore[attr-defined]
                updated = current.model_copy(update={"spec": spec})
                return self.client.update(updated).spec  # type: ignore[attr-defined]
            except (ResourceAlreadyExistsError, UpdateConflictError, ResourceDoesNotExistError):
                continue
        raise TooMuchContentionError("could not store IPAMConfiguration: too much contention")

    def _cooldown(self, cfg: IPAMConfigurationSpec) -> float:
        return float(cfg.ip_cooldown_seconds or 0)

    # -- automatic assignment --------------------------------------------------------------

    def auto_assign(
        self,
        num_v4: int,
        num_v6: int,
        handle_id: str | None,
        attrs: dict[str, str] | None,
        hostname: str,
        ipv4_pools: Sequence[str] | None = None,
        ipv6_pools: Sequence[str] | None = None,
        max_blocks_per_host: int | None = None,
        intended_use: str = WORKLOAD,
    ) -> tuple[list[ipaddress.IPv4Interface], list[ipaddress.IPv6Interface]]:
        """Assign ``num_v4`` + ``num_v6`` addresses to ``hostname``, all or nothing.

        Each result carries its block's prefix (``10.0.0.5/26``), as upstream returns it: the CNI
        plugin relies on it. If any family falls short, everything assigned by this call is
        released again and :class:`NoFreeAddressesError` is raised.
        """
        cfg = self.get_ipam_config()
        pools = list_pools(self.client)
        # LoadBalancer addresses live in blocks with a virtual affinity (``virtual:<name>``,
        # upstream's AffinityTypeVirtual): no node owns, routes or garbage-collects them.
        kind = VIRTUAL if intended_use == LOAD_BALANCER else HOST
        labels = node_labels(self.client, hostname) if kind == HOST else None
        reservations = Reservations.load(self.client)
        got: dict[int, list[IPInterface]] = {4: [], 6: []}
        try:
            for version, num, requested in ((4, num_v4, ipv4_pools), (6, num_v6, ipv6_pools)):
                if num <= 0:
                    continue
                usable = usable_pools(pools, version, labels, intended_use, requested)
                if not usable:
                    raise NoFreeAddressesError(
                        f"no configured Calico pools for node {hostname} (IPv{version})"
                    )
                self._assign_family(
                    version,
                    num,
                    handle_id,
                    attrs,
                    hostname,
                    usable,
                    cfg,
                    reservations,
                    max_blocks_per_host,
                    got[version],
                    kind,
                )
        except BaseException:
            self._undo(got[4] + got[6], handle_id)
            raise
        return got[4], got[6]  # type: ignore[return-value]

    def _undo(self, assigned: list[IPInterface], handle_id: str | None) -> None:
        if not assigned:
            return
        try:
            self.release_ips([ReleaseOptions(str(a.ip), handle_id) for a in assigned])
        except Exception:  # pragma: no cover - best effort; GC catches what is left
            log.exception("failed to release addresses after a failed assignment")

    def _block_cap(self, cfg: IPAMConfigurationSpec, requested: int | None) -> int:
        """min(config, request) over the values that are set; 20 when neither is."""
        caps = [c for c in (cfg.max_blocks_per_host, requested or 0) if c > 0]
        return min(caps) if caps else DEFAULT_MAX_BLOCKS_PER_HOST

    def _assign_family(
        self,
        version: int,
        num: int,
        handle_id: str | None,
        attrs: dict[str, str] | None,
        host: str,
        pools: list[Pool],
        cfg: IPAMConfigurationSpec,
        reservations: Reservations,
        max_blocks: int | None,
        out: list[IPInterface],
        kind: str = "host",
    ) -> None:
        def want() -> int:
            return num - len(out)

        affine = self._affine_blocks(host, version, kind)
        # 1. Blocks this host already owns (in the pools this request may use).
        for cidr in affine:
            if not want():
                return
            if any(cidr.subnet_of(p.cidr) for p in pools):  # type: ignore[arg-type]
                out += self._take(
                    cidr, want(), handle_id, attrs, host, reservations, cfg, True, kind
                )
        # 2. Claim new blocks, within the per-host cap.
        owned = len(affine)
        cap = self._block_cap(cfg, max_blocks)
        while want() and cfg.auto_allocate_blocks and owned < cap:
            cidr = self._claim_free_block(pools, host, reservations, cfg, kind)
            if cidr is None:
                break
            owned += 1
            out += self._take(cidr, want(), handle_id, attrs, host, reservations, cfg, True, kind)
        # 3. Borrow from blocks other hosts own, unless strict affinity forbids it.
        if want() and not cfg.strict_affinity:
            for cidr in self._borrow_candidates(pools, host, kind):
                if not want():
                    break
                out += self._take(cidr, want(), handle_id, attrs, host, reservations, cfg, False)
        if want():
            raise NoFreeAddressesError(
                f"failed to allocate {num} IPv{version} address(es) for host {host}: "
                f"only {len(out)} available"
            )

    def _affine_blocks(self, host: str, version: int, kind: str = "host") -> list[IPNetwork]:
        """CIDRs of this host's confirmed affinities; pending ones whose block already names
        this host (a claim interrupted before its last step) are confirmed first."""
        out: list[IPNetwork] = []
        for aff in self.store.list_affinities(host):
            if (aff.spec.type or HOST) != kind:
                continue
            cidr = ipaddress.ip_network(aff.spec.cidr)
            if cidr.version != version:
                continue
            state = aff.spec.state
            if state == "pending":
                stored = self.store.get_block(cidr)
                if stored is None or stored.block.affinity != f"{kind}:{host}":
                    continue
                if not self._confirm(aff):
                    continue
            elif state not in ("confirmed", ""):
                continue
            out.append(cidr)
        return sorted(out)

    def _take(
        self,
        cidr: IPNetwork,
        num: int,
        handle_id: str | None,
        attrs: dict[str, str] | None,
        host: str,
        reservations: Reservations,
        cfg: IPAMConfigurationSpec,
        affine: bool,
        kind: str = "host",
    ) -> list[IPInterface]:
        """Allocate up to ``num`` addresses from one block (CAS loop); [] if it has none."""
        skip = reservations.ordinals(cidr)
        for _ in range(self.retries):
            stored = self.store.get_block(cidr)
            if stored is None:
                if affine and self._repair_missing_block(cidr, host, cfg, kind):
                    continue
                return []
            block = stored.block
            if affine and block.affinity != f"{kind}:{host}":
                self._drop_stale_affinity(host, cidr)
                return []
            block.collect(self.clock(), self._cooldown(cfg))
            ordinals = block.allocate(num, handle_id, attrs, skip)
            if not ordinals:
                return []
            if handle_id is not None:
                self.handles.add(handle_id, cidr, len(ordinals))
            try:
                self.store.update_block(stored)
            except (UpdateConflictError, ResourceDoesNotExistError):
                if handle_id is not None:
                    self.handles.remove(handle_id, {str(cidr): len(ordinals)})
                continue
            prefix = cidr.prefixlen
            return [ipaddress.ip_interface(f"{block.ip(o)}/{prefix}") for o in ordinals]
        raise TooMuchContentionError(f"could not allocate from block {cidr}: too much contention")

    def _repair_missing_block(
        self, cidr: IPNetwork, host: str, cfg: IPAMConfigurationSpec, kind: str = "host"
    ) -> bool:
        """A confirmed affinity whose block is gone (crash mid-claim): recreate the block."""
        block = Block.new(cidr, f"{kind}:{host}")
        block.affinity_claim_time = format_time(self.clock())
        block.strict_affinity = cfg.strict_affinity
        with contextlib.suppress(ResourceAlreadyExistsError):
            self.store.create_block(block)
        return True

    def _drop_stale_affinity(self, host: str, cidr: IPNetwork) -> None:
        """Our affinity names a block another host owns: it is stale, remove it."""
        aff = self.store.get_affinity(host, cidr)
        if aff is not None:
            with contextlib.suppress(UpdateConflictError, ResourceDoesNotExistError):
                self.store.delete_affinity(aff)

    # -- claiming blocks -------------------------------------------------------------------

    def _claim_free_block(
        self,
        pools: list[Pool],
        host: str,
        reservations: Reservations,
        cfg: IPAMConfigurationSpec,
        kind: str = "host",
    ) -> IPNetwork | None:
        """Find a block no one has created yet and claim it; None when the pools are full."""
        existing = {s.block.cidr for s in self.store.list_blocks()}
        for pool in pools:
            for cidr in block_walk(pool.cidr, pool.block_size, host):
                if cidr in existing or reservations.covers(cidr):
                    continue
                if self._claim(cidr, host, cfg, kind):
                    return cidr
                existing.add(cidr)  # lost the race for it: someone else has it now
        return None

    def _claim(
        self, cidr: IPNetwork, host: str, cfg: IPAMConfigurationSpec, kind: str = "host"
    ) -> bool:
        """Two-phase claim: pending affinity, create the block, confirm the affinity.

        The block create decides races: whoever creates it owns it. A loser deletes its
        pending affinity and looks elsewhere; a second process of the *same* host finds the
        block already names the host and simply goes on to confirm.
        """
        try:
            aff = self.store.create_affinity(host, cidr, "pending", kind)
        except ResourceAlreadyExistsError:
            found = self.store.get_affinity(host, cidr)
            if found is None:
                return False
            aff = found
        block = Block.new(cidr, f"{kind}:{host}")
        block.affinity_claim_time = format_time(self.clock())
        block.strict_affinity = cfg.strict_affinity
        try:
            self.store.create_block(block)
        except ResourceAlreadyExistsError:
            stored = self.store.get_block(cidr)
            if stored is None or stored.block.affinity != f"{kind}:{host}":
                if aff.spec.state == "pending":
                    with contextlib.suppress(UpdateConflictError, ResourceDoesNotExistError):
                        self.store.delete_affinity(aff)
                return False
        return self._confirm(aff)

    def _confirm(self, aff: BlockAffinity) -> bool:
        for _ in range(self.retries):
            if aff.spec.state == "confirmed":
                return True
            if aff.spec.state == "pendingDeletion":
                return False
            try:
                self.store.set_affinity_state(aff, "confirmed")
                return True
            except UpdateConflictError:
                fresh = self.store.get_affinity(aff.spec.node, ipaddress.ip_network(aff.spec.cidr))
                if fresh is None:
                    return False
                aff = fresh
            except ResourceDoesNotExistError:
                return False
        raise TooMuchContentionError(f"could not confirm affinity {aff.metadata.name}")

    def _borrow_candidates(
        self, pools: list[Pool], host: str, kind: str = "host"
    ) -> list[IPNetwork]:
        """Existing blocks not affine to ``host`` with free space, in host-seeded order."""
        ranked: list[tuple[int, int, IPNetwork]] = []
        for stored in self.store.list_blocks():
            block = stored.block
            if block.affinity == f"{kind}:{host}" or not block.unallocated:
                continue
            for i, pool in enumerate(pools):
                if block.cidr.version == pool.cidr.version and block.cidr.subnet_of(pool.cidr):  # type: ignore[arg-type]
                    ranked.append((i, walk_position(pool.cidr, block.cidr, host), block.cidr))
                    break
        return [cidr for _, _, cidr in sorted(ranked)]

    def claim_affinity(self, cidr: str, hostname: str) -> tuple[list[str], list[str]]:
        """Claim every block of ``cidr`` (inside one pool) for ``hostname``.

        Returns (claimed, failed) block CIDRs; failed ones belong to someone else.
        """
        net = ipaddress.ip_network(cidr)
        pool = pool_for_ip(list_pools(self.client), net.network_address)
        if pool is None or not net.subnet_of(pool.cidr):  # type: ignore[arg-type]
            raise IPAMError(f"the requested CIDR ({cidr}) is not within any configured pool")
        size = max(pool.block_size, net.prefixlen)
        if size != pool.block_size:
            raise IPAMError(f"the requested CIDR ({cidr}) is smaller than a block")
        cfg = self.get_ipam_config()
        claimed: list[str] = []
        failed: list[str] = []
        for block in net.subnets(new_prefix=size):
            (claimed if self._claim(block, hostname, cfg) else failed).append(str(block))
        return claimed, failed

    def release_affinity(self, cidr: str, hostname: str, require_empty: bool = True) -> bool:
        """Give up ``hostname``'s claim on a block; False if it still has allocations.

        The affinity goes to ``pendingDeletion`` first so this host's allocators stop
        treating the block as theirs; an empty block is then deleted (CAS, so a racing
        allocation wins and the affinity is restored), a non-empty one is kept unaffine when
        ``require_empty`` is False.
        """
        net = ipaddress.ip_network(cidr)
        for _ in range(self.retries):
            aff = self.store.get_affinity(hostname, net)
            if aff is None:
                return True
            try:
                aff = self.store.set_affinity_state(aff, "pendingDeletion")
            except (UpdateConflictError, ResourceDoesNotExistError):
                continue
            stored = self.store.get_block(net)
            try:
                if stored is not None and stored.block.affinity == f"host:{hostname}":
                    if stored.block.is_empty():
                        self.store.delete_block(stored)
                    elif require_empty:
                        self.store.set_affinity_state(aff, "confirmed")
                        return False
                    else:
                        stored.block.affinity = None
                        self.store.update_block(stored)
                self.store.delete_affinity(aff)
                return True
            except (UpdateConflictError, ResourceDoesNotExistError):
                with contextlib.suppress(UpdateConflictError, ResourceDoesNotExistError):
                    fresh = self.store.get_affinity(hostname, net)
                    if fresh is not None and fresh.spec.state == "pendingDeletion":
                        self.store.set_affinity_state(fresh, "confirmed")
                continue
        raise TooMuchContentionError(f"could not release affinity for {cidr}: too much contention")

    # -- specific assignment ---------------------------------------------------------------

    def assign_ip(
        self,
        ip: str,
        handle_id: str | None,
        attrs: dict[str, str] | None,
        hostname: str,
        intended_use: str | None = None,
    ) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
        """Assign one specific address (CNI ``IP=`` / the ``ipAddrs`` annotation).

        IPReservations do not apply (they only limit automatic assignment, as upstream). If
        the address's block does not exist yet it is claimed for ``hostname``.
        """
        addr = ipaddress.ip_address(ip)
        pool = pool_for_ip(list_pools(self.client), addr)
        if pool is None:
            raise IPAMError(f"the provided IP address {addr} is not in a configured pool")
        if intended_use and intended_use not in pool.allowed_uses:
            raise IPAMError(
                f"the provided IP address {addr} is in pool {pool.name}, which does not allow "
                f"{intended_use} use"
            )
        cfg = self.get_ipam_config()
        cidr = block_cidr_for(addr, pool.block_size)
        for _ in range(self.retries):
            stored = self.store.get_block(cidr)
            if stored is None:
                self._claim(cidr, hostname, cfg)
                continue
            block = stored.block
            block.collect(self.clock(), self._cooldown(cfg))
            if not block.assign(block.ordinal(addr), handle_id, attrs):
                raise AddressInUseError(f"Address already assigned in block: {addr}")
            if handle_id is not None:
                self.handles.add(handle_id, cidr, 1)
            try:
                self.store.update_block(stored)
            except (UpdateConflictError, ResourceDoesNotExistError):
                if handle_id is not None:
                    self.handles.remove(handle_id, {str(cidr): 1})
                continue
            return ipaddress.ip_interface(f"{addr}/{cidr.prefixlen}")
        raise TooMuchContentionError(f"could not assign {addr}: too much contention")

    # -- release ---------------------------------------------------------------------------

    def release_ips(self, ips: Iterable[str | IPAddress | ReleaseOptions]) -> list[str]:
        """Release addresses; returns the ones that were not allocated (nothing to do).

        A ReleaseOptions with ``handle`` releases only if the address still belongs to that
        handle; with ``sequence_number`` only if it has not been reallocated since (else
        :class:`~calico.ipam.blocks.BadSequenceNumber`).
        """
        opts = [o if isinstance(o, ReleaseOptions) else ReleaseOptions(str(o)) for o in ips]
        by_block: dict[IPNetwork, list[tuple[IPAddress, ReleaseOptions]]] = {}
        unallocated: list[str] = []
        for opt in opts:
            addr = ipaddress.ip_address(opt.address)
            cidr = self._block_of(addr)
            if cidr is None:
                unallocated.append(str(addr))
            else:
                by_block.setdefault(cidr, []).append((addr, opt))
        for cidr, items in by_block.items():
            unallocated += self._release_in_block(cidr, items)
        return unallocated

    def release_from_block(self, cidr: IPNetwork, opts: Iterable[ReleaseOptions]) -> list[str]:
        """``release_ips`` for addresses the caller knows lie in block ``cidr`` (the GC found
        them there in its scan): no per-address pool and block lookups."""
        return self._release_in_block(cidr, [(ipaddress.ip_address(o.address), o) for o in opts])

    def _block_of(self, addr: IPAddress) -> IPNetwork | None:
        pool = pool_for_ip(list_pools(self.client), addr)
        if pool is not None:
            cidr = block_cidr_for(addr, pool.block_size)
            if self.store.get_block(cidr) is not None:
                return cidr
        for stored in self.store.list_blocks():  # block outlived its pool or pool resized
            if addr.version == stored.block.cidr.version and addr in stored.block.cidr:
                return stored.block.cidr
        return None

    def _release_in_block(
        self, cidr: IPNetwork, items: list[tuple[IPAddress, ReleaseOptions]]
    ) -> list[str]:
        cfg = self.get_ipam_config()
        for _ in range(self.retries):
            stored = self.store.get_block(cidr)
            if stored is None:
                return [str(a) for a, _ in items]
            block = stored.block
            wanted: list[int] = []
            not_ours: list[str] = []
            sequence: dict[int, int] = {}
            for addr, opt in items:
                o = block.ordinal(addr)
                attr = block.attr_of(o)
                if opt.handle is not None and (attr is None or attr.handle_id != opt.handle):
                    if attr is None or attr.released_at is None:
                        not_ours.append(str(addr))
                    continue
                if opt.sequence_number is not None:
                    sequence[o] = opt.sequence_number
                wanted.append(o)
            now = self.clock()
            released, missing, handles = block.release(wanted, format_time(now), sequence)
            block.collect(now, self._cooldown(cfg))
            if released:
                try:
                    self._write_after_release(stored)
                except (UpdateConflictError, ResourceDoesNotExistError):
                    continue
                self._forget_handles(cidr, handles)
            return not_ours + [str(block.ip(o)) for o in missing]
        raise TooMuchContentionError(f"could not release from block {cidr}: too much contention")

    def _write_after_release(self, stored: Stored) -> None:
        """Persist a block; an empty block nobody is affine to is deleted instead."""
        if stored.block.affinity is None and stored.block.is_empty():
            self.store.delete_block(stored)
        else:
            self.store.update_block(stored)

    def _forget_handles(self, cidr: IPNetwork, handles: dict[int, str | None]) -> None:
        counts: dict[str, int] = {}
        for handle in handles.values():
            if handle is not None:
                counts[handle] = counts.get(handle, 0) + 1
        for handle, n in counts.items():
            self.handles.remove(handle, {str(cidr): n})

    def release_by_handle(self, handle_id: str) -> list[str]:
        """Release every address of ``handle_id``; returns them ([] for an unknown handle)."""
        handle = self.store.get_handle(handle_id)
        if handle is None:
            return []
        cfg = self.get_ipam_config()
        released_ips: list[str] = []
        for key in list(handle.spec.block):
            cidr = ipaddress.ip_network(key)
            for _ in range(self.retries):
                stored = self.store.get_block(cidr)
                if stored is None:
                    self.handles.remove(handle_id, {key: handle.spec.block[key]})
                    break
                block = stored.block
                ordinals = block.ordinals_for_handle(handle_id)
                if not ordinals:
                    self.handles.remove(handle_id, {key: handle.spec.block[key]})
                    break
                now = self.clock()
                released, _, _ = block.release(ordinals, format_time(now))
                block.collect(now, self._cooldown(cfg))
                try:
                    self._write_after_release(stored)
                except (UpdateConflictError, ResourceDoesNotExistError):
                    continue
                self.handles.remove(handle_id, {key: len(released)})
                released_ips += [str(block.ip(o)) for o in released]
                break
            else:
                raise TooMuchContentionError(f"could not release handle {handle_id} in {key}")
        return released_ips

    # -- queries ---------------------------------------------------------------------------

    def ips_by_handle(self, handle_id: str) -> list[str]:
        handle = self.store.get_handle(handle_id)
        if handle is None:
            raise ResourceDoesNotExistError(f"IPAMHandle({handle_id})")
        out: list[str] = []
        for key in handle.spec.block:
            stored = self.store.get_block(ipaddress.ip_network(key))
            if stored is not None:
                out += [
                    str(stored.block.ip(o)) for o in stored.block.ordinals_for_handle(handle_id)
                ]
        return out

    def get_assignment_attributes(self, ip: str) -> tuple[str | None, dict[str, str]]:
        """(handle, owner attributes) of an allocated address; raises if it is not allocated."""
        addr = ipaddress.ip_address(ip)
        cidr = self._block_of(addr)
        stored = self.store.get_block(cidr) if cidr is not None else None
        attr = stored.block.attr_of(stored.block.ordinal(addr)) if stored else None
        if attr is None or attr.released_at is not None:
            raise ResourceDoesNotExistError(str(addr))
        return attr.handle_id, dict(attr.secondary or {})
