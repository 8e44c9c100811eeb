"""BPF dataplane benchmarks: program regeneration, TCP throughput and TTFR against nftables.

Run as ``python benchmarks/bench_bpf.py`` (the load, throughput and TTFR lines need root,
clang and, for throughput, iperf3). Part 1 (regeneration) dataset: one workload endpoint whose
ingress and egress tiers hold 100 policies, each with an IP-set selector rule on a port range
and a CIDR rule, plus a namespace profile. Metrics:

* ``bpf_polprog_generate_ms``: generating both hooks' C sources (target <= 50 ms); baseline =
  the nftables renderer producing the same policies' chains plus the endpoint chains.
* ``bpf_polprog_compile_s``: one clang run for one hook's source (cache miss); baseline = the
  same request served by the object cache (how regeneration without a change is cheap).
* ``bpf_polprog_load_ms``: libbpf load + jump-map update of one generated program; baseline =
  the same for the deny-all program (no rules).

Part 2 runs a real Felix (``calico component felix`` in a host netns, the harness of
``benchmarks/bench_felix.py``) once per dataplane, same workloads and policies:

* ``bpf_tput_1000_policies_bps`` / ``nft_tput_1000_policies_bps``: iperf3 between two
  workloads with 1,000 ingress policies applying to the server (only the last allows
  iperf3's port; a second listener on a port none allows proves the policies are in force).
  Baseline for each: **no policy** = the same dataplane with the server relabelled so that no
  policy applies (BPF: programs attached, profile-only), measured alternately (ABBA) in the
  same phase, so both sides see the same machine load (on a shared 2-core machine iperf3 rates
  drift by 2-5x over minutes); the nftables phase's no-policy median is reported beside the
  BPF line. Target BPF >= 0.95.
* ``bpf_ttfr_p50_s`` / ``bpf_ttfr_p99_s`` (and ``bpf_warm_ttfr_*``): time to first response
  of new workloads (WEP written at 10/s, 100 standing policies over ten label groups) in BPF
  mode; baseline = the same figure measured on nftables in the same run. Includes clang for
  each distinct policy source: the namespace name carries this run's pid, so the selectors,
  hence the IP set ids, hence the generated sources are new and Felix's object cache
  (content-addressed) misses once per label group, as for a newly written policy set.
  The ``warm`` run repeats BPF on the same policies, so every program is a cache hit: the
  cost without clang.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))

from harness import best_of, emit  # noqa: E402

from calico.felix.bpf.idalloc import IDAllocator  # noqa: E402
from calico.felix.bpf.polprog import EndpointPolicy, Generator  # noqa: E402
from calico.felix.messages import (  # noqa: E402
    Policy,
    PolicyID,
    PortRange,
    Profile,
    Rule,
    TierInfo,
    WorkloadEndpoint,
)
from calico.felix.rules import RenderConfig, RuleRenderer  # noqa: E402

POLICIES = 100


def dataset() -> tuple[dict[PolicyID, Policy], dict[str, Profile], WorkloadEndpoint]:
    policies = {}
    for i in range(POLICIES):
        rules = (
            Rule(
                action="allow",
                protocol="tcp",
                src_ip_set_ids=(f"s:sel{i}",),
                dst_ports=(PortRange(8000 + i, 8000 + i), PortRange(9000, 9100)),
            ),
            Rule(action="deny", src_net=(f"10.{i}.0.0/16",)),
        )
        policies[PolicyID(f"p{i}", tier="default")] = Policy(
            inbound_rules=rules, outbound_rules=rules
        )
    profiles = {"kns.ns1": Profile(inbound_rules=(Rule(action="allow"),))}
    ids = tuple(policies)
    ep = WorkloadEndpoint(
        state="active",
        name="cali0123456789a",
        profile_ids=("kns.ns1",),
        ipv4_nets=("10.65.0.1/32",),
        tiers=(TierInfo("default", ingress_policies=ids, egress_policies=ids),),
    )
    return policies, profiles, ep


def main() -> None:
    policies, profiles, ep = dataset()
    ids = IDAllocator()

    def generate() -> dict[str, str]:
        gen = Generator(policies, profiles, ids.get_or_alloc)
        return {
            hook: gen.source(EndpointPolicy(ep.tiers, ep.profile_ids, inbound))
            for hook, inbound in (("ingress", False), ("egress", True))
        }

    renderer = RuleRenderer(RenderConfig())

    def render_nft() -> None:
        for pid, pol in policies.items():
            renderer.policy_chains(pid, pol)
        renderer.workload_endpoint_chains(ep.name, ep)

    sources = generate()
    gen_s, nft_s = best_of(generate, 5), best_of(render_nft, 5)
    emit("bpf", "bpf_polprog_generate_ms", gen_s * 1e3, nft_s * 1e3, policies=POLICIES)
    if not shutil.which("clang"):
        print("# bpf: clang missing, compile/load lines skipped", file=sys.stderr)
        return
    from calico.felix.bpf.build import Compiler

    with tempfile.TemporaryDirectory(prefix="bench-bpf-") as tmp:
        comp = Compiler(os.path.join(tmp, "cache"))
        t0 = time.perf_counter()
        comp.compile_source(sources["egress"], "pol_egress")
        miss = time.perf_counter() - t0
        hit = best_of(lambda: comp.compile_source(sources["egress"], "pol_egress"), 5)
        emit("bpf", "bpf_polprog_compile_s", miss, hit, bytes_c=len(sources["egress"]))
        if os.geteuid() != 0:
            print("# bpf: not root, load line skipped", file=sys.stderr)
            return
        load_bench(tmp, sources["egress"], Generator({}, {}, ids.get_or_alloc))
        fastpath_bench(tmp)


def load_bench(tmp: str, source: str, empty_gen: Generator) -> None:
    from calico.felix.bpf import bpffs
    from calico.felix.bpf.dataplane import BPFDataplane

    mnt = os.path.join(tmp, "bpffs")
    bpffs.mount_bpffs(mnt)  # a private instance: nothing outside this run sees it
    try:
        dp = BPFDataplane(os.path.join(mnt, "globals"), os.path.join(tmp, "cache"))
        try:
            dp.register("lo", 1)
            empty = empty_gen.source(EndpointPolicy((), (), True))

            def load(src: str) -> None:
                dp.set_policies("lo", {"ingress": empty, "egress": src})

            load(source)  # compile outside the timing
            full = best_of(lambda: load(source), 5)
            base = best_of(lambda: load(empty), 5)
            emit("bpf", "bpf_polprog_load_ms", full * 1e3, base * 1e3, policies=POLICIES)
        finally:
            dp.close()
    finally:
        bpffs.unmount(mnt)


FAST_REPEAT = 200_000


def _packet(src: str, dst: str, sport: int, dport: int, flags: int) -> bytes:
    """Ethernet + IPv4 + TCP header (what the programs parse)."""
    import ipaddress
    import struct

    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, flags, 1024, 0, 0)
    addrs = ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0, *addrs)
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + ip + tcp


def _packet6(src: str, dst: str, sport: int, dport: int, flags: int) -> bytes:
    """Ethernet + IPv6 + TCP header."""
    import ipaddress
    import struct

    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, flags, 1024, 0, 0)
    addrs = ipaddress.IPv6Address(src).packed, ipaddress.IPv6Address(dst).packed
    ip = struct.pack("!IHBB16s16s", 6 << 28, len(tcp), 6, 64, *addrs)
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x86\xdd" + ip + tcp


def fastpath_bench(tmp: str) -> None:
    """Per-packet CPU cost inside the kernel (BPF_PROG_TEST_RUN, ``FAST_REPEAT`` runs): the
    noise-free complement to the iperf3 lines. An endpoint whose ingress has the throughput
    benchmark's 1,000 policies (the last one allows the client's set on 5201, rule counters on
    as Felix's default) against the same endpoint with no policy (profile allow only):

    * ``bpf_established_ns_per_pkt``: an ACK of a tracked flow (the conntrack fast path; the
      policy count should not matter: target ratio <= 1.05);
    * ``bpf_new_flow_ns_per_pkt``: a SYN (always re-policed), walking all 1,000 policies.
    * ``bpf6_established_ns_per_pkt`` / ``bpf6_new_flow_ns_per_pkt``: the same over IPv6 (the
      program's v6 walk, the v6 conntrack and IP set maps).
    * ``bpf_from_wep_established_ns_per_pkt``: the server workload's ACK of that flow at
      from-WEP (TC ingress: the fast path also compares the interface the source side was
      recorded on, and re-checks RPF on the first reply); baseline = the client's ACK at
      to-WEP (no interface check), same program, same run.
    * ``bpf_from_wep_new_flow_ns_per_pkt``: a SYN from the workload (profile-only egress)
      with the workload reverse-path check (one routes-map LPM lookup); baseline = a SYN at
      to-WEP through the same profile-only policy, without the check.
    """
    from calico.felix.bpf import bpffs
    from calico.felix.bpf.dataplane import BPFDataplane
    from calico.felix.bpf.libbpf import time_run
    from calico.felix.bpf.maps import IPSET_VALUE, ipset6_key, ipset_key

    client, server = "10.0.0.1", "10.0.0.2"
    client6, server6 = "fd00::1", "fd00::2"
    pols = {}
    for i in range(TPUT_POLICIES):
        last = i == TPUT_POLICIES - 1
        port = 5201 if last else 10000 + i
        rule = Rule(
            action="allow",
            protocol="tcp",
            src_ip_set_ids=("s:client" if last else f"s:x{i}",),
            dst_ports=(PortRange(port, port),),
        )
        pols[PolicyID(f"tp-{i:04d}", tier="default")] = Policy(inbound_rules=(rule,))
    allow = {"allow": Profile(inbound_rules=(Rule(action="allow"),),
                              outbound_rules=(Rule(action="allow"),))}  # fmt: skip
    ids = IDAllocator()
    tiers = (TierInfo("default", ingress_policies=tuple(pols)),)
    mnt = os.path.join(tmp, "bpffs-fast")
    bpffs.mount_bpffs(mnt)
    try:
        dp = BPFDataplane(os.path.join(mnt, "globals"), os.path.join(tmp, "cache"))
        try:
            dp.register("lo", 1)
            dp.set_workload_routes("lo", (f"{server}/32", f"{server6}/128"))  # from-WEP RPF
            key = ipset_key(ids.get_or_alloc("s:client"), f"{client}/32")
            key6 = ipset6_key(ids.get_or_alloc("s:client"), f"{client6}/128")
            assert key is not None and key6 is not None
            dp.maps.ipsets.update(key, IPSET_VALUE.pack(1))
            dp.maps.ipsets6.update(key6, IPSET_VALUE.pack(1))
            results: dict[str, dict[str, float]] = {}
            for label, ep_tiers in (("policies", tiers), ("none", ())):
                gen = Generator(pols, allow, ids.get_or_alloc, rule_counters=True)
                srcs = {
                    "ingress": gen.source(EndpointPolicy((), ("allow",), False)),
                    "egress": gen.source(EndpointPolicy(ep_tiers, ("allow",), True)),
                }
                dp.set_policies("lo", srcs)
                for ct in (dp.maps.ct, dp.maps.ct6):
                    for k in list(ct.keys()):
                        ct.delete(k)
                syn = _packet(client, server, 40000, 5201, 0x02)
                ack = _packet(client, server, 40000, 5201, 0x10)
                rc_syn, ns_syn = time_run(dp.to_fd, syn, FAST_REPEAT)
                rc_ack, ns_ack = time_run(dp.to_fd, ack, FAST_REPEAT)
                assert rc_syn == rc_ack == -1, (label, rc_syn, rc_ack)  # allowed: TC_ACT_UNSPEC
                syn6 = _packet6(client6, server6, 40000, 5201, 0x02)
                ack6 = _packet6(client6, server6, 40000, 5201, 0x10)
                rc6_syn, ns6_syn = time_run(dp.to_fd, syn6, FAST_REPEAT)
                rc6_ack, ns6_ack = time_run(dp.to_fd, ack6, FAST_REPEAT)
                assert rc6_syn == rc6_ack == -1, (label, rc6_syn, rc6_ack)
                results[label] = {"syn": ns_syn, "ack": ns_ack, "syn6": ns6_syn, "ack6": ns6_ack}
            # "none" is programmed last: from-WEP of the server, egress allowed by profile
            reply = _packet(server, client, 5201, 40000, 0x10)
            out_syn = _packet(server, client, 40001, 5201, 0x02)
            rc_reply, ns_reply = time_run(dp.from_fd, reply, FAST_REPEAT)
            rc_out, ns_out = time_run(dp.from_fd, out_syn, FAST_REPEAT)
            assert rc_reply == rc_out == -1, (rc_reply, rc_out)
            results["from_wep"] = {"ack": ns_reply, "syn": ns_out}
        finally:
            dp.close()
    finally:
        bpffs.unmount(mnt)
    extra = {"policies": TPUT_POLICIES, "repeat": FAST_REPEAT}
    emit("bpf", "bpf_established_ns_per_pkt", results["policies"]["ack"],
         results["none"]["ack"], target_ratio=1.05, **extra)  # fmt: skip
    emit("bpf", "bpf_new_flow_ns_per_pkt", results["policies"]["syn"],
         results["none"]["syn"], **extra)  # fmt: skip
    emit("bpf", "bpf6_established_ns_per_pkt", results["policies"]["ack6"],
         results["none"]["ack6"], target_ratio=1.05, **extra)  # fmt: skip
    emit("bpf", "bpf6_new_flow_ns_per_pkt", results["policies"]["syn6"],
         results["none"]["syn6"], **extra)  # fmt: skip
    emit("bpf", "bpf_from_wep_established_ns_per_pkt", results["from_wep"]["ack"],
         results["none"]["ack"], **extra)  # fmt: skip
    emit("bpf", "bpf_from_wep_new_flow_ns_per_pkt", results["from_wep"]["syn"],
         results["none"]["syn"], **extra)  # fmt: skip


TPUT_POLICIES = 1000
TPUT_PAIRS = 6
TTFR_NEW = 30
TTFR_POLICIES = 100
IPERF_PORT, BLOCKED_PORT = 5201, 5202


def felix_benches() -> None:
    """Part 2: throughput and TTFR on both dataplanes (needs root, clang, iperf3)."""
    if os.geteuid() != 0 or not shutil.which("clang"):
        print("# bpf: not root or no clang, Felix throughput/TTFR skipped", file=sys.stderr)
        return
    import bench_felix as bf  # the Felix harness and its helpers (same directory)

    bf.NAMESPACE = f"bb{os.getpid()}"  # new selectors -> cold object cache (see docstring)

    if shutil.which("iperf3"):
        nft_none: list[float] = []
        for mode, metric in (("nftables", "nft_tput_1000_policies_bps"),
                             ("bpf", "bpf_tput_1000_policies_bps")):  # fmt: skip
            runs = throughput(bf, mode)
            nft_none = nft_none or runs["none"]
            emit(
                "bpf",
                metric,
                statistics.median(runs["with"]),
                statistics.median(runs["none"]),
                target_ratio=0.95 if mode == "bpf" else None,
                policies=TPUT_POLICIES,
                runs_with=[round(x) for x in runs["with"]],
                runs_no_policy=[round(x) for x in runs["none"]],
                nft_no_policy_median=round(statistics.median(nft_none)),
                program_1000_policies_s=round(runs["program_s"], 2),
            )
    else:
        print("# bpf: iperf3 missing, throughput skipped", file=sys.stderr)
    # nftables; BPF with a cold object cache; BPF again on the same policies (warm cache)
    ttfr = {run: ttfr_run(bf, run.split("-")[0]) for run in ("nftables", "bpf", "bpf-warm")}
    for q, pq in ((0.5, "p50"), (0.99, "p99")):
        for run in ("bpf", "bpf-warm"):
            emit(
                "bpf",
                f"{run.replace('-', '_')}_ttfr_{pq}_s",
                bf.pct(ttfr[run], q),
                bf.pct(ttfr["nftables"], q),
                n=TTFR_NEW,
                policies=TTFR_POLICIES,
                failed_bpf=sum(1 for x in ttfr[run] if x == float("inf")),
                failed_nft=sum(1 for x in ttfr["nftables"] if x == float("inf")),
            )


def _mode_env(felix: object, mode: str) -> None:
    felix.env["FELIX_BPFENABLED"] = "true" if mode == "bpf" else "false"  # type: ignore[attr-defined]


def throughput(bf: object, mode: str) -> dict:
    """Medians' inputs for one dataplane: iperf3 runs with the policies applying and not."""
    fh = bf.fh  # type: ignore[attr-defined]
    ns_name = bf.NAMESPACE  # type: ignore[attr-defined]
    with (
        bf.host_env(f"tput-{mode}") as (host, ds, felix, _),  # type: ignore[attr-defined]
        fh.workload(host, ds, "server", "10.65.0.2", namespace=ns_name,
                    labels={"app": "unpoliced"}) as server,
        fh.workload(host, ds, "client", "10.65.0.3", namespace=ns_name,
                    labels={"role": "client"}) as client,
    ):  # fmt: skip
        _mode_env(felix, mode)
        felix.start()
        felix.wait_ready()
        procs = [
            subprocess.Popen(
                ["ip", "netns", "exec", server.ns, "iperf3", "-s", "-p", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for port in (IPERF_PORT, BLOCKED_PORT)
        ]

        def reach() -> tuple[bool, bool]:
            return tuple(  # type: ignore[return-value]
                bf.try_connect_port(client.ns, server.ip, p)  # type: ignore[attr-defined]
                for p in (IPERF_PORT, BLOCKED_PORT)
            )

        def policed(on: bool) -> None:
            server.labels["app"] = "server" if on else "unpoliced"
            ds.apply(fh.wep_doc(server))
            fh.eventually(reach, (True, not on), timeout=600, pause=0.3)

        try:
            fh.eventually(reach, (True, True), timeout=60)
            t0 = time.perf_counter()
            for doc in bf.tput_policies(TPUT_POLICIES):  # type: ignore[attr-defined]
                ds.apply(doc)
            policed(True)
            program_s = time.perf_counter() - t0
            if mode == "bpf":
                assert "BPF dataplane enabled" in felix.log_path.read_text()
            none: list[float] = []
            with_pol: list[float] = []
            for i in range(TPUT_PAIRS):  # ABBA order: no position advantage for either
                for on in (False, True) if i % 2 == 0 else (True, False):
                    policed(on)
                    (with_pol if on else none).append(bf.iperf(client, server.ip))  # type: ignore[attr-defined]
        finally:
            for proc in procs:
                proc.kill()
                proc.wait(10)
    return {"none": none, "with": with_pol, "program_s": program_s}


def ttfr_run(bf: object, mode: str) -> list[float]:
    """TTFR of ``TTFR_NEW`` new workloads (inf = never connected) on one dataplane."""
    fh = bf.fh  # type: ignore[attr-defined]
    ns_name, port = bf.NAMESPACE, bf.PORT  # type: ignore[attr-defined]
    with bf.host_env(f"ttfr-{mode}") as (host, ds, felix, _):  # type: ignore[attr-defined]
        _mode_env(felix, mode)
        for doc in bf.standing_policies(TTFR_POLICIES):  # type: ignore[attr-defined]
            ds.apply(doc)
        with (
            fh.workload(host, ds, "server", "10.65.0.2", namespace=ns_name,
                        labels={"app": "server"}) as server,
            fh.workload(host, ds, "warm", "10.65.0.3", namespace=ns_name,
                        labels=bf.client_labels(0)) as warm,  # type: ignore[attr-defined]
            fh.servers(server, f"tcp:{port}"),
            bf.bulk_workloads(host, "c", TTFR_NEW, bf.client_labels) as new,  # type: ignore[attr-defined]
        ):  # fmt: skip
            felix.start()
            felix.wait_ready()
            fh.eventually(
                lambda: bf.try_connect_from(warm.ns, server.ip),  # type: ignore[attr-defined]
                True,
                timeout=60,
            )
            probers = [bf.Prober(w.ns, server.ip, limit=30.0) for w in new]  # type: ignore[attr-defined]
            for p in probers:
                p.start()
                p.ready.wait(5)
            starts: list[float] = []
            t_base = time.perf_counter()
            for i, (w, p) in enumerate(zip(new, probers, strict=True)):
                delay = t_base + i / 10.0 - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                p.go.set()
                starts.append(time.perf_counter())
                ds.apply(fh.wep_doc(w))
            for p in probers:
                p.join(35)
            return [
                p.done - t0 if p.done else float("inf")
                for p, t0 in zip(probers, starts, strict=True)
            ]


if __name__ == "__main__":
    main()
    felix_benches()
