"""Everything the rule renderer needs to know about Felix's configuration, as one frozen value.

Rendering is a pure function of (config, inputs); keeping the knobs in a hashable dataclass lets
the managers cache and diff rendered chains safely.

The knobs are Felix parameters, already parsed and validated by ``calico.felix.config``: the
dataplane builds its ``RenderConfig`` with ``from_config(config)`` from the typed values, and the
field defaults are the same parameters' defaults (one mapping, ``_render_fields``, serves both).
Failsafe ports are the config package's ``ProtoPort`` values; there is no second grammar here.
The dataplane is nftables-only, so it reads the ``Nftables*`` parameters, never their
``Iptables*`` twins.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from calico.felix.config import PARAMS, Config
from calico.felix.config.netparsers import ProtoPort


def _render_fields(value: Callable[[str], Any]) -> dict[str, Any]:
    """RenderConfig's fields from typed Felix parameter values (``value(name)``)."""
    nat_address = value("NATOutgoingAddress")
    return {
        "mark_mask": value("NftablesMarkMask"),
        "deny_action": value("NftablesFilterDenyAction").lower(),
        "endpoint_to_host_action": value("DefaultEndpointToHostAction").lower(),
        "failsafe_inbound": value("FailsafeInboundHostPorts"),
        "failsafe_outbound": value("FailsafeOutboundHostPorts"),
        # ``LogPrefix = none`` (the empty prefix) renders the default prefix.
        "log_prefix": value("LogPrefix") or PARAMS["LogPrefix"].default,
        "log_rate_limit": value("LogActionRateLimit"),
        "log_rate_burst": value("LogActionRateLimitBurst"),
        "ipv6_enabled": value("Ipv6Support"),
        "nat_outgoing_address": "" if nat_address is None else str(nat_address),
        "nat_outgoing_exclusions": value("NATOutgoingExclusions"),
        # The parameter's pattern admits only comma-separated interface names.
        "workload_iface_prefixes": tuple(value("InterfacePrefix").split(",")),
        "disable_conntrack_invalid_check": value("DisableConntrackInvalidCheck"),
        "vxlan_port": value("VXLANPort"),
        # Flow logs go to Goldmane: policy verdicts are also NFLOGged for the collector.
        "flow_logs": bool(value("FlowLogsGoldmaneServer")),
    }


_DEFAULTS = _render_fields(lambda name: PARAMS[name].default)


@functools.cache
def _mark_bits(mask: int) -> tuple[int, ...]:
    """The set bits of ``mask``, lowest first. Cached: the mark properties below read them for
    every rule rendered (a 32-step scan each, ~2% of a policy's render)."""
    return tuple(1 << i for i in range(32) if mask & (1 << i))


# Mark bits are handed out lowest-first from the mask, in this order.
_MARK_ROLES = ("accept", "pass", "drop", "scratch0", "scratch1")


def _mark_bit(role: str) -> property:
    index = _MARK_ROLES.index(role)
    return property(lambda self: _mark_bits(self.mark_mask)[index], doc=f"The {role} mark bit.")


@dataclass(frozen=True)
class RenderConfig:
    """Rendering knobs. Mark bits are handed out lowest-first from ``mark_mask``
    (design/felix-rules.md, "Marks and verdicts")."""

    mark_mask: int = _DEFAULTS["mark_mask"]  # NftablesMarkMask
    deny_action: str = _DEFAULTS["deny_action"]  # drop | reject (NftablesFilterDenyAction)
    endpoint_to_host_action: str = _DEFAULTS["endpoint_to_host_action"]  # drop | accept | return
    failsafe_inbound: tuple[ProtoPort, ...] = _DEFAULTS["failsafe_inbound"]
    failsafe_outbound: tuple[ProtoPort, ...] = _DEFAULTS["failsafe_outbound"]
    log_prefix: str = _DEFAULTS["log_prefix"]
    log_rate_limit: str = _DEFAULTS["log_rate_limit"]  # e.g. "10/second"; "" = unlimited
    log_rate_burst: int = _DEFAULTS["log_rate_burst"]
    ipv6_enabled: bool = _DEFAULTS["ipv6_enabled"]
    nat_outgoing_address: str = _DEFAULTS["nat_outgoing_address"]  # SNAT to this, not masquerade
    # IPPoolsOnly | IPPoolsAndHostIPs (then traffic to any node's IP is not NATed either)
    nat_outgoing_exclusions: str = _DEFAULTS["nat_outgoing_exclusions"]
    workload_iface_prefixes: tuple[str, ...] = _DEFAULTS["workload_iface_prefixes"]
    disable_conntrack_invalid_check: bool = _DEFAULTS["disable_conntrack_invalid_check"]
    # Families with a VXLAN device (decided at start-up from the pools, so not from Config):
    # their VXLAN port is open only to the hosts in ``all-vxlan-net``.
    vxlan_versions: tuple[int, ...] = ()
    vxlan_port: int = _DEFAULTS["vxlan_port"]
    flow_logs: bool = _DEFAULTS["flow_logs"]  # FlowLogsGoldmaneServer set: NFLOG every verdict
    max_name_len: int = 240  # chain names before the layer prefix; nft allows 255 in total

    def __post_init__(self) -> None:
        if len(_mark_bits(self.mark_mask)) < len(_MARK_ROLES):
            raise ValueError(f"mark mask {self.mark_mask:#x} needs at least 5 bits")
        if self.deny_action not in ("drop", "reject"):
            raise ValueError(f"deny action must be drop or reject, not {self.deny_action!r}")
        if self.endpoint_to_host_action not in ("drop", "accept", "return"):
            raise ValueError(f"bad endpoint-to-host action {self.endpoint_to_host_action!r}")
        if not self.workload_iface_prefixes:
            raise ValueError("at least one workload interface prefix is required")

    @classmethod
    def from_config(cls, config: Config) -> RenderConfig:
        """The render config of a resolved Felix configuration."""
        return cls(**_render_fields(config.__getitem__))

    mark_accept = _mark_bit("accept")
    mark_pass = _mark_bit("pass")
    mark_drop = _mark_bit("drop")
    mark_scratch0 = _mark_bit("scratch0")
    mark_scratch1 = _mark_bit("scratch1")

    @property
    def mark_all(self) -> int:
        """The bits Calico owns in the rendered rules (cleared at the start of each hook)."""
        return sum(_mark_bits(self.mark_mask)[: len(_MARK_ROLES)])

    @property
    def ip_versions(self) -> tuple[int, ...]:
        return (4, 6) if self.ipv6_enabled else (4,)
