"""The collector's kernel readers in a fresh network namespace: NFLOG groups fed by an nft rule
with the rendered log statement, and the conntrack dump's counters for the same connection."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from netns_support import netns, run_py

pytestmark = pytest.mark.root

SNIPPET = r"""
import json, socket, time
import nftables
from calico.felix.collector import conntrack
from calico.felix.collector.nflog import NflogReader, NflogError
from calico.felix.rules.nflog import nflog

assert NflogReader.__init__  # imported
nft = nftables.Nftables()
rule = {"family": "inet", "table": "t", "chain": "c",
        "expr": [{"match": {"op": "==", "left": {"ct": {"key": "state"}}, "right": ["new"]}},
                 nflog(False, "API3|np/ns1/p"), {"accept": None}]}
rc, out, err = nft.json_cmd({"nftables": [
    {"add": {"table": {"family": "inet", "name": "t"}}},
    {"add": {"chain": {"family": "inet", "table": "t", "name": "c", "type": "filter",
                       "hook": "output", "prio": 0, "policy": "accept"}}},
    {"add": {"rule": rule}}]})
assert rc == 0, err
with open("/proc/sys/net/netfilter/nf_conntrack_acct", "w") as f:
    f.write("1")
reader = NflogReader([1, 2])
result = {"zero_timeout": reader.read(0)}
try:
    NflogReader([2])
    result["second_bind"] = "ok"
except NflogError as e:
    result["second_bind"] = str(e)
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
port = srv.getsockname()[1]
cli = socket.create_connection(("127.0.0.1", port))
peer, _ = srv.accept()
cli.sendall(b"x" * 1000); peer.recv(2000); peer.sendall(b"y" * 500); cli.recv(1000)
pkts, deadline = [], time.monotonic() + 5
while time.monotonic() < deadline and not pkts:
    pkts += reader.read(0.5)
table = conntrack.dump()
key = [t for t in table if t.proto == 6 and t.dport == port][0]
# The same entries through pyroute2's decoder: our stdlib parser must agree with it.
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTSocket
def attr(m, name):
    return next(v for k, v, *_ in m["attrs"] if k == name)
theirs = {}
ct = NFCTSocket()
for m in ct.dump():
    o = attr(m, "CTA_TUPLE_ORIG")
    ip, pr = attr(o, "CTA_TUPLE_IP"), attr(o, "CTA_TUPLE_PROTO")
    if attr(pr, "CTA_PROTO_NUM") != 6:
        continue
    tup = (6, attr(ip, "CTA_IP_V4_SRC"), attr(ip, "CTA_IP_V4_DST"),
           attr(pr, "CTA_PROTO_SRC_PORT"), attr(pr, "CTA_PROTO_DST_PORT"))
    co, cr = attr(m, "CTA_COUNTERS_ORIG"), attr(m, "CTA_COUNTERS_REPLY")
    theirs[tup] = [attr(co, "CTA_COUNTERS_PACKETS"), attr(co, "CTA_COUNTERS_BYTES"),
                   attr(cr, "CTA_COUNTERS_PACKETS"), attr(cr, "CTA_COUNTERS_BYTES")]
ct.close()
result["theirs"] = {"|".join(map(str, k)): v for k, v in theirs.items()}
result["ours"] = {"|".join(map(str, k)): list(v) for k, v in table.items()
                  if k.proto == 6 and "|".join(map(str, k)) in result["theirs"]}
result["pkts"] = [[p.group, p.prefix, list(p.tuple), p.length] for p in pkts]
result["port"] = port
result["ct"] = list(table[key])
print(json.dumps(result))
"""


def test_nflog_reader_and_conntrack_dump_in_a_namespace() -> None:
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.skip("needs root and nft")
    with netns("colk") as ns:
        out = json.loads(run_py(ns, SNIPPET, timeout=30).stdout)
    assert out["zero_timeout"] == []
    # One reader per group and namespace: a second bind is a clear error, not a hang.
    assert out["second_bind"] == (
        "[Errno 1] NFLOG group 2: Operation not permitted "
        "(is another NFLOG reader bound to it in this namespace?)"
    )
    port = out["port"]
    # The first "new" packet is the client's SYN to the server port (group 2: egress form).
    group, prefix, tup, length = out["pkts"][0]
    assert (group, prefix, tup[0], tup[1], tup[4]) == (2, "API3|np/ns1/p", 6, "127.0.0.1", port)
    assert length >= 40
    orig_packets, orig_bytes, reply_packets, reply_bytes = out["ct"]
    assert orig_packets >= 3 and orig_bytes >= 1000
    assert reply_packets >= 2 and reply_bytes >= 500
    assert out["ours"] == out["theirs"] and out["theirs"]


DESTROY_SNIPPET = r"""
import json, socket, sys, time
import nftables
from calico.felix.collector import conntrack

N, V6 = 5, sys.argv[1] == "6"
host = "::1" if V6 else "127.0.0.1"
fam = socket.AF_INET6 if V6 else socket.AF_INET
for name, value in (("nf_conntrack_acct", "1"), ("nf_conntrack_tcp_timeout_time_wait", "1"),
                    ("nf_conntrack_tcp_timeout_close", "1")):
    with open(f"/proc/sys/net/netfilter/{name}", "w") as f:
        f.write(value)
srv = socket.socket(fam); srv.bind((host, 0)); srv.listen()
port = srv.getsockname()[1]
# Independent counts: an nft counter per direction of the test port, in the output hook
# (every packet on lo crosses it once), and a ct match so conntrack tracks this namespace.
nft = nftables.Nftables()
def counted(field):
    return {"family": "inet", "table": "t", "chain": "c", "expr": [
        {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": field}},
                   "right": port}}, {"counter": None}]}
rc, out, err = nft.json_cmd({"nftables": [
    {"add": {"table": {"family": "inet", "name": "t"}}},
    {"add": {"chain": {"family": "inet", "table": "t", "name": "c", "type": "filter",
                       "hook": "output", "prio": 0, "policy": "accept"}}},
    {"add": {"rule": {"family": "inet", "table": "t", "chain": "c", "expr": [
        {"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["new"]}}]}}},
    {"add": {"rule": counted("dport")}}, {"add": {"rule": counted("sport")}}]})
assert rc == 0, err
events = conntrack.DestroyEvents()
for i in range(N):  # short connections: greeting, request, reply, orderly close
    cli = socket.create_connection((host, port))
    peer, _ = srv.accept()
    cli.sendall(b"q" * (100 + i)); peer.recv(4096); peer.sendall(b"r" * (1000 + i))
    got = b""
    while len(got) < 1000 + i:
        got += cli.recv(4096)
    cli.close(); peer.recv(10); peer.close()
# An expired entry's DESTROY comes when the kernel reaps it: its gc worker may take a minute,
# a dump reaps (and so reports) every expired entry it meets at once, as the collector's polls.
time.sleep(1.5)
got, deadline, left = [], time.monotonic() + 30, []
while time.monotonic() < deadline:
    left = [list(t) for t in conntrack.dump() if t.dport == port]
    got += [e for e in events.read() if e[0].proto == 6 and e[0].dport == port]
    if len(got) >= N:
        break
    time.sleep(0.1)
nft.set_json_output(True)
rc, out, err = nft.cmd("list table inet t")
rules = [o["rule"]["expr"][-1] for o in json.loads(out)["nftables"] if "rule" in o]
counters = [e["counter"] for e in rules if "counter" in e]
print(json.dumps({"port": port, "dropped": events.dropped, "counters": counters,
                  "events": [[list(o), list(s), list(c)] for o, s, c in got],
                  "left": left}))
"""


@pytest.mark.parametrize("family", ["4", "6"])
def test_destroy_events_carry_exact_final_counters(family: str) -> None:
    """Short TCP connections whose entries die (TIME_WAIT 1 s): each one's DESTROY event
    arrives with counters that sum to exactly what nft counted on the wire."""
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.skip("needs root and nft")
    with netns("cold") as ns:
        out = json.loads(run_py(ns, DESTROY_SNIPPET, family, timeout=90).stdout)
    assert out["dropped"] == 0
    events = out["events"]
    assert len(events) == 5, out
    host = "::1" if family == "6" else "127.0.0.1"
    assert sorted({(*o[:3], o[4]) for o, _, _ in events}) == [(6, host, host, out["port"])]
    assert len({o[3] for o, _, _ in events}) == 5  # five distinct connections
    orig, reply = out["counters"]
    assert [sum(c[0] for _, _, c in events), sum(c[1] for _, _, c in events)] == [
        orig["packets"],
        orig["bytes"],
    ]
    assert [sum(c[2] for _, _, c in events), sum(c[3] for _, _, c in events)] == [
        reply["packets"],
        reply["bytes"],
    ]
    assert reply["bytes"] > 5 * 1000  # the replies' payload is in there
    assert out["left"] == []  # the dump that reaped them no longer lists them


SERVICE_SNIPPET = r"""
import json, socket, subprocess, time
import nftables
from calico.felix.collector import conntrack
from calico.felix.collector.collector import Collector
from calico.felix.collector.nflog import NflogReader
from calico.felix.messages import (
    ActivePolicyUpdate, Policy, PolicyID, Rule, ServicePort, ServiceUpdate, TierInfo,
    WorkloadEndpoint, WorkloadEndpointID, WorkloadEndpointUpdate)
from calico.felix.rules.nflog import nflog, rule_prefix

for name, value in (("nf_conntrack_acct", "1"), ("nf_conntrack_tcp_timeout_time_wait", "1")):
    with open(f"/proc/sys/net/netfilter/{name}", "w") as f:
        f.write(value)
for cmd in ("addr add 10.65.0.1/32 dev lo", "addr add 10.65.0.2/32 dev lo",
            "route add 10.96.0.10/32 dev lo"):
    subprocess.run(["ip", *cmd.split()], check=True)
srv = socket.socket(); srv.bind(("10.65.0.2", 0)); srv.listen()
port = srv.getsockname()[1]
np = PolicyID("flows", "NetworkPolicy", namespace="ns1", tier="default")
prefix = rule_prefix("allow", "P", False, 0, "np/ns1/flows")
nft = nftables.Nftables()
rc, out, err = nft.cmd(f'''
table inet t {{
  chain nat {{
    type nat hook output priority -100;
    ip daddr 10.96.0.10 tcp dport 80 dnat ip to 10.65.0.2:{port}
  }}
}}''')
assert rc == 0, err
rule = {"family": "inet", "table": "t", "chain": "c",
        "expr": [{"match": {"op": "==", "left": {"ct": {"key": "state"}}, "right": ["new"]}},
                 nflog(False, prefix), {"accept": None}]}
rc, out, err = nft.json_cmd({"nftables": [
    {"add": {"chain": {"family": "inet", "table": "t", "name": "c", "type": "filter",
                       "hook": "output", "prio": 0, "policy": "accept"}}},
    {"add": {"rule": rule}}]})
assert rc == 0, err

class Sink:
    def push(self, flow): pass

c = Collector(Sink(), flush_interval=60, reader_factory=lambda: NflogReader([1, 2]),
              events_factory=conntrack.DestroyEvents)
c.on_messages([
    ActivePolicyUpdate(np, Policy(namespace="ns1", outbound_rules=(Rule(action="allow"),))),
    *[WorkloadEndpointUpdate(
        WorkloadEndpointID("k8s", f"ns1/{pod}", "eth0"),
        WorkloadEndpoint(state="active", name=f"cali{pod}", ipv4_nets=(f"{ip}/32",),
                         tiers=(TierInfo("default", (), (np,)),)))
      for pod, ip in (("client", "10.65.0.1"), ("server", "10.65.0.2"))],
    ServiceUpdate("web", "ns1", cluster_ips=("10.96.0.10",),
                  ports=(ServicePort("TCP", 80, 0, "http"),)),
])
reader, c.events = c.reader_factory(), c.events_factory()
for dst in [("10.96.0.10", 80)] * 3 + [("10.65.0.2", port)] * 2:
    cli = socket.create_connection(dst, timeout=3, source_address=("10.65.0.1", 0))
    peer, _ = srv.accept()
    cli.sendall(b"q" * 100); peer.recv(4096); peer.sendall(b"r" * 500); cli.recv(4096)
    cli.close(); peer.recv(10); peer.close()
deadline, polled = time.monotonic() + 30, 0.0
while time.monotonic() < deadline:
    c.handle(reader.read(0.2))
    c.on_destroyed(c.events.read())
    if time.monotonic() - polled > 1:
        c.poll_conntrack()
        polled = time.monotonic()
    if c.agg.destroyed >= 5:
        break
flows = c.agg.flush()
print(json.dumps({"port": port, "destroyed": c.agg.destroyed, "flows": [
    {"service": [f.Key.dest_service_name, f.Key.dest_service_namespace,
                 f.Key.dest_service_port_name, f.Key.dest_service_port],
     "dest": [f.Key.dest_name, f.Key.dest_port], "reporter": f.Key.reporter,
     "counts": [f.num_connections_started, f.num_connections_completed, f.packets_out,
                f.bytes_out, f.packets_in, f.bytes_in]} for f in flows]}))
"""


def test_service_fields_from_a_real_dnat_and_conntrack() -> None:
    """Connections to a service cluster IP, DNATed by nft to the server: the collector (real
    NFLOG reader, dump and DESTROY events) names the service; direct ones get no service."""
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.skip("needs root and nft")
    with netns("cols") as ns:
        out = json.loads(run_py(ns, SERVICE_SNIPPET, timeout=60).stdout)
    assert out["destroyed"] == 5, out
    by_service = {tuple(f["service"]): f for f in out["flows"]}
    assert set(by_service) == {("web", "ns1", "http", 80), ("", "", "", 0)}, out
    svc, direct = by_service["web", "ns1", "http", 80], by_service["", "", "", 0]
    for f, n in ((svc, 3), (direct, 2)):
        assert f["dest"] == ["server", out["port"]]  # the backend, as policy saw it
        started, completed, packets_out, bytes_out, _, bytes_in = f["counts"]
        assert (started, completed) == (n, n)
        # Payload + headers, both ways (exact per-packet counts are the other test's job).
        assert bytes_out > n * 100 and bytes_in > n * 500 and packets_out >= 4 * n
