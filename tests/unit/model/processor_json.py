"""Run an update processor the way the tests state its contract: stored path and JSON in,
``{v1 path: upstream's v1 JSON}`` out (the typed keys rendered, the typed values encoded).

Import it from a test module in this directory (no ``__init__.py``: pytest puts the directory
on ``sys.path``)::

    from processor_json import at_path
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calico.model import ResourceKey, key_from_default_path
from calico.model.processors import Processor
from calico.model.values import decode_value, encode_value


def encoded(out: Any) -> dict[str, Any]:
    """A processor's typed output as paths and JSON; each value must decode back to itself."""
    result = {}
    for key, value in out.items():
        data = encode_value(key, value)
        assert decode_value(key, data) == value, (key, value)
        result[key.default_path()] = data
    return result


def at_path(processor: Processor) -> Callable[[str, Any], dict[str, Any]]:
    def run(path: str, value: Any) -> dict[str, Any]:
        key = key_from_default_path(path)
        assert isinstance(key, ResourceKey), path
        return encoded(processor(key, value))

    run.__name__ = getattr(processor, "__name__", "processor")
    return run
