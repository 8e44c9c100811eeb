"""Per-endpoint chains: the tier/policy/profile walk that turns policy-chain marks into verdicts.

One generic builder (``endpoint_chain``) renders every variant; the callers only pick the layer,
direction, failsafe chain and which of the "default deny" steps apply (design/felix-rules.md,
"Chain layout", the endpoint chain body): tracked filter chains deny at the end of a tier and
after the profiles, pre-DNAT and untracked chains never do (a packet they do not explicitly
allow continues to normal policy).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

from calico.felix.hostendpoints import ALL_INTERFACES
from calico.felix.messages import HostEndpoint, PolicyID, TierInfo, WorkloadEndpoint
from calico.felix.nftables.model import Chain, Expr, NftRule, layered, length_limited_id
from calico.felix.rules.config import RenderConfig
from calico.felix.rules.exprs import (
    ACCEPT,
    DROP,
    REJECT,
    RETURN,
    ct_state,
    jump,
    mark_clear,
    mark_is_clear,
    mark_is_set,
)
from calico.felix.rules.groups import GroupKey, group_chain, group_chain_name, group_runs
from calico.felix.rules.nflog import end_of_tier_prefix, nflog, no_profile_prefix
from calico.felix.rules.policy import is_staged, policy_chain_name, profile_chain_name
from calico.policyeval.chains import (
    HOST_FROM_FWD_PREFIX,
    HOST_FROM_PREFIX,
    HOST_TO_FWD_PREFIX,
    HOST_TO_PREFIX,
    WL_FROM_PREFIX,
    WL_TO_PREFIX,
)

FAILSAFE_IN = "cali-failsafe-in"
FAILSAFE_OUT = "cali-failsafe-out"


def endpoint_chain_name(prefix: str, iface: str, layer: str = "filter", max_len: int = 240) -> str:
    return layered(layer, length_limited_id(prefix, iface, max_len))


def deny_expr(config: RenderConfig, layer: str) -> Expr:
    return REJECT if config.deny_action == "reject" and layer == "filter" else DROP


def endpoint_chain(
    config: RenderConfig,
    name: str,
    *,
    layer: str,
    tiers: Sequence[TierInfo],
    inbound: bool,
    profile_ids: Sequence[str] = (),
    admin_down: bool = False,
    conntrack: bool = True,
    failsafe_chain: str | None = None,
    end_of_tier_deny: bool = True,
    final_deny: bool = True,
    final_deny_only_if_policy: bool = False,
    group_key: GroupKey | None = None,
) -> Chain:
    """Render one endpoint chain (see module docstring); ``inbound`` picks ingress policies.

    The body does not depend on ``name``: endpoints of one shape (same tiers, profiles,
    options) share one memoised tuple of rule objects, so neither it nor the rules' canonical
    text (``calico.felix.nftables.state.rule_text``, kept on each rule) is built again."""
    return endpoint_chain_and_groups(
        config,
        name,
        layer=layer,
        tiers=tiers,
        inbound=inbound,
        profile_ids=profile_ids,
        admin_down=admin_down,
        conntrack=conntrack,
        failsafe_chain=failsafe_chain,
        end_of_tier_deny=end_of_tier_deny,
        final_deny=final_deny,
        final_deny_only_if_policy=final_deny_only_if_policy,
        group_key=group_key,
    )[0]


def endpoint_chain_and_groups(
    config: RenderConfig,
    name: str,
    *,
    layer: str,
    tiers: Sequence[TierInfo],
    inbound: bool,
    profile_ids: Sequence[str] = (),
    admin_down: bool = False,
    conntrack: bool = True,
    failsafe_chain: str | None = None,
    end_of_tier_deny: bool = True,
    final_deny: bool = True,
    final_deny_only_if_policy: bool = False,
    group_key: GroupKey | None = None,
) -> tuple[Chain, list[Chain]]:
    """:func:`endpoint_chain`, plus the policy group chains it jumps to
    (``calico.felix.rules.groups``; none without ``group_key``)."""
    tiers = tuple(tiers)
    log_verdicts = config.flow_logs and layer == "filter"
    runs = (
        None
        if group_key is None or admin_down
        else tuple(group_runs(_listed(t, inbound, log_verdicts), group_key) for t in tiers)
    )
    rules, groups = _endpoint_rules(
        config,
        layer,
        tiers,
        inbound,
        tuple(profile_ids),
        admin_down,
        conntrack,
        failsafe_chain,
        end_of_tier_deny,
        final_deny,
        final_deny_only_if_policy,
        runs,
    )
    return Chain(name, list(rules)), [group_chain(config, *g, inbound, layer) for g in groups]


def _listed(tier: TierInfo, inbound: bool, log_verdicts: bool) -> tuple[PolicyID, ...]:
    """The tier's policies an endpoint chain jumps to: the enforced ones, and with flow logs
    the staged ones too (their chains only NFLOG)."""
    ids = tier.ingress_policies if inbound else tier.egress_policies
    return tuple(ids) if log_verdicts else tuple(p for p in ids if not is_staged(p))


@functools.lru_cache(maxsize=4096)
def _endpoint_rules(
    config: RenderConfig,
    layer: str,
    tiers: tuple[TierInfo, ...],
    inbound: bool,
    profile_ids: tuple[str, ...],
    admin_down: bool,
    conntrack: bool,
    failsafe_chain: str | None,
    end_of_tier_deny: bool,
    final_deny: bool,
    final_deny_only_if_policy: bool,
    runs: tuple[tuple[int, ...], ...] | None,
) -> tuple[tuple[NftRule, ...], tuple[tuple[str, tuple[PolicyID, ...]], ...]]:
    """The chain's rules and its groups as (tier name, policies); ``runs`` holds each tier's
    group run lengths (``calico.felix.rules.groups.group_runs``), None for no groups."""
    deny = deny_expr(config, layer)
    if admin_down:
        return (NftRule([deny], "Endpoint admin disabled"),), ()
    accept, pass_ = config.mark_accept, config.mark_pass
    rules: list[NftRule] = []
    if conntrack:
        rules.append(NftRule([ct_state("established", "related"), ACCEPT]))
        if not config.disable_conntrack_invalid_check:
            rules.append(NftRule([ct_state("invalid"), deny]))
    rules.append(NftRule([mark_clear(accept | pass_)]))
    if failsafe_chain:
        rules.append(NftRule([jump(failsafe_chain)], "Failsafe ports"))

    # Flow logs: the default verdicts are logged too (end of tier, no profile matched); only
    # tracked filter chains log, as only they carry the traffic the collector accounts.
    log_verdicts = config.flow_logs and layer == "filter"
    any_policy = False
    groups: list[tuple[str, tuple[PolicyID, ...]]] = []
    for t, tier in enumerate(tiers):
        ids = tier.ingress_policies if inbound else tier.egress_policies
        enforced = [p for p in ids if not is_staged(p)]
        listed = _listed(tier, inbound, log_verdicts)
        if not listed:
            continue  # no policy (or only staged ones): the tier does not apply
        rules.append(NftRule([mark_clear(pass_)], f"Start of tier {tier.name}"))
        start = 0
        for length in (1,) * len(listed) if runs is None else runs[t]:
            run = listed[start : start + length]
            start += length
            if length == 1:
                target = policy_chain_name(run[0], inbound, layer, config.max_name_len)
            else:
                target = group_chain_name(tier.name, run, inbound, layer, config.max_name_len)
                groups.append((tier.name, run))
            rules.append(NftRule([mark_is_clear(pass_), jump(target)]))
            if length > 1 or not is_staged(run[0]):
                rules.append(NftRule([mark_is_set(accept), RETURN], "Return if policy accepted"))
        if not enforced:  # staged policies only: the tier passes (upstream's end-of-tier pass)
            prefix = end_of_tier_prefix(inbound, tier.name, "Pass")
            rules.append(
                NftRule(
                    [mark_is_clear(pass_), nflog(inbound, prefix)],
                    f"End of tier {tier.name}. Staged policies only: pass",
                )
            )
            continue
        any_policy = True
        if end_of_tier_deny and tier.default_action != "Pass":
            log_eot = (
                [nflog(inbound, end_of_tier_prefix(inbound, tier.name))] if log_verdicts else []
            )
            rules.append(
                NftRule(
                    [mark_is_clear(pass_), *log_eot, deny],
                    f"End of tier {tier.name}. Deny if no policies passed packet",
                )
            )
        elif end_of_tier_deny and log_verdicts:
            prefix = end_of_tier_prefix(inbound, tier.name, "Pass")
            rules.append(
                NftRule(
                    [mark_is_clear(pass_), nflog(inbound, prefix)],
                    f"End of tier {tier.name}. Pass to the next tier",
                )
            )

    for profile_id in profile_ids:
        target = profile_chain_name(profile_id, inbound, layer, config.max_name_len)
        rules.append(NftRule([jump(target)]))
        rules.append(NftRule([mark_is_set(accept), RETURN], "Return if profile accepted"))

    if final_deny and (any_policy or not final_deny_only_if_policy):
        log_np = [nflog(inbound, no_profile_prefix(inbound))] if log_verdicts else []
        rules.append(NftRule([*log_np, deny], "Deny if no profiles matched"))
    return tuple(rules), tuple(groups)


def workload_endpoint_chains(
    config: RenderConfig,
    iface: str,
    endpoint: WorkloadEndpoint,
    group_key: GroupKey | None = None,
) -> list[Chain]:
    """``cali-tw-<iface>`` (ingress) and ``cali-fw-<iface>`` (egress) in the filter layer, then
    the policy group chains they jump to (with ``group_key``)."""
    down = endpoint.state != "active"
    return _with_groups(
        [
            _tracked_chain(
                config, iface, prefix, endpoint, inbound, admin_down=down, group_key=group_key
            )
            for prefix, inbound in ((WL_TO_PREFIX, True), (WL_FROM_PREFIX, False))
        ]
    )


def _with_groups(rendered: list[tuple[Chain, list[Chain]]]) -> list[Chain]:
    """The endpoint chains in order, then each group chain they jump to once."""
    groups = {g.name: g for _, gs in rendered for g in gs}
    return [c for c, _ in rendered] + list(groups.values())


def _iface_chain(
    config: RenderConfig,
    iface: str,
    prefix: str,
    layer: str,
    tiers: Sequence[TierInfo],
    inbound: bool,
    **options: Any,
) -> tuple[Chain, list[Chain]]:
    """``endpoint_chain_and_groups`` named ``<layer>-<prefix><iface>``."""
    name = endpoint_chain_name(prefix, iface, layer, config.max_name_len)
    return endpoint_chain_and_groups(
        config, name, layer=layer, tiers=tiers, inbound=inbound, **options
    )


def _tracked_chain(
    config: RenderConfig,
    iface: str,
    prefix: str,
    endpoint: WorkloadEndpoint | HostEndpoint,
    inbound: bool,
    **options: Any,
) -> tuple[Chain, list[Chain]]:
    """An endpoint's normal (tracked, filter-layer) chain: its tiers, then its profiles."""
    return _iface_chain(
        config,
        iface,
        prefix,
        "filter",
        endpoint.tiers,
        inbound,
        profile_ids=endpoint.profile_ids,
        **options,
    )


def _has_policies(tiers: Sequence[TierInfo], inbound: bool) -> bool:
    return any(
        not is_staged(p)
        for t in tiers
        for p in (t.ingress_policies if inbound else t.egress_policies)
    )


# Host endpoint directions: (inbound, chain prefix, forward chain prefix, failsafe chain).
_HEP_DIRECTIONS = (
    (True, HOST_FROM_PREFIX, HOST_FROM_FWD_PREFIX, FAILSAFE_IN),
    (False, HOST_TO_PREFIX, HOST_TO_FWD_PREFIX, FAILSAFE_OUT),
)
# Pre-DNAT and untracked chains only ever allow: no conntrack rules and no default deny.
_ALLOW_ONLY = {"conntrack": False, "end_of_tier_deny": False, "final_deny": False}


def host_endpoint_chains(
    config: RenderConfig,
    iface: str,
    endpoint: HostEndpoint,
    group_key: GroupKey | None = None,
) -> list[Chain]:
    """All chains for a host endpoint on ``iface``, across layers.

    filter: ``cali-fh-`` (to the host: ingress policy, failsafe-in first), ``cali-th-`` (from the
    host: egress, failsafe-out first), ``cali-fhfw-``/``cali-thfw-`` (forwarded traffic: only
    applyOnForward policy, allowed when there is none). mangle ``cali-fh-`` when the HEP has
    pre-DNAT policy; raw ``cali-fh-``/``cali-th-`` when it has untracked policy (never for
    the all-interfaces endpoint: :func:`rendered_host_endpoint`). Then the policy group
    chains these jump to (with ``group_key``).
    """
    endpoint = rendered_host_endpoint(iface, endpoint)
    chains = [
        _tracked_chain(
            config,
            iface,
            prefix,
            endpoint,
            inbound,
            failsafe_chain=layered("filter", failsafe),
            group_key=group_key,
        )
        for inbound, prefix, _, failsafe in _HEP_DIRECTIONS
    ]
    chains += [
        _iface_chain(
            config,
            iface,
            fwd_prefix,
            "filter",
            endpoint.forward_tiers,
            inbound,
            final_deny_only_if_policy=True,
            group_key=group_key,
        )
        for inbound, _, fwd_prefix, _ in _HEP_DIRECTIONS
    ]
    layers = host_endpoint_layers(endpoint)
    optional = (
        ("mangle", endpoint.pre_dnat_tiers, _HEP_DIRECTIONS[:1]),  # pre-DNAT: ingress only
        ("raw", endpoint.untracked_tiers, _HEP_DIRECTIONS),
    )
    for layer, tiers, directions in optional:
        if layers[layer]:
            chains += [
                _iface_chain(
                    config,
                    iface,
                    prefix,
                    layer,
                    tiers,
                    inbound,
                    failsafe_chain=layered(layer, failsafe),
                    group_key=group_key,
                    **_ALLOW_ONLY,
                )
                for inbound, prefix, _, failsafe in directions
            ]
    return _with_groups(chains)


def rendered_host_endpoint(iface: str, endpoint: HostEndpoint) -> HostEndpoint:
    """The endpoint as rendered on ``iface``: the all-interfaces one (``ALL_INTERFACES``)
    loses its untracked tiers, as upstream's, which does not support doNotTrack policy on a
    ``*`` endpoint (design/felix-rules.md "The all-interfaces host endpoint")."""
    if iface == ALL_INTERFACES and endpoint.untracked_tiers:
        return dataclasses.replace(endpoint, untracked_tiers=())
    return endpoint


def host_endpoint_layers(endpoint: HostEndpoint) -> dict[str, bool]:
    """Which optional layers a HEP has chains in (the dispatch maps must agree)."""
    return {
        "mangle": _has_policies(endpoint.pre_dnat_tiers, True),
        "raw": _has_policies(endpoint.untracked_tiers, True)
        or _has_policies(endpoint.untracked_tiers, False),
    }
