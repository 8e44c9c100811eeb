"""Felix with ``BPFEnabled=true``: the BPF programs, not nftables chains, decide workload policy.

(The whole policy traffic matrix also runs in BPF mode: ``policy_cluster`` is parametrised.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from felix_dp_fixtures import cluster, need_root
from harness import (
    CALICO,
    HOST_UPLINK_IP,
    HOSTNAME,
    eventually,
    in_ns,
    servers,
    tcp,
    wep_doc,
    workload,
)

pytestmark = pytest.mark.root

SPOOFED_UDP = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
s.sendto(b"x", (sys.argv[2], 8080))
"""


def test_bpf_programs_enforce_and_nft_chains_only_allow(tmp_path: Path) -> None:
    need_root()
    if not shutil.which("clang"):
        pytest.skip("BPF dataplane needs clang")
    with (
        cluster(tmp_path, FELIX_BPFENABLED="true") as c,
        workload(c.host, c.ds, "cl", "10.65.0.11", labels={"app": "cl"}) as client,
        workload(c.host, c.ds, "sv", "10.65.0.12", labels={"app": "sv"}) as server,
        servers(server, "tcp:8080"),
    ):
        assert eventually(lambda: tcp(client, server.ip, 8080), "ok") == "ok"
        assert "BPF dataplane enabled" in c.felix.log_path.read_text()
        # Felix wrote each endpoint's address as its interface's route: from-WEP's
        # reverse-path check drops (and counts once) a datagram from any other source
        routes = json.loads(in_ns(c.host, CALICO, "bpf", "routes", "dump", "-o", "json").stdout)
        assert {(r["cidr"], r["iface"]) for r in routes} >= {
            (f"{client.ip}/32", client.iface),
            (f"{server.ip}/32", server.iface),
        }

        def rpf_drops() -> int:
            out = in_ns(c.host, CALICO, "bpf", "counters", "dump", "--iface", client.iface,
                        "-o", "json").stdout  # fmt: skip
            return int(json.loads(out)[client.iface]["ingress"]["dropped_rpf"])

        before = rpf_drops()
        in_ns(client.ns, "ip", "addr", "add", "10.65.0.99/32", "dev", "eth0")
        in_ns(client.ns, "python3", "-c", SPOOFED_UDP, "10.65.0.99", server.ip)
        assert eventually(rpf_drops, before + 1) == before + 1
        for w in (client, server):
            filters = in_ns(c.host, "tc", "filter", "show", "dev", w.iface, "ingress").stdout
            assert "calico_from_wep" in filters
            filters = in_ns(c.host, "tc", "filter", "show", "dev", w.iface, "egress").stdout
            assert "calico_to_wep" in filters
        c.ds.apply(
            {
                "kind": "NetworkPolicy",
                "metadata": {"name": "deny-sv", "namespace": "ns1"},
                "spec": {"selector": "app == 'sv'", "types": ["Ingress"]},
            }
        )
        assert eventually(lambda: tcp(client, server.ip, 8080), "timeout") == "timeout"
        # "calico bpf" finds this Felix's maps through its attached programs (its bpffs is
        # private to its "ip netns exec" mount namespace): the server's to-WEP hook counted
        # the earlier accepted connection(s) and the denied one(s)
        out = in_ns(c.host, CALICO, "bpf", "counters", "dump", "--iface", server.iface, "-o",
                    "json").stdout  # fmt: skip
        egress = json.loads(out)[server.iface]["egress"]
        assert egress["accepted_by_policy"] >= 1 and egress["dropped_by_policy"] >= 1
        rows = json.loads(in_ns(c.host, CALICO, "bpf", "ifstate", "dump", "-o", "json").stdout)
        assert {r["name"]: r["flags"] for r in rows} == {
            client.iface: ["workload", "ready"],
            server.iface: ["workload", "ready"],
        }
        # the nftables endpoint chains carry no policy: only the built-in allow profile
        ruleset = in_ns(c.host, "nft", "list", "table", "inet", "calico").stdout
        tw = ruleset.split(f"chain filter-cali-tw-{server.iface}", 1)[1].split("}", 1)[0]
        assert "cali-pi-" not in tw and "cali-pri-_bpf_policy" in tw
        # removing the policy re-opens traffic (program regenerated, not nftables)
        c.ds.delete("NetworkPolicy", "deny-sv", "ns1")
        assert eventually(lambda: tcp(client, server.ip, 8080), "ok") == "ok"
        # endpoint removed from the datastore: its interface's programs are detached
        c.ds.delete("WorkloadEndpoint", client.wep_name, "ns1")

        def attached() -> bool:
            out = in_ns(c.host, "tc", "filter", "show", "dev", client.iface, "ingress")
            return "calico_from_wep" in out.stdout

        assert eventually(attached, False) is False
        c.ds.apply(wep_doc(client, None))  # back, for the fixture's own clean-up
        assert eventually(attached, True) is True


def test_switching_bpf_off_detaches_programs(tmp_path: Path) -> None:
    """BPFEnabled true -> false (a restart): our programs leave the interfaces and nftables
    policy takes over again."""
    need_root()
    if not shutil.which("clang"):
        pytest.skip("BPF dataplane needs clang")
    with (
        cluster(tmp_path, FELIX_BPFENABLED="true") as c,
        workload(c.host, c.ds, "cl", "10.65.0.21", labels={"app": "cl"}) as client,
        workload(c.host, c.ds, "sv", "10.65.0.22", labels={"app": "sv"}) as server,
        servers(server, "tcp:8080"),
    ):
        assert eventually(lambda: tcp(client, server.ip, 8080), "ok") == "ok"

        def programs() -> str:
            return in_ns(c.host, "tc", "filter", "show", "dev", server.iface, "egress").stdout

        assert "calico_to_wep" in programs()
        c.felix.stop()
        c.felix.env["FELIX_BPFENABLED"] = "false"
        c.felix.start()
        c.felix.wait_ready()
        assert "calico_to_wep" not in programs()
        assert "detached BPF programs from" in c.felix.log_path.read_text()
        c.ds.apply(
            {
                "kind": "NetworkPolicy",
                "metadata": {"name": "deny-sv", "namespace": "ns1"},
                "spec": {"selector": "app == 'sv'", "types": ["Ingress"]},
            }
        )
        assert eventually(lambda: tcp(client, server.ip, 8080), "timeout") == "timeout"
        ruleset = in_ns(c.host, "nft", "list", "table", "inet", "calico").stdout
        tw = ruleset.split(f"chain filter-cali-tw-{server.iface}", 1)[1].split("}", 1)[0]
        assert "cali-pi-" in tw  # nftables enforces again
        c.ds.delete("NetworkPolicy", "deny-sv", "ns1")


def test_all_interfaces_host_endpoint_in_bpf(tmp_path: Path) -> None:
    """An ``interfaceName: "*"`` host endpoint is enforced by the HEP programs on the data
    interface (BPFDataIfacePattern), with the configured failsafe ports from the BPF failsafe
    map ahead of its deny-all, and nftables renders none of it (BPF's); removing it allows
    all again."""
    need_root()
    if not shutil.which("clang"):
        pytest.skip("BPF dataplane needs clang")
    env = {
        "FELIX_BPFENABLED": "true",
        "FELIX_BPFDATAIFACEPATTERN": "^uplink0$",
        "FELIX_FAILSAFEINBOUNDHOSTPORTS": "tcp:6667",
    }
    hep = {
        "kind": "HostEndpoint",
        "metadata": {"name": "all"},
        "spec": {"node": HOSTNAME, "interfaceName": "*"},
    }
    with cluster(tmp_path, **env) as c, servers(c.host, "tcp:8090", "tcp:6667", "tcp:22"):
        assert eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok") == "ok"
        assert "workload and host endpoint policy" in c.felix.log_path.read_text()
        filters = in_ns(c.host, "tc", "filter", "show", "dev", "uplink0", "ingress").stdout
        assert "calico_from_hep" in filters
        try:
            c.ds.apply(hep)
            assert eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "timeout") == "timeout"
            assert tcp(c.outside, HOST_UPLINK_IP, 6667) == "ok"  # the configured failsafe
            assert tcp(c.outside, HOST_UPLINK_IP, 22) == "timeout"  # not in this Felix's list
            rows = json.loads(in_ns(c.host, CALICO, "bpf", "ifstate", "dump", "-o", "json").stdout)
            assert {r["name"]: r["flags"] for r in rows}["uplink0"] == ["host", "ready"]
            out = in_ns(c.host, CALICO, "bpf", "counters", "dump", "--iface", "uplink0", "-o",
                        "json").stdout  # fmt: skip
            ingress = json.loads(out)["uplink0"]["ingress"]
            assert ingress["accepted_failsafe"] >= 1 and ingress["dropped_by_policy"] >= 1
            ruleset = in_ns(c.host, "nft", "list", "table", "inet", "calico").stdout
            assert "any-interface-at-all" not in ruleset
        finally:
            c.ds.delete("HostEndpoint", "all")
        assert eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok") == "ok"
