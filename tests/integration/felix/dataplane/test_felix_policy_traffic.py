"""Felix end to end: policy written to the datastore -> real traffic allowed or denied.

One Felix (module fixture) with three workloads; each test writes its resources, waits until
traffic shows the expected verdicts, and deletes them again (so the next test starts from the
namespace-profile-only baseline).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from felix_dp_fixtures import DATAPLANES, Cluster
from harness import (
    EXTERNAL_IP,
    HOST_UPLINK_IP,
    HOSTNAME,
    POOL,
    eventually,
    icmp,
    in_ns,
    nft_table,
    seen_source,
    servers,
    tcp,
    udp,
    workload,
)

# The same matrix on both dataplanes (nftables chains, BPF programs): same answers.
pytestmark = [
    pytest.mark.root,
    pytest.mark.parametrize("policy_cluster", sorted(DATAPLANES), indirect=True, scope="module"),
]


@contextlib.contextmanager
def resources(c: Cluster, *docs: dict[str, Any]) -> Iterator[None]:
    for doc in docs:
        c.ds.apply(doc)
    try:
        yield
    finally:
        for doc in reversed(docs):
            meta = doc["metadata"]
            c.ds.delete(doc["kind"], meta["name"], meta.get("namespace"))
        # Back to the baseline before the next test.
        eventually(lambda: tcp(c.w["client"], c.w["server"].ip, 8080), "ok")


def np(name: str, spec: dict[str, Any], namespace: str = "ns1", kind: str = "NetworkPolicy"):
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def test_namespace_profile_allows_everything(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server, other = c.w["client"], c.w["server"], c.w["other"]
    assert eventually(lambda: tcp(client, server.ip, 8080), "ok") == "ok"
    assert tcp(other, server.ip, 9090) == "ok"
    assert udp(client, server.ip, 5353) == "ok"
    assert icmp(client, server.ip) == "ok"


def test_policy_without_rules_denies(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server = c.w["client"], c.w["server"]
    spec = {"selector": "app == 'server'", "types": ["Ingress"]}
    with resources(c, np("deny-all", spec)):
        eventually(lambda: tcp(client, server.ip, 8080), "timeout")
        assert tcp(c.w["other"], server.ip, 9090) == "timeout"
        # Egress from the server is not governed by an ingress-only policy: its profile allows.
        assert tcp(server, client.ip, 22, timeout=0.5) in ("error 111", "timeout")


def test_allow_from_selector(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server, other = c.w["client"], c.w["server"], c.w["other"]
    spec = {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [{"action": "Allow", "source": {"selector": "app == 'client'"}}],
    }
    with resources(c, np("from-client", spec)):
        eventually(lambda: tcp(other, server.ip, 8080), "timeout")
        assert tcp(client, server.ip, 8080) == "ok"


def test_allow_to_ports_and_named_ports(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server = c.w["client"], c.w["server"]
    spec = {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [
            {"action": "Allow", "protocol": "TCP", "destination": {"ports": [9090, "http"]}}
        ],
    }
    with resources(c, np("ports", spec)):
        eventually(lambda: udp(client, server.ip, 5353), "timeout")
        assert tcp(client, server.ip, 8080) == "ok"  # the named port "http"
        assert tcp(client, server.ip, 9090) == "ok"
    spec["ingress"] = [{"action": "Allow", "protocol": "TCP", "destination": {"ports": ["http"]}}]
    with resources(c, np("named-only", spec)):
        eventually(lambda: tcp(client, server.ip, 9090), "timeout")
        assert tcp(client, server.ip, 8080) == "ok"


def test_egress_deny(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server, other = c.w["client"], c.w["server"], c.w["other"]
    spec = {
        "selector": "app == 'client'",
        "types": ["Egress"],
        "egress": [
            {"action": "Deny", "destination": {"selector": "app == 'server'"}},
            {"action": "Allow"},
        ],
    }
    with resources(c, np("client-egress", spec)):
        eventually(lambda: tcp(client, server.ip, 8080), "timeout")
        assert icmp(client, other.ip) == "ok"
        assert tcp(other, server.ip, 8080) == "ok"


def test_tier_pass_and_tier_default_action(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server, other = c.w["client"], c.w["server"], c.w["other"]
    tier = {"kind": "Tier", "metadata": {"name": "security"}, "spec": {"order": 100}}
    gnp = {
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "security.pass-client"},
        "spec": {
            "tier": "security",
            "selector": "app == 'server'",
            "types": ["Ingress"],
            "ingress": [{"action": "Pass", "source": {"selector": "app == 'client'"}}],
        },
    }
    with resources(c, tier, gnp):
        # Client: passed to the next tier (none applies) -> namespace profile allows.
        # Other: no rule matched -> end of tier -> deny.
        eventually(lambda: tcp(other, server.ip, 8080), "timeout")
        assert tcp(client, server.ip, 8080) == "ok"
        # A tier whose default action is Pass lets unmatched traffic through to the profile.
        c.ds.apply({**tier, "spec": {"order": 100, "defaultAction": "Pass"}})
        eventually(lambda: tcp(other, server.ip, 8080), "ok")


def test_staged_policy_is_not_enforced(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server = c.w["client"], c.w["server"]
    spec = {"selector": "app == 'server'", "types": ["Ingress"]}
    with resources(c, np("staged-deny", spec, kind="StagedNetworkPolicy")):
        time.sleep(1.5)  # give Felix every chance to (wrongly) enforce it
        assert tcp(client, server.ip, 8080) == "ok"


def test_icmp_type_match(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server = c.w["client"], c.w["server"]
    spec = {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [{"action": "Allow", "protocol": "ICMP", "icmp": {"type": 8}}],
    }
    with resources(c, np("echo-only", spec)):
        eventually(lambda: tcp(client, server.ip, 8080), "timeout")
        assert icmp(client, server.ip, 8) == "ok"
        assert icmp(client, server.ip, 13) == "timeout"


def test_nets_and_not_nets(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server, other = c.w["client"], c.w["server"], c.w["other"]
    spec: dict[str, Any] = {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [{"action": "Allow", "source": {"nets": ["10.65.0.0/24"]}}],
    }
    with resources(c, np("nets", spec)):
        eventually(lambda: tcp(other, server.ip, 8080), "timeout")
        assert tcp(client, server.ip, 8080) == "ok"
    spec["ingress"] = [{"action": "Allow", "source": {"notNets": ["10.65.0.0/24"]}}]
    with resources(c, np("not-nets", spec)):
        eventually(lambda: tcp(client, server.ip, 8080), "timeout")
        assert tcp(other, server.ip, 8080) == "ok"


def test_endpoint_status_files(policy_cluster: Cluster) -> None:
    c = policy_cluster
    status_dir = c.workdir / "endpoint-status"
    for w in c.w.values():
        path = status_dir / f"k8s {w.namespace}%2F{w.name} eth0"
        eventually(path.exists, True)
        doc = json.loads(path.read_text())
        assert doc["ifaceName"] == w.iface
        assert doc["ipv4Nets"] == [f"{w.ip}/32"]


def test_health_and_metrics(policy_cluster: Cluster) -> None:
    c = policy_cluster
    code, body = c.felix.get("/readiness")
    assert code == 200
    for reporter in ("FelixStartup", "CalculationGraph", "InternalDataplaneMainLoop"):
        assert reporter in body
    assert c.felix.get("/liveness")[0] == 200
    metrics = c.felix.metrics()
    for name in (
        "felix_int_dataplane_apply_time_seconds",
        "felix_int_dataplane_messages",
        "felix_active_local_endpoints",
        "felix_active_local_policies",
        "felix_active_local_selectors",
        "felix_ipsets_calico",
        "felix_resyncs_started",
        "felix_cluster_num_hosts",
        "felix_cluster_num_workload_endpoints",
    ):
        assert f"\n{name}" in metrics, name
    assert "felix_active_local_endpoints 3.0" in metrics
    # Process status keys: the TTL'd one vanishes if Felix dies; the other stays.
    status = c.ds.backend.get(f"/calico/felix/v2/no-region/host/{HOSTNAME}/status")
    assert status.ttl is not None and json.loads(status.value)["uptime"] >= 0
    c.ds.backend.get(f"/calico/felix/v2/no-region/host/{HOSTNAME}/last_reported_status")
    assert "felix_cluster_num_workload_endpoints 3.0" in metrics


def test_nat_outgoing_masquerades_pool_traffic(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client = c.w["client"]
    pool = {"kind": "IPPool", "metadata": {"name": "pool1"}, "spec": {"cidr": POOL}}
    with servers(c.outside, "tcp:8081", "peer"):
        assert eventually(lambda: seen_source(client, EXTERNAL_IP, 8081), HOST_UPLINK_IP)
        try:
            c.ds.apply({**pool, "spec": {"cidr": POOL, "natOutgoing": False}})
            # Not masqueraded: the outside has no route back to the pool.
            eventually(lambda: seen_source(client, EXTERNAL_IP, 8081), "timeout")
        finally:
            c.ds.apply({**pool, "spec": {"cidr": POOL, "natOutgoing": True}})
        eventually(lambda: seen_source(client, EXTERNAL_IP, 8081), HOST_UPLINK_IP)


def test_endpoint_with_missing_profile_is_denied(policy_cluster: Cluster) -> None:
    c = policy_cluster
    with (
        workload(c.host, c.ds, "orphan", "10.65.2.4", namespace="ns3") as w,
        servers(w, "tcp:8080"),
    ):
        # Programmed (the route appears) but its profile kns.ns3 does not exist: deny.
        eventually(lambda: w.ip in in_ns(c.host, "ip", "route").stdout, True)
        time.sleep(0.5)
        assert tcp(c.w["client"], w.ip, 8080) == "timeout"
        assert tcp(c.w["client"], c.w["server"].ip, 8080) == "ok"  # apply did not fail


def test_host_endpoint_default_deny_failsafe_and_policy(policy_cluster: Cluster) -> None:
    c = policy_cluster
    hep = {
        "kind": "HostEndpoint",
        "metadata": {"name": "uplink", "labels": {"role": "uplink"}},
        "spec": {"node": HOSTNAME, "interfaceName": "uplink0", "expectedIPs": [HOST_UPLINK_IP]},
    }
    allow = {
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "uplink-web"},
        "spec": {
            "selector": "role == 'uplink'",
            "types": ["Ingress"],
            "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [8090]}}],
        },
    }
    with servers(c.host, "tcp:8090", "tcp:6667"), servers(c.outside, "tcp:8081", "peer"):
        assert eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")
        try:
            c.ds.apply(hep)
            # A host endpoint without policy or profile denies, except the failsafe ports.
            eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "timeout")
            assert tcp(c.outside, HOST_UPLINK_IP, 6667) == "ok"
            # Forwarded workload traffic is not policed by it (no applyOnForward policy).
            assert seen_source(c.w["client"], EXTERNAL_IP, 8081) == HOST_UPLINK_IP
            c.ds.apply(allow)
            eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")
            if c.felix.env.get("FELIX_BPFENABLED") == "true":
                # BPF polices the uplink (BPFDataIfacePattern): the HEP programs are on it and
                # its nftables chain carries no policy, only failsafes and the allow profile
                tc = in_ns(c.host, "tc", "filter", "show", "dev", "uplink0", "ingress").stdout
                assert "calico_from_hep" in tc
                ruleset = in_ns(c.host, "nft", "list", "table", "inet", "calico").stdout
                fh = ruleset.split("chain filter-cali-fh-uplink0", 1)[1].split("}", 1)[0]
                assert "cali-pi-" not in fh and "cali-pri-_bpf_policy" in fh
        finally:
            c.ds.delete("GlobalNetworkPolicy", "uplink-web")
            c.ds.delete("HostEndpoint", "uplink")
        eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")


def test_host_endpoint_by_expected_ip_follows_the_address(policy_cluster: Cluster) -> None:
    """A host endpoint without interfaceName applies to the interface holding one of its
    expected IPs, from when the address appears until it goes; on BPF the data interface's
    programs enforce it and nftables keeps only failsafes and the allow profile for it, while
    a non-data interface holding another of its IPs keeps the full nftables chains."""
    c = policy_cluster
    extra, dummy_ip = "192.0.2.2", "198.51.100.50"
    hep = {
        "kind": "HostEndpoint",
        "metadata": {"name": "by-ip", "labels": {"role": "by-ip"}},
        "spec": {"node": HOSTNAME, "expectedIPs": [extra, dummy_ip]},
    }
    allow = {
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "by-ip-web"},
        "spec": {
            "selector": "role == 'by-ip'",
            "types": ["Ingress"],
            "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [8091]}}],
        },
    }
    bpf = c.felix.env.get("FELIX_BPFENABLED") == "true"

    def fh_chain(iface: str) -> str:
        ruleset = in_ns(c.host, "nft", "list", "table", "inet", "calico").stdout
        if f"chain filter-cali-fh-{iface} " not in ruleset:
            return ""
        return ruleset.split(f"chain filter-cali-fh-{iface} ", 1)[1].split("}", 1)[0]

    def uplink_chain() -> str:
        return fh_chain("uplink0")

    with servers(c.host, "tcp:8090", "tcp:8091", "tcp:6667"):
        assert eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")
        in_ns(c.host, "ip", "link", "add", "hepdummy0", "type", "veth", "peer", "hepdummy1")
        try:
            in_ns(c.host, "ip", "addr", "add", f"{dummy_ip}/32", "dev", "hepdummy0")
            in_ns(c.host, "ip", "link", "set", "hepdummy0", "up")
            c.ds.apply(hep)
            c.ds.apply(allow)
            # The dummy (a veth, not a data interface) holds one expected IP: nftables polices it on
            # both dataplanes. Once that is in, uplink0 (no expected IP yet) is still open.
            eventually(lambda: "cali-pi-" in fh_chain("hepdummy0"), True)
            assert tcp(c.outside, HOST_UPLINK_IP, 8090) == "ok"
            assert uplink_chain() == ""
            in_ns(c.host, "ip", "addr", "add", f"{extra}/24", "dev", "uplink0")
            # Now uplink0 is the endpoint: default deny, failsafe and the allowed port pass.
            eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "timeout")
            assert tcp(c.outside, HOST_UPLINK_IP, 8091) == "ok"
            assert tcp(c.outside, HOST_UPLINK_IP, 6667) == "ok"
            fh = uplink_chain()
            if bpf:
                tc = in_ns(c.host, "tc", "filter", "show", "dev", "uplink0", "ingress").stdout
                assert "calico_from_hep" in tc
                assert "cali-pi-" not in fh and "cali-pri-_bpf_policy" in fh
            else:
                assert "cali-pi-" in fh
            # The address goes: so does the endpoint, on both sides.
            in_ns(c.host, "ip", "addr", "del", f"{extra}/24", "dev", "uplink0")
            eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")
            eventually(uplink_chain, "")
            assert "cali-pi-" in fh_chain("hepdummy0")
        finally:
            in_ns(c.host, "ip", "addr", "del", f"{extra}/24", "dev", "uplink0", check=False)
            in_ns(c.host, "ip", "link", "del", "hepdummy0", check=False)
            c.ds.delete("GlobalNetworkPolicy", "by-ip-web")
            c.ds.delete("HostEndpoint", "by-ip")
        eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")


def test_all_interfaces_host_endpoint(policy_cluster: Cluster) -> None:
    """A deny-all all-interfaces (``*``) host endpoint, the same answers on both dataplanes.

    It polices the host's own traffic on every interface no other endpoint claims: the uplink
    denies both ways except the failsafe ports (in and out). It never polices traffic between
    the host and its own workloads (upstream: BPF suppresses the endpoint's normal policy on
    workload programs; iptables skips it for traffic to local workloads and dispatches
    workload -> host traffic apart): the host reaches a workload even on a port the workload's
    own ingress policy denies. Forwarded traffic is untouched without applyOnForward policy
    (workload <-> workload, workload -> outside). A named endpoint on the uplink wins over it,
    and when that goes the ``*`` one applies again. Its applyOnForward egress policy polices
    workload traffic forwarded out of the uplink (not the host's own, to its workloads); its
    pre-DNAT allow admits what its normal policy denies. nftables renders its chains as
    ``cali-*-any-interface-at-all``; on BPF they are the data interface's programs and
    nftables renders none (design/felix-bpf.md "Host endpoints")."""
    c = policy_cluster
    bpf = c.felix.env.get("FELIX_BPFENABLED") == "true"
    client, server = c.w["client"], c.w["server"]
    hep = {
        "kind": "HostEndpoint",
        "metadata": {"name": "all-ifaces", "labels": {"role": "all"}},
        "spec": {"node": HOSTNAME, "interfaceName": "*"},
    }
    named = {
        "kind": "HostEndpoint",
        "metadata": {"name": "uplink-named", "labels": {"role": "named"}},
        "spec": {"node": HOSTNAME, "interfaceName": "uplink0"},
    }
    named_web = {
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "named-web"},
        "spec": {
            "selector": "role == 'named'",
            "types": ["Ingress"],
            "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [8090]}}],
        },
    }
    forward = {
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "all-fwd-no-8081"},
        "spec": {
            "selector": "role == 'all'",
            "types": ["Egress"],
            "applyOnForward": True,
            "egress": [
                {"action": "Deny", "protocol": "TCP", "destination": {"ports": [8081]}},
                {"action": "Allow"},
            ],
        },
    }
    pre_dnat = {
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "all-prednat-8090"},
        "spec": {
            "selector": "role == 'all'",
            "types": ["Ingress"],
            "preDNAT": True,
            "applyOnForward": True,
            "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [8090]}}],
        },
    }
    # Applied after the endpoint: once its effect shows, Felix has the endpoint too.
    marker = np("server-8080-only", {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [8080]}}],
    })  # fmt: skip

    def ruleset() -> str:
        return in_ns(c.host, "nft", "list", "table", "inet", "calico").stdout

    with (
        servers(c.host, "tcp:8090", "tcp:6667"),
        servers(c.outside, "tcp:8081", "tcp:6667", "peer"),
    ):
        assert eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")
        assert tcp(c.host, EXTERNAL_IP, 8081) == "ok"
        assert tcp(c.host, server.ip, 9090) == "ok"
        with resources(c, hep, marker):
            eventually(lambda: tcp(client, server.ip, 9090), "timeout")
            # The uplink: deny-all both ways but the failsafe ports.
            eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "timeout")
            assert tcp(c.outside, HOST_UPLINK_IP, 6667) == "ok"
            assert tcp(c.host, EXTERNAL_IP, 8081) == "timeout"
            assert tcp(c.host, EXTERNAL_IP, 6667) == "ok"
            # Host <-> own workloads, workload <-> workload, forwarded: not policed.
            assert tcp(c.host, server.ip, 9090) == "ok"
            assert tcp(c.host, server.ip, 8080) == "ok"
            assert tcp(client, server.ip, 8080) == "ok"
            assert seen_source(client, EXTERNAL_IP, 8081) == HOST_UPLINK_IP
            wild_chains = "chain filter-cali-fh-any-interface-at-all " in ruleset()
            assert wild_chains is not bpf
            # A named endpoint on the uplink wins; when it goes, `*` applies again.
            with resources(c, named, named_web):
                eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")
                assert tcp(c.outside, HOST_UPLINK_IP, 6667) == "ok"
                assert tcp(c.host, server.ip, 9090) == "ok"
            eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "timeout")
            assert tcp(c.host, EXTERNAL_IP, 8081) == "timeout"
            with resources(c, forward):
                eventually(lambda: seen_source(client, EXTERNAL_IP, 8081), "timeout")
                assert tcp(client, server.ip, 8080) == "ok"
                assert tcp(c.host, server.ip, 9090) == "ok"
                assert tcp(c.host, EXTERNAL_IP, 6667) == "ok"
            eventually(lambda: seen_source(client, EXTERNAL_IP, 8081), HOST_UPLINK_IP)
            with resources(c, pre_dnat):
                eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")
                assert tcp(c.outside, HOST_UPLINK_IP, 6667) == "ok"
                assert tcp(c.host, server.ip, 9090) == "ok"
            eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "timeout")
        eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8090), "ok")
        assert tcp(c.host, EXTERNAL_IP, 8081) == "ok"
        assert "any-interface-at-all" not in ruleset()


def _jumps(host: str) -> dict[str, list[str]]:
    """Chain -> the chains its rules jump to, from Felix's table in ``host``."""
    out: dict[str, list[str]] = {}
    for obj in nft_table(host):
        rule = obj.get("rule")
        if rule is not None:
            targets = [e["jump"]["target"] for e in rule["expr"] if "jump" in e]
            out.setdefault(rule["chain"], []).extend(targets)
        elif "chain" in obj:
            out.setdefault(obj["chain"]["name"], [])
    return out


def test_policy_groups_are_shared_split_and_removed(policy_cluster: Cluster) -> None:
    """Six same-selector policies over client and server: one shared group chain (nftables),
    the sixth policy's allow reached through it; a selector change in the middle splits the
    group with the verdicts unchanged; the group chains go with the policies."""
    c = policy_cluster
    client, server, other = c.w["client"], c.w["server"], c.w["other"]
    bpf = c.felix.env.get("FELIX_BPFENABLED") == "true"
    selector = "app in {'server', 'client'}"

    def grp(i: int, sel: str = selector) -> dict[str, Any]:
        rule: dict[str, Any] = {"action": "Allow", "protocol": "TCP"}
        if i < 6:
            rule["destination"] = {"ports": [1110 + i]}  # nothing listens: never decides
        else:
            rule |= {"source": {"selector": "app == 'client'"}, "destination": {"ports": [9090]}}
        return np(f"grp-{i}", {"selector": sel, "types": ["Ingress"], "ingress": [rule]})

    def groups_of(w: Any) -> list[str]:
        return [t for t in _jumps(c.host).get(f"filter-cali-tw-{w.iface}", []) if "-cali-g" in t]

    with resources(c, *(grp(i) for i in range(1, 7))):
        eventually(lambda: tcp(client, server.ip, 8080), "timeout")
        assert eventually(lambda: tcp(client, server.ip, 9090), "ok") == "ok"
        assert tcp(other, server.ip, 9090) == "timeout"
        if not bpf:
            eventually(lambda: len(groups_of(server)) == 1 and bool(groups_of(client)), True)
            (shared,) = groups_of(server)
            assert groups_of(client) == [shared] and shared.startswith("filter-cali-gi-")
            targets = _jumps(c.host)[shared]
            assert [t.rsplit("/", 1)[-1] for t in targets] == [f"grp-{i}" for i in range(1, 7)]
        c.ds.apply(grp(3, selector + " || app == 'nobody'"))
        if not bpf:
            # grp-1..2 and grp-4..6 stay grouped; grp-3 is jumped to on its own.
            eventually(lambda: len(groups_of(server)) == 2 and shared not in _jumps(c.host), True)
            direct = [t for t in _jumps(c.host)[f"filter-cali-tw-{server.iface}"] if "-pi-" in t]
            assert [t.rsplit("/", 1)[-1] for t in direct] == ["grp-3"]
        assert tcp(client, server.ip, 9090) == "ok"
        assert tcp(other, server.ip, 9090) == "timeout"
        assert tcp(client, server.ip, 8080) == "timeout"
    if not bpf:
        assert not [name for name in _jumps(c.host) if "-cali-g" in name]
