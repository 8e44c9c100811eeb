"""Felix end to end, beyond the basics: namespaceSelector and a namespaced policy's implicit
namespace, the Log action (kernel log), and dual-stack IPv6 traffic.

One Felix (module fixture) with three dual-stack workloads in two labelled namespaces: ``nsa``
(team=a: ``server``, ``clienta``) and ``nsb`` (team=b: ``clientb``, same ``app`` label as
``clienta``). Each test writes its resources and removes them again, back to the
profile-allows-everything baseline.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from felix_dp_fixtures import DATAPLANES, Cluster, cluster, need_root
from harness import CALICO, POOL6, eventually, in_ns, nft_table, tcp, workload
from harness_extra import (
    dmesg_lines,
    dual_stack_servers,
    icmp6,
    kernel_netns_logging,
    labelled_namespace_profile,
    use_v6_gateway,
)
from netns_support import trace_buffer, unique_name

# The same tests on both dataplanes (nftables chains, BPF programs): same answers.
pytestmark = [
    pytest.mark.root,
    pytest.mark.parametrize("ns_cluster", sorted(DATAPLANES), indirect=True, scope="module"),
]

PORT = 8080


@pytest.fixture(scope="module")
def ns_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    need_root()
    dataplane = getattr(request, "param", "nftables")
    if dataplane == "bpf" and not shutil.which("clang"):
        pytest.skip("BPF dataplane needs clang")
    workdir = tmp_path_factory.mktemp("felix-extra")
    env = dict(DATAPLANES[dataplane])
    if dataplane == "bpf":  # log rules' records (and drops) to the trace buffer
        env["FELIX_BPFLOGLEVEL"] = "Info"
    with cluster(workdir, **env) as c:
        c.ds.apply({"kind": "IPPool", "metadata": {"name": "pool6"}, "spec": {"cidr": POOL6}})
        labelled_namespace_profile(c.ds, "nsa", {"team": "a"})
        labelled_namespace_profile(c.ds, "nsb", {"team": "b"})
        app = {"app": "client"}
        with (
            workload(
                c.host, c.ds, "server", "10.65.0.2", namespace="nsa",
                labels={"app": "server"}, ip6="fd65::2",
            ) as srv,
            workload(
                c.host, c.ds, "clienta", "10.65.0.1", namespace="nsa", labels=app, ip6="fd65::1"
            ) as ca,
            workload(
                c.host, c.ds, "clientb", "10.65.1.3", namespace="nsb", labels=app, ip6="fd65::3"
            ) as cb,
            dual_stack_servers(srv.ns, PORT),
        ):  # fmt: skip
            for w in (srv, ca, cb):
                use_v6_gateway(c.host, w)
            c.w.update(server=srv, a=ca, b=cb)
            for client in (ca, cb):
                eventually(lambda cl=client: tcp(cl, srv.ip, PORT), "ok")
                eventually(lambda cl=client: tcp(cl, srv.ip6, PORT), "ok")
            if _bpf(c):  # BPF really is in charge (Felix did not fall back to nftables)
                assert "BPF dataplane enabled" in c.felix.log_path.read_text()
                for w in (srv, ca, cb):
                    tc = in_ns(c.host, "tc", "filter", "show", "dev", w.iface, "egress").stdout
                    assert "calico_to_wep" in tc
            yield c


def _bpf(c: Cluster) -> bool:
    return c.felix.env.get("FELIX_BPFENABLED") == "true"


def _bpf_flows(c: Cluster) -> set[tuple[str, str, str]]:
    """(proto, a, b) of the BPF conntrack entries, read by ``calico bpf conntrack dump``."""
    out = in_ns(c.host, CALICO, "bpf", "conntrack", "dump", "-o", "json").stdout
    return {
        (r["proto"], r["a"].rsplit(":", 1)[0], r["b"].rsplit(":", 1)[0]) for r in json.loads(out)
    }


def _baseline(c: Cluster) -> None:
    srv = c.w["server"]
    for client in (c.w["a"], c.w["b"]):
        eventually(lambda cl=client: tcp(cl, srv.ip, PORT), "ok")
        eventually(lambda cl=client: tcp(cl, srv.ip6, PORT), "ok")


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
        _baseline(c)


def np(name: str, spec: dict[str, Any], namespace: str = "nsa") -> dict[str, Any]:
    return {
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def gnp(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "GlobalNetworkPolicy", "metadata": {"name": name}, "spec": spec}


SERVER_INGRESS = {"selector": "app == 'server'", "types": ["Ingress"]}

# --- namespaces ---------------------------------------------------------------------------------


def test_global_namespace_selector_follows_namespace_labels(ns_cluster: Cluster) -> None:
    c = ns_cluster
    srv, a, b = c.w["server"], c.w["a"], c.w["b"]
    rule = {"action": "Allow", "source": {"namespaceSelector": "team == 'a'"}}
    with resources(c, gnp("team-a-only", {**SERVER_INGRESS, "ingress": [rule]})):
        eventually(lambda: tcp(b, srv.ip, PORT), "timeout")
        assert tcp(a, srv.ip, PORT) == "ok"
        try:
            # Relabelling the namespace (its profile) moves its endpoints into the IP set.
            labelled_namespace_profile(c.ds, "nsb", {"team": "a"})
            eventually(lambda: tcp(b, srv.ip, PORT), "ok")
        finally:
            labelled_namespace_profile(c.ds, "nsb", {"team": "b"})
        eventually(lambda: tcp(b, srv.ip, PORT), "timeout")
        assert tcp(a, srv.ip, PORT) == "ok"


def test_namespaced_policy_selectors_are_confined_to_its_namespace(ns_cluster: Cluster) -> None:
    c = ns_cluster
    srv, a, b = c.w["server"], c.w["a"], c.w["b"]
    # clienta and clientb carry the same labels; only the namespace tells them apart.
    same_ns = np("from-clients", {**SERVER_INGRESS, "ingress": [
        {"action": "Allow", "source": {"selector": "app == 'client'"}}
    ]})  # fmt: skip
    # A policy in nsb selecting app == 'server' must not apply to nsa's server.
    other_ns = np("nsb-deny", {**SERVER_INGRESS, "order": 1, "ingress": [{"action": "Deny"}]},
                  namespace="nsb")  # fmt: skip
    with resources(c, same_ns, other_ns):
        eventually(lambda: tcp(b, srv.ip, PORT), "timeout")
        assert tcp(a, srv.ip, PORT) == "ok"
    # An explicit namespaceSelector replaces the implicit own-namespace scope.
    cross = np("from-team-b", {**SERVER_INGRESS, "ingress": [{"action": "Allow", "source": {
        "selector": "app == 'client'", "namespaceSelector": "team == 'b'"}}]})  # fmt: skip
    with resources(c, cross):
        eventually(lambda: tcp(a, srv.ip, PORT), "timeout")
        assert tcp(b, srv.ip, PORT) == "ok"


# --- Log action ---------------------------------------------------------------------------------


def _log_prefixes(host: str) -> set[str]:
    """Prefixes of the ``log`` statements programmed in Felix's table."""
    return {
        stmt["log"].get("prefix", "")
        for obj in nft_table(host)
        if "rule" in obj
        for stmt in obj["rule"]["expr"]
        if "log" in stmt
    }


def test_log_action_logs_and_continues(ns_cluster: Cluster) -> None:
    """A Log rule logs and continues (the next rule decides). nftables: the kernel log line
    (documented fallback: when dmesg is unreadable only the programmed log statement and the
    verdicts are checked). BPF (BPFLogLevel=Info): the policy program's trace-buffer record,
    with the rule's prefix and ID (from the policy listing) and the packet's addresses; the
    policy name is unique so that another run's records cannot match."""
    c = ns_cluster
    bpf = _bpf(c)
    srv, a = c.w["server"], c.w["a"]
    name = unique_name("log-then-allow")
    rules = [
        {"action": "Log", "protocol": "TCP", "destination": {"ports": [PORT]}},
        {"action": "Allow", "source": {"selector": "app == 'client'"}},
    ]
    with contextlib.ExitStack() as stack:
        readable = stack.enter_context(kernel_netns_logging())
        trace = stack.enter_context(trace_buffer()) if bpf else None
        stack.enter_context(resources(c, np(name, {**SERVER_INGRESS, "ingress": rules})))
        eventually(lambda: "calico-packet: " in _log_prefixes(c.host), True)
        readable = readable and not bpf
        before = set(dmesg_lines()) if readable else set()
        eventually(lambda: tcp(c.w["b"], srv.ip, PORT), "timeout")  # Log did not allow
        assert tcp(a, srv.ip, PORT) == "ok"
        assert tcp(a, srv.ip6, PORT) == "ok"
        if readable:
            want = (f"SRC={a.ip} ", f"DST={srv.ip} ", f"DPT={PORT} ")

            def logged() -> bool:
                new = [ln for ln in dmesg_lines() if ln not in before and "calico-packet" in ln]
                return any(all(w in ln for w in want) for ln in new)

            eventually(logged, True, timeout=5)
        if trace is not None:
            rid = _listed_log_rule(c, srv.iface, name)
            rec = f"cali log calico-packet: rule {rid} "
            v6 = ipaddress.ip_address  # the record prints IPv6 uncompressed (%pI6)
            for dst, want_src, want_dst in (
                (srv.ip, f"src {a.ip}:", f"dst {srv.ip}:{PORT}"),
                (srv.ip6, f"src [{v6(a.ip6).exploded}]:", f"dst [{v6(srv.ip6).exploded}]:{PORT}"),
            ):

                def recorded(dst: str = dst, want: tuple[str, str] = (want_src, want_dst)) -> bool:
                    assert tcp(a, dst, PORT) == "ok"  # a new packet each poll
                    return any(rec in ln and all(w in ln for w in want)
                               for ln in trace().splitlines())  # fmt: skip

                eventually(recorded, True, timeout=20)


def _listed_log_rule(c: Cluster, iface: str, name: str) -> str:
    """The rule ID (hex, as the record prints it) of the log rule of policy ``name`` in the
    to-workload program's listing (BPFPolicyDebugDir)."""
    path = c.felix.workdir / "bpf-policy" / f"{iface}_egress_v4.json"

    def find() -> str:
        if not path.exists():
            return ""
        for r in json.loads(path.read_text())["rules"]:
            if name in r["owner"] and r["action"] == "log":
                return format(int(r["id"], 16), "x")
        return ""

    eventually(lambda: find() != "", True)
    return find()


# --- IPv6 ---------------------------------------------------------------------------------------


def test_ipv6_tcp_allow_by_selector_and_deny_by_empty_policy(ns_cluster: Cluster) -> None:
    c = ns_cluster
    srv, a, b = c.w["server"], c.w["a"], c.w["b"]
    allow = np("v6-from-clients", {**SERVER_INGRESS, "ingress": [
        {"action": "Allow", "protocol": "TCP", "source": {"selector": "app == 'client'"},
         "destination": {"ports": [PORT]}}
    ]})  # fmt: skip
    with resources(c, allow):
        eventually(lambda: tcp(b, srv.ip6, PORT), "timeout")
        assert tcp(a, srv.ip6, PORT) == "ok"
        assert icmp6(a, srv.ip6) == "timeout"
        if _bpf(c):  # the allowed IPv6 flow went through the BPF v6 conntrack
            flows = _bpf_flows(c)
            pair = {f"[{a.ip6}]", f"[{srv.ip6}]"}
            assert any(p == "tcp" and {x, y} == pair for p, x, y in flows), flows
    with resources(c, np("v6-deny", SERVER_INGRESS)):
        eventually(lambda: tcp(a, srv.ip6, PORT), "timeout")
        assert tcp(b, srv.ip6, PORT) == "timeout"
        assert tcp(a, srv.ip, PORT) == "timeout"
        # The policy is ingress-only: the server's own IPv6 traffic (ND, echo) still flows.
        assert icmp6(srv, a.ip6) == "ok"


def test_icmpv6_echo_allowed_by_icmpv6_rule(ns_cluster: Cluster) -> None:
    c = ns_cluster
    srv, a = c.w["server"], c.w["a"]
    assert icmp6(a, srv.ip6) == "ok"
    rule = {"action": "Allow", "protocol": "ICMPv6", "icmp": {"type": 128}}
    with resources(c, np("echo6-only", {**SERVER_INGRESS, "ingress": [rule]})):
        eventually(lambda: tcp(a, srv.ip6, PORT), "timeout")
        assert icmp6(a, srv.ip6) == "ok"
        assert tcp(a, srv.ip, PORT) == "timeout"
