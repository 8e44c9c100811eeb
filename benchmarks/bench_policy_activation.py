"""Policy activation, in process: the calc graph's RuleScanner and the dataplane's
PolicyManager (render, then the table's ``set_chain``) for the 100 policies the first workload
of a label group activates in ``bench_felix.py --large`` (one ingress rule each, a source
selector and a port).

Run as ``python benchmarks/bench_policy_activation.py``; thread CPU, best and median of
``ROUNDS``. Metrics (ms per 100 policies):

* ``activation_first_ms``: first activation (parse, rule IDs, render, rule text and hashes);
  baseline the same in this run with the policies already parsed and rendered once under
  other names, i.e. nothing cached for these keys either (so the ratio is ~1: noise).
* ``activation_again_ms``: the same policies deactivated and activated again at the same
  revision (the parsed-policy and rendered-chain caches); baseline the first activation.
* ``activation_apply_ms``: the table's apply of a first activation's 200 new policy chains and
  the new workload's two endpoint chains (jumping to all 100 policies each way) up to the
  kernel: the plan, the netlink batch (``plan_batch``) and its encoding, with a sender that
  encodes the batch and drops it (the kernel's commit is not in it); baseline the first
  activation above. Those 100 policies have ports no earlier policy had (since session 13;
  before, the apply's port matches were all statement-memo hits, unlike Felix's).

Compare trees by running it with each on ``PYTHONPATH``, alternating.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.append(str(_ROOT.parent))  # after PYTHONPATH: the tree being measured wins

from harness import emit  # noqa: E402

from calico.felix.calc.rule_scanner import RuleScanner  # noqa: E402
from calico.felix.dataplane.managers.policy import PolicyManager  # noqa: E402
from calico.felix.messages import (  # noqa: E402
    ActivePolicyRemove,
    ActivePolicyUpdate,
    TierInfo,
    WorkloadEndpoint,
)
from calico.felix.nftables.table import NftablesTable  # noqa: E402
from calico.felix.rules import RuleRenderer  # noqa: E402
from calico.model import PolicyKey  # noqa: E402
from calico.model.values import decode_value  # noqa: E402

BENCH = "policy_activation"
N = 100
ROUNDS = 15


class _Sink:
    """Callbacks and index of the RuleScanner; policy messages go to the PolicyManager."""

    def __init__(self, manager: PolicyManager) -> None:
        self.manager = manager
        self.ids: list[Any] = []  # active policy IDs, in activation order

    def on_policy_active(self, policy_id: Any, policy: Any) -> None:
        self.ids.append(policy_id)
        self.manager.on_update(ActivePolicyUpdate(policy_id, policy))

    def on_policy_inactive(self, policy_id: Any) -> None:
        self.manager.on_update(ActivePolicyRemove(policy_id))

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kw: None


class _Sender:
    """Encodes each batch as ``NetlinkElements.send`` would, and drops it."""

    def send(self, batch: Any) -> str | None:
        batch.encode(1)
        return None


class _Nft:
    def json_cmd(self, root: dict[str, Any]) -> tuple[int, Any, str]:
        return 0, {"nftables": []}, ""


def policies(prefix: str, port_base: int = 9000) -> list[tuple[PolicyKey, Any]]:
    """``N`` policies, the i-th letting role ``r{i % 7}`` reach port ``port_base + i``."""
    out = []
    for i in range(N):
        key = PolicyKey("NetworkPolicy", "bench", f"{prefix}-{i}")
        rule = {
            "action": "allow",
            "protocol": "tcp",
            "src_selector": f"role == 'r{i % 7}'",
            "dst_ports": [port_base + i],
        }
        doc = {"selector": f"group == 'g{i % 10}'", "namespace": "bench", "order": 1000.0}
        out.append((key, decode_value(key, doc | {"inbound_rules": [rule]})))
    return out


def run(round_: int) -> tuple[float, float, float, float]:
    """(first activation, first activation of other keys after a warm-up, re-activation, the
    table's apply of the last)."""
    table = NftablesTable(nft=_Nft(), netlink=_Sender())  # type: ignore[arg-type]
    renderer = RuleRenderer()
    sink = _Sink(PolicyManager(table, renderer))
    scanner = RuleScanner(sink, sink)  # type: ignore[arg-type]
    warm, mine = policies(f"warm{round_}"), policies(f"noise{round_}")

    def activate(pols: list[tuple[PolicyKey, Any]]) -> float:
        t0 = time.thread_time()
        for key, value in pols:
            scanner.on_policy_active(key, value)
        return time.thread_time() - t0

    table.apply()
    cold = activate(mine)
    table.apply()
    for key, _ in mine:
        scanner.on_policy_inactive(key)
    again = activate(mine)
    activate(warm)
    table.apply()
    sink.ids.clear()
    # Ports no earlier policy had, as a new group's in bench_felix.py --large: their port
    # matches are statement-memo misses in the apply below, as in Felix.
    other = activate(policies(f"other{round_}", 20000 + N * round_))
    # The new workload that activated them: its endpoint chains jump to all of them.
    tier = TierInfo("default", ingress_policies=tuple(sink.ids), egress_policies=tuple(sink.ids))
    endpoint = WorkloadEndpoint("active", f"calibench{round_}", tiers=(tier,))
    for chain in renderer.workload_endpoint_chains(f"calibench{round_}", endpoint):
        table.set_chain(chain)
    t0 = time.thread_time()
    result = table.apply()
    apply = time.thread_time() - t0
    assert result.ok and result.netlink and len(result.stats.chains_written) == 2 * N + 2, result
    return cold, other, again, apply


def main() -> int:
    rows = [run(r) for r in range(ROUNDS)]
    cold, other, again, apply = ([1000 * r[i] for r in rows] for i in range(4))
    for metric, values, base in (
        ("activation_first_ms", cold, other),
        ("activation_again_ms", again, cold),
        ("activation_apply_ms", apply, cold),
    ):
        emit(
            BENCH,
            metric,
            statistics.median(values),
            statistics.median(base),
            best=round(min(values), 3),
            baseline_best=round(min(base), 3),
            policies=N,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
