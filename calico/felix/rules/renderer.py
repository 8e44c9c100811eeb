"""``RuleRenderer``: the one object the dataplane managers call to turn calc-graph state into
desired nft chains, sets and maps.

Every method is a pure function of the config and its arguments (no kernel access), so a manager
can re-render on each update and let the table layer diff the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from calico.felix.messages import HostEndpoint, Policy, PolicyID, Profile, WorkloadEndpoint
from calico.felix.nftables.model import Chain, NftSet, VerdictMap
from calico.felix.rules import endpoint_dispatch as _endpoint_dispatch
from calico.felix.rules import endpoints as _endpoints
from calico.felix.rules import policy as _policy
from calico.felix.rules import static as _static
from calico.felix.rules.config import RenderConfig
from calico.felix.rules.groups import GroupKey


def _versions(config: RenderConfig, ip_versions: int | Iterable[int] | None) -> tuple[int, ...]:
    """Requested families, restricted to the enabled ones, in a stable order."""
    if ip_versions is None:
        wanted: set[int] = set(config.ip_versions)
    elif isinstance(ip_versions, int):
        wanted = {ip_versions}
    else:
        wanted = set(ip_versions)
    if not wanted <= {4, 6}:
        raise ValueError(f"IP versions must be 4 and/or 6, not {sorted(wanted)}")
    return tuple(v for v in config.ip_versions if v in wanted)


class RuleRenderer:
    def __init__(self, config: RenderConfig | None = None) -> None:
        self.config = config or RenderConfig()

    def policy_chains(
        self,
        policy_id: PolicyID,
        policy: Policy,
        ip_version: int | Iterable[int] | None = None,
    ) -> list[Chain]:
        """``cali-pi-``/``cali-po-`` chains (filter, mangle for pre-DNAT, raw for untracked).

        One chain per direction serves both families: rules that mention addresses are rendered
        once per family in ``ip_version`` (default: all enabled families).
        """
        return _policy.policy_chains(
            self.config, policy_id, policy, _versions(self.config, ip_version)
        )

    def profile_chains(
        self,
        profile_id: str,
        profile: Profile,
        ip_version: int | Iterable[int] | None = None,
    ) -> list[Chain]:
        """``cali-pri-``/``cali-pro-`` chains in the filter layer."""
        return _policy.profile_chains(
            self.config, profile_id, profile, _versions(self.config, ip_version)
        )

    def workload_endpoint_chains(
        self,
        iface: str,
        endpoint: WorkloadEndpoint,
        ip_versions: Iterable[int] | None = None,
        group_key: GroupKey | None = None,
    ) -> list[Chain]:
        """``cali-tw-<iface>`` and ``cali-fw-<iface>``, then (with ``group_key``) the policy
        group chains they jump to (``calico.felix.rules.groups``). Endpoint chains hold no
        addresses, so they are the same for every family; ``ip_versions`` is accepted for
        symmetry only."""
        _versions(self.config, ip_versions)
        return _endpoints.workload_endpoint_chains(self.config, iface, endpoint, group_key)

    def host_endpoint_chains(
        self, iface: str, endpoint: HostEndpoint, group_key: GroupKey | None = None
    ) -> list[Chain]:
        """The HEP chains on ``iface`` across the filter, mangle and raw layers, then (with
        ``group_key``) the policy group chains they jump to."""
        return _endpoints.host_endpoint_chains(self.config, iface, endpoint, group_key)

    def dispatch_maps(
        self,
        workload_ifaces: Iterable[str] | Mapping[str, Any],
        host_ifaces: Mapping[str, HostEndpoint] | None = None,
    ) -> list[VerdictMap]:
        """All nine dispatch verdict maps (empty ones included)."""
        return _endpoint_dispatch.dispatch_maps(self.config, workload_ifaces, host_ifaces)

    def workload_dispatch_entries(self, iface: str) -> list[tuple[str, Any]]:
        """``(map name, verdict)`` of one workload interface in the workload dispatch maps."""
        return _endpoint_dispatch.workload_dispatch_entries(self.config, iface)

    def host_dispatch_chains(self, all_interfaces: HostEndpoint | None) -> list[Chain]:
        """The host endpoint dispatch chains, falling back to the ``*`` endpoint's chains."""
        return _endpoint_dispatch.host_dispatch_chains(self.config, all_interfaces)

    def static_chains(self) -> list[Chain]:
        """Base chains, top-level chains, failsafe, wl-to-host, NAT outgoing, dispatch chains."""
        return _static.static_chains(self.config)

    def static_sets(self) -> list[NftSet]:
        """The NAT-outgoing pool sets referenced by the static chains."""
        return _static.static_sets(self.config)

    def policy_chain_names(self, policy_id: PolicyID, policy: Policy) -> list[str]:
        """Names ``policy_chains`` produces for this policy (for cleanup after removal)."""
        staged = policy.staged or _policy.is_staged(policy_id)
        layer = "filter" if staged else _policy.policy_layer(policy)
        return [
            _policy.policy_chain_name(policy_id, inbound, layer, self.config.max_name_len)
            for inbound in (True, False)
        ]


__all__ = ["RenderConfig", "RuleRenderer"]
