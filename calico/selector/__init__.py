"""Calico's label selector language: parse, evaluate, canonicalise, and index selectors.

Use :func:`parse` (memoised) to get a :class:`Selector`; :func:`validate` checks text only.
"""

from calico.selector.canonical import make_unique_id
from calico.selector.errors import SelectorParseError
from calico.selector.restrictions import LabelRestriction
from calico.selector.selector import Selector, normalise, parse, parse_uncached, validate

__all__ = [
    "LabelRestriction",
    "Selector",
    "SelectorParseError",
    "make_unique_id",
    "normalise",
    "parse",
    "parse_uncached",
    "validate",
]
