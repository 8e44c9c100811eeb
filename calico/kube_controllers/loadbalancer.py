"""The LoadBalancer IPAM controller (design/kube-controllers.md "LoadBalancer controller").

Gives ``type: LoadBalancer`` Services addresses from IP pools whose ``allowedUses`` include
``LoadBalancer``, as upstream's ``pkg/controllers/loadbalancer``: allocations come from blocks
with the virtual affinity ``virtual:load-balancer`` under a per-Service handle
(``lb-`` + the unpadded URL-safe base64 SHA-256 of ``<name>-<namespace>-<uid>``, lower-cased,
``-_.`` removed), with attributes ``service``, ``namespace``, ``type`` and ``timestamp``; the
Service's ``status.loadBalancer.ingress`` is written to match them. Each pass diffs the
Services against the allocations found in the blocks (the IPAM store is the truth, so leaked
and missing addresses both converge): a Service gone → its handle released; no longer managed
(type changed, or ``RequestedServicesOnly``) → released and our addresses dropped from its
status; managed but short of addresses for its IP families → assigned. Without any
LoadBalancer pool nothing is done (upstream skips the sync).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from calico.datastore.errors import DatastoreError
from calico.datastore.kubernetes.rest import Rest
from calico.ipam import IPAMClient
from calico.ipam.errors import IPAMError
from calico.ipam.pools import LOAD_BALANCER, VIRTUAL, list_pools
from calico.kube_controllers.services import Ident, ServiceCache

log = logging.getLogger(__name__)

LB_HOST = "load-balancer"  # upstream's VirtualLoadBalancer
LB_AFFINITY = f"{VIRTUAL}:{LB_HOST}"
ALL_SERVICES = "AllServices"
HANDLE_MAX = 253  # DNS-1123 subdomain


def service_handle(name: str, namespace: str, uid: str) -> str:
    text = f"{name}-{namespace}-{uid}".lower().encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(text).digest()).rstrip(b"=").decode()
    return ("lb-" + re.sub(r"[-_.]", "", digest))[:HANDLE_MAX]


def is_managed(svc: dict[str, Any], assign_ips: str) -> bool:
    """A LoadBalancer Service under ``AllServices``. ``RequestedServicesOnly`` manages only
    Services that ask through upstream's annotations, which are not implemented: none."""
    return (svc.get("spec") or {}).get("type") == "LoadBalancer" and assign_ips == ALL_SERVICES


def wanted_families(svc: dict[str, Any]) -> list[int]:
    """The IP versions a Service wants (``spec.ipFamilies``; the API server's IPv4 default)."""
    families = (svc.get("spec") or {}).get("ipFamilies") or ["IPv4"]
    out = [4 if f == "IPv4" else 6 for f in families if f in ("IPv4", "IPv6")]
    policy = (svc.get("spec") or {}).get("ipFamilyPolicy") or "SingleStack"
    return out[:1] if policy == "SingleStack" else out[:2]


@dataclass
class Tracked:
    handle: str
    ips: set[str] = field(default_factory=set)


class LoadBalancerController:
    name = "loadbalancer"

    def __init__(
        self,
        ipam: IPAMClient,
        services: ServiceCache,
        rest: Rest,
        assign_ips: str = ALL_SERVICES,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.ipam, self.services, self.rest = ipam, services, rest
        self.assign_ips, self.now = assign_ips, now

    def pool_signature(self) -> frozenset[tuple[str, str, bool]]:
        """The LoadBalancer pools as (name, CIDR, disabled): the daemon re-syncs when this
        changes (upstream re-syncs on every IPPool update from its syncer)."""
        return frozenset(
            (p.name, str(p.cidr), p.disabled)
            for p in list_pools(self.ipam.client)
            if LOAD_BALANCER in p.allowed_uses
        )

    def tracked(self) -> dict[Ident, Tracked]:
        """Every load-balancer allocation in the IPAM blocks, by the Service it names."""
        out: dict[Ident, Tracked] = {}
        for stored in self.ipam.store.list_blocks():
            block = stored.block
            if block.affinity != LB_AFFINITY:
                continue
            for ordinal in range(block.size):
                attr = block.attr_of(ordinal)
                if attr is None or attr.released_at is not None or attr.handle_id is None:
                    continue
                owner = attr.secondary or {}
                ns, svc = owner.get("namespace"), owner.get("service")
                if not ns or not svc:
                    continue
                entry = out.setdefault((ns, svc), Tracked(attr.handle_id))
                entry.ips.add(str(block.ip(ordinal)))
        return out

    def reconcile(self) -> int:
        """One pass; returns the number of changes made (allocations, releases, statuses)."""
        if not self.services.in_sync:
            return 0
        if not any(LOAD_BALANCER in p.allowed_uses for p in list_pools(self.ipam.client)):
            log.debug("No LoadBalancer IP pools: nothing to assign")
            return 0
        services = self.services.snapshot()
        tracked = self.tracked()
        changes = 0
        for ident in sorted(set(services) | set(tracked)):
            try:
                changes += self._sync(ident, services.get(ident), tracked.get(ident))
            except (DatastoreError, IPAMError) as exc:
                log.warning("LoadBalancer sync of Service %s/%s failed: %s", *ident, exc)
        return changes

    def _sync(self, ident: Ident, svc: dict[str, Any] | None, have: Tracked | None) -> int:
        if svc is None:  # deleted: everything under its handle goes
            assert have is not None
            log.info("Service %s/%s is gone: releasing %s", *ident, sorted(have.ips))
            self.ipam.release_by_handle(have.handle)
            return 1
        meta = svc.get("metadata") or {}
        name, ns = meta.get("name", ""), meta.get("namespace", "")
        handle = service_handle(name, ns, meta.get("uid", ""))
        changes = 0
        if have is not None and have.handle != handle:  # an older Service of the same name
            self.ipam.release_by_handle(have.handle)
            changes, have = changes + 1, None
        ips = set(have.ips) if have else set()
        if not is_managed(svc, self.assign_ips):
            if not ips:
                return changes
            log.info("Service %s/%s is no longer ours: releasing %s", *ident, sorted(ips))
            self.ipam.release_by_handle(handle)
            if (svc.get("spec") or {}).get("type") == "LoadBalancer":
                self._write_status(svc, [i for i in _ingress_ips(svc) if i not in ips])
            return changes + 1
        versions = {ipaddress.ip_address(i).version for i in ips}
        missing = [v for v in wanted_families(svc) if v not in versions]
        extra = [i for i in ips if ipaddress.ip_address(i).version not in wanted_families(svc)]
        if extra:  # a family the Service no longer wants
            self.ipam.release_ips(extra)
            ips -= set(extra)
            changes += 1
        if missing:
            attrs = {
                "service": name,
                "namespace": ns,
                "type": "LoadBalancer",
                "timestamp": datetime.fromtimestamp(self.now(), UTC).isoformat(),
            }
            try:
                v4, v6 = self.ipam.auto_assign(
                    missing.count(4),
                    missing.count(6),
                    handle,
                    attrs,
                    LB_HOST,
                    intended_use=LOAD_BALANCER,
                )
            except IPAMError as exc:
                log.warning("No LoadBalancer address for Service %s/%s: %s", *ident, exc)
            else:
                ips |= {str(a.ip) for a in [*v4, *v6]}
                changes += 1
        if sorted(_ingress_ips(svc)) != sorted(ips):
            self._write_status(svc, sorted(ips, key=_ip_order))
            changes += 1
        return changes

    def _write_status(self, svc: dict[str, Any], ips: list[str]) -> None:
        meta = svc.get("metadata") or {}
        status = dict(svc.get("status") or {})
        lb = dict(status.get("loadBalancer") or {})
        if ips:
            lb["ingress"] = [{"ip": ip} for ip in ips]
        else:
            lb.pop("ingress", None)
        status["loadBalancer"] = lb
        body = {**svc, "status": status}
        path = f"/api/v1/namespaces/{meta.get('namespace')}/services/{meta.get('name')}/status"
        self.rest.request("PUT", path, body=body)


def _ingress_ips(svc: dict[str, Any]) -> list[str]:
    lb = (svc.get("status") or {}).get("loadBalancer") or {}
    return [i["ip"] for i in lb.get("ingress") or () if i.get("ip")]


def _ip_order(ip: str) -> tuple[int, int]:
    addr = ipaddress.ip_address(ip)
    return addr.version, int(addr)
