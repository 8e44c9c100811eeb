"""BPF dataplane benchmark: policy program regeneration for one endpoint with 100 policies.

Run as ``python benchmarks/bench_bpf.py`` (the load line needs root and clang). Dataset: one
workload endpoint whose ingress and egress tiers hold 100 policies, each with an IP-set
selector rule on a port range and a CIDR rule, plus a namespace profile. Metrics:

* ``bpf_polprog_generate_ms``: generating both hooks' C sources (target <= 50 ms); baseline =
  the nftables renderer producing the same policies' chains plus the endpoint chains.
* ``bpf_polprog_compile_s``: one clang run for one hook's source (cache miss); baseline = the
  same request served by the object cache (how regeneration without a change is cheap).
* ``bpf_polprog_load_ms``: libbpf load + jump-map update of one generated program; baseline =
  the same for the deny-all program (no rules).
"""

from __future__ import annotations

import os
import shutil
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


if __name__ == "__main__":
    main()
