"""Policy groups: runs of consecutive same-selector policies in an endpoint's tier, rendered as
one shared ``cali-gi-``/``cali-go-`` chain the endpoint chain jumps to once.

Why: when a commit adds a jump, the kernel validates the table by walking every chain reachable
from the hooked chains; an endpoint chain that jumps to each of its 100 policies costs that walk
100 chains per endpoint, a shared group chain costs it one (design/performance.md "Policy groups
and shared BPF programs"). Endpoints with the same selector-matched policies share the group
chains, so the group chains are few and a new endpoint adds only its own two chains.

Correctness does not depend on the grouping key: a group chain holds exactly the run of the
endpoint's own policy list it replaces, and walks it with the same mark protocol as the
endpoint chain (``calico.felix.rules.endpoints``). Entered with the accept and pass marks clear,
it jumps to each policy while neither mark is set, and every :data:`RETURN_STRIDE` policies
returns as soon as one is, so a verdict does not walk the rest of a long group. The key only
decides how much is shared: the dataplane groups by (namespace, original selector), as upstream
groups by selector. A staged policy, or one whose selector is unknown, is never grouped.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Callable, Hashable, Sequence

from calico.felix.messages import PolicyID
from calico.felix.nftables.model import Chain, NftRule, layered
from calico.felix.rules.config import RenderConfig
from calico.felix.rules.exprs import RETURN, jump, mark_is_any, mark_is_clear
from calico.felix.rules.policy import is_staged, policy_chain_name
from calico.policyeval.chains import GROUP_INBOUND_PREFIX, GROUP_OUTBOUND_PREFIX

#: A group chain checks for a verdict (and returns) before every this-many-th policy.
RETURN_STRIDE = 5

#: A policy's grouping key (None: never grouped). Equal keys of neighbours make one group.
GroupKey = Callable[[PolicyID], Hashable | None]


def group_runs(policies: Sequence[PolicyID], key: GroupKey | None) -> tuple[int, ...]:
    """Lengths of the runs ``policies`` splits into: maximal runs of neighbours with one equal,
    non-None key; staged and keyless policies (and every policy when ``key`` is None) are runs
    of one. The lengths sum to ``len(policies)``."""
    if key is None:
        return (1,) * len(policies)
    runs: list[int] = []
    last: Hashable | None = None
    for pid in policies:
        k = None if is_staged(pid) else key(pid)
        if k is not None and runs and k == last:
            runs[-1] += 1
        else:
            runs.append(1)
        last = k
    return tuple(runs)


def is_group_chain(name: str) -> bool:
    """True for a group chain's (layered) name."""
    _, _, bare = name.partition("-")
    return bare.startswith((GROUP_INBOUND_PREFIX, GROUP_OUTBOUND_PREFIX))


def group_chain_name(
    tier: str, policies: Sequence[PolicyID], inbound: bool, layer: str, max_len: int = 240
) -> str:
    """``<layer>-cali-gi-<hash>`` (``-go-`` for egress): the hash covers the tier and the policy
    chains, so one run of policies has one name on every endpoint and across restarts."""
    prefix = GROUP_INBOUND_PREFIX if inbound else GROUP_OUTBOUND_PREFIX
    text = "\0".join([tier, *(policy_chain_name(p, inbound, layer, max_len) for p in policies)])
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).decode()
    return layered(layer, prefix + digest[:22])


def group_chain(
    config: RenderConfig, tier: str, policies: tuple[PolicyID, ...], inbound: bool, layer: str
) -> Chain:
    """The group chain of ``policies`` (the module docstring has the protocol)."""
    name, rules = _group_rules(config, tier, policies, inbound, layer)
    return Chain(name, list(rules))


@functools.lru_cache(maxsize=4096)
def _group_rules(
    config: RenderConfig, tier: str, policies: tuple[PolicyID, ...], inbound: bool, layer: str
) -> tuple[str, tuple[NftRule, ...]]:
    """Memoised: an endpoint of an existing group re-uses the rule objects and their cached
    text."""
    verdict = config.mark_accept | config.mark_pass
    rules: list[NftRule] = []
    for i, pid in enumerate(policies):
        target = policy_chain_name(pid, inbound, layer, config.max_name_len)
        if i % RETURN_STRIDE == 0:
            if i:
                rules.append(NftRule([mark_is_any(verdict), RETURN], "Return on verdict"))
            rules.append(NftRule([jump(target)]))
        else:
            rules.append(NftRule([mark_is_clear(verdict), jump(target)]))
    return group_chain_name(tier, policies, inbound, layer, config.max_name_len), tuple(rules)
