"""orjson's decode of a stored value, for the processors that can prove it is the stdlib's.

A Felix start decodes every stored resource once; at 250,000 WorkloadEndpoints ``json.loads``
was ~11% of the syncer thread (design/performance.md "The WorkloadEndpoint snapshot at
250,000"). ``orjson`` (a project dependency) decodes the same text ~3x faster, and its answer
is the stdlib's except in one way: an integer outside [-2**63, 2**64) comes back as a float.
Everything else where the two could differ (NaN and Infinity, lone surrogates, nesting past
its depth limit, a byte-order mark, non-``str`` input) orjson refuses, and :func:`fast` then
answers None. So a caller that accepts a decode only when every leaf it keeps has been
type-checked as a ``str``, ``int`` or ``bool`` (never a float) holds exactly what ``json.loads``
would have given; anything else decodes again with :func:`loads`. Checked against the stdlib
over generated texts in ``tests/unit/syncer/test_jsondecode.py``; without orjson installed,
:func:`fast` always answers None.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; keep working without it
    _orjson = None

__all__ = ["fast", "loads"]

#: The reference decoder, and the one for every value :func:`fast` cannot vouch for.
loads = json.loads


if _orjson is None:  # pragma: no cover

    def fast(text: Any) -> Any:
        return None

else:
    _decode = _orjson.loads
    _refused = _orjson.JSONDecodeError

    def fast(text: Any) -> Any:
        """orjson's decode of ``text`` (a ``str``), or None where orjson refuses it (or the
        text is ``null``): then only :func:`loads` can answer."""
        if type(text) is not str:  # orjson also takes bytes and memoryviews
            return None
        try:
            return _decode(text)
        except _refused:
            return None
