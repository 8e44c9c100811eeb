"""Parse ``list table`` JSON into a :class:`KernelState` (the "mark" half of mark-and-sweep).

Only what diffing needs is kept: per chain the hook spec, policy and hash comments; per set and map
its type and canonical members. Rule bodies are never compared, so a resync is cheap to evaluate.
"""

from __future__ import annotations

from typing import Any

from calico.felix.nftables.elements import SetType, canonical, canonical_verdict
from calico.felix.nftables.state import ChainState, HookSpec, KernelState, MapState, SetState
from calico.felix.nftables.state import hash_from_comment as _hash


def parse_listing(listing: dict[str, Any] | str, table: str) -> KernelState:
    """Kernel state of ``table`` from libnftables' JSON output of ``list table``."""
    objects = listing.get("nftables", []) if isinstance(listing, dict) else []
    state = KernelState(table_exists=False)
    hooks: dict[str, tuple[HookSpec | None, str | None]] = {}
    hashes: dict[str, list[str]] = {}
    for obj in objects:
        if "table" in obj:
            state.table_exists = state.table_exists or obj["table"].get("name") == table
        elif "chain" in obj:
            c = obj["chain"]
            hooks[c["name"]] = _hook_of(c)
            hashes.setdefault(c["name"], [])
        elif "rule" in obj:
            r = obj["rule"]
            hashes.setdefault(r["chain"], []).append(_hash(r.get("comment")))
        elif "set" in obj:
            s = obj["set"]
            typ = _type_of(s["type"])
            try:
                elements = {canonical(e, typ) for e in s.get("elem", [])}
            except (ValueError, KeyError, TypeError, OSError):
                typ, elements = ("<unparsed>",), set()  # never same_kind: re-created or deleted
            state.sets[s["name"]] = SetState(
                type=typ, interval="interval" in s.get("flags", []), elements=elements
            )
        elif "map" in obj:
            m = obj["map"]
            key_type = _type_of(m["type"])
            try:
                if m.get("map") != "verdict":
                    raise ValueError("not a verdict map")
                elems = m.get("elem", [])
                elements = {canonical(k, key_type): canonical_verdict(v) for k, v in elems}
            except (ValueError, KeyError, TypeError):
                key_type, elements = ("<unparsed>",), {}  # never equal to ours: re-created
            state.maps[m["name"]] = MapState(key_type=key_type, elements=elements)
    for name, (hook, policy) in hooks.items():
        state.chains[name] = ChainState(hook, policy, tuple(hashes.get(name, ())))
    return state


def _hook_of(c: dict[str, Any]) -> tuple[HookSpec | None, str | None]:
    if "hook" not in c:
        return None, None
    return HookSpec(c.get("type", "filter"), c["hook"], int(c.get("prio", 0))), c.get("policy")


def _type_of(value: Any) -> SetType:
    return tuple(value) if isinstance(value, list) else str(value)
