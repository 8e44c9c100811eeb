"""Benchmark NftablesTable: full program, no-op apply, small delta, resync, restart, and
element-only deltas (raw nfnetlink batch vs libnftables, alternating on the same table).

Runs itself inside a throwaway network namespace (root needed). Baselines are measured in the
same run with libnftables' text parser (``Nftables().cmd(text)``) on an equivalent ruleset in a
second table, so ratios compare our JSON path with the fastest plain-libnftables path.
Ruleset (as in the platform notes): 1,000 interval sets (5 addresses + one /24), a base chain
with 100 ``iifname`` jumps and 100 chains of 100 rules: 10,100 rules.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from calico.felix.nftables.model import Chain
    from calico.felix.nftables.table import NftablesTable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import emit

INNER = "CALICO_BENCH_NFT_INNER"
N_SETS, N_CHAINS, N_RULES = 1000, 100, 100
BENCH = "nftables"


def main() -> int:
    if os.environ.get(INNER) == "1":
        # ``--commit-only``: just the kernel commit figures (bench_commit_costs).
        if "--commit-only" in sys.argv[1:]:
            bench_commit_costs()
        else:
            run()
        return 0
    if os.geteuid() != 0:
        print("bench_nftables needs root (network namespaces)", file=sys.stderr)
        return 1
    ns = f"calbench-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        cmd = ["ip", "netns", "exec", ns, sys.executable, __file__, *sys.argv[1:]]
        return subprocess.run(cmd, env={**os.environ, INNER: "1"}, check=False).returncode
    finally:
        subprocess.run(["ip", "netns", "delete", ns], check=False)


# ---- ruleset ------------------------------------------------------------------------------------


def set_members(i: int) -> set[str]:
    a, b = divmod(i, 250)
    return {f"10.{a}.{b}.{k}" for k in range(1, 6)} | {f"172.{16 + a}.{b}.0/24"}


def rule_exprs(set_name: str, port: int) -> list[dict]:
    saddr = {"payload": {"protocol": "ip", "field": "saddr"}}
    dport = {"payload": {"protocol": "tcp", "field": "dport"}}
    return [
        {"match": {"op": "==", "left": saddr, "right": f"@{set_name}"}},
        {"match": {"op": "==", "left": dport, "right": port}},
        {"counter": None},
        {"accept": None},
    ]


def load_desired(table: NftablesTable, port_offset: int = 0) -> None:
    from calico.felix.nftables.model import BaseChain, Chain, NftRule, NftSet

    for i in range(N_SETS):
        table.set_set(NftSet(f"cali40s{i}", "ipv4_addr", True, set_members(i)))
    jumps = []
    for c in range(N_CHAINS):
        name = f"filter-cali-fw-cali{c}"
        rules = [
            NftRule(rule_exprs(f"cali40s{(c * N_RULES + r) % N_SETS}", 1000 + r + port_offset), "p")
            for r in range(N_RULES)
        ]
        table.set_chain(Chain(name, rules))
        iif = {"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": f"cali{c}"}}
        jumps.append(NftRule([iif, {"jump": {"target": name}}]))
    base = BaseChain("filter-FORWARD", "filter", "forward", 0)
    table.set_chain(Chain("filter-FORWARD", jumps, base))


def text_ruleset(table: str) -> str:
    out = [f"add table inet {table}"]
    for i in range(N_SETS):
        out.append(f"add set inet {table} cali40s{i} {{ type ipv4_addr; flags interval; }}")
        out.append(f"add element inet {table} cali40s{i} {{ {', '.join(sorted(set_members(i)))} }}")
    out.append(
        f"add chain inet {table} filter-FORWARD "
        "{ type filter hook forward priority 0; policy accept; }"
    )
    for c in range(N_CHAINS):
        out.append(f"add chain inet {table} filter-cali-fw-cali{c}")
    for c in range(N_CHAINS):
        out.append(text_chain_rules(table, c, 0))
        out.append(
            f'add rule inet {table} filter-FORWARD iifname "cali{c}" jump filter-cali-fw-cali{c}'
        )
    return "\n".join(out) + "\n"


def text_chain_rules(table: str, c: int, port_offset: int) -> str:
    return "\n".join(
        f"add rule inet {table} filter-cali-fw-cali{c}"
        f" ip saddr @cali40s{(c * N_RULES + r) % N_SETS} tcp dport {1000 + r + port_offset}"
        ' counter accept comment "cali:x; p"'
        for r in range(N_RULES)
    )


# ---- measurements -------------------------------------------------------------------------------


def run() -> None:
    import nftables

    from calico.felix.nftables.netlink import NetlinkElements
    from calico.felix.nftables.table import NftablesTable

    nft = nftables.Nftables()

    def text_cmd(text: str) -> float:
        start = time.perf_counter()
        rc, _, err = nft.cmd(text)
        assert rc == 0, err
        return time.perf_counter() - start

    # 1. Full program: render + one transaction, vs the same ruleset through the text parser.
    ours, theirs, applies = [], [], []
    for _ in range(3):
        nft.cmd("delete table inet calico")
        nft.cmd("delete table inet calibench")
        start = time.perf_counter()
        table = NftablesTable(nft=nftables.Nftables(), netlink=NetlinkElements())
        load_desired(table)
        applied_at = time.perf_counter()
        result = table.apply()
        assert result.ok, result.error
        ours.append(time.perf_counter() - start)
        applies.append(time.perf_counter() - applied_at)
        theirs.append(text_cmd(text_ruleset("calibench")))
    full = min(ours)
    emit(
        BENCH,
        "full_program_10k_rules_1k_sets_s",
        full,
        min(theirs),
        apply_only_s=round(min(applies), 4),
        commands=result.commands,
        rules=N_CHAINS * N_RULES + N_CHAINS,
        sets=N_SETS,
    )

    # 2. Steady state: nothing dirty, so no kernel round trip at all.
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        assert table.apply().kernel_calls == 0
    noop = (time.perf_counter() - start) / n
    roundtrip = min(
        text_cmd("add table inet calibench") for _ in range(20)
    )  # cheapest real kernel call
    emit(BENCH, "noop_apply_s", noop, roundtrip, note="baseline: one trivial libnftables call")

    # 3. Resync with no drift: read back, diff by hash comments, send nothing.
    resyncs, listings = [], []
    for _ in range(3):
        table.invalidate()
        start = time.perf_counter()
        result = table.apply()
        resyncs.append(time.perf_counter() - start)
        assert result.ok and result.resynced and result.commands == 0, result
        listings.append(text_cmd("list table inet calibench"))
    emit(
        BENCH,
        "resync_no_drift_s",
        min(resyncs),
        min(listings),
        note="baseline: text listing of the same table",
    )

    # 4. Restart: a new instance with the same desired state converges without rewriting.
    restarts = []
    for _ in range(3):
        start = time.perf_counter()
        fresh = NftablesTable(nft=nftables.Nftables())
        load_desired(fresh)
        result = fresh.apply()
        restarts.append(time.perf_counter() - start)
        assert result.ok and result.commands == 0, result
    emit(BENCH, "restart_converge_s", min(restarts), full, note="baseline: our full program")

    # 5. Small deltas in the loaded table: rewrite one 100-rule chain + a few set members.
    # Any element change makes libnftables 1.0.6 dump the members of every interval set in the
    # table into its cache first (~1 netlink dump per set), hence the separate chain-only figure.
    variants = (
        ("small_delta_chain_only_s", 0, False),
        ("small_delta_adds_s", 3, False),
        ("small_delta_add_remove_s", 3, True),
    )
    for variant, (label, n_members, with_removal) in enumerate(variants):
        ours, theirs = [], []
        for k in range(1, 11):
            port = k + 100 * variant
            members = [f"192.168.{port}.{j}" for j in range(1, n_members + 1)]
            table.set_chain(_one_chain(port))
            table.add_set_members("cali40s7", members)
            gone = [f"192.168.{port - 1}.1"] if with_removal and k > 1 else []
            table.remove_set_members("cali40s7", gone)
            start = time.perf_counter()
            result = table.apply()
            ours.append(time.perf_counter() - start)
            assert result.ok and result.stats.chains_written == ["filter-cali-fw-cali3"], result
            text = "flush chain inet calibench filter-cali-fw-cali3\n"
            text += text_chain_rules("calibench", 3, port)
            if members:
                text += f"\nadd element inet calibench cali40s7 {{ {', '.join(members)} }}\n"
            if gone:
                text += f"delete element inet calibench cali40s7 {{ {gone[0]} }}\n"
            theirs.append(text_cmd(text))
        emit(
            BENCH,
            label,
            statistics.median(ours),
            statistics.median(theirs),
            note=f"1 chain x 100 rules + {n_members} member adds"
            + (" + 1 interval-set removal" if with_removal else "")
            + "; table holds 10k rules, 1k interval sets",
        )
    # 6. Element-only deltas (a remote endpoint coming and going): our table sends them as one
    # raw nfnetlink batch; baseline: the same delta through libnftables (which first dumps the
    # members of all 1,000 interval sets), both against the same loaded table.
    bench_element_deltas(table)
    bench_mixed_deltas(table)
    nft.cmd("delete table inet calibench")
    bench_commit_costs()


# ---- the kernel's commit: jump validation and acks -----------------------------------------------

VAL_POLICIES, VAL_PER_ENDPOINT = 1000, 100


def validation_table(nft: object, name: str, endpoints: int) -> None:
    """A table shaped like Felix's at ``--large``: a hooked chain whose verdict map sends each
    interface to its endpoint chain, each endpoint chain jumping to 100 of 1,000 policy chains
    (a ``return`` after each jump, as the renderer does)."""
    lines = [
        f"add table inet {name}",
        f"add set inet {name} s {{ type ipv4_addr; flags interval; }}",
        f"add map inet {name} disp {{ type ifname : verdict; }}",
        f"add chain inet {name} hooked {{ type filter hook forward priority 0; policy accept; }}",
        f"add rule inet {name} hooked iifname vmap @disp",
        f"add chain inet {name} spare",
    ]
    for p in range(VAL_POLICIES):
        lines += [
            f"add chain inet {name} pol{p}",
            f"add rule inet {name} pol{p} ip saddr @s tcp dport 80 meta mark set 0x10000 return",
            f"add rule inet {name} pol{p} ip saddr 10.0.{p % 250}.0/24 accept",
        ]
    for e in range(endpoints):
        group = e % 10
        lines += [
            f"add chain inet {name} ep{e}",
            f"add rule inet {name} ep{e} ct state established accept",
        ]
        for k in range(VAL_PER_ENDPOINT):
            pol = (group * VAL_PER_ENDPOINT + k) % VAL_POLICIES
            lines += [
                f"add rule inet {name} ep{e} jump pol{pol}",
                f"add rule inet {name} ep{e} meta mark and 0x10000 == 0x10000 return",
            ]
        lines.append(f"add element inet {name} disp {{ cali{e} : jump ep{e} }}")
    rc, _, err = nft.cmd("\n".join(lines))  # type: ignore[attr-defined]
    assert rc == 0, err


def send_acking_each(sender: object, batch: object) -> str | None:
    """The previous protocol, for the baseline: every message asks for an ack and each is
    read (one datagram each)."""
    from calico import nlmsg
    from calico.felix.nftables import netlink

    data, seqs = batch.encode(1 << 20)  # type: ignore[attr-defined]
    msgs = nlmsg.split(data)
    out = b"".join(
        nlmsg.message(t, f | (nlmsg.NLM_F_ACK if i not in (0, len(msgs) - 1) else 0), q, b)
        for i, (t, f, q, b) in enumerate(msgs)
    )
    sock = sender._socket()  # type: ignore[attr-defined]
    sender._fit(sock, len(out), len(seqs))  # type: ignore[attr-defined]
    netlink._drain(sock)
    sock.sendall(out)
    for seq, code in nlmsg.refusals(nlmsg.receive(sock, 10.0, 1 << 16), seqs):
        return f"message {seq}: {os.strerror(code)}"
    return None


def bench_commit_costs() -> None:
    """What a commit costs the kernel as the table grows, and what the acks cost us.

    1. Adding one verdict-map element ``cali-new : jump spare`` (what a new workload's dispatch
       entry is) vs one interval-set member (baseline), each deleted again untimed, in tables
       with 50 and 200 endpoint chains: a jump makes the kernel re-validate every chain
       reachable from the hooked chains, a plain element does not.
    2. A 2,000-rule transaction (20 chains of 100 rules, a policy activation's size) with one
       ack for the batch vs the baseline: an ack per message, alternating on one table."""
    import nftables

    from calico.felix.nftables import nlrules
    from calico.felix.nftables.netlink import (
        NFT_MSG_DELCHAIN,
        NFT_MSG_DELRULE,
        NFT_MSG_NEWCHAIN,
        NFT_MSG_NEWRULE,
        ElementBatch,
        NetlinkElements,
        map_elem,
        set_member_elems,
    )

    nft = nftables.Nftables()
    sender = NetlinkElements()

    def commit(name: str, build: object) -> float:
        batch = ElementBatch("inet", name)
        build(batch)  # type: ignore[operator]
        start = time.perf_counter()
        error = sender.send(batch)
        assert error is None, error
        return time.perf_counter() - start

    for endpoints in (50, 200):
        name = f"calival{endpoints}"
        validation_table(nft, name, endpoints)
        jumps, plain = [], []
        for k in range(20):
            elem = map_elem("cali-new", "ifname", ("jump", "spare"))
            member = set_member_elems(f"10.200.0.{k + 1}", "ipv4_addr", True)
            jumps.append(commit(name, lambda b, e=elem: b.add(False, "disp", [e])))
            plain.append(commit(name, lambda b, m=member: b.add(False, "s", m)))
            gone = map_elem("cali-new", "ifname", None)
            commit(name, lambda b, e=gone: b.add(True, "disp", [e]))
            commit(name, lambda b, m=member: b.add(True, "s", m))
        emit(
            BENCH,
            f"commit_jump_element_{endpoints}_endpoints_s",
            statistics.median(jumps),
            statistics.median(plain),
            note=f"one dispatch-map jump element added, {endpoints} endpoint chains x"
            " 200 rules over 1,000 policy chains; baseline: one interval-set member, same table",
        )
        nft.cmd(f"delete table inet {name}")

    name = "calivalacks"
    rc, _, err = nft.cmd(f"add table inet {name}")
    assert rc == 0, err
    nfproto = {"match": {"op": "==", "left": {"meta": {"key": "nfproto"}}, "right": "ipv4"}}
    tcp = {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": 6}}
    dport = {"payload": {"protocol": "th", "field": "dport"}}
    chains = [f"pol{c}" for c in range(20)]

    def activation(delete: bool) -> ElementBatch:
        batch = ElementBatch("inet", name)
        for c, chain in enumerate(chains):
            if delete:
                batch.add_object(NFT_MSG_DELRULE, chain, nlrules._str(nlrules.RULE_CHAIN, chain))
                batch.add_object(NFT_MSG_DELCHAIN, chain, nlrules._str(nlrules.CHAIN_NAME, chain))
                continue
            batch.add_object(NFT_MSG_NEWCHAIN, chain, nlrules.chain_body({"name": chain}))
            for r in range(100):
                match = {"match": {"op": "==", "left": dport, "right": 1000 + 100 * c + r}}
                exprs = [nfproto, tcp, match, {"counter": None}, {"accept": None}]
                batch.add_object(NFT_MSG_NEWRULE, chain, nlrules.rule_body(chain, exprs, "p"))
        return batch

    one, each = [], []
    for k in range(10):
        acking_each = k % 2 == 1
        add = activation(False)
        start = time.perf_counter()
        error = send_acking_each(sender, add) if acking_each else sender.send(add)
        (each if acking_each else one).append(time.perf_counter() - start)
        assert error is None, error
        assert sender.send(activation(True)) is None
    emit(
        BENCH,
        "commit_2000_rules_one_ack_s",
        statistics.median(one),
        statistics.median(each),
        note="20 new chains x 100 rules in one netlink batch: one ack for the batch vs an ack"
        " per message (baseline), alternating on one table",
    )
    nft.cmd(f"delete table inet {name}")


def bench_element_deltas(table: NftablesTable) -> None:
    """Alternates the two paths on one table (its sender switched off for the baseline), so
    both see the same table, the same noise and an exact known state."""
    sender = table._netlink
    assert sender is not None
    for label, n in (("element_delta_3_adds_s", 3), ("element_delta_100_adds_s", 100)):
        ours, theirs = [], []
        for k in range(20):
            via_netlink = k % 2 == 0
            table._netlink = sender if via_netlink else None
            members = [f"192.{170 + n % 7}.{k}.{j}" for j in range(1, n + 1)]
            table.add_set_members("cali40s7", members)
            if k:
                table.remove_set_members("cali40s7", [f"192.{170 + n % 7}.{k - 1}.1"])
            start = time.perf_counter()
            result = table.apply()
            (ours if via_netlink else theirs).append(time.perf_counter() - start)
            assert result.ok and result.netlink == via_netlink, result
        table._netlink = sender
        emit(
            BENCH,
            label,
            statistics.median(ours),
            statistics.median(theirs),
            note=f"{n} member adds + 1 removal in one interval set; netlink batch vs libnftables"
            " on the same table (10k rules, 1k interval sets)",
        )
    table.invalidate()  # both transports left the kernel exactly as the table believes
    assert table.apply().commands == 0


def bench_mixed_deltas(table: NftablesTable) -> None:
    """A new workload's shape: a 100-rule chain in the renderer's form (explicit ``meta
    nfproto``/``meta l4proto``, ``th dport``) rewritten together with 3 set member adds, as one
    netlink batch vs the same plan through libnftables, alternating on the same table."""
    from calico.felix.nftables.model import Chain, NftRule

    sender = table._netlink
    assert sender is not None
    nfproto = {"match": {"op": "==", "left": {"meta": {"key": "nfproto"}}, "right": "ipv4"}}
    tcp = {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": 6}}
    saddr = {"payload": {"protocol": "ip", "field": "saddr"}}
    dport = {"payload": {"protocol": "th", "field": "dport"}}
    ours, theirs = [], []
    for k in range(20):
        via_netlink = k % 2 == 0
        table._netlink = sender if via_netlink else None
        rules = [
            NftRule(
                [
                    nfproto,
                    tcp,
                    {"match": {"op": "==", "left": saddr, "right": f"@cali40s{r % N_SETS}"}},
                    {"match": {"op": "==", "left": dport, "right": 2000 + r + k}},
                    {"counter": None},
                    {"accept": None},
                ],
                "p",
            )
            for r in range(N_RULES)
        ]
        table.set_chain(Chain("filter-cali-tw-new", rules))
        table.add_set_members("cali40s9", [f"192.180.{k}.{j}" for j in range(1, 4)])
        start = time.perf_counter()
        result = table.apply()
        (ours if via_netlink else theirs).append(time.perf_counter() - start)
        assert result.ok and result.netlink == via_netlink, result
    table._netlink = sender
    emit(
        BENCH,
        "mixed_delta_chain_100_rules_3_adds_s",
        statistics.median(ours),
        statistics.median(theirs),
        note="renderer-shaped 100-rule chain rewrite + 3 member adds; netlink batch vs the same"
        " plan through libnftables on the same table (10k rules, 1k interval sets)",
    )
    table.remove_chain("filter-cali-tw-new")
    assert table.apply().ok


def _one_chain(k: int) -> Chain:
    from calico.felix.nftables.model import Chain, NftRule

    c = 3
    rules = [
        NftRule(rule_exprs(f"cali40s{(c * N_RULES + r) % N_SETS}", 1000 + r + k), "p")
        for r in range(N_RULES)
    ]
    return Chain(f"filter-cali-fw-cali{c}", rules)


if __name__ == "__main__":
    sys.exit(main())
