"""The cluster-scoped documents under one datastore prefix, as their stored JSON and text.

Why one place: explain reads FelixConfigurations, Nodes and IP pools straight from the backend
(no typed client, design/explain.md "Costs") and skips the same things for each: keys that are
not a direct child of the prefix, and values that are not a JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


def documents(prefix: str, kvs: Iterable[Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """``(name, decoded JSON, stored text)`` of each KV directly under ``prefix``."""
    for kv in kvs:
        name = kv.key[len(prefix) :] if kv.key.startswith(prefix) else ""
        if not name or "/" in name:
            continue
        try:
            raw = json.loads(kv.value)
        except ValueError:
            continue
        if isinstance(raw, dict):
            yield name, raw, kv.value
