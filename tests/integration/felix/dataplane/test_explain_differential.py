"""Differential test: ``calicoctl explain``'s verdict against real traffic through a real Felix.

Hypothesis draws small policy sets (tiers with Deny/Pass end-of-tier actions, Allow/Deny/Pass
rules, selectors, ports and named ports, nets, ICMP, staged policies) and a few probes between
three workloads in network namespaces (in two Kubernetes-style namespaces, so namespaced policy
and namespace selectors take part). Felix programs the policy; for each probe the verdict
``calicoctl explain -o json`` computes must be what a real TCP/UDP/ICMP probe observes. A
mismatch that persists past Felix's convergence time fails the example.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from click.testing import CliRunner
from felix_dp_fixtures import Cluster, cluster, need_root
from harness import (
    EXTERNAL_IP,
    HOST_UPLINK_IP,
    HOSTNAME,
    eventually,
    servers,
    tcp,
    udp,
    workload,
)
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from netns_support import in_ns, probe

from calico.cli.root import cli

pytestmark = pytest.mark.root

ICMP_PROBE = """
import os, socket, struct, sys, time
dst, timeout = sys.argv[1], float(sys.argv[2])
ident = int.from_bytes(os.urandom(2), "big")  # a fresh ICMP id: no conntrack entry to reuse
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(timeout)
hdr = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + b"probe!"
s.sendto(struct.pack("!BBHHH", 8, 0, csum(hdr), ident, 1) + b"probe!", (dst, 0))
end = time.time() + timeout
try:
    while time.time() < end:
        data, addr = s.recvfrom(2048)
        off = (data[0] & 0xf) * 4
        if addr[0] == dst and data[off] == 0 and data[off + 4:off + 6] == ident.to_bytes(2, "big"):
            print("ok"); break
    else:
        print("timeout")
except socket.timeout:
    print("timeout")
"""

NAMES = ("a", "b", "c")
PROBES = (("tcp", 8080), ("tcp", 9090), ("udp", 5353), ("icmp", None))
SELECTORS = ("app == 'a'", "app == 'b'", "app == 'c'", "all()", "app != 'a'", "has(app)")
NS_SELECTORS = ("projectcalico.org/name == 'ns1'", "projectcalico.org/name == 'ns2'", "all()")
KINDS = ["GlobalNetworkPolicy"] * 3 + ["NetworkPolicy"] * 2
KINDS += ["StagedGlobalNetworkPolicy", "StagedNetworkPolicy"]


@pytest.fixture(scope="module")
def diff_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    need_root()
    workdir = tmp_path_factory.mktemp("felix-explain")
    with cluster(workdir) as c:
        for ns in ("ns1", "ns2"):  # namespace labels as the k8s controller writes them (pcns.)
            labels = {"projectcalico.org/name": ns, "pcns.projectcalico.org/name": ns}
            c.ds.apply(
                {
                    "kind": "Profile",
                    "metadata": {"name": f"kns.{ns}"},
                    "spec": {
                        "ingress": [{"action": "Allow"}],
                        "egress": [{"action": "Allow"}],
                        "labelsToApply": labels,
                    },
                }
            )
        ports = [{"name": "http", "protocol": "TCP", "port": 8080}]
        with (
            workload(c.host, c.ds, "a", "10.65.0.1", labels={"app": "a"}) as wa,
            workload(c.host, c.ds, "b", "10.65.0.2", labels={"app": "b"}, ports=ports) as wb,
            workload(c.host, c.ds, "c", "10.65.1.3", namespace="ns2", labels={"app": "c"}) as wc,
            servers(wa, "tcp:8080", "tcp:9090", "udp:5353"),
            servers(wb, "tcp:8080", "tcp:9090", "udp:5353"),
            servers(wc, "tcp:8080", "tcp:9090", "udp:5353"),
        ):
            c.w.update(a=wa, b=wb, c=wc)
            yield c


# -- strategies -----------------------------------------------------------------------------------


@st.composite
def rules(draw: st.DrawFn) -> dict[str, Any]:
    rule: dict[str, Any] = {"action": draw(st.sampled_from(["Allow", "Deny", "Pass"]))}
    proto = draw(st.sampled_from([None, "TCP", "UDP", "ICMP"]))
    if proto:
        rule["protocol"] = proto
    peer = draw(st.sampled_from(["source", "destination"]))
    choice = draw(
        st.sampled_from(["none", "selector", "notSelector", "nets", "notNets", "namespaceSelector"])
    )
    if choice == "namespaceSelector":
        rule[peer] = {choice: draw(st.sampled_from(NS_SELECTORS))}
    elif choice in ("selector", "notSelector"):
        rule[peer] = {choice: draw(st.sampled_from(SELECTORS))}
    elif choice in ("nets", "notNets"):
        rule[peer] = {choice: [draw(st.sampled_from(["10.65.0.0/24", "10.65.1.3/32"]))]}
    if proto in ("TCP", "UDP") and draw(st.booleans()):
        field = draw(st.sampled_from(["ports", "notPorts"]))
        ports = draw(st.sampled_from([[8080], [9090], ["http"], ["8000:8999"], [5353]]))
        rule.setdefault("destination", {})[field] = ports
    if proto == "ICMP" and draw(st.booleans()):
        rule[draw(st.sampled_from(["icmp", "notICMP"]))] = {"type": draw(st.sampled_from([0, 8]))}
    return rule


@st.composite
def policy_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    with_tier = draw(st.booleans())
    if with_tier:
        action = draw(st.sampled_from(["Deny", "Pass"]))
        docs.append(
            {
                "kind": "Tier",
                "metadata": {"name": "t1"},
                "spec": {"order": 10, "defaultAction": action},
            }
        )
    for index in range(draw(st.integers(1, 3))):
        tier = draw(st.sampled_from(["default", "t1"])) if with_tier else "default"
        kind = draw(st.sampled_from(KINDS))
        types = draw(st.sampled_from([["Ingress"], ["Egress"], ["Ingress", "Egress"]]))
        spec: dict[str, Any] = {
            "tier": tier,
            "order": draw(st.sampled_from([1, 2, 3])),
            "selector": draw(st.sampled_from(SELECTORS)),
            "types": types,
        }
        for direction in ("ingress", "egress"):
            if direction.capitalize() in types:
                spec[direction] = draw(st.lists(rules(), max_size=2))
        name = f"p{index}" if tier == "default" else f"t1.p{index}"
        meta = {"name": name}
        if kind.endswith("NetworkPolicy") and "Global" not in kind:
            meta["namespace"] = "ns1"  # selects a and b (c lives in ns2)
        docs.append({"kind": kind, "metadata": meta, "spec": spec})
    return docs


probe_lists = st.lists(
    st.tuples(st.sampled_from(NAMES), st.sampled_from(NAMES), st.sampled_from(PROBES)).filter(
        lambda p: p[0] != p[1]
    ),
    min_size=3,
    max_size=5,
    unique=True,
)


# -- verdicts -------------------------------------------------------------------------------------


def explained(c: Cluster, src: str, dst: str, kind: str, port: int | None) -> str:
    w_src, w_dst = c.w[src], c.w[dst]
    args = ["ctl", "explain", "--from", f"{w_src.namespace}/{src}"]
    args += ["--to", f"{w_dst.namespace}/{dst}", "--protocol", kind.upper(), "-o", "json"]
    if port is not None:
        args += ["--port", str(port)]
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(c.workdir / "calico.db")}
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return "ok" if json.loads(result.stdout)["result"]["verdict"] == "Allow" else "timeout"


def observed(c: Cluster, src: str, dst: str, kind: str, port: int | None) -> str:
    w_src, ip = c.w[src], c.w[dst].ip
    if kind == "tcp":
        assert port is not None
        return tcp(w_src, ip, port, timeout=0.6)
    if kind == "udp":
        assert port is not None
        return udp(w_src, ip, port, timeout=0.6)
    return probe(w_src.ns, ICMP_PROBE, ip, 0.6)


def observe_all(c: Cluster, probes: list[tuple[str, str, tuple[str, int | None]]]) -> list[str]:
    with ThreadPoolExecutor(max_workers=len(probes)) as pool:
        return list(pool.map(lambda p: observed(c, p[0], p[1], *p[2]), probes))


@settings(
    max_examples=12,
    deadline=None,
    # no shrinking: each step re-programs Felix; the failure message carries the whole example
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(docs=policy_sets(), probes=probe_lists)
def test_explain_agrees_with_real_traffic(
    diff_cluster: Cluster, docs: list[dict[str, Any]], probes: list[Any]
) -> None:
    c = diff_cluster
    for doc in docs:
        c.ds.apply(doc)
    try:
        expected = [explained(c, s, d, *p) for s, d, p in probes]
        event(f"denied probes: {expected.count('timeout')} of {len(expected)}")
        deadline = time.monotonic() + 15
        got = observe_all(c, probes)
        while got != expected and time.monotonic() < deadline:
            time.sleep(0.3)
            got = observe_all(c, probes)
        if got == expected:  # converged: it must stay so (not a transient of the old policy)
            time.sleep(1.0)
            got = observe_all(c, probes)
        assert got == expected, {"docs": docs, "probes": probes, "explain": expected}
    finally:
        for doc in reversed(docs):
            c.ds.delete(doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace"))


# -- host endpoints -------------------------------------------------------------------------------


def _tcp_rule(action: str, *ports: int) -> dict[str, Any]:
    return {"action": action, "protocol": "TCP", "destination": {"ports": list(ports)}}


HEP_DOCS: list[dict[str, Any]] = [
    # The uplink's own endpoint, and an all-interfaces one holding the same address that would
    # allow everything: explain must pick the named one, as Felix does.
    {"kind": "HostEndpoint", "metadata": {"name": "uplink", "labels": {"role": "host"}},
     "spec": {"node": HOSTNAME, "interfaceName": "uplink0", "expectedIPs": [HOST_UPLINK_IP]}},
    {"kind": "HostEndpoint", "metadata": {"name": "auto", "labels": {"role": "auto"}},
     "spec": {"node": HOSTNAME, "interfaceName": "*", "expectedIPs": [HOST_UPLINK_IP]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "auto-allow"},
     "spec": {"selector": "role == 'auto'", "ingress": [{"action": "Allow"}],
              "egress": [{"action": "Allow"}]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "host-in"},
     "spec": {"selector": "role == 'host'", "types": ["Ingress"],
              "ingress": [{"action": "Allow", "protocol": "TCP",
                           "destination": {"ports": [8081, 8083]}}]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "host-out"},
     "spec": {"selector": "role == 'host'", "types": ["Egress"],
              "egress": [_tcp_rule("Allow", 8081, 6667)]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "auto-fwd-in"},
     "spec": {"selector": "role == 'auto'", "types": ["Ingress"], "applyOnForward": True,
              "ingress": [_tcp_rule("Deny", 6667), {"action": "Allow"}]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "untracked-8083"},
     "spec": {"selector": "role == 'host'", "types": ["Ingress"], "doNotTrack": True,
              "applyOnForward": True,
              "ingress": [_tcp_rule("Deny", 8083)]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "prednat-8084"},
     "spec": {"selector": "role == 'host'", "types": ["Ingress"], "preDNAT": True,
              "applyOnForward": True,
              "ingress": [_tcp_rule("Allow", 8084)]}},
    # Forwarded traffic through the uplink (applyOnForward: the cali-fhfw-/thfw- chains) and
    # into workloads (the `*` endpoint's cali-thfw- on their interfaces).
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "fwd-in"},
     "spec": {"selector": "role == 'host'", "types": ["Ingress"], "applyOnForward": True,
              "ingress": [_tcp_rule("Allow", 8080, 8086), _tcp_rule("Deny", 9090),
                          _tcp_rule("Pass", 8085)]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "fwd-out"},
     "spec": {"selector": "role == 'host'", "types": ["Egress"], "applyOnForward": True,
              "egress": [_tcp_rule("Allow", 8081, 6667)]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "auto-fwd-in"},
     "spec": {"selector": "role == 'auto'", "types": ["Ingress"], "applyOnForward": True,
              "ingress": [_tcp_rule("Deny", 6667), {"action": "Allow"}]}},
    {"kind": "GlobalNetworkPolicy", "metadata": {"name": "auto-fwd"},
     "spec": {"selector": "role == 'auto'", "types": ["Egress"], "applyOnForward": True,
              "egress": [_tcp_rule("Deny", 8086), {"action": "Allow"}]}},
    # Workload a denies all ingress: the host still reaches it (host -> own workload).
    {"kind": "NetworkPolicy", "metadata": {"name": "a-closed", "namespace": "ns1"},
     "spec": {"selector": "app == 'a'", "types": ["Ingress"], "ingress": [{"action": "Deny"}]}},
]  # fmt: skip

# (from, to, port): "host" = the host netns, "outside" = the netns behind the uplink.
HEP_PROBES = [
    ("outside", "host", 8081),  # normal allow
    ("outside", "host", 8082),  # normal: no rule -> end of tier deny
    ("outside", "host", 8083),  # normal allows, the untracked deny comes first
    ("outside", "host", 8084),  # pre-DNAT allow over the normal deny
    ("outside", "host", 6667),  # inbound failsafe over the normal deny
    ("outside", "host", 6668),  # failsafe + 1
    ("host", "outside", 8081),  # egress allow
    ("host", "outside", 8082),  # egress deny
    ("host", "outside", 6667),  # outbound failsafe
    ("host", "a", 8080),  # host -> own workload: not policed
    ("a", "host", 8081),  # workload -> own host: DefaultEndpointToHostAction (Drop)
    # forwarded in through the uplink, to a workload
    ("outside", "b", 8080),  # fwd-in allows, b's profile allows, auto-fwd allows
    ("outside", "b", 9090),  # fwd-in denies
    ("outside", "b", 8085),  # fwd-in passes: no later tier, the forward chain's final deny
    ("outside", "b", 8087),  # no rule: end-of-tier deny (host-in is not applyOnForward)
    ("outside", "b", 8084),  # pre-DNAT allow: the forward chain in is skipped
    ("outside", "b", 8083),  # the untracked deny
    ("outside", "b", 6667),  # failsafe skips raw and mangle only: fwd-in's end of tier
    ("outside", "b", 8086),  # fwd-in allows, `*`'s egress forward chain on cali-b denies
    ("outside", "a", 8080),  # fwd-in allows, a's own ingress policy denies
    # forwarded out of the uplink, from a workload
    ("a", "outside", 8081),  # fwd-out allows
    ("a", "outside", 8082),  # fwd-out: no rule, end-of-tier deny
    ("a", "outside", 6667),  # fwd-out allows, but `*`'s ingress forward chain on cali-a denies
    # an address only the host's Node resource lists: the uplink endpoint polices it
    ("outside", "node-addr", 8081),  # host-in allows
    ("outside", "node-addr", 8082),  # end-of-tier deny
    ("a", "node-addr", 8081),  # workload -> own host: DefaultEndpointToHostAction (Drop)
]
FORWARDED_EXPECTED = ["ok", "timeout", "timeout", "timeout", "ok", "timeout", "timeout",
                      "timeout", "timeout", "ok", "timeout", "timeout",
                      "ok", "timeout", "timeout"]  # fmt: skip
NODE_ADDR = "10.66.0.1"  # on the host's lo; listed only by its Node resource
NODE_DOC = {"kind": "Node", "metadata": {"name": HOSTNAME},
            "spec": {"addresses": [{"address": NODE_ADDR, "type": "InternalIP"}]}}  # fmt: skip
B_PORTS = ("tcp:8083", "tcp:8084", "tcp:8085", "tcp:8086", "tcp:8087", "tcp:6667")
HOST_PORTS = ("tcp:8081", "tcp:8082", "tcp:8083", "tcp:8084", "tcp:6667", "tcp:6668")


def _spec(c: Cluster, who: str) -> tuple[str, str]:
    """(explain's argument, the probe's netns or address) for a probe end."""
    if who == "host":
        return HOST_UPLINK_IP, c.host
    if who == "outside":
        return EXTERNAL_IP, c.outside
    if who == "node-addr":
        return NODE_ADDR, c.host
    return f"{c.w[who].namespace}/{who}", c.w[who].ns


def explained_hep(c: Cluster, src: str, dst: str, port: int) -> str:
    args = ["ctl", "explain", "--from", _spec(c, src)[0], "--to", _spec(c, dst)[0]]
    args += ["--port", str(port), "-o", "json"]
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(c.workdir / "calico.db")}
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return "ok" if json.loads(result.stdout)["result"]["verdict"] == "Allow" else "timeout"


def observed_hep(c: Cluster, src: str, dst: str, port: int) -> str:
    named = {"host": HOST_UPLINK_IP, "outside": EXTERNAL_IP, "node-addr": NODE_ADDR}
    dst_ip = named.get(dst) or c.w[dst].ip
    return tcp(_spec(c, src)[1], dst_ip, port, timeout=0.6)


def observe_hep_all(c: Cluster) -> list[str]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda p: observed_hep(c, *p), HEP_PROBES))


def test_explain_agrees_with_host_endpoint_traffic(diff_cluster: Cluster) -> None:
    """Failsafe ports, untracked before pre-DNAT before normal policy, a named endpoint over
    the ``*`` one, the host <-> own workload exceptions, and traffic forwarded through the
    uplink to and from workloads (applyOnForward allow / deny / pass / no match against the
    workload's own policy, pre-DNAT and untracked before the forward chain, failsafe ports
    not covering it, the ``*`` endpoint's forward chains on workload interfaces), and an
    address only the host's Node resource lists: explain's
    verdicts are the kernel's. Felix's convergence is waited for (every probe as explained,
    then still so)."""
    c = diff_cluster
    route = ["ip", "route", "add", "10.65.0.0/16", "via", HOST_UPLINK_IP]
    with (
        servers(c.host, *HOST_PORTS),
        servers(c.outside, "tcp:8081", "tcp:8082", "tcp:6667"),
        servers(c.w["b"], *B_PORTS),
    ):
        assert eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8082), "ok")
        in_ns(c.outside, *route)  # the outside reaches the pool through the host
        in_ns(c.outside, "ip", "route", "add", f"{NODE_ADDR}/32", "via", HOST_UPLINK_IP)
        in_ns(c.host, "ip", "addr", "add", f"{NODE_ADDR}/32", "dev", "lo")
        for doc in [*HEP_DOCS, NODE_DOC]:
            c.ds.apply(doc)
        try:
            expected = [explained_hep(c, *p) for p in HEP_PROBES]
            assert expected == [
                "ok", "timeout", "timeout", "ok", "ok", "timeout",
                "ok", "timeout", "ok", "ok", "timeout", *FORWARDED_EXPECTED,
            ]  # fmt: skip
            probe_all = lambda: observe_hep_all(c)  # noqa: E731
            deadline = time.monotonic() + 30
            got = probe_all()
            while got != expected and time.monotonic() < deadline:
                time.sleep(0.3)
                got = probe_all()
            if got == expected:  # converged: it must stay so
                time.sleep(1.0)
                got = probe_all()
            assert got == expected, list(zip(HEP_PROBES, got, expected, strict=True))
        finally:
            in_ns(c.outside, "ip", "route", "del", "10.65.0.0/16", check=False)
            in_ns(c.outside, "ip", "route", "del", f"{NODE_ADDR}/32", check=False)
            in_ns(c.host, "ip", "addr", "del", f"{NODE_ADDR}/32", "dev", "lo", check=False)
            for doc in reversed([*HEP_DOCS, NODE_DOC]):
                meta = doc["metadata"]
                c.ds.delete(doc["kind"], meta["name"], meta.get("namespace"))
            # The next example starts from an unpoliced host again.
            assert eventually(lambda: tcp(c.outside, HOST_UPLINK_IP, 8082), "ok")
