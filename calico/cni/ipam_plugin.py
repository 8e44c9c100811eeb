"""calico-ipam: assign and release workload addresses through Calico IPAM.

Usable in-process (the ``calico`` plugin calls :func:`add`/:func:`delete` directly, saving a
process start) and as the ``calico-ipam`` binary (:func:`calico.cni.main.run_plugin` with
``is_ipam``). Addresses are held under handle ``<network>.<containerID>``, so DEL can release
exactly what ADD took. A host-wide flock
(best effort) queues this host's allocations, which avoids pointless CAS retries on the blocks
this host shares; the 90 s assignment clock starts after the lock is taken, as upstream.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from calico.cni.errors import IPAM_FAILURE, CNIError
from calico.cni.identity import K8S, Identity
from calico.cni.netconf import CNIEnv, NetConf
from calico.cni.types import IPConfig, Result, Route

if TYPE_CHECKING:
    from calico.cni.store import Store
    from calico.datastore.client import Client

log = logging.getLogger(__name__)


@contextlib.contextmanager
def host_lock(path: str) -> Iterator[None]:
    """Exclusive flock on ``path``; if the file cannot be opened, carry on unlocked."""
    fd = -1
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as exc:
        log.warning("IPAM lock %s unavailable (%s); continuing without it", path, exc)
    try:
        yield
    finally:
        if fd >= 0:
            os.close(fd)


def _attrs(ident: Identity) -> dict[str, str]:
    attrs = {"node": ident.node}
    if ident.orchestrator == K8S:
        attrs.update(namespace=ident.namespace, pod=ident.workload)
    return attrs


def _result(addrs: list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]) -> Result:
    res = Result()
    families: set[int] = set()
    for addr in addrs:
        res.ips.append(IPConfig(address=str(addr)))
        families.add(addr.version)
    for family in sorted(families):
        res.routes.append(Route(dst="0.0.0.0/0" if family == 4 else "::/0"))
    return res


def _existing(ipam: object, handle: str) -> list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]:
    from calico.datastore.errors import ResourceDoesNotExistError

    try:
        ips = ipam.ips_by_handle(handle)  # type: ignore[attr-defined]
    except ResourceDoesNotExistError:
        return []
    return [ipaddress.ip_interface(ip) for ip in ips]


def add(store: Store, conf: NetConf, env: CNIEnv, ident: Identity) -> Result:
    """Assign one address per enabled family (or the CNI_ARGS ``IP=`` ones).

    The common case (this node owns a block with room) runs on stored JSON
    (:func:`calico.cni.lean.auto_assign`); everything else on the typed allocator.
    """
    num4 = 1 if conf.ipam.assign_ipv4 else 0
    num6 = 1 if conf.ipam.assign_ipv6 else 0
    if not num4 and not num6:
        raise CNIError(IPAM_FAILURE, "no IP families enabled (assign_ipv4 and assign_ipv6 false)")
    handle = ident.handle_id
    attrs = _attrs(ident)
    requested = [s for s in env.args.get("IP", "").split(",") if s.strip()]
    with host_lock(conf.ipam_lock_file):
        if not requested:
            from calico.cni import lean

            families = [f for f, n in ((4, num4), (6, num6)) if n]
            try:
                got = lean.auto_assign(store.backend, conf, handle, attrs, ident.node, families)
            except lean.PartialLean as exc:
                log.info("Lean assignment interrupted (%s); redoing it typed", exc)
                _undo_partial(store.client, handle)
            except lean.NotLean as exc:
                log.debug("Typed assignment: %s", exc)
            else:
                log.info("Assigned %s to handle %s", [str(a) for a in got], handle)
                return _result(got)
        return _add_typed(store.client, conf, ident, handle, attrs, requested, num4, num6)


def _undo_partial(client: Client, handle: str) -> None:
    from calico.ipam import IPAMClient, IPAMError

    try:
        IPAMClient(client).release_by_handle(handle)
    except IPAMError as exc:
        raise CNIError(IPAM_FAILURE, "failed to request an IP address", str(exc)) from None


def _add_typed(
    client: Client,
    conf: NetConf,
    ident: Identity,
    handle: str,
    attrs: dict[str, str],
    requested: list[str],
    num4: int,
    num6: int,
) -> Result:
    from calico.ipam import IPAMClient, IPAMError

    ipam = IPAMClient(client)
    try:
        held = _existing(ipam, handle)
        if held:
            log.info("Handle %s already holds %s; reusing them", handle, held)
            return _result(held)
        if requested:
            return _result(_assign_requested(ipam, requested, handle, attrs, ident.node))
        v4, v6 = ipam.auto_assign(
            num4,
            num6,
            handle,
            attrs,
            ident.node,
            ipv4_pools=conf.ipam.ipv4_pools or None,
            ipv6_pools=conf.ipam.ipv6_pools or None,
        )
    except IPAMError as exc:
        raise CNIError(IPAM_FAILURE, "failed to request an IP address", str(exc)) from None
    log.info("Assigned %s to handle %s", [str(a) for a in v4 + v6], handle)
    return _result([*v4, *v6])


def _assign_requested(
    ipam: object, requested: list[str], handle: str, attrs: dict[str, str], node: str
) -> list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]:
    got: list[ipaddress.IPv4Interface | ipaddress.IPv6Interface] = []
    try:
        for text in requested:
            try:
                ip = ipaddress.ip_address(text.strip())
            except ValueError:
                raise CNIError(IPAM_FAILURE, f"invalid IP address {text!r} in CNI_ARGS") from None
            got.append(ipam.assign_ip(str(ip), handle, attrs, node))  # type: ignore[attr-defined]
    except BaseException:
        if got:
            ipam.release_ips([str(a.ip) for a in got])  # type: ignore[attr-defined]
        raise
    return got


def delete(store: Store, conf: NetConf, ident: Identity) -> list[str]:
    """Release by ``<network>.<containerID>`` and, for pods, the workload handle too."""
    from calico.ipam import IPAMError

    handles = [ident.handle_id]
    if ident.orchestrator == K8S:
        handles.append(ident.workload_handle_id)
    released: list[str] = []
    with host_lock(conf.ipam_lock_file):
        try:
            for handle in handles:
                released += _release(store, handle)
        except IPAMError as exc:
            raise CNIError(IPAM_FAILURE, "failed to release addresses", str(exc)) from None
    if released:
        log.info("Released %s (handle %s)", released, ident.handle_id)
    return released


def _release(store: Store, handle: str) -> list[str]:
    """On stored JSON when it applies (:func:`calico.cni.lean.release_by_handle`), else typed."""
    from calico.cni import lean

    try:
        got = lean.release_by_handle(store.backend, handle)
        return got if got is not None else []
    except lean.NotLean as exc:
        log.debug("Typed release of %s: %s", handle, exc)
    from calico.ipam import IPAMClient

    return IPAMClient(store.client).release_by_handle(handle)
