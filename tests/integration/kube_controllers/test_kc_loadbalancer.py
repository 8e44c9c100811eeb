"""The LoadBalancer IPAM controller: Services in the fake API server, IP pools and IPAM in a
real etcd. Assignment from LoadBalancer pools only (virtual affinity, upstream's handle and
attributes, status written), single and dual stack, idempotence, release on delete / type
change / RequestedServicesOnly, leaked allocations, the node GC leaving them alone, and the
Service informer riding out dropped watches and a 410."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from etcd_fixture import make_etcd_backend
from k8s_fake_apiserver import FakeAPIServer
from kc_support import add_pool, kdd_config, wait_for

from calico.api import parse_resource
from calico.datastore.client import Client
from calico.datastore.errors import ResourceDoesNotExistError
from calico.datastore.factory import open_backend
from calico.ipam import IPAMClient
from calico.kube_controllers.ipamgc import IPAMGarbageCollector
from calico.kube_controllers.loadbalancer import (
    LB_AFFINITY,
    LoadBalancerController,
    service_handle,
)
from calico.kube_controllers.services import ServiceCache

LB4, LB6 = "192.168.100.0/28", "fd00:100::/124"


def _lb_pool(calico: Client, name: str, cidr: str) -> None:
    spec = {"cidr": cidr, "blockSize": 30 if ":" not in cidr else 126}
    spec["allowedUses"] = ["LoadBalancer"]
    calico.create(
        parse_resource(
            {
                "apiVersion": "projectcalico.org/v3",
                "kind": "IPPool",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    )


def _svc(api: FakeAPIServer, name: str, typ: str = "LoadBalancer", **spec: Any) -> dict:
    body = {
        "metadata": {"name": name, "namespace": "web"},
        "spec": {"type": typ, "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", **spec},
    }
    return api.put_object("v1", "services", body)


def _ingress(api: FakeAPIServer, name: str) -> list[str]:
    return _status(api.get_object("v1", "services", name, "web"))


def _status(svc: dict) -> list[str]:
    lb = svc.get("status", {}).get("loadBalancer", {})
    return [i["ip"] for i in lb.get("ingress") or ()]


def _allocated(ipam: IPAMClient, ip: str) -> bool:
    try:
        ipam.get_assignment_attributes(ip)
    except ResourceDoesNotExistError:
        return False
    return True


def _in(ip: str, cidr: str) -> bool:
    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


@pytest.fixture
def world(etcd_server: Any) -> Iterator[dict[str, Any]]:
    with FakeAPIServer(bookmark_interval=0.2) as api:
        kube_backend = open_backend(kdd_config(api))
        calico = Client(make_etcd_backend(etcd_server.endpoints, f"/kclb-{uuid.uuid4().hex[:12]}"))
        add_pool(calico, "pods", "10.0.0.0/16", block_size=29)
        ipam = IPAMClient(calico)
        services = ServiceCache(kube_backend.rest, backoff=(0.05, 0.5))  # type: ignore[attr-defined]
        services.start()
        ctrl = LoadBalancerController(ipam, services, kube_backend.rest)  # type: ignore[attr-defined]
        try:
            yield {"api": api, "calico": calico, "ipam": ipam, "svc": services, "ctrl": ctrl}
        finally:
            services.stop()
            kube_backend.close()


def _seen(services: ServiceCache, check: Any) -> Any:
    return wait_for(lambda: services.in_sync and check(services.snapshot()), what="services")


def test_assign_status_idempotence_and_releases(world: dict[str, Any]) -> None:
    api, calico, ipam, services, ctrl = (world[k] for k in ("api", "calico", "ipam", "svc", "ctrl"))
    a = _svc(api, "a")
    _svc(api, "plain", "ClusterIP")
    _seen(services, lambda s: len(s) == 2)
    assert ctrl.reconcile() == 0  # no LoadBalancer pool yet: nothing happens
    assert _ingress(api, "a") == []

    _lb_pool(calico, "lb4", LB4)
    _lb_pool(calico, "lb6", LB6)
    assert ctrl.reconcile() == 2  # one assignment, one status write
    (ip,) = _ingress(api, "a")
    assert _in(ip, LB4)  # from the LoadBalancer pool, never the pod pool
    assert _ingress(api, "plain") == []
    handle = service_handle("a", "web", a["metadata"]["uid"])
    # upstream's recipe: sha256 of "<name>-<namespace>-<uid>" lower-cased, base64 (URL
    # alphabet, unpadded) with "-", "_" and "." dropped
    digest = hashlib.sha256(f"a-web-{a['metadata']['uid']}".lower().encode()).digest()
    std = base64.b64encode(digest).decode().rstrip("=")
    assert handle == "lb-" + std.replace("+", "").replace("/", "")
    owner, attrs = ipam.get_assignment_attributes(ip)
    assert owner == handle
    assert {k: attrs[k] for k in ("service", "namespace", "type")} == {
        "service": "a",
        "namespace": "web",
        "type": "LoadBalancer",
    }
    blocks = {str(s.block.cidr): s.block.affinity for s in ipam.store.list_blocks()}
    assert next(aff for c, aff in blocks.items() if _in(ip, c)) == LB_AFFINITY
    affs = [x for x in ipam.store.list_affinities() if x.spec.type == "virtual"]
    assert [x.spec.node for x in affs] == ["load-balancer"]
    # idempotent, once the informer has seen our own status write
    _seen(services, lambda s: _status(s[("web", "a")]) == [ip])
    assert ctrl.reconcile() == 0

    # the node controller's GC, even with no live node at all, leaves it alone
    gc = IPAMGarbageCollector(ipam, 0.001)
    assert gc.run_pass(set(), {}).released == []
    assert ipam.get_assignment_attributes(ip)[0] == handle

    # dual stack
    _svc(api, "dual", ipFamilies=["IPv4", "IPv6"], ipFamilyPolicy="PreferDualStack")
    _seen(services, lambda s: ("web", "dual") in s)
    ctrl.reconcile()
    dual = _ingress(api, "dual")
    assert len(dual) == 2 and _in(dual[0], LB4) and _in(dual[1], LB6)

    # type change: released (status is the new owner's business, as upstream)
    svc = api.get_object("v1", "services", "a", "web")
    svc["spec"]["type"] = "ClusterIP"
    api.update_object("v1", "services", svc)
    _seen(services, lambda s: s[("web", "a")]["spec"]["type"] == "ClusterIP")
    ctrl.reconcile()
    assert not _allocated(ipam, ip)

    # deletion: released
    api.delete_object("v1", "services", "dual", "web")
    _seen(services, lambda s: ("web", "dual") not in s)
    ctrl.reconcile()
    for addr in dual:
        assert not _allocated(ipam, addr)
    assert ctrl.tracked() == {}


def test_leaked_allocation_and_requested_services_only(world: dict[str, Any]) -> None:
    api, calico, ipam, services, ctrl = (world[k] for k in ("api", "calico", "ipam", "svc", "ctrl"))
    _lb_pool(calico, "lb4", LB4)
    leaked, _ = ipam.auto_assign(
        1,
        0,
        "lb-leaked",
        {"service": "gone", "namespace": "web", "type": "LoadBalancer"},
        "load-balancer",
        intended_use="LoadBalancer",
    )
    _svc(api, "b")
    _seen(services, lambda s: len(s) == 1)
    ctrl.reconcile()
    assert not _allocated(ipam, str(leaked[0].ip))  # no such Service
    (ip,) = _ingress(api, "b")

    _seen(services, lambda s: _status(s[("web", "b")]) == [ip])
    ctrl.assign_ips = "RequestedServicesOnly"  # b asks for nothing: ours no more
    ctrl.reconcile()
    assert not _allocated(ipam, ip)
    assert _ingress(api, "b") == []  # our address dropped from its status
    _seen(services, lambda s: _status(s[("web", "b")]) == [])
    assert ctrl.reconcile() == 0


def test_service_informer_rides_out_drops_and_410(world: dict[str, Any]) -> None:
    api, services = world["api"], world["svc"]
    _svc(api, "x")
    _seen(services, lambda s: ("web", "x") in s)
    api.drop_watches()
    _svc(api, "y")
    _seen(services, lambda s: ("web", "y") in s)
    api.expire_next_watches(3)
    api.drop_watches()
    api.delete_object("v1", "services", "x", "web")  # seen through the relist after the 410
    _seen(services, lambda s: set(s) == {("web", "y")})
