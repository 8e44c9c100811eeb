"""``calicoctl flows`` formatting and filters (the command itself runs against a real Goldmane
in tests/integration/felix/dataplane/test_felix_flow_logs.py)."""

from __future__ import annotations

from click.testing import CliRunner

from calico.calicoctl.flows import build_filter, flows_command, hit_text, keep, row, table
from calico.proto.goldmane import api_pb2 as pb


def flow(ns_src: str = "ns1", ns_dst: str = "ns2", action: int = pb.Deny) -> pb.Flow:
    hit = pb.PolicyHit(
        kind=pb.CalicoNetworkPolicy,
        namespace="ns2",
        name="p",
        tier="default",
        action=action,
        rule_index=3,
    )
    return pb.Flow(
        Key=pb.FlowKey(
            source_name="a",
            source_namespace=ns_src,
            dest_name="b",
            dest_namespace=ns_dst,
            dest_port=9090,
            proto="tcp",
            reporter=pb.Dst,
            action=action,
            policies=pb.PolicyTrace(enforced_policies=[hit]),
        ),
        start_time=0,
        packets_in=2,
        bytes_in=120,
        source_ips=["10.65.0.1"],
        source_ports=[40000, 40001, 40002],
    )


def test_hit_text_and_table() -> None:
    h = flow().Key.policies.enforced_policies[0]
    assert hit_text(h) == "default|CalicoNetworkPolicy:ns2/p|deny|3"
    gnp = pb.PolicyHit(kind=pb.GlobalNetworkPolicy, name="g", tier="t", action=pb.Allow)
    assert hit_text(gnp) == "t|GlobalNetworkPolicy:g|allow|0"
    lines = table([flow()]).splitlines()
    assert lines[0].split() == [
        "START",
        "REPORTER",
        "ACTION",
        "SOURCE",
        "SRC",
        "IP",
        "SRC",
        "PORT",
        "DEST",
        "PROTO",
        "PORT",
        "POLICY",
        "PKTS",
        "BYTES",
    ]
    assert lines[1].split() == [
        "00:00:00",
        "Dst",
        "Deny",
        "ns1/a",
        "10.65.0.1",
        "40000+2",
        "ns2/b",
        "tcp",
        "9090",
        "default|CalicoNetworkPolicy:ns2/p|deny|3",
        "2/0",
        "120/0",
    ]
    no_trace = pb.Flow(Key=pb.FlowKey(source_name="x", dest_name="y"))
    assert row(no_trace)[9] == "-"
    assert row(no_trace)[4:6] == ("-", "-")  # an upstream Goldmane: no samples
    assert len(table([no_trace], header=False).splitlines()) == 1  # no header row


def test_filters() -> None:
    assert build_filter(False, None) == pb.Filter()
    f = build_filter(True, "ns2/p")
    assert list(f.actions) == [pb.Deny]
    [m] = f.policies
    assert (m.name.value, m.name.type, m.namespace.value) == ("p", pb.Exact, "ns2")
    [m] = build_filter(False, "gp").policies
    assert (m.name.value, m.HasField("namespace")) == ("gp", False)
    assert keep(flow(), None) and keep(flow(), "ns1") and keep(flow(), "ns2")
    assert not keep(flow(), "ns3")


def test_unreachable_goldmane_is_one_line_and_exit_1() -> None:
    # Port 1 on loopback: nothing listens there (connection refused at once).
    res = CliRunner().invoke(flows_command, ["--server", "127.0.0.1:1", "--timeout", "2"])
    assert res.exit_code == 1
    assert res.output.startswith("Error: cannot reach Goldmane at 127.0.0.1:1: ")
    assert len(res.output.strip().splitlines()) == 1
