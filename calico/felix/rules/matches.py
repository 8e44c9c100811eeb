"""Translate the match part of a policy ``Rule`` into nft match expressions for one IP family.

Within a rule every criterion is ANDed and entries of one list are ORed. Plain lists (nets,
numeric ports) become anonymous nft sets. Port criteria that mix numeric ports with named-port
IP sets (or list several named-port sets) cannot be one nft expression, so they come back as
*alternatives* that the policy renderer ORs through scratch mark bits.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from calico.felix.messages import ICMPTypeCode, PortRange, Rule
from calico.felix.nftables.model import Expr, ipset_name
from calico.felix.rules.exprs import ADDR_PROTO, match, meta, nfproto, payload
from calico.policyeval.rulesem import ICMP_V4, ICMP_V6, PROTOCOL_NUMBERS, protocol_number

__all__ = [
    "PROTOCOL_NUMBERS",
    "RuleMatch",
    "icmp_matches",
    "is_family_specific",
    "named_port_match",
    "nets_value",
    "ports_value",
    "protocol_number",
    "rule_match",
]


def _nets_of(
    nets: Sequence[str], version: int
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    parsed = [ipaddress.ip_network(n, strict=False) for n in nets]
    return [n for n in parsed if n.version == version]


def nets_value(nets: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> Any:
    """A single address/prefix, or an anonymous set; overlaps are collapsed (nft rejects them)."""
    collapsed = list(ipaddress.collapse_addresses(nets))  # type: ignore[type-var]
    items: list[Any] = [
        str(n.network_address)
        if n.prefixlen == n.max_prefixlen
        else {"prefix": {"addr": str(n.network_address), "len": n.prefixlen}}
        for n in collapsed
    ]
    return items[0] if len(items) == 1 else {"set": items}


def ports_value(ports: Sequence[PortRange]) -> Any:
    """A single port, a range, or an anonymous set of both (sorted, de-duplicated)."""
    items: list[Any] = []
    for pr in sorted(set(ports), key=lambda p: (p.first, p.last)):
        items.append(pr.first if pr.first == pr.last else {"range": [pr.first, pr.last]})
    return items[0] if len(items) == 1 else {"set": items}


def named_port_match(set_id: str, version: int, side: str, op: str = "==") -> Expr:
    """``ip saddr . meta l4proto . th sport @set`` against an IP_AND_PORT set."""
    addr, port = ("saddr", "sport") if side == "src" else ("daddr", "dport")
    left = {"concat": [payload(ADDR_PROTO[version], addr), meta("l4proto"), payload("th", port)]}
    return match(left, f"@{ipset_name(set_id, version)}", op)


def icmp_matches(proto: int, icmp: ICMPTypeCode, negated: bool) -> list[Expr]:
    name = "icmp" if proto == ICMP_V4 else "icmpv6"
    ptype, pcode = payload(name, "type"), payload(name, "code")
    if not negated:
        out = [match(ptype, icmp.type)]
        if icmp.code is not None:
            out.append(match(pcode, icmp.code))
        return out
    if icmp.code is None:
        return [match(ptype, icmp.type, "!=")]
    # not (type and code): one concatenation compared against a one-element set.
    return [match({"concat": [ptype, pcode]}, {"set": [{"concat": [icmp.type, icmp.code]}]}, "!=")]


def is_family_specific(rule: Rule) -> bool:
    """True if the rule must be rendered once per family (addresses or an explicit version)."""
    return bool(
        rule.ip_version
        or rule.src_net
        or rule.dst_net
        or rule.not_src_net
        or rule.not_dst_net
        or rule.src_ip_set_ids
        or rule.dst_ip_set_ids
        or rule.not_src_ip_set_ids
        or rule.not_dst_ip_set_ids
        or rule.src_named_port_ip_set_ids
        or rule.dst_named_port_ip_set_ids
        or rule.not_src_named_port_ip_set_ids
        or rule.not_dst_named_port_ip_set_ids
        or rule.src_ip_port_set_ids
        or rule.dst_ip_port_set_ids
    )


@dataclass
class RuleMatch:
    """Rendered matches: ``exprs`` are ANDed; each group in ``alternatives`` is an OR of
    expression lists (only used when a side has more than one port alternative)."""

    exprs: list[Expr] = field(default_factory=list)
    alternatives: list[list[list[Expr]]] = field(default_factory=list)


def _protocol_of(rule: Rule) -> int | None:
    return None if rule.protocol is None else protocol_number(rule.protocol)


def rule_match(rule: Rule, version: int | None) -> RuleMatch | None:
    """Matches for ``rule`` in family ``version`` (None: family-agnostic rule, both families).

    Returns None when the rule cannot match in this family (wrong ip_version, ICMP of the other
    family, or positive nets all of the other family), so the caller skips it.
    """
    if version is None and is_family_specific(rule):
        raise ValueError("a family-specific rule needs an IP version")
    proto = _protocol_of(rule)
    if version is not None:
        if rule.ip_version and rule.ip_version != version:
            return None
        if (proto == ICMP_V4 and version == 6) or (proto == ICMP_V6 and version == 4):
            return None
    out = RuleMatch()
    exprs = out.exprs
    if version is not None:
        exprs.append(nfproto(version))
    if proto is not None:
        exprs.append(match(meta("l4proto"), proto))
    if rule.not_protocol is not None:
        exprs.append(match(meta("l4proto"), protocol_number(rule.not_protocol), "!="))

    for side, nets, not_nets in (
        ("saddr", rule.src_net, rule.not_src_net),
        ("daddr", rule.dst_net, rule.not_dst_net),
    ):
        if version is None or not (nets or not_nets):
            continue
        left = payload(ADDR_PROTO[version], side)
        if nets:
            mine = _nets_of(nets, version)
            if not mine:
                return None
            exprs.append(match(left, nets_value(mine)))
        theirs = _nets_of(not_nets, version)
        if theirs:
            exprs.append(match(left, nets_value(theirs), "!="))

    if version is not None:
        for side, ids, op in (
            ("saddr", rule.src_ip_set_ids, "=="),
            ("saddr", rule.not_src_ip_set_ids, "!="),
            ("daddr", rule.dst_ip_set_ids, "=="),
            ("daddr", rule.not_dst_ip_set_ids, "!="),
            ("saddr", rule.src_ip_port_set_ids, "=="),  # svcnoport: address-only NET sets
        ):
            if not ids:  # (the payload dicts are only built for a side in use)
                continue
            left = payload(ADDR_PROTO[version], side)
            exprs.extend(match(left, f"@{ipset_name(i, version)}", op) for i in ids)

    for side, ports, named, not_ports, not_named in (
        ("src", rule.src_ports, rule.src_named_port_ip_set_ids, rule.not_src_ports,
         rule.not_src_named_port_ip_set_ids),
        ("dst", rule.dst_ports, rule.dst_named_port_ip_set_ids, rule.not_dst_ports,
         rule.not_dst_named_port_ip_set_ids),
    ):  # fmt: skip
        port_field = None  # (built only for a side with numeric ports)
        if ports or not_ports:
            port_field = payload("th", "sport" if side == "src" else "dport")
        alts: list[list[Expr]] = []
        if ports:
            alts.append([match(port_field, ports_value(ports))])
        if named:
            assert version is not None
            alts.extend([named_port_match(i, version, side)] for i in named)
        if len(alts) == 1:
            exprs.extend(alts[0])
        elif alts:
            out.alternatives.append(alts)
        if not_ports:
            exprs.append(match(port_field, ports_value(not_ports), "!="))
        if not_named:
            assert version is not None
            exprs.extend(named_port_match(i, version, side, "!=") for i in not_named)

    if version is not None:
        exprs.extend(named_port_match(i, version, "dst") for i in rule.dst_ip_port_set_ids)

    for icmp, negated in ((rule.icmp, False), (rule.not_icmp, True)):
        if icmp is None:
            continue
        if proto not in (ICMP_V4, ICMP_V6):
            raise ValueError("an ICMP type match needs protocol icmp or icmpv6")
        exprs.extend(icmp_matches(proto, icmp, negated))
    return out
