"""calicoctl's ``ipam`` commands, driven through a tiny wrapper group that supplies the client."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.testing import CliRunner

from calico.api.cluster import ClusterInformation
from calico.api.endpoints import WorkloadEndpoint
from calico.api.ipam import IPPool, IPPoolSpec, IPReservation, IPReservationSpec
from calico.calicoctl.ipam import ipam_group
from calico.datastore.client import Client
from calico.ipam import IPAMClient


class Ctx:
    def __init__(self, client: Client) -> None:
        self._client = client
        self.version = "v3.31.0"

    def client(self) -> Client:
        return self._client


def run(client: Client, *args: str):
    @click.group("ipam", commands=ipam_group.commands)
    @click.pass_context
    def ipam(ctx: click.Context) -> None:
        ctx.obj = Ctx(client)

    root = click.Group(commands=[ipam])
    return CliRunner().invoke(root, ["ipam", *args], catch_exceptions=False)


def setup(client: Client) -> IPAMClient:
    pool = IPPool(spec=IPPoolSpec(cidr="10.0.0.0/24"))
    pool.metadata.name = "default-ipv4-ippool"
    client.create(pool)
    res = IPReservation(spec=IPReservationSpec(reservedCIDRs=["10.0.0.250/31"]))
    res.metadata.name = "r"
    client.create(res)
    return IPAMClient(client)


def test_show_usage_table(local_client: Client) -> None:
    ipam = setup(local_client)
    ipam.auto_assign(5, 0, "h", {"node": "n1", "pod": "p", "namespace": "ns"}, "n1")
    result = run(local_client, "show", "--show-blocks")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == (
        "| GROUPING | CIDR        | IPS TOTAL | IPS IN USE | IPS RESERVED | IPS FREE  |"
    )
    assert lines[3] == (
        "| IP Pool  | 10.0.0.0/24 |       256 |     5 (2%) |       2 (1%) | 249 (97%) |"
    )
    assert lines[4].startswith("| Block    | 10.0.0.")
    assert lines[0] == lines[2] == lines[-1]
    assert lines[0].startswith("+----------+---")
    plain = run(local_client, "show")
    assert len(plain.output.splitlines()) == 5  # no block rows without --show-blocks


def test_show_ip(local_client: Client) -> None:
    ipam = setup(local_client)
    (ip,), _ = ipam.auto_assign(1, 0, "k8s-pod-network.abc", {"pod": "p", "namespace": "ns"}, "n")
    out = run(local_client, "show", "--ip", str(ip.ip)).output
    assert out == (
        f"IP {ip.ip} is in use\nHandle ID: k8s-pod-network.abc\nActive Owner Attributes:\n"
        "  namespace: ns\n  pod: p\n"
    )
    assert run(local_client, "show", "--ip", "10.0.0.99").output == "10.0.0.99 is not assigned\n"


def test_show_borrowed_and_configuration(local_client: Client) -> None:
    ipam = setup(local_client)
    ipam.claim_affinity("10.0.0.0/26", "owner")
    ipam.assign_ip("10.0.0.3", "h", {"node": "thief", "pod": "p", "namespace": "ns"}, "thief")
    out = run(local_client, "show", "--show-borrowed").output.splitlines()
    assert out[1].split("|")[1:-1] == [
        " IP       ",
        " BORROWING-NODE ",
        " BLOCK       ",
        " BLOCK OWNER ",
        " TYPE ",
        " ALLOCATED-TO ",
    ]
    assert [c.strip() for c in out[3].split("|")[1:-1]] == [
        "10.0.0.3",
        "thief",
        "10.0.0.0/26",
        "owner",
        "pod",
        "ns/p",
    ]
    cfg = run(local_client, "show", "--show-configuration").output
    assert "| StrictAffinity " in cfg and "| false " in cfg


def test_configure(local_client: Client) -> None:
    setup(local_client)
    r = run(local_client, "configure", "--strictaffinity=true", "--max-blocks-per-host", "3")
    assert r.exit_code == 0
    assert r.output == (
        "Successfully set StrictAffinity to: true\nSuccessfully set MaxBlocksPerHost to: 3\n"
    )
    cfg = IPAMClient(local_client).get_ipam_config()
    assert cfg.strict_affinity and cfg.max_blocks_per_host == 3
    bad = run(local_client, "configure", "--strictaffinity=maybe")
    assert bad.exit_code == 1 and "invalid value. Use true or false" in bad.output
    none = run(local_client, "configure")
    assert none.exit_code == 1 and "at least one configuration option" in none.output
    rule = run(local_client, "configure", "--strictaffinity=false")
    assert rule.exit_code == 1 and "maxBlocksPerHost can only be set" in rule.output


def test_release_ip(local_client: Client) -> None:
    ipam = setup(local_client)
    (ip,), _ = ipam.auto_assign(1, 0, "h", None, "n")
    ok = run(local_client, "release", "--ip", str(ip.ip))
    assert ok.exit_code == 0 and ok.output == f"Successfully released IP address {ip.ip}\n"
    again = run(local_client, "release", "--ip", str(ip.ip))
    assert again.exit_code == 1 and f"IP address {ip.ip} is not assigned" in again.output


def test_check_and_release_from_report(local_client: Client, tmp_path: Path) -> None:
    ipam = setup(local_client)
    local_client.ensure_initialized("v3.31.0")
    (used,), _ = ipam.auto_assign(1, 0, "used", {"pod": "a", "namespace": "ns", "node": "n"}, "n")
    (leak,), _ = ipam.auto_assign(1, 0, "leak", {"pod": "b", "namespace": "ns", "node": "n"}, "n")
    ipam.store.create_handle("orphan", {})
    wep = WorkloadEndpoint.model_validate(
        {
            "metadata": {"name": "n-k8s-a-eth0", "namespace": "ns"},
            "spec": {
                "node": "n",
                "orchestrator": "k8s",
                "endpoint": "eth0",
                "pod": "a",
                "interfaceName": "cali1",
                "ipNetworks": [f"{used.ip}/32"],
            },
        }
    )
    local_client.create(wep)
    report = tmp_path / "report.json"
    out = run(local_client, "check", "--show-problem-ips", "-o", str(report)).output
    assert "Found 2 IPAM blocks." not in out and "Found 1 IPAM blocks." in out
    assert f"  {leak.ip} leaked; attrs Main:leak Extra:namespace=ns,node=n,pod=b" in out
    assert "Found 1 IPs that are allocated in IPAM but not actually in use." in out
    assert "Found 1 handles with no matching IPs (and 2 handles with matches)." in out
    assert "Check complete; found 2 problems." in out
    data = json.loads(report.read_text())
    assert data["allocations"][str(leak.ip)][0]["inUse"] is False
    assert data["allocations"][str(used.ip)][0]["owners"] == ["Workload(ns/n-k8s-a-eth0)"]
    assert [h["ID"] for h in data["leakedHandles"]] == ["orphan"]
    # Not locked: refused without --force.
    refused = run(local_client, "release", "--from-report", str(report))
    assert refused.exit_code == 1 and "data store is not locked" in refused.output
    # Lock the datastore and regenerate (the revision must be current), then release.
    cinfo = local_client.get(ClusterInformation, "default")
    spec = cinfo.spec.model_copy(update={"datastore_ready": False})
    local_client.update(cinfo.model_copy(update={"spec": spec}))
    run(local_client, "check", "-o", str(report))
    done = run(local_client, "release", "--from-report", str(report))
    assert done.exit_code == 0, done.output
    assert "Releasing 1 old IPs...\nReleased 1 IPs successfully\n" in done.output
    assert "Released 1 handles; 0 skipped; 0 errors." in done.output
    assert done.output.endswith("You may now unlock the data store.\n")
    assert ipam.ips_by_handle("used") == [str(used.ip)]
    assert ipam.store.get_handle("leak") is None and ipam.store.get_handle("orphan") is None
