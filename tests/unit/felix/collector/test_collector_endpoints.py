"""Endpoint names and labels from the calc graph: local and remote endpoints, removals, IP
reuse, and that the feed reaches flows through a real (synchronous) calc pipeline."""

from __future__ import annotations

from typing import Any

from calico.felix.calc.calc_graph import build_felix_calc_pipeline
from calico.felix.collector.collector import Collector
from calico.felix.collector.lookups import Endpoint, label_strings
from calico.felix.collector.nflog import FiveTuple, NflogPacket
from calico.felix.messages import ActivePolicyUpdate, Policy, PolicyID, Rule
from calico.model import HostEndpointKey, WorkloadEndpointKey
from calico.model import values as v1
from calico.proto.goldmane import api_pb2 as pb
from calico.syncer.api import SyncStatus, Update, UpdateType

HOST = "node1"


class FakeClient:
    def __init__(self) -> None:
        self.flows: list[pb.Flow] = []

    def push(self, flow: pb.Flow) -> None:
        self.flows.append(flow)


def wep_key(pod: str, host: str = HOST, ns: str = "ns1") -> WorkloadEndpointKey:
    return WorkloadEndpointKey(host, "k8s", f"{ns}/{pod}", "eth0")


def wep(ip: str, **labels: str) -> v1.WorkloadEndpoint:
    return v1.WorkloadEndpoint(
        state="active", name="cali" + ip.replace(".", ""), ipv4_nets=(f"{ip}/32",), labels=labels
    )


class Rig:
    """Collector + synchronous calc pipeline wired as Felix's daemon wires them."""

    def __init__(self) -> None:
        self.collector = Collector(
            FakeClient(), flush_interval=1, ct_dump=lambda: {}, clock=lambda: 100.0
        )
        self.pipeline = build_felix_calc_pipeline(
            HOST,
            self.collector.on_messages,
            synchronous=True,
            endpoint_listener=self.collector.lookups.on_endpoint,
        )
        self.pipeline.on_status_updated(SyncStatus.IN_SYNC)

    def put(self, key: Any, value: Any) -> None:
        utype = UpdateType.DELETED if value is None else UpdateType.UPDATED
        self.pipeline.on_updates([Update(key, value, "1", utype)])
        self.pipeline.flush()


def test_label_strings_sorted_key_value() -> None:
    assert label_strings({"b": "2", "a": "1", "e": ""}) == ("a=1", "b=2", "e=")
    assert label_strings({}) == ()
    assert label_strings(None) == ()


def test_local_and_remote_endpoints_named_with_labels_then_removed() -> None:
    r = Rig()
    lk = r.collector.lookups
    r.put(wep_key("client"), wep("10.65.0.1", app="client", tier="fe"))
    r.put(wep_key("server", host="node2", ns="ns2"), wep("10.65.1.2", app="server"))
    r.put(
        HostEndpointKey("node3", "node3-eth0"),
        v1.HostEndpoint(name="eth0", expected_ipv4_addrs=("192.0.2.3",), labels={"role": "gw"}),
    )
    assert lk.endpoint("10.65.0.1") == Endpoint(
        "client", "ns1", pb.WorkloadEndpoint, ("app=client", "tier=fe")
    )
    assert lk.endpoint("10.65.1.2") == Endpoint(
        "server", "ns2", pb.WorkloadEndpoint, ("app=server",)
    )
    assert lk.endpoint("192.0.2.3") == Endpoint("node3-eth0", "", pb.HostEndpoint, ("role=gw",))
    # A label change replaces the entry; a removal forgets it (back to a network).
    r.put(wep_key("server", host="node2", ns="ns2"), wep("10.65.1.2", app="api"))
    assert lk.endpoint("10.65.1.2").labels == ("app=api",)
    r.put(wep_key("server", host="node2", ns="ns2"), None)
    assert lk.endpoint("10.65.1.2") == Endpoint("pvt", "", pb.Network)
    r.put(HostEndpointKey("node3", "node3-eth0"), None)
    assert lk.endpoint("192.0.2.3") == Endpoint("pvt", "", pb.Network)  # TEST-NET


def test_reused_ip_stays_with_the_newer_endpoint_until_it_goes() -> None:
    r = Rig()
    lk = r.collector.lookups
    r.put(wep_key("old", host="node2"), wep("10.65.1.9", v="old"))
    r.put(wep_key("new", host="node3"), wep("10.65.1.9", v="new"))
    r.put(wep_key("old", host="node2"), None)  # the older one's removal keeps the newer
    assert lk.endpoint("10.65.1.9").name == "new"
    r.put(wep_key("new", host="node3"), None)
    assert lk.endpoint("10.65.1.9").type == pb.Network


def test_bad_address_skipped_and_other_keys_ignored() -> None:
    lk = Collector(FakeClient(), flush_interval=1).lookups
    lk.on_endpoint(wep_key("x"), v1.WorkloadEndpoint(ipv4_nets=("bogus/32", "10.65.0.7/32")))
    assert lk.endpoint("10.65.0.7").name == "x"
    before = lk.generation
    lk.on_endpoint("not-an-endpoint-key", None)
    assert lk.generation == before


def test_flow_to_a_remote_workload_carries_both_sides_labels() -> None:
    r = Rig()
    pid = PolicyID("out", "GlobalNetworkPolicy", tier="default")
    r.collector.on_messages(
        [ActivePolicyUpdate(pid, Policy(outbound_rules=(Rule(action="allow"),)))]
    )
    r.put(wep_key("client"), wep("10.65.0.1", app="client"))
    r.put(wep_key("server", host="node2", ns="ns2"), wep("10.65.1.2", app="server"))
    tup = FiveTuple(6, "10.65.0.1", "10.65.1.2", 40000, 8080)
    r.collector.handle([NflogPacket(2, "APE0|gnp/out", tup, 60)])
    [f] = r.collector.flush()
    assert (f.Key.reporter, f.Key.source_name, f.Key.dest_name, f.Key.dest_namespace) == (
        pb.Src,
        "client",
        "server",
        "ns2",
    )
    assert (f.Key.dest_type, list(f.source_labels), list(f.dest_labels)) == (
        pb.WorkloadEndpoint,
        ["app=client"],
        ["app=server"],
    )
    # The memo follows a label change (any endpoint update invalidates it).
    r.put(wep_key("server", host="node2", ns="ns2"), wep("10.65.1.2", app="v2"))
    r.collector.handle([NflogPacket(2, "APE0|gnp/out", tup._replace(sport=40001), 60)])
    [f] = r.collector.flush()
    assert list(f.dest_labels) == ["app=v2"]


def _deny_rig() -> Rig:
    r = Rig()
    pid = PolicyID("in", "GlobalNetworkPolicy", tier="default")
    r.collector.on_messages([ActivePolicyUpdate(pid, Policy(inbound_rules=(Rule(action="deny"),)))])
    r.put(wep_key("server"), wep("10.65.0.2", app="server"))
    return r


def test_network_sources_keyed_by_ip_endpoint_sources_not() -> None:
    r = _deny_rig()
    r.put(wep_key("client", host="node2"), wep("10.65.1.1"))
    pkts = [
        NflogPacket(1, "DPI0|gnp/in", FiveTuple(6, src, "10.65.0.2", sport, 9090), 60)
        for src, sport in (
            ("10.65.1.1", 50000),
            ("10.65.1.1", 50001),
            ("8.8.8.8", 1000),
            ("8.8.8.8", 1001),
            ("1.1.1.1", 2000),
        )
    ]
    r.collector.handle(pkts)
    flows = {(f.Key.source_name, f.Key.source_ip): f for f in r.collector.flush()}
    assert set(flows) == {("client", ""), ("pub", "8.8.8.8"), ("pub", "1.1.1.1")}
    ep = flows["client", ""]
    assert (list(ep.source_ips), list(ep.source_ports), ep.packets_in) == (
        ["10.65.1.1"],
        [50000, 50001],
        2,
    )
    assert list(flows["pub", "8.8.8.8"].source_ports) == [1000, 1001]
    assert list(flows["pub", "1.1.1.1"].source_ips) == ["1.1.1.1"]


def test_source_port_sample_is_bounded_per_interval() -> None:
    r = _deny_rig()
    base = FiveTuple(6, "10.65.1.1", "10.65.0.2", 0, 9090)
    r.collector.handle(
        [NflogPacket(1, "DPI0|gnp/in", base._replace(sport=p), 60) for p in range(40011, 40000, -1)]
    )  # 11 distinct ports, newest first: the first ten seen are kept
    [f] = r.collector.flush()
    assert (list(f.source_ports), f.packets_in, f.num_connections_started) == (
        list(range(40002, 40012)),
        11,
        11,
    )
    r.collector.handle([NflogPacket(1, "DPI0|gnp/in", base._replace(sport=1), 60)])
    [f] = r.collector.flush()  # a new interval starts a new sample
    assert list(f.source_ports) == [1]


def test_allowed_connections_sampled_when_registered_live_and_completed() -> None:
    ct: dict = {}
    c = Collector(FakeClient(), flush_interval=1, ct_dump=lambda: ct, clock=lambda: 5.0)
    pid = PolicyID("in", "GlobalNetworkPolicy", tier="default")
    c.on_messages([ActivePolicyUpdate(pid, Policy(inbound_rules=(Rule(action="allow"),)))])
    c.lookups.on_endpoint(wep_key("server"), wep("10.65.0.2"))
    tup = FiveTuple(17, "10.65.1.1", "10.65.0.2", 5353, 53)
    c.handle([NflogPacket(1, "API0|gnp/in", tup, 60)])
    from calico.felix.collector.conntrack import CtCounters

    ct[tup] = CtCounters(1, 60, 1, 80)
    [f] = c.flush()
    assert (list(f.source_ports), list(f.source_ips), f.Key.source_ip) == (
        [5353],
        ["10.65.1.1"],
        "10.65.1.1",
    )
    [f] = c.flush()  # still live in the next interval: sampled again
    assert (list(f.source_ports), f.num_connections_live) == ([5353], 1)
    del ct[tup]
    [f] = c.flush()
    assert (list(f.source_ports), f.num_connections_completed) == ([5353], 1)
    icmp = FiveTuple(1, "10.65.1.1", "10.65.0.2", 0, 0)
    c.handle([NflogPacket(1, "API0|gnp/in", icmp, 60)])
    [f] = c.flush()
    assert (list(f.source_ports), list(f.source_ips)) == ([], ["10.65.1.1"])  # no port 0


def test_network_sets_name_other_addresses_longest_prefix_first() -> None:
    from calico.model import NetworkSetKey

    r = Rig()
    lk = r.collector.lookups
    wide = v1.NetworkSet(nets=("203.0.113.0/24", "2001:db8::/32"), labels={"zone": "dmz"})
    r.put(NetworkSetKey("partners"), wide)
    r.put(NetworkSetKey("ns1/office"), v1.NetworkSet(nets=("203.0.113.128/25",)))
    assert lk.endpoint("203.0.113.1") == Endpoint("partners", "", pb.NetworkSet, ("zone=dmz",))
    assert lk.endpoint("2001:db8::7").name == "partners"
    assert lk.endpoint("203.0.113.255") == Endpoint("office", "ns1", pb.NetworkSet)
    assert lk.endpoint("203.0.114.1") == Endpoint("pub", "", pb.Network)  # just outside
    # An endpoint owning an address wins over a set holding it.
    r.put(wep_key("pod", host="node2"), wep("203.0.113.200"))
    assert lk.endpoint("203.0.113.200").type == pb.WorkloadEndpoint
    r.put(NetworkSetKey("ns1/office"), None)
    assert lk.endpoint("203.0.113.255").name == "partners"
    r.put(NetworkSetKey("partners"), v1.NetworkSet(nets=("198.51.100.0/24",)))
    assert lk.endpoint("203.0.113.1").type == pb.Network  # the update replaced the nets
    assert lk.endpoint("198.51.100.9").name == "partners"
    r.put(NetworkSetKey("partners"), v1.NetworkSet(nets=("bogus",)))  # invalid: deleted
    assert lk.endpoint("198.51.100.9").type == pb.Network
    # Directly (no validation filter in front): a bad CIDR is skipped, the rest kept.
    lk.on_endpoint(NetworkSetKey("x"), v1.NetworkSet(nets=("bogus", "192.0.2.0/28")))
    assert lk.endpoint("192.0.2.15").name == "x"
    assert lk.endpoint("192.0.2.16").type == pb.Network


def test_flow_from_a_network_set_keeps_its_address_out_of_the_key() -> None:
    from calico.model import NetworkSetKey

    r = _deny_rig()
    r.put(NetworkSetKey("scanners"), v1.NetworkSet(nets=("8.8.0.0/16",), labels={"bad": "yes"}))
    r.collector.handle(
        [
            NflogPacket(1, "DPI0|gnp/in", FiveTuple(6, src, "10.65.0.2", 1000, 22), 60)
            for src in ("8.8.4.4", "8.8.8.8")
        ]
    )
    [f] = r.collector.flush()
    assert (f.Key.source_name, f.Key.source_type, f.Key.source_ip) == (
        "scanners",
        pb.NetworkSet,
        "",
    )
    assert (list(f.source_labels), list(f.source_ips)) == (["bad=yes"], ["8.8.4.4", "8.8.8.8"])
