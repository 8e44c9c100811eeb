"""Decide the Node's BGP addresses and interface list from the environment and the host.

``IP`` / ``IP6``: ``autodetect``, ``none`` (keep what the Node has) or an explicit address or
CIDR. IPv4 is also autodetected when ``IP`` is unset and the Node has no IPv4 address yet; IPv6
only on request. Works on the Node's wire dict so every field we do not own survives untouched.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from calico.node import autodetect as ad
from calico.node.errors import NodeError
from calico.node.interfaces import Interface

log = logging.getLogger(__name__)

_FIELD = {4: "ipv4Address", 6: "ipv6Address"}
_ENV = {4: "IP", 6: "IP6"}
_METHOD_ENV = {4: "IP_AUTODETECTION_METHOD", 6: "IP6_AUTODETECTION_METHOD"}


@dataclass
class IPResult:
    changed: bool  # addresses or interfaces differ from what the Node had
    ip_changed: bool  # an address changed: other Nodes must be checked for conflicts


class AutodetectFailed(NodeError):
    """Autodetection found nothing and the Node has no previous address to fall back on."""


def _validate_on_host(cidr: str, interfaces: Sequence[Interface]) -> None:
    ip = ipaddress.ip_interface(cidr).ip
    for iface in interfaces:
        if any(c.ip == ip for c in iface.cidrs):
            return
    log.warning("Unable to confirm IPv%d address %s is assigned to this host", ip.version, ip)


def _explicit(value: str, version: int, interfaces: Sequence[Interface]) -> str:
    name = _ENV[version]
    text = ad.local_cidr(value, version, interfaces)
    try:
        net = ipaddress.ip_interface(text)
    except ValueError:
        net = None
    if net is None or net.version != version:
        raise NodeError(
            f"Environment does not contain a valid IPv{version} address: {name}={value}"
        )
    log.info("Using IPv%d address from environment: %s=%s", version, name, value)
    return str(net)


def _configure_family(
    bgp: dict[str, Any],
    version: int,
    env: Mapping[str, str],
    interfaces: Callable[[], Sequence[Interface]],
    reach: ad.Reach,
) -> None:
    value = env.get(_ENV[version], "")
    current = bgp.get(_FIELD[version], "")
    wants_detect = value == "autodetect" or (version == 4 and value == "" and not current)
    if wants_detect:
        found = ad.autodetect(env.get(_METHOD_ENV[version], ""), version, interfaces, reach)
        if found is not None:
            bgp[_FIELD[version]] = str(found)
        elif not current:
            raise AutodetectFailed(
                f"failed to autodetect an IPv{version} address; choose a different "
                f"{_METHOD_ENV[version]} or set {_ENV[version]} explicitly"
            )
        else:
            log.warning(
                "Autodetection of IPv%d address failed, keeping existing value: %s",
                version,
                current,
            )
            _validate_on_host(current, interfaces())
    elif value == "none":
        if current:
            log.info("IPv%d autodetection disabled, keeping existing value: %s", version, current)
            _validate_on_host(current, interfaces())
    elif value:
        bgp[_FIELD[version]] = _explicit(value, version, interfaces())
        _validate_on_host(bgp[_FIELD[version]], interfaces())
    elif current:
        _validate_on_host(current, interfaces())


def _interface_list(
    env: Mapping[str, str], interfaces: Sequence[Interface]
) -> list[dict[str, Any]] | None:
    """``spec.interfaces``: non-excluded interfaces of each family given explicitly in IP/IP6
    (upstream only fills it then), sorted by name."""
    versions = [v for v in (4, 6) if env.get(_ENV[v], "") not in ("", "none")]
    if not versions:
        return None
    found = ad.filter_interfaces(interfaces, (), ad.DEFAULT_INTERFACES_TO_EXCLUDE)
    out = []
    for iface in sorted(found, key=lambda i: i.name):
        addrs = [str(c.ip) for c in iface.cidrs if c.version in versions]
        entry: dict[str, Any] = {"name": iface.name}
        if addrs:
            entry["addresses"] = addrs
        out.append(entry)
    return out or None


def configure_ips(
    spec: dict[str, Any],
    env: Mapping[str, str],
    list_ifaces: Callable[[], Sequence[Interface]],
    reach: ad.Reach = ad.udp_reach,
) -> IPResult:
    """Update ``spec`` (the Node's wire spec) in place; raise NodeError on a fatal problem."""
    if env.get("CALICO_NETWORKING_BACKEND") == "none":
        return IPResult(False, False)
    cache: list[Sequence[Interface]] = []

    def interfaces() -> Sequence[Interface]:
        if not cache:
            cache.append(list_ifaces())
        return cache[0]

    bgp = dict(spec.get("bgp") or {})
    before = (bgp.get("ipv4Address", ""), bgp.get("ipv6Address", ""), spec.get("interfaces"))
    for version in (4, 6):
        _configure_family(bgp, version, env, interfaces, reach)
    ifaces = _interface_list(env, interfaces())
    if ifaces is None:
        spec.pop("interfaces", None)
    else:
        spec["interfaces"] = ifaces
    spec["bgp"] = bgp
    if not bgp.get("ipv4Address") and not bgp.get("ipv6Address"):
        raise NodeError(
            "no IPv4 or IPv6 addresses configured or detected, required for Calico networking"
        )
    after = (bgp.get("ipv4Address", ""), bgp.get("ipv6Address", ""), spec.get("interfaces"))
    ip_changed = before[:2] != after[:2]
    if ip_changed:
        log.info("Node IP addresses changed, will check for conflicts")
    return IPResult(changed=before != after, ip_changed=ip_changed)


def _ip_of(cidr: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not cidr:
        return None
    try:
        return ipaddress.ip_interface(cidr).ip
    except ValueError:
        return None


def conflicts(name: str, spec: Mapping[str, Any], others: Sequence[Any]) -> dict[int, str]:
    """{version: other node's name} for every address of ours another Node already uses."""
    bgp = spec.get("bgp") or {}
    ours = {v: _ip_of(bgp.get(_FIELD[v])) for v in (4, 6)}
    found: dict[int, str] = {}
    for other in others:
        other_bgp = other.spec.bgp
        if other_bgp is None:
            continue
        theirs = {4: _ip_of(other_bgp.ipv4_address), 6: _ip_of(other_bgp.ipv6_address)}
        for v in (4, 6):
            if ours[v] is None or theirs[v] is None or ours[v] != theirs[v]:
                if other.metadata.name == name and ours[v] and theirs[v]:
                    log.warning(
                        "IPv%d address of node %s changed from %s to %s; this could happen if "
                        "two nodes share a name",
                        v,
                        name,
                        theirs[v],
                        ours[v],
                    )
                continue
            if other.metadata.name != name:
                found.setdefault(v, other.metadata.name)
    return found
