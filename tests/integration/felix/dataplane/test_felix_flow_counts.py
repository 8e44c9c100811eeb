"""Exact flow counters end to end, over IPv4 and IPv6: short TCP connections -> conntrack
DESTROY events -> Felix's collector -> a real Goldmane, checked against nft counters in the
client's namespace; a denied IPv6 flow with its policy verdict; Felix's collector metrics.

Conntrack in Felix's namespace forgets a closed connection after 1 s (TIME_WAIT and CLOSE
timeouts) and Felix polls conntrack every 3 s, so most connections are gone before any dump
sees them: their packets and bytes reach Goldmane only through their DESTROY events.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from felix_dp_fixtures import cluster, need_root
from flow_fixtures import goldmane, listed
from harness import POOL6, PY, eventually, free_port, in_ns, tcp, workload
from harness_extra import dual_stack_servers, use_v6_gateway

pytestmark = pytest.mark.root

V4_PORT, V6_PORT, WARM_PORT, DENIED_PORT = 8080, 8081, 7070, 9090
CONNECTIONS = 12

POLICY = {
    "kind": "NetworkPolicy",
    "metadata": {"name": "counts", "namespace": "ns1"},
    "spec": {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [
            {"action": "Allow", "protocol": "TCP", "destination": {"ports": [WARM_PORT]}},
            {"action": "Allow", "protocol": "TCP", "destination": {"ports": [V4_PORT, V6_PORT]}},
            {"action": "Deny", "protocol": "TCP", "destination": {"ports": [DENIED_PORT]}},
        ],
    },
}

# Packets and bytes per direction of each test port, as the client's namespace sees them.
COUNTERS = """
table inet cnt {
  chain out { type filter hook output priority 0; policy accept;
    ip daddr %(v4)s tcp dport %(p4)d counter
    ip6 daddr %(v6)s tcp dport %(p6)d counter
  }
  chain in { type filter hook input priority 0; policy accept;
    ip saddr %(v4)s tcp sport %(p4)d counter
    ip6 saddr %(v6)s tcp sport %(p6)d counter
  }
}
"""

# Short connections: connect, read the greeting to EOF (the server closes), close.
CLIENT = """
import socket, sys
n = int(sys.argv[1])
for host, port in ((sys.argv[2], int(sys.argv[3])), (sys.argv[4], int(sys.argv[5]))):
    for _ in range(n):
        c = socket.create_connection((host, port), timeout=5)
        while c.recv(100):
            pass
        c.close()
print("done")
"""


def nft_counts(ns: str) -> dict[str, tuple[int, int]]:
    """{"out4", "out6", "in4", "in6"}: (packets, bytes) of the client's counters."""
    rules = [
        o["rule"]
        for o in json.loads(in_ns(ns, "nft", "-j", "list", "table", "inet", "cnt").stdout)[
            "nftables"
        ]
        if "rule" in o
    ]
    out = {}
    for r in rules:
        fam = "4" if r["expr"][0]["match"]["left"]["payload"]["protocol"] == "ip" else "6"
        c = r["expr"][-1]["counter"]
        out[r["chain"] + fam] = (c["packets"], c["bytes"])
    return out


def flow_counts(f: dict[str, Any]) -> tuple[int, ...]:
    return tuple(
        int(f.get(k, 0))
        for k in (
            "packets_in",
            "bytes_in",
            "packets_out",
            "bytes_out",
            "num_connections_started",
            "num_connections_completed",
        )
    )


def by_key(flows: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {
        (f["Key"]["reporter"], f["Key"]["action"], int(f["Key"]["dest_port"])): f for f in flows
    }


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} not exported"
    return float(m.group(1))


def test_exact_counts_of_short_v4_and_v6_connections_and_a_denied_v6_flow(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    need_root()
    workdir = tmp_path_factory.mktemp("flowcounts")
    port = free_port()
    env = {
        "FELIX_FLOWLOGSGOLDMANESERVER": f"127.0.0.1:{port}",
        "FELIX_FLOWLOGSFLUSHINTERVAL": "3",  # conntrack polls every 3 s too
    }
    with (
        cluster(workdir, **env) as c,
        goldmane(c.host, port, workdir / "goldmane.log"),
        workload(
            c.host, c.ds, "client", "10.65.0.1", labels={"app": "client"}, ip6="fd65::1"
        ) as client,
        workload(
            c.host, c.ds, "server", "10.65.0.2", labels={"app": "server"}, ip6="fd65::2"
        ) as server,
        dual_stack_servers(server.ns, WARM_PORT, V4_PORT, V6_PORT, DENIED_PORT),
    ):
        c.ds.apply({"kind": "IPPool", "metadata": {"name": "pool6"}, "spec": {"cidr": POOL6}})
        for w in (client, server):
            use_v6_gateway(c.host, w)
        for name in ("tcp_timeout_time_wait", "tcp_timeout_close"):
            in_ns(c.host, "sysctl", "-qw", f"net.netfilter.nf_conntrack_{name}=1")
        c.ds.apply(POLICY)
        eventually(lambda: tcp(client, server.ip6, DENIED_PORT), "timeout")
        eventually(lambda: tcp(client, server.ip, WARM_PORT), "ok")
        eventually(lambda: tcp(client, server.ip6, WARM_PORT), "ok")
        vals = {"v4": server.ip, "v6": server.ip6, "p4": V4_PORT, "p6": V6_PORT}
        in_ns(client.ns, "nft", "-f", "-", input=COUNTERS % vals)

        out = in_ns(
            client.ns,
            PY,
            "-c",
            CLIENT,
            str(CONNECTIONS),
            server.ip,
            str(V4_PORT),
            server.ip6,
            str(V6_PORT),
        ).stdout
        assert out.strip() == "done"

        def complete() -> dict[tuple[str, str, int], dict[str, Any]] | None:
            flows = by_key(listed(c.host, port))
            want = [(r, "Allow", p) for r in ("Src", "Dst") for p in (V4_PORT, V6_PORT)]
            if (
                all(
                    k in flows and flow_counts(flows[k])[4:] == (CONNECTIONS, CONNECTIONS)
                    for k in want
                )
                and ("Dst", "Deny", DENIED_PORT) in flows
            ):
                return flows
            return None

        try:
            eventually(lambda: complete() is not None, True, timeout=60, pause=1)
        except AssertionError:
            raise AssertionError(
                f"flows: {json.dumps(listed(c.host, port), indent=1)}\n{c.felix.log()}"
            ) from None
        flows = complete()
        assert flows is not None
        # Read only now: every connection's entry is gone, so its last packet has passed.
        wire = nft_counts(client.ns)
        for fam, p in (("4", V4_PORT), ("6", V6_PORT)):
            (op, ob), (ip_, ib) = wire["out" + fam], wire["in" + fam]
            assert op >= 4 * CONNECTIONS and ib > 0, wire  # real traffic, both ways
            # The destination reports the client's packets as in, the source as out.
            assert flow_counts(flows["Dst", "Allow", p]) == (
                op, ob, ip_, ib, CONNECTIONS, CONNECTIONS
            ), (fam, wire)  # fmt: skip
            assert flow_counts(flows["Src", "Allow", p]) == (
                ip_, ib, op, ob, CONNECTIONS, CONNECTIONS
            ), (fam, wire)  # fmt: skip
            hit = flows["Dst", "Allow", p]["Key"]["policies"]["enforced_policies"][-1]
            assert (hit["name"], hit["action"], int(hit.get("rule_index", 0))) == (
                "counts",
                "Allow",
                1,
            )
            assert flows["Dst", "Allow", p]["source_ips"] == [
                client.ip if fam == "4" else client.ip6
            ]

        # The denied IPv6 SYNs: counted from NFLOG, 80 bytes each (40 IPv6 + 40 TCP with
        # Linux's SYN options), with the deny rule's verdict.
        denied = flows["Dst", "Deny", DENIED_PORT]
        packets, nbytes = int(denied["packets_in"]), int(denied["bytes_in"])
        assert packets >= 1 and nbytes == 80 * packets, denied
        hit = denied["Key"]["policies"]["enforced_policies"][-1]
        assert (hit["kind"], hit["name"], hit["action"], int(hit["rule_index"])) == (
            "CalicoNetworkPolicy",
            "counts",
            "Deny",
            2,
        )
        assert denied["source_ips"] == [client.ip6]
        assert (denied["Key"]["source_name"], denied["Key"]["dest_name"]) == ("client", "server")

        # Felix's Prometheus endpoint: the collector's metrics under upstream's names.
        text = c.felix.metrics()
        assert metric(text, "felix_collector_lookupcache_endpoints") == 2
        assert metric(text, "felix_collector_lookups_cache_policies") == 1
        assert metric(text, "felix_collector_lookupcache_networksets") == 0
        assert metric(text, "felix_collector_conntrack_processing_latency_seconds_count") >= 1
        assert metric(text, "felix_collector_packet_info_processing_latency_seconds_count") >= 1
        # Every allowed connection has ended: none is left tracked once conntrack says so.
        eventually(lambda: metric(c.felix.metrics(), "felix_collector_epstats"), 0.0, timeout=30)
        assert 'felix_collector_allowed_flowlog_aggregator_store{action="deny"}' in text
