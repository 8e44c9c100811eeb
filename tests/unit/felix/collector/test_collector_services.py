"""Service fields: a Kubernetes Service through a real synchronous calc pipeline names the
flows whose connections conntrack shows were opened to its cluster IP and port (a dump's
post-NAT view, or a DESTROY event); anything else keeps empty service fields."""

from __future__ import annotations

from typing import Any

from calico.felix.calc.calc_graph import build_felix_calc_pipeline
from calico.felix.collector.collector import Collector
from calico.felix.collector.conntrack import CtCounters, CtTable
from calico.felix.collector.lookups import Service
from calico.felix.collector.nflog import FiveTuple, NflogPacket
from calico.felix.messages import (
    ActivePolicyUpdate,
    ActiveProfileUpdate,
    Policy,
    PolicyID,
    Profile,
    ProfileID,
    Rule,
    TierInfo,
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointUpdate,
)
from calico.model import ResourceKey
from calico.proto.goldmane import api_pb2 as pb
from calico.syncer.api import SyncStatus, Update, UpdateType

NP = PolicyID("flows", "NetworkPolicy", namespace="ns1", tier="default")
MESSAGES: list[object] = [
    ActivePolicyUpdate(NP, Policy(namespace="ns1", inbound_rules=(Rule(action="allow"),))),
    ActiveProfileUpdate(ProfileID("kns.ns1"), Profile(outbound_rules=(Rule(action="allow"),))),
    *[
        WorkloadEndpointUpdate(
            WorkloadEndpointID("k8s", f"ns1/{name}", "eth0"),
            WorkloadEndpoint(
                state="active",
                name=f"cali{name}",
                ipv4_nets=(f"{ip}/32",),
                ipv6_nets=(f"{ip6}/128",),
                profile_ids=("kns.ns1",),
                tiers=(TierInfo("default", (NP,)),),
            ),
        )
        for name, ip, ip6 in (
            ("client", "10.65.0.1", "fd65::1"),
            ("server", "10.65.0.2", "fd65::2"),
        )
    ],
]

SVC = {
    "spec": {
        "clusterIPs": ["10.96.0.10", "fd00:96:0:0::10"],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"port": 443}],
    }
}
KEY = ResourceKey("KubernetesService", "web", "ns1")


class FakeClient:
    def push(self, flow: pb.Flow) -> None:
        pass


class Rig:
    """A collector fed by a synchronous calc pipeline (services) and the messages above."""

    def __init__(self) -> None:
        self.collector = Collector(FakeClient(), flush_interval=1, ct_dump=dict, clock=lambda: 5)
        self.pipeline = build_felix_calc_pipeline(
            "node1", self.collector.on_messages, synchronous=True
        )
        self.pipeline.on_status_updated(SyncStatus.IN_SYNC)
        self.collector.on_messages(MESSAGES)

    def put(self, value: Any) -> None:
        utype = UpdateType.DELETED if value is None else UpdateType.UPDATED
        self.pipeline.on_updates([Update(KEY, value, "1", utype)])
        self.pipeline.flush()


def connect(c: Collector, tup: FiveTuple) -> None:
    """The verdicts of one allowed connection: egress at the client, ingress at the server."""
    c.handle(
        [NflogPacket(2, "ARE0|kns.ns1", tup, 60), NflogPacket(1, "API0|np/ns1/flows", tup, 60)]
    )


def service(flow: pb.Flow) -> tuple[str, str, str, int]:
    k = flow.Key
    return (
        k.dest_service_name,
        k.dest_service_namespace,
        k.dest_service_port_name,
        k.dest_service_port,
    )


POD = FiveTuple(6, "10.65.0.1", "10.65.0.2", 40000, 8080)  # what policy saw (post-DNAT)


def test_service_from_the_calc_pipeline_names_a_dnated_connection_in_a_dump() -> None:
    r = Rig()
    r.put(SVC)
    lk = r.collector.lookups
    assert lk.service("tcp", "10.96.0.10", 80) == Service("web", "ns1", "http", 80)
    assert lk.service("tcp", "fd00:96::10", 443) == Service("web", "ns1", "", 443)  # normalised
    assert lk.service("udp", "10.96.0.10", 80) is None
    connect(r.collector, POD)
    table = CtTable()
    table[POD] = CtCounters(4, 300, 3, 200)
    table.orig_dst[POD] = ("10.96.0.10", 80)
    r.collector.agg.on_conntrack(table)
    flows = {f.Key.reporter: f for f in r.collector.agg.flush()}
    assert {rep: service(f) for rep, f in flows.items()} == {
        pb.Src: ("web", "ns1", "http", 80),
        pb.Dst: ("web", "ns1", "http", 80),
    }
    assert flows[pb.Dst].num_connections_started == 1
    assert (flows[pb.Dst].Key.dest_name, flows[pb.Dst].Key.dest_port) == ("server", 8080)
    assert (flows[pb.Dst].packets_in, flows[pb.Src].packets_out) == (4, 4)


def test_destroy_event_names_the_service_and_removal_forgets_it() -> None:
    r = Rig()
    r.put(SVC)
    v6 = FiveTuple(6, "fd65::1", "fd65::2", 40001, 8443)
    connect(r.collector, v6)
    orig = v6._replace(dst="fd00:96::10", dport=443)
    r.collector.on_destroyed([(orig, v6, CtCounters(5, 500, 4, 400))])
    [dst] = [f for f in r.collector.agg.flush() if f.Key.reporter == pb.Dst]
    assert service(dst) == ("web", "ns1", "", 443)
    assert (dst.num_connections_started, dst.num_connections_completed) == (1, 1)
    r.put(None)  # ServiceRemove
    assert r.collector.lookups.service("tcp", "10.96.0.10", 80) is None
    connect(r.collector, v6._replace(sport=40002))
    r.collector.on_destroyed(
        [(orig._replace(sport=40002), v6._replace(sport=40002), CtCounters(1, 1, 1, 1))]
    )
    [dst] = [f for f in r.collector.agg.flush() if f.Key.reporter == pb.Dst]
    assert service(dst) == ("", "", "", 0)


def test_no_service_without_dnat_or_for_an_unknown_port() -> None:
    r = Rig()
    r.put(SVC)
    connect(r.collector, POD)
    other = POD._replace(sport=40001)
    connect(r.collector, other)
    table = CtTable()
    table[POD] = table[other] = CtCounters(1, 60, 1, 60)
    table.orig_dst[other] = ("10.96.0.10", 8080)  # DNATed, but not from a service port
    r.collector.agg.on_conntrack(table)
    flows = [f for f in r.collector.agg.flush() if f.Key.reporter == pb.Dst]
    assert [(service(f), f.num_connections_started) for f in flows] == [(("", "", "", 0), 2)]


def test_service_port_name_passes_through_the_calc_graph() -> None:
    from calico.felix.calc.dataplane_passthru import service_update

    ports = service_update("ns1", "web", SVC).ports
    assert [(p.protocol, p.port, p.name) for p in ports] == [("TCP", 80, "http"), ("TCP", 443, "")]
