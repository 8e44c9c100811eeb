"""State records shared by the table, the transaction builder and the readback parser.

The same shapes describe both what we want (desired) and what we believe the kernel holds
(known), so a diff is a plain comparison of two records.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from calico.felix.nftables.elements import Element, SetType, Verdict
from calico.felix.nftables.model import BaseChain, Chain, NftRule, rule_hashes

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; keep working without it
    _orjson = None  # type: ignore[assignment]

_SORT = 0 if _orjson is None else _orjson.OPT_SORT_KEYS

HASH_PREFIX = "cali:"
_REF = re.compile(r'"@([^"\\]+)"')  # a set/map reference inside a rule's canonical JSON
MAX_COMMENT_LEN = 128  # nft's comment limit, in bytes


@dataclass(frozen=True)
class HookSpec:
    """The immutable part of a base chain: changing any of it needs delete + re-add."""

    type: str
    hook: str
    priority: int


@dataclass(frozen=True)
class ChainState:
    """A chain as far as diffing cares: hook spec, policy, and its rules' hashes in order."""

    hook: HookSpec | None
    policy: str | None
    hashes: tuple[str, ...]


@dataclass
class RenderedChain:
    """A desired chain with hashes, comments and rule JSON computed once, at ``set_chain`` time."""

    name: str
    state: ChainState
    base: BaseChain | None
    rules: list[tuple[list[dict[str, Any]], str]]  # (exprs, full comment)
    refs: frozenset[str] = frozenset()  # set/map names (without "@") the rules refer to


@dataclass
class SetState:
    type: SetType
    interval: bool
    elements: set[Element] = field(default_factory=set)

    def same_kind(self, other: SetState) -> bool:
        return self.type == other.type and self.interval == other.interval


@dataclass
class MapState:
    key_type: SetType
    elements: dict[Element, Verdict] = field(default_factory=dict)


@dataclass
class KernelState:
    """What the table holds (or, for the known copy, what our last successful apply left)."""

    table_exists: bool = False
    chains: dict[str, ChainState] = field(default_factory=dict)
    sets: dict[str, SetState] = field(default_factory=dict)
    maps: dict[str, MapState] = field(default_factory=dict)


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def canonical_json(obj: Any) -> str:
    """``obj`` as sorted-key compact JSON, exactly as ``_ENCODER`` writes it (the reference).

    orjson writes the same text ~5x faster for what rules hold (dicts with ``str`` keys,
    lists, tuples, ``str``, ``int``, ``bool``, None; never floats) as long as the text is
    ASCII without DEL: the stdlib escapes DEL and everything past ASCII as ``\\uXXXX``, so
    such a text, or anything orjson refuses (an integer past 64 bits, a non-``str`` key), is
    written again by the reference. A new activation of 100 policies spent ~9 of its ~26 ms
    here (design/performance.md "Rule text through orjson (session 12)"); tested against the
    reference in ``tests/unit/felix/nftables/test_rule_text_canonical.py``."""
    if _orjson is not None:
        try:
            text = _orjson.dumps(obj, option=_SORT).decode()
        except _orjson.JSONEncodeError:
            pass
        else:
            if text.isascii() and "\x7f" not in text:
                return text
    return _ENCODER.encode(obj)


def rule_text(rule: NftRule) -> str:
    """Canonical JSON of a rule's exprs plus its human comment: the input to the rule hash.

    Kept on the rule (frozen, so computed once): the renderer hands out the same rule objects
    for every endpoint chain of one shape (``calico.felix.rules.endpoints.endpoint_chain``),
    and encoding was most of rendering a new workload (design/performance.md "TTFR: one
    workload's delta")."""
    text = rule.__dict__.get("_text")
    if text is None:
        text = canonical_json({"comment": rule.comment, "expr": list(rule.exprs)})
        object.__setattr__(rule, "_text", text)
    return text


def full_comment(rule_hash: str, human: str) -> str:
    """``cali:<hash>;`` plus the human comment, cut to nft's 128-byte limit."""
    text = f"{HASH_PREFIX}{rule_hash};" + (f" {human}" if human else "")
    raw = text.encode()
    if len(raw) <= MAX_COMMENT_LEN:
        return text
    return raw[:MAX_COMMENT_LEN].decode(errors="ignore")


def hash_from_comment(comment: str | None) -> str:
    """The hash in a rule comment we wrote; "" for foreign rules (which then never match)."""
    if not comment or not comment.startswith(HASH_PREFIX):
        return ""
    return comment[len(HASH_PREFIX) :].split(";", 1)[0]


def hook_spec(base: BaseChain | None) -> HookSpec | None:
    return None if base is None else HookSpec(base.type, base.hook, int(base.priority))


def render_chain(chain: Chain) -> RenderedChain:
    texts = [rule_text(r) for r in chain.rules]
    hashes = rule_hashes(chain.name, texts)
    rules = [
        (list(r.exprs), full_comment(h, r.comment))
        for r, h in zip(chain.rules, hashes, strict=True)
    ]
    refs = frozenset(m for t in texts for m in _REF.findall(t))
    state = ChainState(
        hook=hook_spec(chain.base),
        policy=chain.base.policy if chain.base else None,
        hashes=tuple(hashes),
    )
    return RenderedChain(chain.name, state, chain.base, rules, refs)
