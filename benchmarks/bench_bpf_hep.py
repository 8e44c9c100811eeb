"""BPF host endpoint and attach benchmarks (root, clang). Run as
``python benchmarks/bench_bpf_hep.py``; each line's baseline is measured in the same run.

Per packet in the kernel (BPF_PROG_TEST_RUN x ``REPEAT``, the from-HEP hook, a TCP SYN to one
of the host's addresses; SYNs are always re-policed, so every run takes the full path):

* ``bpf_hep_failsafe_ns_per_pkt``: a SYN to failsafe port 22 (upstream's default failsafe
  list in the map), allowed ahead of policy; baseline = a SYN to port 8080 allowed by the
  first rule of the host endpoint's policy (tail call + policy program).
* ``bpf_hep_failsafe_miss_ns_per_pkt``: the policy-allowed SYN with the default failsafe
  entries in the map (one LPM miss before the tail call); baseline = the same with an empty
  failsafe map: the failsafe check's cost on every new flow.

Attach (a fresh veth in a private netns, both hooks, ``ATTACHES`` times, median):

* ``bpf_attach_tcx_ms``: TCX links created and pinned; baseline = tc clsact + two filters.
* ``bpf_reattach_tcx_ms``: re-attach of an attached interface (TCX: BPF_LINK_UPDATE on the
  pinned link); baseline = the tc filter replace.
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

from bench_bpf import _packet  # noqa: E402
from harness import emit  # noqa: E402

from calico.felix.bpf import attach, bpffs, failsafes  # noqa: E402
from calico.felix.bpf.dataplane import BPFDataplane  # noqa: E402
from calico.felix.bpf.idalloc import IDAllocator  # noqa: E402
from calico.felix.bpf.libbpf import time_run  # noqa: E402
from calico.felix.bpf.polprog import EndpointPolicy, Generator  # noqa: E402
from calico.felix.config import PARAMS  # noqa: E402
from calico.felix.messages import Policy, PolicyID, PortRange, Rule, TierInfo  # noqa: E402

REPEAT = 200_000
ATTACHES = 20
HOST, REMOTE = "10.0.0.1", "10.0.0.2"


def _hep_sources() -> dict[str, str]:
    pid = PolicyID("web", tier="default")
    pol = Policy(
        inbound_rules=(Rule(action="allow", protocol="tcp", dst_ports=(PortRange(8080, 8080),)),)
    )
    gen = Generator({pid: pol}, {}, IDAllocator().get_or_alloc)
    tiers = (TierInfo("default", ingress_policies=(pid,)),)
    return {
        hook: gen.source(EndpointPolicy(tiers, (), inbound, host=True))
        for hook, inbound in (("ingress", True), ("egress", False))
    }


def failsafe_bench(tmp: str) -> None:
    mnt = os.path.join(tmp, "bpffs")
    bpffs.mount_bpffs(mnt)
    try:
        # RPF off, as in tests/integration/felix/bpf/test_bpf_hep_semantics.py: a
        # BPF_PROG_TEST_RUN packet has no ingress interface for the FIB lookup, so with
        # BPFEnforceRPF's check every SYN here was dropped (rc 2) and the bench stopped.
        dp = BPFDataplane(
            os.path.join(mnt, "globals"), os.path.join(tmp, "cache"), defines={"CALI_RPF": 0}
        )
        try:
            dp.register("lo", 1)
            dp.set_policies("lo", _hep_sources(), hep=True)
            dp.maps.hostips.update(bytes([10, 0, 0, 1]), (1).to_bytes(4, "little"))
            keys = failsafes.failsafe_keys(
                PARAMS["FailsafeInboundHostPorts"].default,
                PARAMS["FailsafeOutboundHostPorts"].default,
            )
            failsafes.sync(dp.maps, keys)
            fs_syn = _packet(REMOTE, HOST, 40000, 22, 0x02)
            pol_syn = _packet(REMOTE, HOST, 40001, 8080, 0x02)
            rc1, fs_ns = time_run(dp.from_hep_fd, fs_syn, REPEAT)
            rc2, pol_ns = time_run(dp.from_hep_fd, pol_syn, REPEAT)
            failsafes.sync(dp.maps, set())
            rc3, pol_empty_ns = time_run(dp.from_hep_fd, pol_syn, REPEAT)
            assert rc1 == rc2 == rc3 == -1, (rc1, rc2, rc3)  # all allowed
            counters = dp.maps.read_counters(1) or {}
            assert counters["ingress"]["accepted_failsafe"] >= REPEAT
        finally:
            dp.close()
    finally:
        bpffs.unmount(mnt)
    emit("bpf", "bpf_hep_failsafe_ns_per_pkt", fs_ns, pol_ns, repeat=REPEAT,
         failsafe_entries=len(keys))  # fmt: skip
    emit("bpf", "bpf_hep_failsafe_miss_ns_per_pkt", pol_ns, pol_empty_ns, repeat=REPEAT,
         failsafe_entries=len(keys))  # fmt: skip


def attach_bench(tmp: str) -> None:
    netns = f"benchatt{os.getpid()}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    mnt = os.path.join(tmp, "bpffs-att")
    bpffs.mount_bpffs(mnt)
    times: dict[str, list[float]] = {"tc": [], "tcx": [], "tc_re": [], "tcx_re": []}
    try:
        dp = BPFDataplane(os.path.join(mnt, "globals"), os.path.join(tmp, "cache"), netns=netns)
        try:
            for i in range(ATTACHES):
                for mode in ("tc", "tcx"):
                    iface = f"calib{mode}{i}"
                    subprocess.run(["ip", "-n", netns, "link", "add", iface, "type", "veth",
                                    "peer", "name", f"p{mode}{i}"], check=True)  # fmt: skip
                    dp.attach_type = mode
                    t0 = time.perf_counter()
                    dp.attach_iface(iface)
                    t1 = time.perf_counter()
                    dp.attach_iface(iface)
                    t2 = time.perf_counter()
                    times[mode].append(t1 - t0)
                    times[f"{mode}_re"].append(t2 - t1)
                    assert set(attach.attach_mode(iface, netns).values()) == {mode}
                    dp.remove_iface(iface)
        finally:
            dp.close()
    finally:
        bpffs.unmount(mnt)
        subprocess.run(["ip", "netns", "del", netns], check=False)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    emit("bpf", "bpf_attach_tcx_ms", med["tcx"], med["tc"], attaches=ATTACHES)
    emit("bpf", "bpf_reattach_tcx_ms", med["tcx_re"], med["tc_re"], attaches=ATTACHES)


def main() -> None:
    if os.geteuid() != 0 or not shutil.which("clang"):
        print("# bpf_hep: needs root and clang", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory(prefix="bench-bpfhep-") as tmp:
        failsafe_bench(tmp)
        attach_bench(tmp)


if __name__ == "__main__":
    main()
