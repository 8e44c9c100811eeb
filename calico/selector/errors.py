"""The one exception the selector package raises for bad input."""

from __future__ import annotations

import json


class SelectorParseError(ValueError):
    """A selector failed to tokenize or parse.

    ``position`` is the 0-based character offset of the offending token (``len(selector)`` for
    "unexpected end"), so a user can point at the problem in a long policy selector.
    """

    def __init__(self, selector: str, position: int, reason: str) -> None:
        self.selector = selector
        self.position = position
        self.reason = reason
        super().__init__(
            f"invalid selector {json.dumps(selector, ensure_ascii=False)}: "
            f"{reason} at position {position}"
        )

    def __reduce__(self) -> tuple[type[SelectorParseError], tuple[str, int, str]]:
        # Keep the exception picklable despite the custom __init__ signature.
        return (type(self), (self.selector, self.position, self.reason))
