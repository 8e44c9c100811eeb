"""NFLOG wire parsing (property-tested against an encoder), trace building, aggregation."""

from __future__ import annotations

import ipaddress
import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calico.felix.collector.aggregator import Aggregator
from calico.felix.collector.client import ResendCache
from calico.felix.collector.collector import Collector
from calico.felix.collector.conntrack import ConntrackError, CtCounters, parse_dump
from calico.felix.collector.lookups import Endpoint
from calico.felix.collector.nflog import FiveTuple, NflogPacket, parse_ip, parse_messages
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
from calico.proto.goldmane import api_pb2 as pb


def ipv4(src: str, dst: str, proto: int, sport: int, dport: int, total: int) -> bytes:
    hdr = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        total,
        0,
        0,
        64,
        proto,
        0,
        ipaddress.IPv4Address(src).packed,
        ipaddress.IPv4Address(dst).packed,
    )
    return hdr + struct.pack("!HH", sport, dport) + b"\0" * 16


def attr(t: int, v: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(v), t) + v
    return raw + b"\0" * ((-len(raw)) % 4)


def nflog_msg(group: int, prefix: str, payload: bytes) -> bytes:
    body = struct.pack("=BB", socket.AF_INET, 0) + struct.pack("!H", group)
    body += attr(1, b"\x08\x00\x03\x00") + attr(10, prefix.encode() + b"\0") + attr(9, payload)
    return struct.pack("=IHHII", 16 + len(body), 4 << 8, 0, 0, 0) + body


ips = st.ip_addresses(v=4).map(str)
ports = st.integers(0, 65535)


# No deadline: CI's loaded 2-core machine makes timings meaningless.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(1, 2),
            st.text("APDREI0123456789|/abc.-", max_size=63),
            ips,
            ips,
            st.sampled_from([6, 17]),
            ports,
            ports,
            st.integers(28, 65535),
        ),
        max_size=8,
    )
)
def test_parse_messages_round_trip(items) -> None:
    data = b"".join(
        nflog_msg(g, p, ipv4(s, d, proto, sp, dp, total))
        for g, p, s, d, proto, sp, dp, total in items
    )
    # A trailing NLMSG_DONE (batched delivery) is skipped.
    data += struct.pack("=IHHII", 16, 3, 0, 0, 0)
    got = parse_messages(data)
    assert got == [
        NflogPacket(g, p, FiveTuple(proto, s, d, sp, dp), total)
        for g, p, s, d, proto, sp, dp, total in items
    ]


# No deadline: CI's loaded 2-core machine makes timings meaningless.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_parse_messages_never_raises_on_garbage(data: bytes) -> None:
    parse_messages(data)


def test_parse_ip_icmp_and_v6_and_short() -> None:
    tup, total = parse_ip(ipv4("10.0.0.1", "10.0.0.2", 1, 0x0800, 7, 84))
    assert tup == FiveTuple(1, "10.0.0.1", "10.0.0.2", 0, 0) and total == 84
    v6 = struct.pack("!IHBB", 6 << 28, 20, 6, 64) + ipaddress.IPv6Address("fd00::1").packed
    v6 += ipaddress.IPv6Address("fd00::2").packed + struct.pack("!HH", 1234, 80)
    assert parse_ip(v6) == (FiveTuple(6, "fd00::1", "fd00::2", 1234, 80), 60)
    assert parse_ip(b"\x45" * 19) is None
    assert parse_ip(b"") is None


def ct_attr(t: int, v: bytes, nested: bool = False) -> bytes:
    raw = struct.pack("=HH", 4 + len(v), t | (0x8000 if nested else 0)) + v
    return raw + b"\0" * ((-len(raw)) % 4)


def ct_tuple(src: str, dst: str, proto: int, sport: int | None, dport: int | None) -> bytes:
    fam = socket.AF_INET6 if ":" in src else socket.AF_INET
    a, b = (3, 4) if fam == socket.AF_INET6 else (1, 2)
    ip = ct_attr(a, socket.inet_pton(fam, src)) + ct_attr(b, socket.inet_pton(fam, dst))
    l4 = ct_attr(1, bytes([proto]))
    if sport is not None:
        l4 += ct_attr(2, struct.pack("!H", sport)) + ct_attr(3, struct.pack("!H", dport))
    return ct_attr(1, ip, True) + ct_attr(2, l4, True)


def ct_entry(orig: bytes, reply: bytes, counts: tuple[int, int, int, int] | None) -> bytes:
    body = struct.pack("=BBH", socket.AF_INET, 0, 0)
    body += ct_attr(1, orig, True) + ct_attr(2, reply, True) + ct_attr(3, struct.pack("!I", 14))
    if counts:
        op, ob, rp, rb = counts
        body += ct_attr(
            9, ct_attr(1, struct.pack("!Q", op)) + ct_attr(2, struct.pack("!Q", ob)), True
        )
        body += ct_attr(
            10, ct_attr(1, struct.pack("!Q", rp)) + ct_attr(2, struct.pack("!Q", rb)), True
        )
    return struct.pack("=IHHII", 16 + len(body), 1 << 8, 2, 1, 0) + body


def test_conntrack_dump_parsing_counters_nat_view_and_done() -> None:
    data = ct_entry(
        ct_tuple("10.0.0.1", "10.96.0.1", 6, 5000, 80),
        ct_tuple("10.0.0.2", "10.0.0.1", 6, 8080, 5000),  # DNAT to the pod
        (3, 180, 2, 120),
    )
    data += ct_entry(
        ct_tuple("fd00::1", "fd00::2", 58, None, None),
        ct_tuple("fd00::2", "fd00::1", 58, None, None),
        None,
    )
    data += struct.pack("=IHHII", 8, 1 << 8, 2, 1, 0)  # a truncated message is skipped
    entries, done = parse_dump(data)
    assert not done
    assert entries == [
        (
            FiveTuple(6, "10.0.0.1", "10.96.0.1", 5000, 80),
            FiveTuple(6, "10.0.0.1", "10.0.0.2", 5000, 8080),
            CtCounters(3, 180, 2, 120),
        ),
        (
            FiveTuple(58, "fd00::1", "fd00::2", 0, 0),
            FiveTuple(58, "fd00::1", "fd00::2", 0, 0),
            CtCounters(0, 0, 0, 0),
        ),
    ]
    assert parse_dump(struct.pack("=IHHIIi", 20, 3, 2, 1, 0, 0)) == ([], True)
    err = struct.pack("=IHHIIi", 36, 2, 0, 1, 0, -1) + b"\0" * 16
    with pytest.raises(ConntrackError, match="EPERM"):
        parse_dump(err)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=300),
        # Well-framed messages with garbage bodies reach the attribute decoding.
        st.lists(st.tuples(st.sampled_from([2, 3, 256]), st.binary(max_size=60)), max_size=4).map(
            lambda ms: b"".join(
                struct.pack("=IHHII", 16 + len(b), t, 0, 0, 0) + b + b"\0" * (-len(b) % 4)
                for t, b in ms
            )
        ),
    )
)
def test_conntrack_parse_never_raises_on_garbage_but_errors(data: bytes) -> None:
    """Garbage never crashes the parser; only a well-formed kernel error raises."""
    try:
        entries, _ = parse_dump(data)
    except ConntrackError as e:
        assert e.errno and e.strerror.startswith("conntrack dump: ")
    else:
        assert all(isinstance(c, CtCounters) for _, _, c in entries)


NP = PolicyID("flows", "NetworkPolicy", namespace="ns1", tier="default")
T1 = PolicyID("t1pol", "GlobalNetworkPolicy", tier="t1")


class FakeClient:
    def __init__(self) -> None:
        self.flows: list[pb.Flow] = []

    def push(self, flow: pb.Flow) -> None:
        self.flows.append(flow)


MESSAGES: list[object] = [
    ActivePolicyUpdate(T1, Policy(inbound_rules=(Rule(action="pass"),))),
    ActivePolicyUpdate(
        NP,
        Policy(namespace="ns1", inbound_rules=(Rule(action="allow"), Rule(action="deny"))),
    ),
    ActiveProfileUpdate(ProfileID("kns.ns1"), Profile(outbound_rules=(Rule(action="allow"),))),
    *[
        WorkloadEndpointUpdate(
            WorkloadEndpointID("k8s", f"ns1/{name}", "eth0"),
            WorkloadEndpoint(
                state="active",
                name=f"cali{name}",
                ipv4_nets=(f"{ip}/32",),
                profile_ids=("kns.ns1",),
                tiers=(TierInfo("t1", (T1,)), TierInfo("default", (NP,))),
            ),
        )
        for name, ip in (("client", "10.65.0.1"), ("server", "10.65.0.2"))
    ],
]


def collector(now: list[float], ct: dict) -> Collector:
    c = Collector(FakeClient(), flush_interval=1, ct_dump=lambda: ct, clock=lambda: now[0])
    c.on_messages(MESSAGES)
    return c


TUP = FiveTuple(6, "10.65.0.1", "10.65.0.2", 40000, 8080)


def test_trace_across_tiers_and_conntrack_counts() -> None:
    now, ct = [1000.0], {}
    c = collector(now, ct)
    c.handle([NflogPacket(1, "PPI0|gnp/t1pol", TUP, 60)])
    assert c.flush() == []  # a pass hit alone is not a verdict yet
    c.handle(
        [NflogPacket(1, "API0|np/ns1/flows", TUP, 60), NflogPacket(2, "ARE0|kns.ns1", TUP, 60)]
    )
    ct[TUP] = CtCounters(5, 400, 4, 300)
    now[0] = 1001.0
    flows = {f.Key.reporter: f for f in c.flush()}
    dst, src = flows[pb.Dst], flows[pb.Src]
    assert [
        (h.kind, h.name, h.tier, h.action, h.policy_index, h.rule_index)
        for h in dst.Key.policies.enforced_policies
    ] == [
        (pb.GlobalNetworkPolicy, "t1pol", "t1", pb.Pass, 0, 0),
        (pb.CalicoNetworkPolicy, "flows", "default", pb.Allow, 1, 0),
    ]
    assert list(dst.Key.policies.pending_policies) == list(dst.Key.policies.enforced_policies)
    assert (dst.Key.source_name, dst.Key.source_namespace, dst.Key.dest_name) == (
        "client",
        "ns1",
        "server",
    )
    assert (dst.packets_in, dst.bytes_in, dst.packets_out, dst.bytes_out) == (5, 400, 4, 300)
    assert (src.packets_out, src.bytes_out, src.packets_in, src.bytes_in) == (5, 400, 4, 300)
    assert src.Key.policies.enforced_policies[0].kind == pb.Profile
    assert (dst.num_connections_started, dst.num_connections_live, dst.start_time) == (1, 1, 1000)
    # Next interval: only the delta, still live; then the entry vanishes: completed.
    ct[TUP] = CtCounters(7, 500, 4, 300)
    now[0] = 1002.0
    dst = {f.Key.reporter: f for f in c.flush()}[pb.Dst]
    assert (dst.packets_in, dst.bytes_in, dst.packets_out, dst.num_connections_started) == (
        2,
        100,
        0,
        0,
    )
    del ct[TUP]
    now[0] = 1003.0
    dst = {f.Key.reporter: f for f in c.flush()}[pb.Dst]
    assert (dst.num_connections_completed, dst.num_connections_live) == (1, 0)
    now[0] = 1004.0
    assert c.flush() == []  # nothing left to report


def test_denied_packets_counted_from_nflog_and_end_of_tier_trigger() -> None:
    now = [50.0]
    c = collector(now, {})
    deny = FiveTuple(6, "10.65.0.1", "10.65.0.2", 40001, 9090)
    c.handle(
        [NflogPacket(1, "PPI0|gnp/t1pol", deny, 60), NflogPacket(1, "DPI1|np/ns1/flows", deny, 60)]
        * 3
    )
    other = FiveTuple(6, "10.65.0.1", "10.65.0.2", 40002, 22)
    c.handle(
        [NflogPacket(1, "PPI0|gnp/t1pol", other, 60), NflogPacket(1, "DPI|default", other, 60)]
    )
    flows = {f.Key.dest_port: f for f in c.flush()}
    f = flows[9090]
    assert (f.Key.action, f.packets_in, f.bytes_in, f.packets_out) == (pb.Deny, 3, 180, 0)
    assert (f.num_connections_started, f.num_connections_completed) == (1, 1)
    eot = flows[22].Key.policies.enforced_policies[-1]
    assert (eot.kind, eot.tier, eot.name, eot.rule_index) == (pb.EndOfTier, "default", "flows", -1)
    assert (eot.trigger.kind, eot.trigger.name, eot.trigger.namespace) == (
        pb.CalicoNetworkPolicy,
        "flows",
        "ns1",
    )


def test_unknown_prefix_and_unknown_addresses() -> None:
    c = collector([0.0], {})
    c.handle([NflogPacket(1, "API9|np/ns1/gone", TUP, 60)])
    assert c.traces.unknown == 1
    ext = FiveTuple(6, "8.8.8.8", "10.65.0.2", 1, 8080)
    c.handle(
        [NflogPacket(1, "PPI0|gnp/t1pol", ext, 60), NflogPacket(1, "DPI1|np/ns1/flows", ext, 60)]
    )
    [f] = c.flush()
    assert (f.Key.source_name, f.Key.source_type, f.Key.dest_type) == (
        "pub",
        pb.Network,
        pb.WorkloadEndpoint,
    )


def test_policy_update_replaces_prefixes() -> None:
    c = collector([0.0], {})
    assert c.lookups.rule("DPI1|np/ns1/flows") is not None
    c.on_messages(
        [ActivePolicyUpdate(NP, Policy(namespace="ns1", inbound_rules=(Rule(action="allow"),)))]
    )
    assert c.lookups.rule("DPI1|np/ns1/flows") is None
    assert c.lookups.rule("API0|np/ns1/flows").action == pb.Allow


def test_resend_cache_expires_at_the_window() -> None:
    now = [0.0]
    cache = ResendCache(lambda: now[0], window=300)
    cache.add(pb.Flow(start_time=1))
    now[0] = 200.0
    cache.add(pb.Flow(start_time=2))
    now[0] = 300.0
    assert [f.start_time for f in cache.flows()] == [1, 2]  # exactly 300 s old: still kept
    now[0] = 300.5
    assert [f.start_time for f in cache.flows()] == [2]


def test_aggregator_retransmitted_syn_counts_once() -> None:
    agg = Aggregator(lambda: 0.0)
    ep = collector([0], {}).lookups.endpoint
    key = agg.key_for(True, TUP, ep(TUP.src), ep(TUP.dst), [], [], pb.Allow)
    agg.on_verdict(True, TUP, key, 60)
    agg.on_verdict(True, TUP, key, 60)
    [f] = agg.flush()
    assert f.num_connections_started == 1


SNP = PolicyID("would-deny", "StagedNetworkPolicy", namespace="ns1", tier="default")
SONLY = PolicyID("s-only", "StagedGlobalNetworkPolicy", tier="sec")


def staged_collector() -> Collector:
    c = collector([0.0], {})
    c.on_messages(
        [
            ActivePolicyUpdate(
                SNP,
                Policy(
                    namespace="ns1",
                    staged=True,
                    inbound_rules=(Rule(action="log"), Rule(action="deny")),
                ),
            ),
            ActivePolicyUpdate(SONLY, Policy(staged=True, inbound_rules=(Rule(action="allow"),))),
            WorkloadEndpointUpdate(
                WorkloadEndpointID("k8s", "ns1/server", "eth0"),
                WorkloadEndpoint(
                    state="active",
                    name="caliserver",
                    ipv4_nets=("10.65.0.2/32",),
                    tiers=(TierInfo("sec", (SONLY,)), TierInfo("default", (SNP, NP))),
                ),
            ),
        ]
    )
    return c


def traces(flow: pb.Flow) -> tuple[list, list]:
    def short(hits):
        return [(h.kind, h.name, h.action, h.policy_index, h.rule_index) for h in hits]

    return short(flow.Key.policies.enforced_policies), short(flow.Key.policies.pending_policies)


def test_staged_deny_before_enforced_allow_is_the_pending_verdict() -> None:
    c = staged_collector()
    c.handle(
        [
            NflogPacket(1, p, TUP, 60)
            for p in (
                "PPI|sec",  # the staged-only tier ends (no staged rule matched)
                "DPI1|snp/ns1/would-deny",  # staged: would deny (rule 1; the log rule 0 is not one)
                "API0|np/ns1/flows",  # enforced: allows
            )
        ]
    )
    [f] = c.flush()
    assert f.Key.action == pb.Allow
    enforced, pending = traces(f)
    assert enforced == [(pb.CalicoNetworkPolicy, "flows", pb.Allow, 0, 0)]
    # The staged-only tier's end takes the tier's default action (Deny) in the pending world,
    # so the pending verdict is decided there, by its last (staged) policy.
    assert pending == [(pb.EndOfTier, "s-only", pb.Deny, 0, -1)]
    assert f.Key.policies.pending_policies[0].trigger.kind == pb.StagedGlobalNetworkPolicy


def test_staged_allow_in_staged_only_tier_then_staged_deny_ignored() -> None:
    c = staged_collector()
    c.handle(
        [
            NflogPacket(1, p, TUP, 60)
            for p in ("API0|sgnp/s-only", "DPI1|snp/ns1/would-deny", "API0|np/ns1/flows")
        ]
    )
    [f] = c.flush()
    enforced, pending = traces(f)
    assert enforced == [(pb.CalicoNetworkPolicy, "flows", pb.Allow, 0, 0)]
    assert pending == [(pb.StagedGlobalNetworkPolicy, "s-only", pb.Allow, 0, 0)]


def test_pass_in_pending_skips_the_rest_of_the_tier() -> None:
    c = collector([0.0], {})
    c.handle([NflogPacket(1, p, TUP, 60) for p in ("PPI0|gnp/t1pol", "API0|np/ns1/flows")])
    [f] = c.flush()
    enforced, pending = traces(f)
    assert (
        enforced
        == pending
        == [
            (pb.GlobalNetworkPolicy, "t1pol", pb.Pass, 0, 0),
            (pb.CalicoNetworkPolicy, "flows", pb.Allow, 1, 0),
        ]
    )


def test_unfinished_traces_survive_one_reset_only() -> None:
    c = collector([0.0], {})
    c.handle([NflogPacket(1, "PPI0|gnp/t1pol", TUP, 60)])
    c.traces.reset()  # a flush between a packet's two hits keeps the first
    c.handle([NflogPacket(1, "API0|np/ns1/flows", TUP, 60)])
    [f] = c.flush()
    assert len(f.Key.policies.enforced_policies) == 2
    c.handle([NflogPacket(1, "PPI0|gnp/t1pol", TUP, 60)])
    c.traces.reset()
    c.traces.reset()  # never finished: dropped at the second reset
    c.handle([NflogPacket(1, "API0|np/ns1/flows", TUP, 60)])
    flows = c.flush()
    assert [len(f.Key.policies.enforced_policies) for f in flows] == [1]


class ThreadClient(FakeClient):
    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 0) -> None:
        self.stopped = True


class ScriptedReader:
    """Hands out one batch, then raises once (the loop must survive it), then stays idle."""

    def __init__(self, batch: list[NflogPacket]) -> None:
        self.script: list[object] = [batch, RuntimeError("boom")]
        self.closed = False

    def read(self, timeout: float) -> list[NflogPacket]:
        if self.script:
            item = self.script.pop(0)
            if isinstance(item, Exception):
                raise item
            return item  # type: ignore[return-value]
        time.sleep(min(timeout, 0.05))
        return []

    def close(self) -> None:
        self.closed = True


def test_collector_thread_flushes_to_the_client_and_survives_errors() -> None:
    reader = ScriptedReader(
        [NflogPacket(1, "PPI0|gnp/t1pol", TUP, 60), NflogPacket(1, "DPI1|np/ns1/flows", TUP, 60)]
    )
    client = ThreadClient()
    c = Collector(client, flush_interval=0.2, reader_factory=lambda: reader, ct_dump=dict)
    c.on_messages(MESSAGES)
    c.start()
    try:
        deadline = time.monotonic() + 10
        while not client.flows and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        c.stop()
    assert client.started and client.stopped and reader.closed
    [f] = client.flows
    assert (f.Key.action, f.packets_in, f.Key.dest_port) == (pb.Deny, 1, 8080)


def test_host_endpoints_and_removals() -> None:
    from calico.felix.messages import (
        HostEndpoint,
        HostEndpointID,
        HostEndpointRemove,
        HostEndpointUpdate,
        WorkloadEndpointRemove,
    )

    c = collector([0.0], {})
    hep = HostEndpointID("node1-eth0")
    c.on_messages(
        [HostEndpointUpdate(hep, HostEndpoint("eth0", expected_ipv4_addrs=("192.0.2.9",)))]
    )
    assert c.lookups.endpoint("192.0.2.9") == Endpoint("node1-eth0", "", pb.HostEndpoint)
    c.on_messages([HostEndpointRemove(hep)])
    assert c.lookups.endpoint("192.0.2.9").type == pb.Network
    c.on_messages([WorkloadEndpointRemove(WorkloadEndpointID("k8s", "ns1/client", "eth0"))])
    assert c.lookups.endpoint("10.65.0.1") == Endpoint("pvt", "", pb.Network)
    assert c.lookups.endpoint("10.65.0.2").name == "server"


def test_from_config_reuses_typha_tls_and_guards_the_interval() -> None:
    from calico.felix.collector.collector import from_config

    base = {
        "FlowLogsGoldmaneServer": "gm:7443",
        "FlowLogsFlushInterval": 15.0,
        "TyphaCertFile": "/c",
        "TyphaKeyFile": "/k",
        "TyphaCAFile": None,
    }
    c = from_config(base)
    assert (c.client.target, c.client.tls.cert, c.client.tls.key, c.client.tls.ca) == (
        "gm:7443",
        "/c",
        "/k",
        "",
    )
    assert (c.flush_interval, c.poll_interval) == (15.0, 5.0)
    assert from_config({**base, "FlowLogsFlushInterval": 2.0}).poll_interval == 2.0
    assert from_config({**base, "FlowLogsFlushInterval": 0.0}).flush_interval == 300.0


def test_memoised_flow_keys_follow_endpoint_changes() -> None:
    from calico.felix.messages import WorkloadEndpointRemove

    c = collector([0.0], {})
    hits = ["PPI0|gnp/t1pol", "DPI1|np/ns1/flows"]
    c.handle([NflogPacket(1, p, TUP, 60) for p in hits])
    c.handle([NflogPacket(1, p, TUP._replace(sport=1), 60) for p in hits])  # memo hit
    [f] = c.flush()
    assert (f.Key.source_name, f.packets_in) == ("client", 2)
    c.on_messages([WorkloadEndpointRemove(WorkloadEndpointID("k8s", "ns1/client", "eth0"))])
    c.handle([NflogPacket(1, p, TUP, 60) for p in hits])
    [f] = c.flush()
    assert (f.Key.source_name, f.Key.source_type) == ("pvt", pb.Network)


def test_drops_are_reported_once_per_change(caplog) -> None:
    c = collector([0.0], {})
    reader = ScriptedReader([])
    c.client.dropped = 0  # type: ignore[attr-defined]
    c._report_drops(reader)
    assert "incomplete" not in caplog.text
    reader.dropped = 2  # type: ignore[attr-defined]
    c._report_drops(reader)
    c._report_drops(reader)
    assert caplog.text.count("2 NFLOG batches dropped by the kernel, 0 flows") == 1
