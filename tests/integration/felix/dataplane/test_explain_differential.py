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
from harness import servers, tcp, udp, workload
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from netns_support import probe

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
