"""The desired-state vocabulary shared by the rule renderer and the nftables table layer.

A rule is a list of libnftables JSON statements (the ``expr`` array of a JSON ``rule`` object)
plus a human comment; the table layer prepends the ``cali:<hash>;`` comment itself. Nothing here
talks to the kernel.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field
from typing import Any

TABLE_FAMILY = "inet"
TABLE_NAME = "calico"

# Logical tables ("layers") namespace chain names inside the single inet table, as upstream's
# nftables backend does: filter-cali-fw-eth0, nat-cali-nat-outgoing, raw-..., mangle-...
LAYERS = ("filter", "nat", "mangle", "raw")

Expr = dict[str, Any]  # one libnftables JSON statement, e.g. {"accept": None}


@dataclass(frozen=True)
class NftRule:
    exprs: tuple[Expr, ...]
    comment: str = ""  # human part only; the table adds "cali:<hash>;"

    def __post_init__(self) -> None:
        object.__setattr__(self, "exprs", tuple(self.exprs))


@dataclass(frozen=True)
class BaseChain:
    """A chain hooked into netfilter. ``type`` filter|nat|route, ``hook`` prerouting|input|...,
    ``priority`` an int (filter 0, dstnat -100, srcnat 100, mangle -150, raw -300)."""

    name: str
    type: str
    hook: str
    priority: int
    policy: str = "accept"


@dataclass
class Chain:
    name: str
    rules: list[NftRule] = field(default_factory=list)
    base: BaseChain | None = None  # set for hooked chains


@dataclass
class NftSet:
    """An nft set. ``type`` is an nft type name (``ipv4_addr``) or a tuple for a concatenation
    (``("ipv4_addr", "inet_proto", "inet_service")``); ``interval`` for CIDR members."""

    name: str
    type: str | tuple[str, ...]
    interval: bool = False
    elements: set[Any] = field(default_factory=set)


@dataclass
class VerdictMap:
    """``ifname : verdict`` map for endpoint dispatch; values like ("goto", "filter-cali-fw-x")."""

    name: str
    key_type: str = "ifname"
    elements: dict[str, tuple[str, str]] = field(default_factory=dict)


def layered(layer: str, name: str) -> str:
    """Chain name in the single inet table: (filter, cali-fw-eth0) -> filter-cali-fw-eth0."""
    if layer not in LAYERS:
        raise ValueError(f"unknown layer {layer!r}")
    return f"{layer}-{name}"


def ipset_name(set_id: str, ip_version: int) -> str:
    """nft set name for a Calico IP set ID as upstream names them: ``cali<v>0<id>``, <= 31 chars."""
    if ip_version not in (4, 6):
        raise ValueError(f"ip_version must be 4 or 6, not {ip_version!r}")
    return f"cali{ip_version}0{set_id}"[:31]


def length_limited_id(prefix: str, suffix: str, max_len: int) -> str:
    """Upstream's GetLengthLimitedID: keep ``prefix + suffix`` when it fits, else hash the suffix.

    Over the limit (or exactly at it with a suffix starting with ``_``, to avoid colliding with a
    hashed name) the result is ``prefix + "_" + base64url(SHA-256(suffix))`` cut to ``max_len``.
    """
    if not suffix:
        suffix = "_"
    if len(prefix) + len(suffix) < max_len or (
        len(prefix) + len(suffix) == max_len and not suffix.startswith("_")
    ):
        return prefix + suffix
    digest = base64.urlsafe_b64encode(hashlib.sha256(suffix.encode()).digest()).decode()
    return prefix + "_" + digest[: max_len - 1 - len(prefix)]


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def rule_hashes(chain_name: str, rendered_rules: list[str]) -> list[str]:
    """Chained rule hashes: h0 = SHA-224(chain), hi = SHA-224(h(i-1) || rule i), 16 chars each.

    Position and predecessors are part of each hash, so an unchanged prefix of a chain keeps its
    hashes (and a resync can tell exactly which chains drifted).
    """
    out: list[str] = []
    h = hashlib.sha224(chain_name.encode()).digest()
    sha224, b64, urlsafe = hashlib.sha224, binascii.b2a_base64, _URLSAFE
    for text in rendered_rules:
        h = sha224(h + text.encode()).digest()
        # The first 16 characters of urlsafe base64 are exactly those of the first 12 bytes
        # (no padding): one C call per rule, not two Python frames over all 28 bytes.
        out.append(b64(h[:12], newline=False).translate(urlsafe).decode())
    return out


def rule_hashes_reference(chain_name: str, rendered_rules: list[str]) -> list[str]:
    """:func:`rule_hashes` as defined (urlsafe base64 of each digest, cut to 16): the
    reference its tests compare against."""
    out: list[str] = []
    h = hashlib.sha224(chain_name.encode()).digest()
    for text in rendered_rules:
        h = hashlib.sha224(h + text.encode()).digest()
        out.append(base64.urlsafe_b64encode(h).decode()[:16])
    return out
