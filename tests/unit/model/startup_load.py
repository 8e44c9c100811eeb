"""Shared by the lean config tests: Felix's start-up config load over one stored document,
counting the calls that reach the processor (a lean read makes none).

Import as ``from startup_load import load_counting``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from calico.datastore.backend import KVPair, ListResult
from calico.datastore.errors import ResourceDoesNotExistError
from calico.felix.startup_config import load_datastore_config
from calico.model import ResourceKey
from calico.model import processors as p


class _Backend:
    """The two calls the start-up config load makes."""

    def __init__(self, docs: dict[str, str]) -> None:
        self.docs = docs

    def list(self, prefix: str) -> ListResult:
        kvs = [KVPair(k, v, 1) for k, v in self.docs.items() if k.startswith(prefix)]
        return ListResult(kvs, 1)

    def get(self, path: str) -> KVPair:
        raise ResourceDoesNotExistError(path)


def load_counting(
    key: ResourceKey, doc: Any, processor: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[str]]:
    """``load_datastore_config`` for host ``h1`` with ``doc`` stored at ``key``; also the
    names the processor ``calico.model.processors.config.<processor>`` was called for."""
    from calico.model.processors import config

    calls: list[str] = []
    real = getattr(config, processor)

    def counting(key: ResourceKey, value: Any) -> Any:
        calls.append(key.name)
        return real(key, value)

    monkeypatch.setattr(p, processor, counting)
    backend = _Backend({key.default_path(): json.dumps(doc)})
    return load_datastore_config(backend, "h1"), calls  # type: ignore[arg-type]
