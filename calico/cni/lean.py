"""The common ADD's datastore work on stored JSON: no pydantic models, fewer round trips.

A plugin process pays for every module it imports, and the typed client (pydantic, the v3
models, the typed IPAM allocator) costs more CPU than all of an ADD's real work. Most ADDs are
the same few steps, though: the network's Profile exists, this node already owns a block with
a free address, and the WorkloadEndpoint is new. This module does exactly those steps on the
Backend's JSON, writing byte-for-byte what the typed path writes (same keys, same canonical
JSON, the same block arithmetic from :mod:`calico.ipam.blocks`).

The stored form follows the v3 wire rules (:func:`calico.api.io.resource_to_wire`) by hand:
``tests/unit/cni/test_lean.py`` compares every key with the typed path's, so a change to the
IPAMBlock, IPAMHandle or WorkloadEndpoint wire form shows up there and must be mirrored here.

Anything else raises :class:`NotLean` *before any write* and the caller runs the typed path
(which also produces every error message): a handle that already exists (a retried ADD), pools
with a node selector other than ``all()``, no affine block with room (the typed allocator
claims or borrows one), pending affinities, a write conflict, a WorkloadEndpoint that already
exists, Mesos labels or any field the typed validation might refuse.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from calico.cni.identity import K8S, NAMESPACE_LABEL, ORCHESTRATOR_LABEL, Identity, profiles_for
from calico.cni.netconf import NetConf

if TYPE_CHECKING:
    from calico.datastore.backend import Backend, KVPair
    from calico.ipam.blocks import Block

V3_PREFIX = "/calico/resources/v3/projectcalico.org/"
API_VERSION = "projectcalico.org/v3"
WORKLOAD_USE = "Workload"
DEFAULT_BLOCK_SIZE = {4: 26, 6: 122}

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class NotLean(Exception):
    """This call needs the typed path; nothing has been written."""


class PartialLean(NotLean):
    """The handle (and maybe some blocks) were written: release by handle, then go typed."""


def path(plural: str, name: str, namespace: str | None = None) -> str:
    return f"{V3_PREFIX}{plural}/{namespace}/{name}" if namespace else f"{V3_PREFIX}{plural}/{name}"


def encode(doc: dict[str, Any]) -> str:
    """The typed client's stored form: compact, sorted keys, no resourceVersion."""
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def uuid4() -> str:
    """``str(uuid.uuid4())`` without importing ``uuid`` (which loads ``platform``)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_doc(
    kind: str,
    name: str,
    spec: dict[str, Any],
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A resource as the typed client's create stores it (server-set uid and timestamp)."""
    meta: dict[str, Any] = {"name": name, "uid": uuid4(), "creationTimestamp": _now()}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def _get(backend: Backend, key: str) -> KVPair | None:
    from calico.datastore.errors import ResourceDoesNotExistError

    try:
        return backend.get(key)
    except ResourceDoesNotExistError:
        return None


def _spec(kv: KVPair) -> dict[str, Any]:
    try:
        doc = json.loads(kv.value)
    except ValueError:
        raise NotLean(f"{kv.key} is not JSON") from None
    spec = doc.get("spec") if isinstance(doc, dict) else None
    if not isinstance(spec, dict):
        raise NotLean(f"{kv.key} has no spec")
    return spec


def profile_exists(backend: Backend, name: str) -> bool:
    return _get(backend, path("profiles", name)) is not None


# -- WorkloadEndpoint ----------------------------------------------------------------------


def wep_doc(
    ident: Identity, conf: NetConf, networks: Sequence[str], host_ifname: str, mac: str
) -> dict[str, Any]:
    """The endpoint ``calico.cni.wep.build`` describes, checked by the same validators.

    Raises NotLean where the typed model might disagree (it then reports the error)."""
    from calico.api import validators as v

    if conf.mesos_labels:
        raise NotLean("Mesos labels")
    spec: dict[str, Any] = {
        "orchestrator": ident.orchestrator,
        "node": ident.node,
        "endpoint": ident.endpoint,
        "containerID": ident.container_id,
        "ipNetworks": list(networks),
        "profiles": profiles_for(ident, conf),
        "interfaceName": host_ifname,
        "mac": mac,
    }
    spec["pod" if ident.orchestrator == K8S else "workload"] = ident.workload
    labels = {NAMESPACE_LABEL: ident.namespace, ORCHESTRATOR_LABEL: ident.orchestrator}
    try:
        v.dns1123_subdomain(ident.wep_name)
        v.dns1123_label(ident.namespace, "namespace")
        for name in ("orchestrator", "node", "endpoint", "pod", "workload"):
            if spec.get(name):
                v.dns1123_subdomain(spec[name])
        v.container_id(ident.container_id)
        for net in networks:
            if ipaddress.ip_network(v.cidr(net, strict=True)).num_addresses != 1:
                raise ValueError(net)
        for profile in spec["profiles"]:
            v.dns1123_subdomain(profile)
        v.interface_name(host_ifname)
        v.mac_address(mac)
        v.label_map(labels)
    except ValueError as exc:
        raise NotLean(f"endpoint field: {exc}") from None
    return new_doc("WorkloadEndpoint", ident.wep_name, spec, ident.namespace, labels)


def create_wep(backend: Backend, doc: dict[str, Any]) -> None:
    """Create the endpoint; NotLean when one of that name exists (the typed path replaces it)."""
    from calico.datastore.errors import ResourceAlreadyExistsError

    meta = doc["metadata"]
    try:
        backend.create(path("workloadendpoints", meta["name"], meta["namespace"]), encode(doc))
    except ResourceAlreadyExistsError:
        raise NotLean("the WorkloadEndpoint exists") from None


# -- IPAM ----------------------------------------------------------------------------------


def _pools(backend: Backend, version: int, requested: Sequence[str]) -> list[IPNetwork]:
    """CIDRs of the usable pools of ``version`` (as :func:`calico.ipam.pools.usable_pools`)."""
    found: list[tuple[str, Any, dict[str, Any]]] = []
    for kv in backend.list(V3_PREFIX + "ippools/").kvs:
        spec = _spec(kv)
        try:
            net = ipaddress.ip_network(spec["cidr"])
        except (KeyError, ValueError):
            raise NotLean(f"{kv.key}: no valid cidr") from None
        found.append((kv.key.rsplit("/", 1)[-1], net, spec))
    if requested:
        chosen = []
        for want in requested:
            match = [f for f in found if f[0] == want or str(f[1]) == want]
            if not match or match[0][2].get("disabled") or match[0][1].version != version:
                raise NotLean(f"requested pool {want}")  # the typed path says why
            chosen.append(match[0])
    else:
        chosen = found
    out = []
    for _name, net, spec in chosen:
        if net.version != version or spec.get("disabled"):
            continue
        if WORKLOAD_USE not in spec.get("allowedUses", ["Workload", "Tunnel"]):
            continue
        if (spec.get("nodeSelector") or "all()") != "all()":
            raise NotLean("a pool with a node selector")  # needs the Node's labels
        out.append(net)
    return out


def _reserved(backend: Backend) -> list[IPNetwork]:
    nets = []
    for kv in backend.list(V3_PREFIX + "ipreservations/").kvs:
        for cidr in _spec(kv).get("reservedCIDRs") or []:
            nets.append(ipaddress.ip_network(cidr, strict=False))
    return nets


def _cooldown(backend: Backend) -> float:
    kv = _get(backend, path("ipamconfigurations", "default"))
    return float((_spec(kv).get("ipCooldownSeconds") or 0) if kv else 0)


def _affine_blocks(backend: Backend, host: str) -> list[IPNetwork]:
    """This host's confirmed affinities (as the typed allocator lists them)."""
    out = []
    for kv in backend.list(f"{V3_PREFIX}blockaffinities/{host}-").kvs:
        spec = _spec(kv)
        if spec.get("deleted") or spec.get("node") != host:
            continue
        state = spec.get("state")
        if state == "pending":
            raise NotLean("a pending affinity")  # the typed allocator may confirm it
        if state not in ("confirmed", ""):
            continue
        out.append(ipaddress.ip_network(spec["cidr"]))
    return sorted(out, key=lambda n: (n.version, n))


@contextlib.contextmanager
def _stored_shapes() -> Iterator[None]:
    """A stored value of an unexpected shape: the typed path reads (and reports) it."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise NotLean(f"unexpected stored value: {exc!r}") from None


def _block_doc(stored: dict[str, Any], block: Block) -> dict[str, Any]:
    """The block as the typed store's update writes it: spec rebuilt from ``block``, metadata
    reduced to what ``block_to_resource`` carries (name) plus the server-kept uid/timestamp."""
    meta = {k: stored["metadata"][k] for k in ("name", "uid", "creationTimestamp")
            if k in stored["metadata"]}  # fmt: skip
    return {"apiVersion": API_VERSION, "kind": "IPAMBlock", "metadata": meta,
            "spec": block_spec(block)}  # fmt: skip


def block_from_spec(spec: dict[str, Any]) -> Block:
    """:func:`calico.ipam.store.block_from_resource`, from the stored JSON."""
    from calico.ipam.blocks import Attr, Block

    net = ipaddress.ip_network(spec["cidr"])
    return Block(
        cidr=net,
        affinity=spec.get("affinity"),
        allocations=list(spec.get("allocations") or [None] * net.num_addresses),
        unallocated=list(spec.get("unallocated") or []),
        attributes=[
            Attr(
                a.get("handle_id"),
                a.get("secondary"),
                a.get("alternateOwnerAttrs"),
                a.get("releasedAt"),
            )
            for a in spec.get("attributes") or []
        ],
        sequence_number=spec.get("sequenceNumber", 0),
        seq_for_alloc=dict(spec.get("sequenceNumberForAllocation") or {}),
        deleted=spec.get("deleted", False),
        strict_affinity=spec.get("strictAffinity", False),
        affinity_claim_time=spec.get("affinityClaimTime"),
    )


def block_spec(block: Block) -> dict[str, Any]:
    """The stored spec of :func:`calico.ipam.store.block_to_resource`, with the wire rules of
    :func:`calico.api.io.resource_to_wire`: None fields left out, and the zero-defaulted ones
    too (``omitempty``) except ``allocations``, ``unallocated``, ``attributes`` and
    ``deleted``, which upstream always prints."""
    attrs = []
    for a in block.attributes:
        fields = (("handle_id", a.handle_id), ("secondary", a.secondary),
                  ("alternateOwnerAttrs", a.alternate), ("releasedAt", a.released_at))  # fmt: skip
        attrs.append({k: val for k, val in fields if val is not None})
    spec: dict[str, Any] = {
        "cidr": str(block.cidr),
        "affinity": block.affinity,
        "affinityClaimTime": block.affinity_claim_time,
        "allocations": list(block.allocations),
        "unallocated": list(block.unallocated),
        "attributes": attrs,
        "sequenceNumber": block.sequence_number or None,
        "sequenceNumberForAllocation": dict(block.seq_for_alloc),
        "deleted": block.deleted,
        "strictAffinity": block.strict_affinity or None,
    }
    return {k: val for k, val in spec.items() if val is not None}


def _take_one(
    backend: Backend,
    version: int,
    requested: Sequence[str],
    affine: list[IPNetwork],
    host: str,
    handle_id: str,
    attrs: dict[str, str],
    now: datetime,
    cooldown: float,
    reserved: list[IPNetwork],
) -> tuple[KVPair, dict[str, Any], Block, int]:
    """Plan one ``version`` address from the first owned block with room (nothing written)."""
    from calico.ipam.blocks import cidr_to_name, overlap_ordinals

    pools = _pools(backend, version, requested)
    if not pools:
        raise NotLean(f"no usable IPv{version} pool")
    for cidr in affine:
        if cidr.version != version or not any(cidr.subnet_of(p) for p in pools):  # type: ignore[arg-type]
            continue
        kv = _get(backend, path("ipamblocks", cidr_to_name(cidr)))
        if kv is None:
            raise NotLean(f"block {cidr} is missing")  # the typed allocator repairs it
        doc = json.loads(kv.value)
        block = block_from_spec(doc["spec"])
        if block.affinity != f"host:{host}":
            raise NotLean(f"block {cidr} is not this host's")  # a stale affinity
        block.collect(now, cooldown)
        taken = block.allocate(1, handle_id, attrs, overlap_ordinals(block.cidr, reserved))
        if taken:
            return kv, doc, block, taken[0]
    raise NotLean(f"no room in this host's IPv{version} blocks")


def auto_assign(
    backend: Backend,
    conf: NetConf,
    handle_id: str,
    attrs: dict[str, str],
    host: str,
    families: Sequence[int],
) -> list[IPInterface]:
    """One address per family from blocks ``host`` already owns, under ``handle_id``.

    The reads come first; then the handle is created (it may over-count, never under-count, as
    the typed allocator's), then each block is compare-and-swapped. A conflict after the handle
    exists raises :class:`PartialLean`: the caller releases by handle and runs the typed path.
    """
    from calico.datastore.errors import (
        ResourceAlreadyExistsError,
        ResourceDoesNotExistError,
        UpdateConflictError,
    )

    if _get(backend, path("ipamhandles", handle_id.lower())) is not None:
        raise NotLean("the handle exists")  # a retried ADD: the typed path reuses its addresses
    plan: list[tuple[KVPair, dict[str, Any], Block, int]] = []
    with _stored_shapes():
        cooldown = _cooldown(backend)
        reserved = _reserved(backend)
        affine = _affine_blocks(backend, host)
        now = datetime.now(UTC)
        for version in families:
            requested = conf.ipam.ipv4_pools if version == 4 else conf.ipam.ipv6_pools
            plan.append(_take_one(backend, version, requested, affine, host, handle_id, attrs,
                                  now, cooldown, reserved))  # fmt: skip
    counts: dict[str, int] = {}
    for _kv, _doc, block, _o in plan:
        counts[str(block.cidr)] = counts.get(str(block.cidr), 0) + 1
    handle = new_doc("IPAMHandle", handle_id.lower(),
                     {"handleID": handle_id, "block": counts, "deleted": False})  # fmt: skip
    try:
        backend.create(path("ipamhandles", handle_id.lower()), encode(handle))
    except ResourceAlreadyExistsError:
        raise NotLean("the handle appeared concurrently") from None
    out: list[IPInterface] = []
    for kv, doc, block, ordinal in plan:
        block.sequence_number += 1  # every block write bumps it, as the typed store's
        try:
            backend.update(kv.key, encode(_block_doc(doc, block)), kv.revision)
        except (UpdateConflictError, ResourceDoesNotExistError):
            raise PartialLean(f"block {block.cidr} changed concurrently") from None
        out.append(ipaddress.ip_interface(f"{block.ip(ordinal)}/{block.cidr.prefixlen}"))
    return out


def release_by_handle(backend: Backend, handle_id: str) -> list[str] | None:
    """:meth:`calico.ipam.IPAMClient.release_by_handle` on stored JSON; None if unknown.

    Every read and check comes first (NotLean before any write); then each block is
    compare-and-swapped and the emptied handle deleted. A conflict raises PartialLean: the
    typed release finishes the job (it is idempotent).
    """
    from calico.datastore.errors import ResourceDoesNotExistError, UpdateConflictError
    from calico.ipam.blocks import cidr_to_name, format_time

    handle_kv = _get(backend, path("ipamhandles", handle_id.lower()))
    if handle_kv is None:
        return None
    plan: list[tuple[KVPair, dict[str, Any], Block, list[int]]] = []
    with _stored_shapes():
        counts = _spec(handle_kv).get("block") or {}
        cooldown = _cooldown(backend)
        now = datetime.now(UTC)
        for key in counts:
            kv = _get(backend, path("ipamblocks", cidr_to_name(key)))
            if kv is None:
                raise NotLean(f"block {key} is gone")
            doc = json.loads(kv.value)
            block = block_from_spec(doc["spec"])
            ordinals = block.ordinals_for_handle(handle_id)
            if not ordinals:
                raise NotLean(f"block {key} holds nothing of the handle")
            released, _, _ = block.release(ordinals, format_time(now))
            block.collect(now, cooldown)
            if block.affinity is None and block.is_empty():
                raise NotLean(f"block {key} would be deleted")
            plan.append((kv, doc, block, released))
    out: list[str] = []
    for kv, doc, block, released in plan:
        block.sequence_number += 1
        try:
            backend.update(kv.key, encode(_block_doc(doc, block)), kv.revision)
        except (UpdateConflictError, ResourceDoesNotExistError):
            raise PartialLean(f"block {block.cidr} changed concurrently") from None
        out += [str(block.ip(o)) for o in released]
    try:
        backend.delete(handle_kv.key, handle_kv.revision)
    except (UpdateConflictError, ResourceDoesNotExistError):
        raise PartialLean("the handle changed concurrently") from None
    return out


def delete_wep(backend: Backend, ident: Identity) -> tuple[str, str]:
    """``calico.cni.wep.delete`` on stored JSON: ("deleted" | "absent" | "kept", the
    stored containerID)."""
    from calico.datastore.errors import ResourceDoesNotExistError, UpdateConflictError

    key = path("workloadendpoints", ident.wep_name, ident.namespace)
    for _ in range(5):
        kv = _get(backend, key)
        if kv is None:
            return "absent", ""
        owner = str(_spec(kv).get("containerID") or "")
        if owner and owner != ident.container_id:
            return "kept", owner
        try:
            backend.delete(key, kv.revision)
            return "deleted", owner
        except ResourceDoesNotExistError:
            return "absent", ""
        except UpdateConflictError:
            continue
    raise NotLean("the WorkloadEndpoint keeps changing")
