"""Everything the rule renderer needs to know about Felix's configuration, as one frozen value.

Rendering is a pure function of (config, inputs); keeping the knobs in a hashable dataclass lets
the managers cache and diff rendered chains safely.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Failsafe:
    """One failsafe port: ``protocol`` tcp|udp, ``port``, optional ``net`` (a CIDR, "" = any)."""

    protocol: str
    port: int
    net: str = ""


def parse_failsafes(text: str) -> tuple[Failsafe, ...]:
    """Parse FailsafeInbound/OutboundHostPorts: ``port``, ``proto:port`` or ``proto:net:port``.

    ``none`` (or empty) means no failsafes; IPv6 nets are written in brackets.
    """
    text = text.strip()
    if text.lower() in ("", "none"):
        return ()
    out: list[Failsafe] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        proto, net = "tcp", ""
        if entry.count(":") == 0:
            port = entry
        else:
            proto, _, rest = entry.partition(":")
            if rest.startswith("["):
                net, _, port = rest[1:].partition("]:")
            elif ":" in rest:
                net, _, port = rest.rpartition(":")
            else:
                port = rest
        proto = proto.lower()
        if proto not in ("tcp", "udp"):
            raise ValueError(f"failsafe protocol must be tcp or udp: {entry!r}")
        if net:
            net = str(ipaddress.ip_network(net, strict=False))
        port_num = int(port)
        if not 0 <= port_num <= 65535:
            raise ValueError(f"failsafe port out of range: {entry!r}")
        out.append(Failsafe(proto, port_num, net))
    return tuple(out)


DEFAULT_FAILSAFE_INBOUND = parse_failsafes(
    "tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
)
DEFAULT_FAILSAFE_OUTBOUND = parse_failsafes(
    "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
)


def _mark_bits(mask: int) -> list[int]:
    return [1 << i for i in range(32) if mask & (1 << i)]


@dataclass(frozen=True)
class RenderConfig:
    """Rendering knobs. Mark bits are handed out lowest-first from ``mark_mask`` (felix §4.2)."""

    mark_mask: int = 0xFFFF0000
    deny_action: str = "drop"  # drop | reject (Nftables/IptablesFilterDenyAction)
    endpoint_to_host_action: str = "drop"  # drop | accept | return (DefaultEndpointToHostAction)
    failsafe_inbound: tuple[Failsafe, ...] = DEFAULT_FAILSAFE_INBOUND
    failsafe_outbound: tuple[Failsafe, ...] = DEFAULT_FAILSAFE_OUTBOUND
    log_prefix: str = "calico-packet"
    log_rate_limit: str = ""  # e.g. "10/second"; "" = unlimited
    log_rate_burst: int = 5
    ipv6_enabled: bool = True
    nat_outgoing_address: str = ""  # SNAT to this instead of masquerading
    workload_iface_prefixes: tuple[str, ...] = ("cali",)
    disable_conntrack_invalid_check: bool = False
    max_name_len: int = 240  # chain names before the layer prefix; nft allows 255 in total

    def __post_init__(self) -> None:
        if len(_mark_bits(self.mark_mask)) < 5:
            raise ValueError(f"mark mask {self.mark_mask:#x} needs at least 5 bits")
        if self.deny_action not in ("drop", "reject"):
            raise ValueError(f"deny action must be drop or reject, not {self.deny_action!r}")
        if self.endpoint_to_host_action not in ("drop", "accept", "return"):
            raise ValueError(f"bad endpoint-to-host action {self.endpoint_to_host_action!r}")
        if not self.workload_iface_prefixes:
            raise ValueError("at least one workload interface prefix is required")

    # Mark bits, lowest first: accept, pass, drop, scratch0, scratch1.
    @property
    def mark_accept(self) -> int:
        return _mark_bits(self.mark_mask)[0]

    @property
    def mark_pass(self) -> int:
        return _mark_bits(self.mark_mask)[1]

    @property
    def mark_drop(self) -> int:
        return _mark_bits(self.mark_mask)[2]

    @property
    def mark_scratch0(self) -> int:
        return _mark_bits(self.mark_mask)[3]

    @property
    def mark_scratch1(self) -> int:
        return _mark_bits(self.mark_mask)[4]

    @property
    def mark_all(self) -> int:
        """The bits Calico owns in the rendered rules (cleared at the start of each hook)."""
        return (
            self.mark_accept
            | self.mark_pass
            | self.mark_drop
            | self.mark_scratch0
            | self.mark_scratch1
        )

    @property
    def ip_versions(self) -> tuple[int, ...]:
        return (4, 6) if self.ipv6_enabled else (4,)

    @classmethod
    def from_felix_config(cls, params: Mapping[str, str]) -> RenderConfig:
        """Build from resolved Felix parameters (names as in config_params, case-insensitive)."""
        p = {k.lower(): v for k, v in params.items() if v not in (None, "")}
        kw: dict[str, object] = {}
        mask = p.get("nftablesmarkmask") or p.get("iptablesmarkmask")
        if mask:
            kw["mark_mask"] = int(mask, 0)
        deny = p.get("nftablesfilterdenyaction") or p.get("iptablesfilterdenyaction")
        if deny:
            kw["deny_action"] = deny.lower()
        if "defaultendpointtohostaction" in p:
            kw["endpoint_to_host_action"] = p["defaultendpointtohostaction"].lower()
        if "failsafeinboundhostports" in p:
            kw["failsafe_inbound"] = parse_failsafes(p["failsafeinboundhostports"])
        if "failsafeoutboundhostports" in p:
            kw["failsafe_outbound"] = parse_failsafes(p["failsafeoutboundhostports"])
        if "logprefix" in p:
            kw["log_prefix"] = p["logprefix"]
        if "logactionratelimit" in p:
            kw["log_rate_limit"] = p["logactionratelimit"]
        if "logactionratelimitburst" in p:
            kw["log_rate_burst"] = int(p["logactionratelimitburst"])
        if "ipv6support" in p:
            kw["ipv6_enabled"] = p["ipv6support"].lower() in ("true", "1", "yes")
        if "natoutgoingaddress" in p:
            kw["nat_outgoing_address"] = p["natoutgoingaddress"]
        if "interfaceprefix" in p:
            kw["workload_iface_prefixes"] = tuple(
                s.strip() for s in p["interfaceprefix"].split(",") if s.strip()
            )
        if "disableconntrackinvalidcheck" in p:
            kw["disable_conntrack_invalid_check"] = p["disableconntrackinvalidcheck"].lower() in (
                "true",
                "1",
                "yes",
            )
        return cls(**kw)  # type: ignore[arg-type]
