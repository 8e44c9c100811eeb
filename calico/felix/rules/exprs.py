"""Tiny builders for libnftables JSON statements, so the renderers read like nft rules."""

from __future__ import annotations

from typing import Any

from calico.felix.nftables.model import Expr

MARK: Expr = {"meta": {"key": "mark"}}
NFPROTO = {4: "ipv4", 6: "ipv6"}
ADDR_PROTO = {4: "ip", 6: "ip6"}  # payload protocol carrying saddr/daddr


def meta(key: str) -> Expr:
    return {"meta": {"key": key}}


def payload(protocol: str, field: str) -> Expr:
    return {"payload": {"protocol": protocol, "field": field}}


def match(left: Any, right: Any, op: str = "==") -> Expr:
    return {"match": {"op": op, "left": left, "right": right}}


def nfproto(version: int) -> Expr:
    """``meta nfproto ipv4|ipv6``: restricts a rule to one family inside the inet table."""
    return match(meta("nfproto"), NFPROTO[version])


def iifname(name: str, op: str = "==") -> Expr:
    return match(meta("iifname"), name, op)


def oifname(name: str, op: str = "==") -> Expr:
    return match(meta("oifname"), name, op)


def mark_set(bits: int) -> Expr:
    """``meta mark set meta mark | bits``."""
    return {"mangle": {"key": MARK, "value": {"|": [MARK, bits]}}}


def mark_clear(bits: int) -> Expr:
    """``meta mark set meta mark & ~bits``."""
    return {"mangle": {"key": MARK, "value": {"&": [MARK, ~bits & 0xFFFFFFFF]}}}


def mark_is_set(bits: int) -> Expr:
    """``meta mark & bits == bits``."""
    return match({"&": [MARK, bits]}, bits)


def mark_is_clear(bits: int) -> Expr:
    """``meta mark & bits == 0``."""
    return match({"&": [MARK, bits]}, 0)


def mark_is_any(bits: int) -> Expr:
    """``meta mark & bits != 0``: at least one of ``bits`` is set."""
    return match({"&": [MARK, bits]}, 0, "!=")


def ct_state(*states: str) -> Expr:
    return match({"ct": {"key": "state"}}, list(states), "in")


def jump(target: str) -> Expr:
    return {"jump": {"target": target}}


def goto(target: str) -> Expr:
    return {"goto": {"target": target}}


def vmap(key: Expr, map_name: str) -> Expr:
    return {"vmap": {"key": key, "data": f"@{map_name}"}}


ACCEPT: Expr = {"accept": None}
DROP: Expr = {"drop": None}
RETURN: Expr = {"return": None}
REJECT: Expr = {"reject": None}
NOTRACK: Expr = {"notrack": None}
COUNTER: Expr = {"counter": None}
