"""Policy and profile rules -> per-direction nft chains (``cali-pi-``/``cali-po-``, ``cali-pri-``/
``cali-pro-``).

Verdicts travel between chains as mark bits, because an endpoint chain must tell "this policy
allowed" (accept mark, return) from "skip the rest of the tier" (pass mark, return) from "no rule
matched" (fall through to the next policy). Deny drops on the spot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from calico.felix.messages import Policy, PolicyID, Profile, Rule
from calico.felix.nftables.model import Chain, Expr, NftRule, layered, length_limited_id
from calico.felix.rules.config import RenderConfig
from calico.felix.rules.exprs import (
    COUNTER,
    DROP,
    NOTRACK,
    REJECT,
    RETURN,
    mark_clear,
    mark_is_set,
    mark_set,
)
from calico.felix.rules.matches import RuleMatch, is_family_specific, rule_match
from calico.felix.rules.nflog import OWNER_POLICY, OWNER_PROFILE, nflog, rule_prefix
from calico.policyeval.chains import (
    POLICY_INBOUND_PREFIX,
    POLICY_OUTBOUND_PREFIX,
    PROFILE_INBOUND_PREFIX,
    PROFILE_OUTBOUND_PREFIX,
    rule_comment,
)
from calico.policyeval.chains import policy_chain_id as _policy_chain_id
from calico.policyeval.chains import short_kind as _short_kind


def log_prefix(template: str, tier: str, kind: str, name: str, namespace: str) -> str:
    """A ``log`` rule's prefix: ``LogPrefix`` with %t/%k/%n/%p substituted. Kernel log lines
    read "calico-packet: IN=..." as upstream's do; nft caps prefixes at 127. The BPF
    dataplane's log records use the same text (design/felix-bpf.md "Policy programs")."""
    return (
        template.replace("%t", tier)
        .replace("%k", kind)
        .replace("%n", name)
        .replace("%p", namespace)
    )[:125] + ": "


def short_kind(policy_id: PolicyID) -> str:
    return _short_kind(policy_id.kind, policy_id.namespace)


def is_staged(policy_id: PolicyID) -> bool:
    """Staged policies are matched for flow-log accounting only: never jumped to or programmed."""
    return policy_id.kind.startswith("Staged")


def policy_chain_id(policy_id: PolicyID) -> str:
    """The policy's name in chain names: ``gnp/name`` or ``np/namespace/name``."""
    return _policy_chain_id(policy_id.kind, policy_id.namespace, policy_id.name)


def policy_layer(policy: Policy) -> str:
    """Untracked policy lives in raw, pre-DNAT policy in mangle, everything else in filter."""
    if policy.untracked:
        return "raw"
    if policy.pre_dnat:
        return "mangle"
    return "filter"


def policy_chain_name(
    policy_id: PolicyID, inbound: bool, layer: str = "filter", max_len: int = 240
) -> str:
    prefix = POLICY_INBOUND_PREFIX if inbound else POLICY_OUTBOUND_PREFIX
    return layered(layer, length_limited_id(prefix, policy_chain_id(policy_id), max_len))


def profile_chain_name(
    profile_id: str, inbound: bool, layer: str = "filter", max_len: int = 240
) -> str:
    prefix = PROFILE_INBOUND_PREFIX if inbound else PROFILE_OUTBOUND_PREFIX
    return layered(layer, length_limited_id(prefix, profile_id, max_len))


class RuleRenderContext:
    """Where a rule list is rendered: decides deny/allow statements and log prefixes."""

    def __init__(
        self,
        config: RenderConfig,
        layer: str,
        *,
        untracked: bool = False,
        tier: str = "",
        kind: str = "",
        name: str = "",
        namespace: str = "",
        nflog_owner: str = "",
        nflog_name: str = "",
        inbound: bool = True,
        staged: bool = False,
    ) -> None:
        self.config = config
        self.layer = layer
        self.untracked = untracked
        # Flow logs: verdicts also go to NFLOG with a prefix naming owner, direction and rule.
        self.nflog_owner = nflog_owner if config.flow_logs else ""
        self.nflog_name = nflog_name
        self.inbound = inbound
        # A staged policy's chain only reports what it would have done (flow logs' pending
        # trace): NFLOG and return, never a mark or a drop.
        self.staged = staged
        self.log_prefix = log_prefix(config.log_prefix, tier, kind, name, namespace)

    def deny(self) -> Expr:
        # reject is only valid on the input/forward/output hooks, i.e. the filter layer.
        if self.config.deny_action == "reject" and self.layer == "filter":
            return REJECT
        return DROP

    def _nflog(self, action: str, index: int) -> list[Expr]:
        if not self.nflog_owner:
            return []
        prefix = rule_prefix(action, self.nflog_owner, self.inbound, index, self.nflog_name)
        return [nflog(self.inbound, prefix)]

    def actions(self, action: str, index: int = 0) -> list[Expr]:
        """Statements for a rule with ``action``; ``index`` is its position in the rule list
        (only the NFLOG prefix of flow logs uses it)."""
        cfg = self.config
        if self.staged:
            return [*self._nflog(action, index), RETURN]
        if action == "allow":
            pre = [NOTRACK] if self.untracked else []
            return [*pre, mark_set(cfg.mark_accept), *self._nflog(action, index), RETURN]
        if action in ("pass", "next-tier"):
            return [mark_set(cfg.mark_pass), *self._nflog(action, index), RETURN]
        if action == "deny":
            return [*self._nflog(action, index), self.deny()]
        if action == "log":
            out: list[Expr] = []
            if cfg.log_rate_limit:
                rate, _, per = cfg.log_rate_limit.partition("/")
                out.append(
                    {
                        "limit": {
                            "rate": int(rate),
                            "per": per or "second",
                            "burst": cfg.log_rate_burst,
                        }
                    }
                )
            out.append({"log": {"prefix": self.log_prefix}})
            return out
        raise ValueError(f"unknown rule action {action!r}")


def _assemble(
    m: RuleMatch, actions: list[Expr], config: RenderConfig, comment: str
) -> list[NftRule]:
    """One rule, or a scratch-mark block when a side ORs several port alternatives. The rule
    that decides counts its packets and bytes (as upstream's nftables rules all do), which
    ``calicoctl explain --live`` reports; the block's scratch rules only prepare the match."""
    if not m.alternatives:
        return [NftRule([*m.exprs, COUNTER, *actions], comment)]
    bits = [config.mark_scratch0, config.mark_scratch1]
    out = [NftRule([mark_clear(bits[0] | bits[1])], comment)]
    prev: int | None = None
    for bit, group in zip(bits, m.alternatives, strict=False):
        for alt in group:
            cond = [] if prev is None else [mark_is_set(prev)]
            out.append(NftRule([*cond, *alt, mark_set(bit)], comment))
        prev = bit
    assert prev is not None
    out.append(NftRule([*m.exprs, mark_is_set(prev), COUNTER, *actions], comment))
    return out


def render_rule(
    rule: Rule, versions: Sequence[int], ctx: RuleRenderContext, index: int = 0
) -> list[NftRule]:
    """All nft rules for one policy rule across the requested families (possibly none)."""
    if ctx.staged and rule.action not in ("allow", "deny", "pass", "next-tier"):
        return []  # a staged policy's log rules would log traffic it does not police
    actions = ctx.actions(rule.action, index)
    comment = rule_comment(index, rule.rule_id)
    out: list[NftRule] = []
    if not is_family_specific(rule) and set(versions) == {4, 6}:
        m = rule_match(rule, None)
        assert m is not None
        return _assemble(m, actions, ctx.config, comment)
    for version in versions:
        m = rule_match(rule, version)
        if m is None:
            continue
        # rule_match starts every per-family rendering with ``meta nfproto``, so a family-agnostic
        # rule rendered for one family only leaves the other family alone.
        out.extend(_assemble(m, actions, ctx.config, comment))
    return out


def render_rules(
    rules: Iterable[Rule], versions: Sequence[int], ctx: RuleRenderContext
) -> list[NftRule]:
    out: list[NftRule] = []
    for index, rule in enumerate(rules):
        out.extend(render_rule(rule, versions, ctx, index))
    return out


def policy_chains(
    config: RenderConfig, policy_id: PolicyID, policy: Policy, versions: Sequence[int]
) -> list[Chain]:
    """Inbound and outbound chains for a policy, in the layer its flags select. A staged policy
    has none, except with flow logs: then chains that only NFLOG its verdicts (filter layer)."""
    staged = policy.staged or is_staged(policy_id)
    if staged and not config.flow_logs:
        return []
    layer = "filter" if staged else policy_layer(policy)

    def ctx(inbound: bool) -> RuleRenderContext:
        return RuleRenderContext(
            config,
            layer,
            untracked=policy.untracked,
            tier=policy_id.tier or policy.tier,
            kind=short_kind(policy_id),
            name=policy_id.name,
            namespace=policy_id.namespace,
            nflog_owner=OWNER_POLICY,
            nflog_name=policy_chain_id(policy_id),
            inbound=inbound,
            staged=staged,
        )

    return [
        Chain(
            policy_chain_name(policy_id, True, layer, config.max_name_len),
            render_rules(policy.inbound_rules, versions, ctx(True)),
        ),
        Chain(
            policy_chain_name(policy_id, False, layer, config.max_name_len),
            render_rules(policy.outbound_rules, versions, ctx(False)),
        ),
    ]


def profile_chains(
    config: RenderConfig, profile_id: str, profile: Profile, versions: Sequence[int]
) -> list[Chain]:
    """Inbound and outbound filter-layer chains for a profile (profiles only apply there)."""

    def ctx(inbound: bool) -> RuleRenderContext:
        return RuleRenderContext(
            config,
            "filter",
            kind="pro",
            name=profile_id,
            nflog_owner=OWNER_PROFILE,
            nflog_name=profile_id,
            inbound=inbound,
        )

    return [
        Chain(
            profile_chain_name(profile_id, True, "filter", config.max_name_len),
            render_rules(profile.inbound_rules, versions, ctx(True)),
        ),
        Chain(
            profile_chain_name(profile_id, False, "filter", config.max_name_len),
            render_rules(profile.outbound_rules, versions, ctx(False)),
        ),
    ]
