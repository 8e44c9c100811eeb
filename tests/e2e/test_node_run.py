"""``calico node run|status|stop`` end to end: readiness, CNI workloads, policy, restart."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import time

import pytest
from node_harness import (
    PINGER,
    PY,
    Node,
    echo_server,
    in_ns,
    run,
    tcp_ok,
)

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

DENY_C = """apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: e2e-deny-client-c
spec:
  selector: projectcalico.org/namespace == 'srv'
  types: [Ingress]
  ingress:
    - action: Deny
      source:
        selector: role == 'c'
    - action: Allow
"""


def test_every_readiness_endpoint_reports_ready(running_node: Node) -> None:
    status = running_node.calico("node", "status")
    assert "Calico process is running." in status.stdout
    assert "felix          ready" in status.stdout
    for svc in ("felix", "node-services"):
        assert f"{svc:<14} run:" in status.stdout
    code = in_ns(
        running_node.host,
        PY,
        "-c",
        "import urllib.request as u; print(u.urlopen('http://localhost:9099/readiness').status)",
    )
    assert code.stdout.strip() == "200"
    logs = running_node.log_dir / "felix" / "current"
    assert logs.exists() and logs.stat().st_size > 0


def test_goldmane_and_whisker_run_under_runit_and_the_url_is_printed(running_node: Node) -> None:
    deadline = time.monotonic() + 30
    while "Whisker (flow logs): http://127.0.0.1:8081/" not in running_node.output():
        assert time.monotonic() < deadline, running_node.diagnostics()
        time.sleep(0.2)
    status = running_node.calico("node", "status").stdout
    for svc in ("goldmane", "whisker-backend"):
        assert f"{svc:<14} run:" in status, status
    # whisker-backend answers and reaches Goldmane (a Goldmane failure would be a 500).
    probe = (
        "import json, time, urllib.request as u\n"
        "for _ in range(150):\n"
        "    try:\n"
        "        r = u.urlopen('http://127.0.0.1:8081/flows?pageSize=1', timeout=2)\n"
        "        print(r.status, sorted(json.load(r)))\n"
        "        break\n"
        "    except OSError:\n"
        "        time.sleep(0.2)\n"
    )
    out = in_ns(running_node.host, PY, "-c", probe).stdout.strip()
    assert out == "200 ['items', 'total']", running_node.diagnostics()


def test_cni_workloads_get_pool_addresses_and_talk(running_node: Node) -> None:
    pools = json.loads(running_node.calicoctl("get", "ippools", "-o", "json").stdout)
    items = pools.get("items", [pools])
    cidrs = [ipaddress.ip_network(p["spec"]["cidr"]) for p in items]
    server = running_node.add_workload("talk", "server")
    client = running_node.add_workload("talk", "client")
    for w in (server, client):
        assert any(ipaddress.ip_address(w.ip) in c for c in cidrs), (w.ip, cidrs)
    with echo_server(server, 7001):
        deadline = time.monotonic() + 10
        while not tcp_ok(client, server, 7001) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert tcp_ok(client, server, 7001)
    status = running_node.calico("node", "status").stdout
    assert f"Workload endpoints on this node: {len(running_node.workloads)}" in status


def test_deny_policy_blocks_the_right_flow_within_1s(running_node: Node) -> None:
    srv = running_node.add_workload("srv", "web")
    b = running_node.add_workload("cli", "b")
    c = running_node.add_workload("cli", "c")
    wep_c = f"{running_node.name}-k8s-c-eth0"
    running_node.calicoctl("label", "workloadendpoint", wep_c, "role=c", "-n", "cli")
    with echo_server(srv, 7002):
        deadline = time.monotonic() + 10
        while not (tcp_ok(b, srv, 7002) and tcp_ok(c, srv, 7002)):
            assert time.monotonic() < deadline, "workloads never got connectivity"
            time.sleep(0.2)
        try:
            running_node.calicoctl("apply", "-f", "-", stdin=DENY_C)
            applied = time.monotonic()
            while tcp_ok(c, srv, 7002, timeout=0.2):
                assert time.monotonic() - applied < 1.0, "deny policy not in force within 1 s"
            assert time.monotonic() - applied < 1.0
            assert tcp_ok(b, srv, 7002)
            assert not tcp_ok(c, srv, 7002)
        finally:
            running_node.calicoctl("delete", "globalnetworkpolicy", "e2e-deny-client-c")


def test_stop_leaves_no_process_and_connections_survive_stop_and_restart(
    fresh_node: Node,
) -> None:
    node = fresh_node
    node.start()
    node.wait_ready()
    a = node.add_workload("keep", "a")
    b = node.add_workload("keep", "b")
    with echo_server(a, 7003):
        deadline = time.monotonic() + 10
        while not tcp_ok(b, a, 7003):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        pinger = run_pinger(b.netns, a.ip)
        try:
            expect_progress(pinger)
            out = node.stop()
            assert "Calico node stopped" in out.stdout
            assert node.marked_processes() == []
            assert not node.state_dir.joinpath("node.pid").exists()
            assert str(node.state_dir) not in run("ps", "-eo", "args").stdout
            expect_progress(pinger)  # the dataplane stayed programmed
            assert tcp_ok(b, a, 7003)  # new connections too
            node.start()
            node.wait_ready()
            expect_progress(pinger)
            assert tcp_ok(b, a, 7003)
        finally:
            pinger.kill()
            pinger.wait(timeout=10)
    node.stop()
    assert node.marked_processes() == []


def test_stop_cleanup_removes_processes_table_routes_and_files(fresh_node: Node) -> None:
    node = fresh_node
    node.start()
    node.wait_ready()
    node.add_workload("gone", "w")
    assert "cali" in in_ns(node.host, "ip", "route").stdout
    out = node.stop(cleanup=True)
    assert "Cleanup done." in out.stdout
    assert node.marked_processes() == []
    assert "calico" not in in_ns(node.host, "nft", "list", "tables").stdout
    assert "cali" not in in_ns(node.host, "ip", "route").stdout
    assert "cali" not in in_ns(node.host, "ip", "link").stdout
    assert list(node.cni_conf_dir.iterdir()) == []
    assert list(node.cni_bin_dir.iterdir()) == []
    again = node.calico("node", "status", check=False)
    assert again.returncode == 1 and "Calico process is not running." in again.stderr


def run_pinger(netns: str, ip: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ip", "netns", "exec", netns, PY, "-c", PINGER, ip, "7003"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def expect_progress(pinger: subprocess.Popen[str], rounds: int = 5) -> None:
    """The long-lived connection completes round trips *now* (older lines are skipped)."""
    assert pinger.stdout is not None
    now, fresh = time.time(), 0
    while fresh < rounds:
        line = pinger.stdout.readline().strip()
        assert line and not line.startswith("dead"), f"connection broke: {line!r}"
        if float(line.split()[1]) >= now:
            fresh += 1
