"""Per-service advertisement decisions (calico.confd.services) and the route generator's render
hold (calico.confd.routegen); design/confd.md "Per-service advertisement"."""

from __future__ import annotations

from typing import Any

import pytest

from calico.confd.routegen import ENDPOINT_SLICES, SERVICES, RouteGenerator
from calico.confd.services import service_routes

NODE = "n1"
EXT = ["10.102.0.0/16", "10.103.0.1/32", "fd00:102::/64", "fd00:103::1/128"]
LBS = ["10.104.0.0/24", "10.105.0.7/32"]


def svc(name: str = "s", **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {})
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": status}


def eps(service: str = "s", *endpoints: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{service}-x",
            "namespace": "ns",
            "labels": {"kubernetes.io/service-name": service},
        },
        "endpoints": list(endpoints),
    }


def here(*addrs: str, ready: bool | None = True, node: str = NODE) -> dict[str, Any]:
    ep: dict[str, Any] = {"addresses": list(addrs), "nodeName": node}
    if ready is not None:
        ep["conditions"] = {"ready": ready}
    return ep


def routes_for(
    s: dict[str, Any],
    slices: list[dict[str, Any]],
    cluster: tuple[str, ...] = ("10.101.0.0/16",),
    excluded: bool = False,
) -> set[str]:
    return service_routes(
        {"ns/" + s["metadata"]["name"]: s},
        {f"ns/{i}": sl for i, sl in enumerate(slices)},
        NODE,
        list(cluster),
        EXT,
        LBS,
        excluded,
    )


LOCAL = {"type": "NodePort", "clusterIP": "10.101.0.1", "externalTrafficPolicy": "Local"}


@pytest.mark.parametrize(
    ("endpoint", "want"),
    [
        (here("10.0.0.2"), {"10.101.0.1/32"}),
        (here("10.0.0.2", ready=None), {"10.101.0.1/32"}),  # no conditions: ready
        (here("10.0.0.2", ready=False), set()),  # not ready
        (here("10.0.0.2", node="n2"), set()),  # another node's
        (here("fd00::2"), set()),  # another family than the cluster IP
    ],
)
def test_local_policy_needs_a_ready_local_endpoint_of_the_family(
    endpoint: dict[str, Any], want: set[str]
) -> None:
    assert routes_for(svc(**LOCAL), [eps("s", endpoint)]) == want


def test_local_endpoints_of_another_service_do_not_count() -> None:
    assert routes_for(svc(**LOCAL), [eps("other", here("10.0.0.2"))]) == set()


def test_routes_of_an_advertised_service() -> None:
    s = svc(
        type="LoadBalancer",
        clusterIP="10.101.0.1",
        externalTrafficPolicy="Local",
        externalIPs=["10.102.0.5", "192.0.2.1", "fd00:102::5"],
        status={"loadBalancer": {"ingress": [{"ip": "10.104.0.5"}, {"hostname": "x"}]}},
    )
    want = {"10.101.0.1/32", "10.102.0.5/32", "fd00:102::5/128", "10.104.0.5/32"}
    assert routes_for(s, [eps("s", here("10.0.0.2"))]) == want
    # Cluster IPs not advertised at all: the service's other addresses still are.
    assert routes_for(s, [eps("s", here("10.0.0.2"))], cluster=()) == want - {"10.101.0.1/32"}
    # An excluded node advertises nothing per service.
    assert routes_for(s, [eps("s", here("10.0.0.2"))], excluded=True) == set()


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        # Cluster policy: only single-address entries make a service per-service.
        (
            {
                "type": "LoadBalancer",
                "status": {"loadBalancer": {"ingress": [{"ip": "10.105.0.7"}]}},
            },
            {"10.101.0.1/32", "10.105.0.7/32"},
        ),
        ({"type": "LoadBalancer", "loadBalancerIP": "10.105.0.7"}, {"10.101.0.1/32"}),
        ({"type": "ClusterIP", "externalIPs": ["10.103.0.1"]}, {"10.101.0.1/32", "10.103.0.1/32"}),
        (
            {"type": "ClusterIP", "externalIPs": ["fd00:103::1"]},
            {"10.101.0.1/32", "fd00:103::1/128"},
        ),
        ({"type": "ClusterIP", "externalIPs": ["10.102.0.9"]}, set()),  # in a range
        ({"type": "NodePort", "loadBalancerIP": "10.105.0.7"}, set()),  # LB IP, not an LB
        (
            {
                "type": "LoadBalancer",
                "status": {"loadBalancer": {"ingress": [{"ip": "10.104.0.9"}]}},
            },
            set(),
        ),
    ],
)
def test_cluster_policy(spec: dict[str, Any], want: set[str]) -> None:
    s = svc(clusterIP="10.101.0.1", externalTrafficPolicy="Cluster", **spec)
    assert routes_for(s, [eps("s", here("10.0.0.2"))]) == want


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "ExternalName", "clusterIP": "10.101.0.1", "externalTrafficPolicy": "Local"},
        {"type": "ClusterIP", "clusterIP": "None", "externalTrafficPolicy": "Local"},
        {"type": "ClusterIP", "clusterIP": "", "externalTrafficPolicy": "Local"},
        {"type": "ClusterIP", "clusterIP": "10.101.0.1"},  # no policy: ranges cover it
        {"type": "ClusterIP", "clusterIP": "10.101.0.1", "externalTrafficPolicy": "Cluster"},
    ],
)
def test_never_advertised(spec: dict[str, Any]) -> None:
    s = svc(**spec)
    assert routes_for(s, [eps("s", here("10.0.0.2"))]) == set()


class _FakeCollection:
    def __init__(self, path: str, on_change: Any) -> None:
        self.path, self.synced, self.started, self.stopped = path, False, False, False
        self.items: dict[str, Any] = {}

    def start(self) -> None:
        self.started = True

    def objects(self) -> dict[str, Any]:
        return dict(self.items)

    def stop(self) -> None:
        self.stopped = True


def test_route_generator_starts_on_demand_and_holds_until_listed() -> None:
    made: dict[str, _FakeCollection] = {}
    now = [10.0]

    def factory(path: str, cb: Any) -> _FakeCollection:
        made[path] = _FakeCollection(path, cb)
        return made[path]

    rg = RouteGenerator(factory, lambda: None, wait=3.0, clock=lambda: now[0])
    assert rg.snapshot(False) == (None, None)
    assert made == {}  # nothing asked for service advertisement: no watches
    assert rg.snapshot(True) == (None, 13.0)
    assert set(made) == {SERVICES, ENDPOINT_SLICES} and all(c.started for c in made.values())
    made[SERVICES].synced = True
    now[0] = 12.9
    assert rg.snapshot(True) == (None, 13.0)  # both must be listed
    made[ENDPOINT_SLICES].synced = True
    made[SERVICES].items = {"ns/s": {}}
    assert rg.snapshot(True) == (({"ns/s": {}}, {}), None)
    rg.stop()
    assert all(c.stopped for c in made.values())


def test_route_generator_gives_up_holding_at_the_deadline() -> None:
    now = [0.0]
    rg = RouteGenerator(_FakeCollection, lambda: None, wait=3.0, clock=lambda: now[0])
    assert rg.snapshot(True)[1] == 3.0
    now[0] = 3.0
    assert rg.snapshot(True) == (({}, {}), None)
