"""Per-endpoint chains: the tier/policy/profile walk that turns policy-chain marks into verdicts.

One generic builder (``endpoint_chain``) renders every variant; the callers only pick the layer,
direction, failsafe chain and which of the "default deny" steps apply (design/felix-rules.md,
"Chain layout", the endpoint chain body): tracked filter chains deny at the end of a tier and
after the profiles, pre-DNAT and untracked chains never do (a packet they do not explicitly
allow continues to normal policy).
"""

from __future__ import annotations

from collections.abc import Sequence

from calico.felix.messages import HostEndpoint, TierInfo, WorkloadEndpoint
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
from calico.felix.rules.policy import is_staged, policy_chain_name, profile_chain_name

WL_TO_PREFIX = "cali-tw-"  # to workload: the workload's ingress policy
WL_FROM_PREFIX = "cali-fw-"  # from workload: egress policy
HOST_TO_PREFIX = "cali-th-"  # to host endpoint (leaving the host): egress policy
HOST_FROM_PREFIX = "cali-fh-"  # from host endpoint (arriving): ingress policy
HOST_TO_FWD_PREFIX = "cali-thfw-"
HOST_FROM_FWD_PREFIX = "cali-fhfw-"

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
) -> Chain:
    """Render one endpoint chain (see module docstring); ``inbound`` picks ingress policies."""
    deny = deny_expr(config, layer)
    if admin_down:
        return Chain(name, [NftRule([deny], "Endpoint admin disabled")])
    accept, pass_ = config.mark_accept, config.mark_pass
    rules: list[NftRule] = []
    if conntrack:
        rules.append(NftRule([ct_state("established", "related"), ACCEPT]))
        if not config.disable_conntrack_invalid_check:
            rules.append(NftRule([ct_state("invalid"), deny]))
    rules.append(NftRule([mark_clear(accept | pass_)]))
    if failsafe_chain:
        rules.append(NftRule([jump(failsafe_chain)], "Failsafe ports"))

    any_policy = False
    for tier in tiers:
        ids = tier.ingress_policies if inbound else tier.egress_policies
        enforced = [p for p in ids if not is_staged(p)]
        if not enforced:
            continue  # no policy (or only staged ones): the tier does not apply
        any_policy = True
        rules.append(NftRule([mark_clear(pass_)], f"Start of tier {tier.name}"))
        for pid in enforced:
            target = policy_chain_name(pid, inbound, layer, config.max_name_len)
            rules.append(NftRule([mark_is_clear(pass_), jump(target)]))
            rules.append(NftRule([mark_is_set(accept), RETURN], "Return if policy accepted"))
        if end_of_tier_deny and tier.default_action != "Pass":
            rules.append(
                NftRule(
                    [mark_is_clear(pass_), deny],
                    f"End of tier {tier.name}. Deny if no policies passed packet",
                )
            )

    for profile_id in profile_ids:
        target = profile_chain_name(profile_id, inbound, layer, config.max_name_len)
        rules.append(NftRule([jump(target)]))
        rules.append(NftRule([mark_is_set(accept), RETURN], "Return if profile accepted"))

    if final_deny and (any_policy or not final_deny_only_if_policy):
        rules.append(NftRule([deny], "Deny if no profiles matched"))
    return Chain(name, rules)


def workload_endpoint_chains(
    config: RenderConfig, iface: str, endpoint: WorkloadEndpoint
) -> list[Chain]:
    """``cali-tw-<iface>`` (ingress) and ``cali-fw-<iface>`` (egress) in the filter layer."""
    down = endpoint.state != "active"
    out = []
    for prefix, inbound in ((WL_TO_PREFIX, True), (WL_FROM_PREFIX, False)):
        out.append(
            endpoint_chain(
                config,
                endpoint_chain_name(prefix, iface, "filter", config.max_name_len),
                layer="filter",
                tiers=endpoint.tiers,
                inbound=inbound,
                profile_ids=endpoint.profile_ids,
                admin_down=down,
            )
        )
    return out


def _has_policies(tiers: Sequence[TierInfo], inbound: bool) -> bool:
    return any(
        not is_staged(p)
        for t in tiers
        for p in (t.ingress_policies if inbound else t.egress_policies)
    )


def host_endpoint_chains(config: RenderConfig, iface: str, endpoint: HostEndpoint) -> list[Chain]:
    """All chains for a host endpoint on ``iface``, across layers.

    filter: ``cali-fh-`` (to the host: ingress policy, failsafe-in first), ``cali-th-`` (from the
    host: egress, failsafe-out first), ``cali-fhfw-``/``cali-thfw-`` (forwarded traffic: only
    applyOnForward policy, allowed when there is none). mangle ``cali-fh-`` when the HEP has
    pre-DNAT policy; raw ``cali-fh-``/``cali-th-`` when it has untracked policy.
    """
    n = config.max_name_len

    def name(prefix: str, layer: str) -> str:
        return endpoint_chain_name(prefix, iface, layer, n)

    chains = [
        endpoint_chain(
            config,
            name(HOST_FROM_PREFIX, "filter"),
            layer="filter",
            tiers=endpoint.tiers,
            inbound=True,
            profile_ids=endpoint.profile_ids,
            failsafe_chain=layered("filter", FAILSAFE_IN),
        ),
        endpoint_chain(
            config,
            name(HOST_TO_PREFIX, "filter"),
            layer="filter",
            tiers=endpoint.tiers,
            inbound=False,
            profile_ids=endpoint.profile_ids,
            failsafe_chain=layered("filter", FAILSAFE_OUT),
        ),
    ]
    for prefix, inbound in ((HOST_FROM_FWD_PREFIX, True), (HOST_TO_FWD_PREFIX, False)):
        chains.append(
            endpoint_chain(
                config,
                name(prefix, "filter"),
                layer="filter",
                tiers=endpoint.forward_tiers,
                inbound=inbound,
                final_deny_only_if_policy=True,
            )
        )
    if _has_policies(endpoint.pre_dnat_tiers, True):
        chains.append(
            endpoint_chain(
                config,
                name(HOST_FROM_PREFIX, "mangle"),
                layer="mangle",
                tiers=endpoint.pre_dnat_tiers,
                inbound=True,
                conntrack=False,
                failsafe_chain=layered("mangle", FAILSAFE_IN),
                end_of_tier_deny=False,
                final_deny=False,
            )
        )
    if _has_policies(endpoint.untracked_tiers, True) or _has_policies(
        endpoint.untracked_tiers, False
    ):
        for prefix, inbound, failsafe in (
            (HOST_FROM_PREFIX, True, FAILSAFE_IN),
            (HOST_TO_PREFIX, False, FAILSAFE_OUT),
        ):
            chains.append(
                endpoint_chain(
                    config,
                    name(prefix, "raw"),
                    layer="raw",
                    tiers=endpoint.untracked_tiers,
                    inbound=inbound,
                    conntrack=False,
                    failsafe_chain=layered("raw", failsafe),
                    end_of_tier_deny=False,
                    final_deny=False,
                )
            )
    return chains


def host_endpoint_layers(endpoint: HostEndpoint) -> dict[str, bool]:
    """Which optional layers a HEP has chains in (the dispatch maps must agree)."""
    return {
        "mangle": _has_policies(endpoint.pre_dnat_tiers, True),
        "raw": _has_policies(endpoint.untracked_tiers, True)
        or _has_policies(endpoint.untracked_tiers, False),
    }
