"""Endpoint dispatch: interface name -> endpoint chain, as nft verdict maps.

A dispatch *chain* (static) looks the interface up in a same-named verdict *map* (dynamic) and
``goto``s the endpoint chain, so the endpoint chain's ``return`` lands back in the hook chain
that jumped to the dispatch chain. Packets on an unknown workload interface are denied; packets on
a non-HEP host interface just return (no host endpoint, no host policy) unless an all-interfaces
(``*``) endpoint is in force: then the host dispatch chains end in a ``goto`` of its chains
(design/felix-rules.md "The all-interfaces host endpoint").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from calico.felix.hostendpoints import ALL_INTERFACES
from calico.felix.messages import HostEndpoint
from calico.felix.nftables.model import Chain, NftRule, VerdictMap, layered
from calico.felix.rules.config import RenderConfig
from calico.felix.rules.endpoints import (
    HOST_FROM_FWD_PREFIX,
    HOST_FROM_PREFIX,
    HOST_TO_FWD_PREFIX,
    HOST_TO_PREFIX,
    WL_FROM_PREFIX,
    WL_TO_PREFIX,
    deny_expr,
    endpoint_chain_name,
    host_endpoint_layers,
    rendered_host_endpoint,
)
from calico.felix.rules.exprs import RETURN, goto, iifname, meta, vmap


@dataclass(frozen=True)
class Dispatch:
    """One dispatch chain/map pair: ``layer``-``name``, keyed on ``key`` (iifname|oifname)."""

    layer: str
    name: str
    key: str
    endpoint_prefix: str
    workload: bool  # unknown interface -> deny (workloads) or return (host endpoints)

    @property
    def full_name(self) -> str:
        return layered(self.layer, self.name)


FROM_WL = Dispatch("filter", "cali-from-wl-dispatch", "iifname", WL_FROM_PREFIX, True)
TO_WL = Dispatch("filter", "cali-to-wl-dispatch", "oifname", WL_TO_PREFIX, True)
FROM_HEP = Dispatch("filter", "cali-from-host-endpoint", "iifname", HOST_FROM_PREFIX, False)
TO_HEP = Dispatch("filter", "cali-to-host-endpoint", "oifname", HOST_TO_PREFIX, False)
FROM_HEP_FWD = Dispatch("filter", "cali-from-hep-forward", "iifname", HOST_FROM_FWD_PREFIX, False)
TO_HEP_FWD = Dispatch("filter", "cali-to-hep-forward", "oifname", HOST_TO_FWD_PREFIX, False)
MANGLE_FROM_HEP = Dispatch("mangle", "cali-from-host-endpoint", "iifname", HOST_FROM_PREFIX, False)
RAW_FROM_HEP = Dispatch("raw", "cali-from-host-endpoint", "iifname", HOST_FROM_PREFIX, False)
RAW_TO_HEP = Dispatch("raw", "cali-to-host-endpoint", "oifname", HOST_TO_PREFIX, False)

WORKLOAD_DISPATCHES = (FROM_WL, TO_WL)
HOST_DISPATCHES = (FROM_HEP, TO_HEP, FROM_HEP_FWD, TO_HEP_FWD)
ALL_DISPATCHES = (*WORKLOAD_DISPATCHES, *HOST_DISPATCHES, MANGLE_FROM_HEP, RAW_FROM_HEP, RAW_TO_HEP)


def dispatch_chains(
    config: RenderConfig, all_interfaces: HostEndpoint | None = None
) -> list[Chain]:
    """The lookup chains (their maps come from ``dispatch_maps``); ``all_interfaces`` is the
    ``*`` endpoint in force, if any (see ``host_dispatch_chains``)."""
    return [_dispatch_chain(config, d, all_interfaces) for d in ALL_DISPATCHES]


def host_dispatch_chains(config: RenderConfig, all_interfaces: HostEndpoint | None) -> list[Chain]:
    """The host endpoint lookup chains, the ones the ``*`` endpoint changes.

    After the map lookup: filter INPUT/OUTPUT/FORWARD dispatch ``goto`` the ``*`` endpoint's
    chain (workload traffic never reaches the INPUT/OUTPUT ones: the hook chains send it
    elsewhere first; forwarded workload traffic does reach the forward ones, as upstream's);
    mangle (pre-DNAT) does when the endpoint has pre-DNAT policy, after returning for workload
    interfaces (upstream's mangle PREROUTING lets workload traffic through before its
    dispatch); raw never (no untracked policy on ``*``).
    """
    return [_dispatch_chain(config, d, all_interfaces) for d in ALL_DISPATCHES if not d.workload]


def _dispatch_chain(config: RenderConfig, d: Dispatch, wild: HostEndpoint | None) -> Chain:
    rules = [NftRule([vmap(meta(d.key), d.full_name)])]
    if d.workload:
        rules.append(NftRule([deny_expr(config, d.layer)], "Unknown interface"))
    elif wild is not None and _wild_layer(rendered_host_endpoint(ALL_INTERFACES, wild), d.layer):
        if d.layer == "mangle":
            rules += [
                NftRule([iifname(f"{p}*"), RETURN], "Pre-DNAT policy is for host interfaces")
                for p in config.workload_iface_prefixes
            ]
        target = endpoint_chain_name(
            d.endpoint_prefix, ALL_INTERFACES, d.layer, config.max_name_len
        )
        rules.append(NftRule([goto(target)], "All-interfaces host endpoint"))
    return Chain(d.full_name, rules)


def _wild_layer(wild: HostEndpoint, layer: str) -> bool:
    return layer == "filter" or host_endpoint_layers(wild)[layer]


def _elements(
    config: RenderConfig, d: Dispatch, ifaces: Iterable[str]
) -> dict[str, tuple[str, str]]:
    return {
        iface: ("goto", endpoint_chain_name(d.endpoint_prefix, iface, d.layer, config.max_name_len))
        for iface in sorted(ifaces)
    }


def workload_dispatch_entries(config: RenderConfig, iface: str) -> list[tuple[str, Any]]:
    """``(map, verdict)`` of workload interface ``iface`` in each workload dispatch map: what
    ``dispatch_maps`` puts there for it, for updating the maps one interface at a time."""
    return [(d.full_name, _elements(config, d, (iface,))[iface]) for d in WORKLOAD_DISPATCHES]


def dispatch_maps(
    config: RenderConfig,
    workload_ifaces: Iterable[str] | Mapping[str, Any],
    host_endpoints: Mapping[str, HostEndpoint] | None = None,
) -> list[VerdictMap]:
    """Every dispatch map (possibly empty, so the static chains always resolve).

    ``host_endpoints`` maps a resolved interface name to its host endpoint; the all-interfaces
    key (``ALL_INTERFACES``, dispatched by ``host_dispatch_chains`` instead), ``*`` and the
    unresolved ``""`` are not interfaces and get no elements.
    """
    heps = {k: v for k, v in (host_endpoints or {}).items() if k and k not in ("*", ALL_INTERFACES)}
    wl = list(workload_ifaces)
    out = [VerdictMap(d.full_name, elements=_elements(config, d, wl)) for d in WORKLOAD_DISPATCHES]
    out += [VerdictMap(d.full_name, elements=_elements(config, d, heps)) for d in HOST_DISPATCHES]
    layers = {k: host_endpoint_layers(v) for k, v in heps.items()}
    mangle = [k for k, v in layers.items() if v["mangle"]]
    raw = [k for k, v in layers.items() if v["raw"]]
    out.append(
        VerdictMap(MANGLE_FROM_HEP.full_name, elements=_elements(config, MANGLE_FROM_HEP, mangle))
    )
    out += [
        VerdictMap(d.full_name, elements=_elements(config, d, raw))
        for d in (RAW_FROM_HEP, RAW_TO_HEP)
    ]
    return out
