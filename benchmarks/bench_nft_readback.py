"""Benchmark a table's readback: netlink dumps (``nlreadback.read_table``) against libnftables
(``list table`` JSON + ``parse_listing``, the same-run baseline), alternating on one table.

Runs itself in a private network namespace (root needed: ``unshare(CLONE_NEWNET)``, gone
with the process). Shapes: ``cold`` is the cold-start bench's (100 endpoints, 100 policies
with 10 per endpoint, one selector set and one named-port set per policy), ``scale`` adds
250,000 remote endpoints' addresses spread over the policies' selector sets (``--scale``).
Time is this thread's CPU (libnftables and the kernel's dump work run in it).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import emit

BENCH = "nft_readback"
CLONE_NEWNET = 0x40000000
TABLE = "calico"


def program(remote: int) -> object:
    from calico.felix.messages import (
        Policy,
        PolicyID,
        PortRange,
        Profile,
        Rule,
        TierInfo,
        WorkloadEndpoint,
    )
    from calico.felix.nftables.model import NftSet, ipset_name
    from calico.felix.nftables.table import NftablesTable
    from calico.felix.rules import RuleRenderer

    r = RuleRenderer()
    t = NftablesTable(TABLE)
    pids = [PolicyID(f"p{i}", "GlobalNetworkPolicy", tier="default") for i in range(100)]
    for i, pid in enumerate(pids):
        rules = (
            Rule(
                "allow",
                ip_version=4,
                protocol="tcp",
                src_ip_set_ids=(f"s{i}",),
                dst_ports=(PortRange(80, 80),),
            ),
            Rule("allow", ip_version=4, protocol="tcp", dst_named_port_ip_set_ids=(f"n{i}",)),
            Rule("deny", protocol="udp", not_dst_ports=(PortRange(53, 53),)),
        )
        for c in r.policy_chains(pid, Policy(inbound_rules=rules, outbound_rules=rules)):
            t.set_chain(c)
    for c in r.profile_chains("kns.a", Profile(inbound_rules=(Rule("allow"),))):
        t.set_chain(c)
    weps = {}
    for i in range(100):
        mine = tuple(pids[(i + k) % 100] for k in range(10))
        tiers = (TierInfo("default", mine, mine, "Deny"),)
        weps[f"cali{i:011d}"] = WorkloadEndpoint(
            "active", f"w{i}", profile_ids=("kns.a",), tiers=tiers
        )
    for iface, ep in weps.items():
        for c in r.workload_endpoint_chains(iface, ep):
            t.set_chain(c)
    for c in r.static_chains():
        t.set_chain(c)
    for s in r.static_sets():
        t.set_set(s)
    for m in r.dispatch_maps(weps, {}):
        t.set_map(m)
    per_set = max(remote // 100, 5)
    for i in range(100):
        base = (10 << 24) + i * 65536 * 4
        members = {socket.inet_ntoa((base + j).to_bytes(4, "big")) for j in range(per_set)}
        t.set_set(NftSet(ipset_name(f"s{i}", 4), "ipv4_addr", True, members))
        ports = {(m, 6, 8080) for m in list(members)[:5]}
        t.set_set(
            NftSet(
                ipset_name(f"n{i}", 4), ("ipv4_addr", "inet_proto", "inet_service"), False, ports
            )
        )
    result = t.apply()
    if not result.ok:
        raise SystemExit(f"programming the table failed: {result.error}")
    return t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--scale", type=int, default=0, help="remote endpoint addresses (250000)")
    args = ap.parse_args()
    if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) != 0:
        print(f"unshare: {os.strerror(ctypes.get_errno())} (needs root)", file=sys.stderr)
        return 1
    import nftables

    from calico.felix.nftables.netlink import NetlinkElements
    from calico.felix.nftables.nlreadback import read_table
    from calico.felix.nftables.readback import parse_listing

    program(args.scale)
    nft, conn = nftables.Nftables(), NetlinkElements()

    def via_libnftables() -> object:
        rc, out, err = nft.json_cmd(
            {"nftables": [{"list": {"table": {"family": "inet", "name": TABLE}}}]}
        )
        assert rc == 0, err
        return parse_listing(out, TABLE)

    def via_netlink() -> object:
        return read_table(conn, "inet", TABLE)

    a, b = via_netlink(), via_libnftables()
    if a != b:
        raise SystemExit("the two readbacks differ")
    shape = {
        "chains": len(a.chains),  # type: ignore[attr-defined]
        "rules": sum(len(c.hashes) for c in a.chains.values()),  # type: ignore[attr-defined]
        "sets": len(a.sets),  # type: ignore[attr-defined]
        "members": sum(len(s.elements) for s in a.sets.values()),  # type: ignore[attr-defined]
    }
    fast: list[float] = []
    base: list[float] = []
    for i in range(args.rounds):
        order = ((fast, via_netlink), (base, via_libnftables))
        for out, fn in order if i % 2 == 0 else order[::-1]:
            start = time.thread_time()
            fn()
            out.append(time.thread_time() - start)
    ratios = sorted(f / b for f, b in zip(fast, base, strict=True))
    emit(
        BENCH,
        "scale_readback_cpu_s" if args.scale else "cold_readback_cpu_s",
        statistics.median(fast),
        statistics.median(base),
        rounds=args.rounds,
        netlink_min_median_max=[
            round(min(fast), 4),
            round(statistics.median(fast), 4),
            round(max(fast), 4),
        ],
        libnftables_min_median_max=[
            round(min(base), 4),
            round(statistics.median(base), 4),
            round(max(base), 4),
        ],
        ratio_min_median_max=[
            round(ratios[0], 4),
            round(statistics.median(ratios), 4),
            round(ratios[-1], 4),
        ],
        loadavg=Path("/proc/loadavg").read_text().split()[:3],
        **shape,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
