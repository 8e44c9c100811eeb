"""``calicoctl explain --live`` on a node running a real Felix: the kernel's nftables trace of a
probe agrees with the computed verdict, and a datastore that Felix has not programmed (drift)
is flagged as a disagreement."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from felix_dp_fixtures import Cluster
from harness import EXTERNAL_IP, HOST_UPLINK_IP, HOSTNAME, eventually, in_ns, tcp

pytestmark = pytest.mark.root

CALICOCTL = str(Path(sys.executable).parent / "calicoctl")
DENY_9090 = {
    "kind": "GlobalNetworkPolicy",
    "metadata": {"name": "live-deny-9090"},
    "spec": {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [
            {"action": "Deny", "protocol": "TCP", "destination": {"ports": [9090]}},
            {"action": "Allow"},
        ],
    },
}


def explain_live(
    c: Cluster, db: Path, port: int, protocol: str = "TCP", output: str = "json",
    to: str = "ns1/server", frm: str = "ns1/client",
) -> tuple[int, Any, str]:  # fmt: skip
    env = {
        "DATASTORE_TYPE": "local",
        "CALICO_DATASTORE_PATH": str(db),
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    }
    args = ["explain", "--from", frm, "--to", to, "--port", str(port)]
    args += ["--protocol", protocol]
    proc = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            c.host,
            "env",
            *[f"{k}={v}" for k, v in env.items()],
            CALICOCTL,
            *args,
            "--live",
            "-o",
            output,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if output != "json":
        return proc.returncode, proc.stdout, proc.stderr
    report = json.loads(proc.stdout) if proc.returncode == 0 else {}
    return proc.returncode, report, proc.stderr


def test_live_trace_agrees_with_the_computed_chain(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server = c.w["client"], c.w["server"]
    c.ds.apply(DENY_9090)
    try:
        eventually(lambda: tcp(client, server.ip, 9090), "timeout")
        code, report, err = explain_live(c, c.workdir / "calico.db", 9090)
        assert code == 0, err
        live = report["live"]
        assert report["result"]["verdict"] == "Deny"
        assert live["verdict"] == "Deny" and live["agrees"] is True, live
        assert live["compared"] == "overall"
        # the kernel dropped in the policy's own chain, reached through the server's ingress chain
        assert "cali-pi-gnp/live-deny-9090" in live["rule"] and "(verdict drop)" in live["rule"]
        assert any(ch.endswith(f"cali-tw-{server.iface}") for ch in live["chains"]), live
        assert any(ch.endswith(f"cali-fw-{client.iface}") for ch in live["chains"]), live
        code, report, err = explain_live(c, c.workdir / "calico.db", 8080)
        assert code == 0, err
        assert report["live"]["verdict"] == "Allow" and report["live"]["agrees"] is True
        # our trace table is gone again; Felix's table is untouched
        tables = in_ns(c.host, "nft", "list", "tables").stdout
        assert "calico-explain" not in tables and "inet calico" in tables
    finally:
        c.ds.delete("GlobalNetworkPolicy", "live-deny-9090")


COUNT_UDP = {
    "kind": "GlobalNetworkPolicy",
    "metadata": {"name": "live-count-udp"},
    "spec": {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [
            {"action": "Allow", "protocol": "TCP"},
            {"action": "Deny", "protocol": "UDP", "destination": {"ports": [5354]}},
            {"action": "Allow"},
        ],
    },
}
PROBE_BYTES = 20 + 8 + len("calico-explain")  # the UDP probe's IPv4 packet, as nft counts it


def test_live_reports_per_rule_counters_of_the_endpoint_chains(policy_cluster: Cluster) -> None:
    c = policy_cluster
    client, server = c.w["client"], c.w["server"]
    pi_chain = "filter-cali-pi-gnp/live-count-udp"
    c.ds.apply(COUNT_UDP)
    try:
        tw_chain = f"filter-cali-tw-{server.iface}"
        listing = ("nft", "list", "chain", "inet", "calico", tw_chain)
        eventually(lambda: pi_chain in in_ns(c.host, *listing).stdout, True)  # programmed
        code, report, err = explain_live(c, c.workdir / "calico.db", 5354, "UDP")
        assert code == 0, err
        assert report["result"]["verdict"] == "Deny" and report["live"]["agrees"] is True
        ingress = report["live"]["counters"]["ingress"]
        assert ingress["chain"] == f"filter-cali-tw-{server.iface}"
        # The computed deciding step, with the counts of the nft rule it became.
        [step] = ingress["steps"]
        assert step["policy"] == "GlobalNetworkPolicy live-count-udp"
        assert step["ruleIndex"] == 1 and step["chain"] == pi_chain
        assert (step["probePackets"], step["probeBytes"]) == (1, PROBE_BYTES)
        assert step["packets"] >= 1
        # Every rule of the endpoint's chains is listed; only the deny saw the probe.
        [listed] = [ch for ch in ingress["chains"] if ch["chain"] == pi_chain]
        assert [r["ruleIndex"] for r in listed["rules"]] == [0, 1, 2]
        assert [r["probePackets"] for r in listed["rules"]] == [0, 1, 0]
        first = listed["rules"][1]["packets"]
        # Egress: the client's profile allowed it, and that rule counted the probe too.
        egress = report["live"]["counters"]["egress"]
        assert egress["chain"] == f"filter-cali-fw-{client.iface}"
        [out] = egress["steps"]
        assert out["policy"].startswith("Profile ") and out["chain"].startswith("filter-cali-pro-")
        assert out["probePackets"] >= 1
        # Counters are cumulative (Felix's resyncs never rewrite or reset them); text shows
        # them next to the computed chain.
        code, text, err = explain_live(c, c.workdir / "calico.db", 5354, "UDP", "text")
        assert code == 0, err
        line = next(ln for ln in text.splitlines() if "GlobalNetworkPolicy live-count-udp" in ln)
        assert line.endswith(
            f"[counters: {first + 1} packets, {(first + 1) * PROBE_BYTES} bytes"
            f" (probe +1 packets, +{PROBE_BYTES} bytes)]"
        ), text
        assert f"ingress counters (filter-cali-tw-{server.iface}):" in text
        assert f"    {pi_chain}:" in text
    finally:
        c.ds.delete("GlobalNetworkPolicy", "live-count-udp")


UPLINK_HEP = {
    "kind": "HostEndpoint",
    "metadata": {"name": "live-uplink", "labels": {"role": "live-up"}},
    "spec": {"node": HOSTNAME, "interfaceName": "uplink0", "expectedIPs": [HOST_UPLINK_IP]},
}
FWD_OUT = {
    "kind": "GlobalNetworkPolicy",
    "metadata": {"name": "live-fwd-out"},
    "spec": {
        "selector": "role == 'live-up'",
        "types": ["Egress"],
        "applyOnForward": True,
        "egress": [
            {"action": "Deny", "protocol": "UDP", "destination": {"ports": [5356]}},
            {"action": "Allow"},
        ],
    },
}


def test_live_counts_the_host_endpoint_forward_chain(policy_cluster: Cluster) -> None:
    """Workload -> outside leaves by the uplink's endpoint: its to-HEP forward chain
    (``cali-thfw-uplink0``) is read with the workload's own, and each computed step there
    carries the counts of the nft rule Felix made of it."""
    c = policy_cluster
    po_chain = "filter-cali-po-gnp/live-fwd-out"
    thfw = "filter-cali-thfw-uplink0"
    c.ds.apply(UPLINK_HEP)
    c.ds.apply(FWD_OUT)
    try:
        listing = ("nft", "list", "chain", "inet", "calico", thfw)
        eventually(lambda: po_chain in in_ns(c.host, *listing, check=False).stdout, True)
        code, report, err = explain_live(c, c.workdir / "calico.db", 5356, "UDP", to=EXTERNAL_IP)
        assert code == 0, err
        assert report["result"]["verdict"] == "Deny"
        assert report["result"]["hostEndpoint"] == "hostendpoint live-uplink"
        assert report["live"]["verdict"] == "Deny" and report["live"]["agrees"] is True
        assert report["live"]["rule"].startswith(f"calico {po_chain}:"), report["live"]
        egress = report["live"]["counters"]["egress"]
        client = c.w["client"]
        assert egress["endpointChains"] == [f"filter-cali-fw-{client.iface}", thfw]
        profile, fwd = egress["steps"]
        assert profile["chain"].startswith("filter-cali-pro-") and profile["probePackets"] >= 1
        assert (fwd["policy"], fwd["ruleIndex"], fwd["chain"]) == (
            "GlobalNetworkPolicy live-fwd-out",
            0,
            po_chain,
        )
        assert (fwd["probePackets"], fwd["probeBytes"]) == (1, PROBE_BYTES)
        [listed] = [ch for ch in egress["chains"] if ch["chain"] == po_chain]
        assert [r["probePackets"] for r in listed["rules"]] == [1, 0]
        # The allow rule the next port takes, in text.
        code, text, err = explain_live(
            c, c.workdir / "calico.db", 5357, "UDP", "text", to=EXTERNAL_IP
        )
        assert code == 0, err
        line = next(ln for ln in text.splitlines() if "[forward hostendpoint live-uplink]" in ln)
        assert "rule 1" in line and "(probe +1 packets" in line, text
        assert f"egress counters (filter-cali-fw-{client.iface}, {thfw}):" in text
    finally:
        c.ds.delete("GlobalNetworkPolicy", "live-fwd-out")
        c.ds.delete("HostEndpoint", "live-uplink")
        # The next test starts with an unpoliced uplink again.
        eventually(lambda: thfw in in_ns(c.host, "nft", "list", "ruleset").stdout, False)


HOST_OUT = {
    "kind": "GlobalNetworkPolicy",
    "metadata": {"name": "live-host-out"},
    "spec": {
        "selector": "role == 'live-up'",
        "types": ["Egress"],
        "egress": [
            {"action": "Deny", "protocol": "UDP", "destination": {"ports": [5358]}},
            {"action": "Allow"},
        ],
    },
}


def test_live_probes_from_a_host_endpoint_and_counts_its_chain(policy_cluster: Cluster) -> None:
    """A host endpoint source: the probe leaves the host itself (OUTPUT), bound to the
    endpoint's address; its ``cali-th-`` chain is read (no workload chain on that side)."""
    c = policy_cluster
    po_chain = "filter-cali-po-gnp/live-host-out"
    th = "filter-cali-th-uplink0"
    c.ds.apply(UPLINK_HEP)
    c.ds.apply(HOST_OUT)
    try:
        listing = ("nft", "list", "chain", "inet", "calico", th)
        eventually(lambda: po_chain in in_ns(c.host, *listing, check=False).stdout, True)
        db = c.workdir / "calico.db"
        verdicts = {}
        for port, index in ((5358, 0), (5359, 1)):
            code, report, err = explain_live(
                c, db, port, "UDP", to=EXTERNAL_IP, frm="hep/live-uplink"
            )
            assert code == 0, err
            live = report["live"]
            verdicts[port] = (report["result"]["verdict"], live["verdict"], live["agrees"])
            egress = live["counters"]["egress"]
            assert egress["chain"] is None and egress["endpointChains"] == [th]
            [step] = egress["steps"]
            assert (step["ruleIndex"], step["chain"]) == (index, po_chain)
            assert (step["probePackets"], step["probeBytes"]) == (1, PROBE_BYTES)
            assert "ingress" not in live["counters"]
        assert verdicts == {5358: ("Deny", "Deny", True), 5359: ("Allow", "Allow", True)}
    finally:
        c.ds.delete("GlobalNetworkPolicy", "live-host-out")
        c.ds.delete("HostEndpoint", "live-uplink")
        eventually(lambda: th in in_ns(c.host, "nft", "list", "ruleset").stdout, False)


def test_live_flags_drift_between_datastore_and_dataplane(
    policy_cluster: Cluster, tmp_path: Path
) -> None:
    c = policy_cluster
    eventually(lambda: tcp(c.w["client"], c.w["server"].ip, 9090), "ok")
    # A datastore Felix does not read: it holds a deny the dataplane never got.
    drifted = tmp_path / "drifted.db"
    for suffix in ("", "-wal", "-shm"):  # SQLite in WAL mode: the log holds recent writes
        src = c.workdir / f"calico.db{suffix}"
        if src.exists():
            shutil.copy(src, f"{drifted}{suffix}")
    from harness import Datastore

    other = Datastore(str(drifted))
    try:
        other.apply(DENY_9090)
    finally:
        other.close()
    code, report, err = explain_live(c, drifted, 9090)
    assert code == 0, err
    assert report["result"]["verdict"] == "Deny"
    assert report["live"]["verdict"] == "Allow"
    assert report["live"]["agrees"] is False


def test_live_needs_the_hosting_node(policy_cluster: Cluster) -> None:
    c = policy_cluster
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(c.workdir / "calico.db")}
    args = ["explain", "--from", "ns1/client", "--to", "ns1/server", "--port", "80", "--live"]
    # From the outside netns the workload's interface does not exist.
    proc = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            c.outside,
            "env",
            *[f"{k}={v}" for k, v in env.items()],
            CALICOCTL,
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("--live must run on the node hosting the source"), proc.stderr
