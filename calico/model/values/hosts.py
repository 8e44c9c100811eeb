"""v1 per-host values: WireGuard identity and host metadata."""

from __future__ import annotations

from dataclasses import dataclass

from calico.model.values.codec import V1Value, opt_text, text


@dataclass(frozen=True, slots=True)
class Wireguard(V1Value):
    """``/calico/v1/host/<h>/wireguard``: the node's WireGuard interface addresses and public
    keys, one pair per family; a family is usable once its public key is published."""

    interface_ipv4_addr: str | None = opt_text("interfaceIPv4Addr", omitempty=True)
    public_key: str = text("publicKey", omitempty=True)
    interface_ipv6_addr: str | None = opt_text("interfaceIPv6Addr", omitempty=True)
    public_key_v6: str = text("publicKeyV6", omitempty=True)


@dataclass(frozen=True, slots=True)
class HostMetadata(V1Value):
    """``/calico/v1/host/<h>/metadata``: upstream's (empty) marker that a host exists."""
