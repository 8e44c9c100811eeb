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
