"""Felix flow collection end to end: real traffic -> NFLOG + conntrack -> a real Goldmane.

Two workloads in ns1 under a policy that allows TCP 8080 (rule 0) and denies TCP 9090 (rule 1);
Felix runs with ``FlowLogsGoldmaneServer`` pointing at ``calico component goldmane`` in the same
host namespace. The allowed and denied flows, with the policy name and rule index, must come
back from Goldmane's ``Flows.List`` and from ``calicoctl flows``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from felix_dp_fixtures import cluster, need_root
from flow_fixtures import goldmane, listed
from harness import CALICO, eventually, free_port, in_ns, servers, tcp, workload

pytestmark = pytest.mark.root

POLICY = {
    "kind": "NetworkPolicy",
    "metadata": {"name": "flows-policy", "namespace": "ns1"},
    "spec": {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [
            {"action": "Allow", "protocol": "TCP", "destination": {"ports": [8080]}},
            {"action": "Deny", "protocol": "TCP", "destination": {"ports": [9090]}},
        ],
    },
}

# Staged: would deny 8080. It must not change traffic, only the flows' pending trace.
STAGED = {
    "kind": "StagedNetworkPolicy",
    "metadata": {"name": "staged-deny", "namespace": "ns1"},
    "spec": {
        "order": 10,
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [{"action": "Deny", "protocol": "TCP", "destination": {"ports": [8080]}}],
    },
}


@contextlib.contextmanager
def follow(host: str, *args: str) -> Iterator[list[str]]:
    """``calicoctl flows --follow ARGS`` running in ``host``; yields its output lines so far."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", host, CALICO, "ctl", "flows", "--follow", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.start()
    try:
        yield lines
    finally:
        proc.terminate()
        proc.wait(10)
        reader.join(10)


def summary(flow: dict[str, Any]) -> tuple[Any, ...]:
    """(reporter, action, source, dest, port, terminal enforced hit) of a listed flow."""
    k = flow["Key"]
    hit = k["policies"]["enforced_policies"][-1]
    return (
        k["reporter"],
        k["action"],
        f"{k['source_namespace']}/{k['source_name']}",
        f"{k['dest_namespace']}/{k['dest_name']}",
        int(k["dest_port"]),
        (
            hit["kind"],
            hit.get("namespace", ""),
            hit["name"],
            hit["tier"],
            hit["action"],
            int(hit.get("rule_index", 0)),
        ),
    )


def pending(flow: dict[str, Any]) -> list[tuple[Any, ...]]:
    hits = flow["Key"]["policies"].get("pending_policies", [])
    return [(h["kind"], h["name"], h["action"], int(h.get("rule_index", 0))) for h in hits]


def test_allowed_and_denied_flows_reach_goldmane_and_calicoctl(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    need_root()
    workdir = tmp_path_factory.mktemp("flowlogs")
    port = free_port()  # ports are per netns: any number is free in the new host namespace
    env = {
        "FELIX_FLOWLOGSGOLDMANESERVER": f"127.0.0.1:{port}",
        "FELIX_FLOWLOGSFLUSHINTERVAL": "1",
    }
    with (
        cluster(workdir, **env) as c,
        goldmane(c.host, port, workdir / "goldmane.log"),
        workload(c.host, c.ds, "client", "10.65.0.1", labels={"app": "client"}) as client,
        workload(c.host, c.ds, "server", "10.65.0.2", labels={"app": "server"}) as server,
        servers(server, "tcp:8080", "tcp:9090"),
        # Nothing is denied yet: whatever this prints comes from Flows.Stream.
        follow(c.host, "--server", f"127.0.0.1:{port}", "--denied", "-o", "json") as followed,
    ):
        eventually(lambda: tcp(client, server.ip, 8080), "ok")
        ctl = [CALICO, "ctl", "flows", "--server", f"127.0.0.1:{port}"]
        c.ds.apply(STAGED)
        c.ds.apply(POLICY)
        eventually(lambda: tcp(client, server.ip, 9090), "timeout")
        assert tcp(client, server.ip, 8080) == "ok"

        allowed = (
            "Dst",
            "Allow",
            "ns1/client",
            "ns1/server",
            8080,
            ("CalicoNetworkPolicy", "ns1", "flows-policy", "default", "Allow", 0),
        )
        denied = (
            "Dst",
            "Deny",
            "ns1/client",
            "ns1/server",
            9090,
            ("CalicoNetworkPolicy", "ns1", "flows-policy", "default", "Deny", 1),
        )

        # Pending traces: the staged policy would have denied 8080; 9090 it does not match.
        want_pending = {
            "Allow": [("StagedNetworkPolicy", "staged-deny", "Deny", 0)],
            "Deny": [("CalicoNetworkPolicy", "flows-policy", "Deny", 1)],
        }

        def matching() -> dict[str, dict[str, Any]]:
            """The wanted flows by action, once Goldmane lists both with both traces (a flow
            from before the staged policy was programmed has another pending trace)."""
            out = {}
            for f in listed(c.host, port):
                if summary(f) in (allowed, denied) and pending(f) == want_pending[summary(f)[1]]:
                    out[f["Key"]["action"]] = f
            return out

        def seen() -> bool:
            if len(matching()) == 2:
                return True
            tcp(client, server.ip, 8080)  # more traffic, in case the first predates a policy
            tcp(client, server.ip, 9090, timeout=0.3)
            return False

        try:
            eventually(seen, True, timeout=60, pause=0.5)
        except AssertionError:
            raise AssertionError(
                f"flows: {json.dumps(listed(c.host, port), indent=1)}\n{c.felix.log()}"
            ) from None
        by_action = matching()
        # The allowed connection was counted from conntrack, both ways.
        assert int(by_action["Allow"].get("packets_in", 0)) >= 1
        assert int(by_action["Allow"].get("num_connections_started", 0)) >= 1
        # Denied packets are counted from NFLOG (they never get a conntrack entry).
        assert int(by_action["Deny"].get("packets_in", 0)) >= 1
        assert "packets_out" not in by_action["Deny"]
        # Labels come from the calc graph's endpoint feed; the source address and port from
        # the sampled 5-tuples (an extension: endpoint sources keep no address in the key).
        for f in by_action.values():
            assert "app=client" in f["source_labels"], f
            assert "app=server" in f["dest_labels"], f
            assert f["source_ips"] == ["10.65.0.1"], f
            assert all(1024 <= int(p) <= 65535 for p in f["source_ports"]), f
            assert "source_ip" not in f["Key"], f

        table = in_ns(c.host, *ctl).stdout
        assert "default|CalicoNetworkPolicy:ns1/flows-policy|allow|0" in table
        assert "default|CalicoNetworkPolicy:ns1/flows-policy|deny|1" in table
        assert "10.65.0.1" in table
        only_denied = in_ns(c.host, *ctl, "--denied").stdout
        assert "flows-policy|deny|1" in only_denied
        assert "|allow|" not in only_denied
        by_policy = in_ns(c.host, *ctl, "--policy", "ns1/flows-policy", "-o", "json").stdout
        rows = [json.loads(line) for line in by_policy.splitlines()]
        assert {r["Key"]["action"] for r in rows} == {"Allow", "Deny"}
        assert in_ns(c.host, *ctl, "--namespace", "nope").stdout.splitlines()[1:] == []

        def streamed_deny() -> bool:
            got = [json.loads(line) for line in list(followed) if line.startswith("{")]
            return any(summary(f) == denied for f in got)

        eventually(streamed_deny, True, timeout=45, pause=0.3)
        assert all(json.loads(line)["Key"]["action"] == "Deny" for line in list(followed))
        # Goldmane gone: calicoctl says so in one line and exits 1.
    gone = subprocess.run(
        [CALICO, "ctl", "flows", "--server", f"127.0.0.1:{free_port()}", "--timeout", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert gone.returncode == 1
    assert gone.stderr.startswith("Error: cannot reach Goldmane at 127.0.0.1:")
    assert "Traceback" not in gone.stderr
