"""Policy rules count their packets and bytes in the kernel, per rule index, and a resync reads
the changing counter values back without seeing drift (nothing rewritten, counts kept)."""

from __future__ import annotations

import contextlib
import json
import socket

import pytest
from netns_support import NetnsWorker, in_ns, worker_netns

from calico.felix.messages import Policy, PolicyID, PortRange, Rule
from calico.felix.nftables.model import BaseChain, Chain, NftRule
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules import RenderConfig, RuleRenderer
from calico.policyeval.chains import rule_index

pytestmark = pytest.mark.root

PID = PolicyID("count-me", "GlobalNetworkPolicy", tier="default")
POLICY = Policy(
    outbound_rules=(
        Rule("deny", protocol="udp", dst_ports=(PortRange(9, 9),), rule_id="denyid"),
        Rule("allow", protocol="udp"),
    )
)
CHAIN = "filter-cali-po-gnp/count-me"
PAYLOAD = b"x" * 10  # 20 (IPv4) + 8 (UDP) + 10 = 38 bytes counted per datagram


def _send(port: int, count: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(count):
            with contextlib.suppress(OSError):  # the dropped datagrams fail with EPERM
                s.sendto(PAYLOAD, ("127.0.0.1", port))


def _counters(ns: str) -> dict[int, tuple[int, int]]:
    """rule index -> (packets, bytes) summed over the chain's counted nft rules."""
    out = json.loads(in_ns(ns, "nft", "-j", "list", "chain", "inet", "calico", CHAIN).stdout)
    found: dict[int, tuple[int, int]] = {}
    for obj in out["nftables"]:
        rule = obj.get("rule")
        if rule is None:
            continue
        index = rule_index(rule.get("comment"))
        for stmt in rule["expr"]:
            if "counter" in stmt and index is not None:
                p, b = found.get(index, (0, 0))
                found[index] = (p + stmt["counter"]["packets"], b + stmt["counter"]["bytes"])
    return found


def test_counters_per_rule_index_survive_a_resync() -> None:
    r = RuleRenderer(RenderConfig(ipv6_enabled=False))
    chains = r.policy_chains(PID, POLICY)
    out = Chain(
        "filter-OUTPUT",
        [NftRule([{"jump": {"target": CHAIN}}])],
        BaseChain("filter-OUTPUT", "filter", "output", 0),
    )
    with worker_netns(NetnsWorker, "calcnt", length=10) as ns:
        table: NftablesTable = ns.call(NftablesTable)
        for chain in [*chains, out]:
            table.set_chain(chain)
        ns.call(table.apply).raise_for_error()
        assert _counters(ns.name) == {0: (0, 0), 1: (0, 0)}
        ns.call(_send, 9, 3)
        ns.call(_send, 5353, 2)
        assert _counters(ns.name) == {0: (3, 3 * 38), 1: (2, 2 * 38)}
        # A resync reads counters that moved since the chain was written: no drift, no write.
        table.invalidate()
        result = ns.call(table.apply)
        assert result.ok and result.resynced and result.commands == 0, result
        assert _counters(ns.name) == {0: (3, 3 * 38), 1: (2, 2 * 38)}
        ns.call(_send, 9, 1)
        assert _counters(ns.name)[0] == (4, 4 * 38)
