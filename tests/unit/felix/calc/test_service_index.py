"""ServiceIndex (``calico.felix.calc.service_index``): EndpointSlices -> members of the
``svc:`` (IP+port) and ``svcnoport:`` (CIDR) sets, reference-counted across slices; and the
whole graph resolving a policy rule with ``services:`` through it."""

from __future__ import annotations

from typing import Any

import pytest

from calico.felix.calc.calc_graph import build_felix_calc_pipeline
from calico.felix.calc.service_index import ServiceIndex, parse_slice
from calico.felix.messages import IPSetDeltaUpdate, IPSetRemove, IPSetUpdate
from calico.model import PolicyKey, ResourceKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.selector import make_unique_id
from calico.syncer.api import SyncStatus, Update, UpdateType

SVC = make_unique_id("svc", "ns/web")
NOPORT = make_unique_id("svcnoport", "ns/web")


def eps(name: str, service: str | None, addrs: list[str], ports: list[Any], ns: str = "ns") -> Any:
    labels = {"kubernetes.io/service-name": service} if service else {}
    return (
        ResourceKey("KubernetesEndpointSlice", name, ns),
        {
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [a]} for a in addrs],
            "ports": ports,
        },
    )


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def index(self) -> ServiceIndex:
        return ServiceIndex(
            lambda s, m: self.events.append(("+", s, m)),
            lambda s, m: self.events.append(("-", s, m)),
        )

    def take(self) -> list[tuple[str, str, str]]:
        out, self.events = self.events, []
        return out


@pytest.mark.parametrize(
    ("ports", "members"),
    [
        ([{"port": 80, "protocol": "TCP"}], ["10.0.0.1,tcp:80"]),
        ([{"port": 53}], ["10.0.0.1,tcp:53"]),  # protocol unset: TCP
        (
            [{"port": 53, "protocol": "UDP"}, {"port": 9, "protocol": "SCTP"}],
            ["10.0.0.1,udp:53", "10.0.0.1,sctp:9"],
        ),
        ([{"name": "all"}], []),  # a nil port cannot be an IP+port member
        ([{"port": 80, "protocol": "ICMP"}], []),
        ([], []),
    ],
)
def test_slice_ports(ports: list[Any], members: list[str]) -> None:
    rec = Recorder()
    idx = rec.index()
    idx.update_ip_set(SVC, "ns/web", True)
    idx.update_ip_set(NOPORT, "ns/web", False)
    key, value = eps("web-1", "web", ["10.0.0.1"], ports)
    idx.on_resource(key, value)
    got = rec.take()
    assert sorted(m for _, s, m in got if s == SVC) == sorted(members)
    assert [m for _, s, m in got if s == NOPORT] == ["10.0.0.1/32"]


def test_parse_slice_skips_junk_and_dedupes() -> None:
    _, value = eps("a", "web", ["10.0.0.1", "bogus", "10.0.0.1", "fd00::1"], [{"port": 80}])
    s = parse_slice("ns", value)
    assert (s.service, s.addresses, s.ports) == (
        "ns/web",
        ("10.0.0.1/32", "fd00::1/128"),
        ("tcp:80",),
    )
    assert parse_slice("ns", eps("b", None, ["10.0.0.1"], [])[1]).service == ""


def test_members_are_counted_across_slices_and_only_net_changes_are_sent() -> None:
    rec = Recorder()
    idx = rec.index()
    k1, s1 = eps("web-1", "web", ["10.0.0.1", "10.0.0.2"], [{"port": 80}])
    k2, s2 = eps("web-2", "web", ["10.0.0.2"], [{"port": 80}])
    idx.on_resource(k1, s1)
    idx.on_resource(k2, s2)
    assert rec.take() == []  # no active set yet
    idx.update_ip_set(NOPORT, "ns/web", False)  # activation sends what is known
    assert rec.take() == [("+", NOPORT, "10.0.0.1/32"), ("+", NOPORT, "10.0.0.2/32")]
    idx.on_resource(k1, None)  # 10.0.0.2 still in web-2
    assert rec.take() == [("-", NOPORT, "10.0.0.1/32")]
    idx.on_resource(k1, s1)
    assert rec.take() == [("+", NOPORT, "10.0.0.1/32")]
    idx.on_resource(k1, s1)  # same value: nothing
    assert rec.take() == []
    _, moved = eps("web-1", "web", ["10.0.0.3"], [{"port": 80}])
    idx.on_resource(k1, moved)  # additions before removals
    assert rec.take() == [("+", NOPORT, "10.0.0.3/32"), ("-", NOPORT, "10.0.0.1/32")]
    _, other = eps("web-1", "db", ["10.0.0.3"], [{"port": 80}])
    idx.on_resource(k1, other)  # relabelled to another service
    assert rec.take() == [("-", NOPORT, "10.0.0.3/32")]
    idx.delete_ip_set(NOPORT)
    idx.on_resource(k2, None)
    assert rec.take() == []  # the set is gone: nothing more about it


def test_other_namespaces_and_kinds_are_not_mixed_in() -> None:
    rec = Recorder()
    idx = rec.index()
    idx.update_ip_set(NOPORT, "ns/web", False)
    idx.on_resource(*eps("web-1", "web", ["10.0.0.9"], [], ns="other"))
    idx.on_resource(ResourceKey("KubernetesService", "web", "ns"), {"metadata": {"name": "web"}})
    assert rec.take() == []


def _policy(rule: dict[str, Any]) -> v1.Policy:
    return v1.Policy.from_json(
        {"order": 10, "selector": "all()", "inbound_rules": [rule], "types": ["ingress"]}
    )


def test_graph_resolves_services_rules_into_member_sets() -> None:
    batches: list[list[Any]] = []
    pipe = build_felix_calc_pipeline("h1", batches.append, synchronous=True)
    wep = v1.WorkloadEndpoint.from_json(
        {
            "state": "active",
            "name": "cali1",
            "profile_ids": [],
            "ipv4_nets": ["10.1.0.1/32"],
            "labels": {"projectcalico.org/namespace": "ns"},
        }
    )
    rule = {
        "action": "allow",
        "dst_service": "web",
        "dst_service_ns": "ns",
        "src_service": "web",
        "src_service_ns": "ns",
    }
    key, value = eps("web-1", "web", ["10.0.0.1"], [{"port": 8080}])
    pipe.on_updates(
        [
            Update(key, value, "1", UpdateType.NEW),
            Update(WorkloadEndpointKey("h1", "k8s", "ns/p", "eth0"), wep, "1", UpdateType.NEW),
            Update(PolicyKey("GlobalNetworkPolicy", "", "p"), _policy(rule), "1", UpdateType.NEW),
        ]
    )
    pipe.on_status_updated(SyncStatus.IN_SYNC)
    pipe.flush()
    sets = {m.id: m for b in batches for m in b if isinstance(m, IPSetUpdate)}
    assert sets[SVC].members == ("10.0.0.1,tcp:8080",)
    assert sets[NOPORT].members == ("10.0.0.1/32",)
    batches.clear()
    _, more = eps("web-1", "web", ["10.0.0.1", "10.0.0.2"], [{"port": 8080}])
    pipe.on_updates([Update(key, more, "2", UpdateType.UPDATED)])
    pipe.flush()
    deltas = {m.id: m for b in batches for m in b if isinstance(m, IPSetDeltaUpdate)}
    assert deltas[SVC].added_members == ("10.0.0.2,tcp:8080",)
    assert deltas[NOPORT].added_members == ("10.0.0.2/32",)
    batches.clear()
    pipe.on_updates(
        [Update(PolicyKey("GlobalNetworkPolicy", "", "p"), None, "3", UpdateType.DELETED)]
    )
    pipe.flush()
    removed = {m.id for b in batches for m in b if isinstance(m, IPSetRemove)}
    assert {SVC, NOPORT} <= removed


def test_kubernetes_services_pass_through_as_service_updates() -> None:
    from calico.felix.calc.dataplane_passthru import service_update
    from calico.felix.messages import ServicePort, ServiceRemove, ServiceUpdate

    svc = {
        "spec": {
            "type": "LoadBalancer",
            "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10", "fd00::10"],
            "externalIPs": ["192.0.2.1"],
            "ports": [{"port": 53, "protocol": "UDP", "nodePort": 30053}, {"port": 80}],
        },
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.1"}, {"hostname": "x"}]}},
    }
    assert service_update("kube-system", "dns", svc) == ServiceUpdate(
        name="dns",
        namespace="kube-system",
        type="LoadBalancer",
        cluster_ips=("10.96.0.10", "fd00::10"),
        loadbalancer_ips=("198.51.100.1",),
        external_ips=("192.0.2.1",),
        ports=(ServicePort("UDP", 53, 30053), ServicePort("TCP", 80, 0)),
    )
    headless = service_update("ns", "h", {"spec": {"clusterIP": "None"}})
    assert (headless.type, headless.cluster_ips) == ("ClusterIP", ())
    batches: list[list[Any]] = []
    pipe = build_felix_calc_pipeline("h1", batches.append, synchronous=True)
    key = ResourceKey("KubernetesService", "dns", "kube-system")
    pipe.on_status_updated(SyncStatus.IN_SYNC)
    pipe.on_updates([Update(key, svc, "1", UpdateType.NEW)])
    pipe.flush()
    pipe.on_updates([Update(key, svc, "2", UpdateType.UPDATED)])  # same value: nothing
    pipe.flush()
    pipe.on_updates([Update(key, None, "3", UpdateType.DELETED)])
    pipe.flush()
    msgs = [m for b in batches for m in b if isinstance(m, ServiceUpdate | ServiceRemove)]
    assert [type(m).__name__ for m in msgs] == ["ServiceUpdate", "ServiceRemove"]
