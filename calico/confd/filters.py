"""BGPFilter resources -> BIRD functions (design/confd.md "BGP filters").

One function per filter and direction that has rules for the IP version:
``'bgp_<name>_importFilterV4'()`` (or ``(bool is_same_as)`` when a rule matches on
``peerType``). Each rule is ``if (<cond>&&...) then { <operations> accept|reject; }``. BIRD
symbols are at most 64 characters, so names longer than 45 become their first 28 characters,
``_`` and 16 upper-case hex digits of their SHA-256.
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any

MAX_SYMBOL = 64
_OPERATORS = {"Equal": "=", "NotEqual": "!=", "In": "~", "NotIn": "!~"}
BIRD_INT_MAX = 2147483647


def truncate_name(name: str, max_len: int) -> str:
    if len(name) <= max_len:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest().upper()[:16]
    return f"{name[: max_len - 17]}_{digest}"


def function_name(name: str, direction: str, version: int) -> str:
    """The quoted BIRD symbol; ``direction`` is ``import`` or ``export``."""
    overhead = len(f"bgp__{direction}FilterV{version}")
    return f"'bgp_{truncate_name(name, MAX_SYMBOL - overhead)}_{direction}FilterV{version}'"


def _rules(spec: Any, direction: str, version: int) -> list[Any]:
    attr = f"{direction}_v{version}"
    return list(getattr(spec, attr) or [])


def has_rules(spec: Any, direction: str, version: int) -> bool:
    return bool(_rules(spec, direction, version))


def uses_peer_type(spec: Any, direction: str, version: int) -> bool:
    return any(r.peer_type for r in _rules(spec, direction, version))


def _community(value: str) -> str:
    parts = value.split(":")
    return ", ".join(parts)


def _cidr_condition(rule: Any) -> str:
    op = _OPERATORS[rule.match_operator]
    cidr = rule.cidr
    if rule.prefix_length is not None:
        net = ipaddress.ip_network(cidr, strict=False)
        lo = max(net.prefixlen, rule.prefix_length.min or 0)
        hi = min(net.max_prefixlen, rule.prefix_length.max or net.max_prefixlen)
        cidr = f"[ {cidr}{{{lo},{hi}}} ]"
    return f"(net {op} {cidr})"


def rule_statement(rule: Any) -> str:
    conds = []
    if rule.cidr:
        conds.append(_cidr_condition(rule))
    if rule.source == "RemotePeers":
        conds.append("((defined(source))&&(source ~ [ RTS_BGP ]))")
    if rule.interface:
        conds.append(f'((defined(ifname))&&(ifname ~ "{rule.interface}"))')
    if rule.communities is not None:
        value = rule.communities.values[0]
        attr = "bgp_community" if value.count(":") == 1 else "bgp_large_community"
        conds.append(f"(({_community(value)}) ~ {attr})")
    if rule.as_path_prefix:
        conds.append(f"(bgp_path ~ [= {' '.join(str(a) for a in rule.as_path_prefix)} * =])")
    if rule.priority is not None:
        conds.append(f"(bgp_local_pref = {BIRD_INT_MAX - rule.priority})")
    body = []
    for op in rule.operations or []:
        if op.add_community is not None:
            value = op.add_community.value
            attr = "bgp_community" if value.count(":") == 1 else "bgp_large_community"
            body.append(f"{attr}.add(({_community(value)}));")
        elif op.prepend_as_path is not None:
            # BIRD prepends one AS at a time; the last prepend ends up first.
            body.extend(f"bgp_path.prepend({a});" for a in reversed(op.prepend_as_path.prefix))
        elif op.set_priority is not None:
            p = op.set_priority.value
            body.append(f"krt_metric = {p}; bgp_local_pref = {BIRD_INT_MAX - p};")
    body.append(f"{rule.action.lower()};")
    text = " ".join(body)
    if conds:
        text = f"if ({'&&'.join(conds)}) then {{ {text} }}"
    if rule.peer_type == "iBGP":
        text = f"if (is_same_as) then {{ {text} }}"
    elif rule.peer_type == "eBGP":
        text = f"if (!is_same_as) then {{ {text} }}"
    return text


def bird_functions(filters: dict[str, Any], version: int) -> list[str]:
    """The function definitions for every filter (sorted by name), as lines."""
    lines: list[str] = []
    for name in sorted(filters):
        spec = filters[name].spec
        directions = [d for d in ("import", "export") if has_rules(spec, d, version)]
        if not directions:
            continue
        lines.append(f"# v{version} BGPFilter {name}")
        for d in directions:
            arg = "bool is_same_as" if uses_peer_type(spec, d, version) else ""
            lines.append(f"function {function_name(name, d, version)}({arg}) {{")
            lines.extend(f"  {rule_statement(r)}" for r in _rules(spec, d, version))
            lines.append("}")
    return lines or [f"# No v{version} BGPFilters configured"]


def filter_calls(
    filters: dict[str, Any], names: list[str], direction: str, version: int, same_as: bool
) -> list[str]:
    """The calls a peer's import/export filter makes, in the peer's ``filters`` order."""
    out = []
    for name in names:
        res = filters.get(name)
        if res is None or not has_rules(res.spec, direction, version):
            continue
        arg = (
            ("true" if same_as else "false") if uses_peer_type(res.spec, direction, version) else ""
        )
        out.append(f"{function_name(name, direction, version)}({arg});")
    return out
