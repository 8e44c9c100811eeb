"""The ``Selector`` value object that the rest of calico-py uses."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

from calico.selector.ast import Node
from calico.selector.canonical import canonical, unique_id
from calico.selector.compiler import Evaluator, compile_selector
from calico.selector.errors import SelectorParseError
from calico.selector.interpreter import evaluate as interpret
from calico.selector.parser import parse_ast
from calico.selector.restrictions import LabelRestriction, label_restrictions


class Selector:
    """A parsed selector. Equal (and hashed) by canonical form, like upstream's UniqueID.

    Derived data (canonical form, ID, compiled evaluator, restrictions) is computed on first use:
    parsing thousands of policy selectors should not pay for a ``compile()`` each up front.
    """

    def __init__(self, text: str, root: Node) -> None:
        self.text = text
        self.root = root
        self._canonical: str | None = None
        self._unique_id: str | None = None
        self._compiled: Evaluator | None = None
        self._restrictions: Mapping[str, LabelRestriction] | None = None

    @property
    def canonical(self) -> str:
        """Canonical string (upstream ``String()``); the empty selector is ``all()``."""
        if self._canonical is None:
            self._canonical = canonical(self.root)
        return self._canonical

    def string(self) -> str:
        """Alias of :attr:`canonical`, named like upstream's method."""
        return self.canonical

    @property
    def unique_id(self) -> str:
        """``s:`` + base64url-no-pad(SHA-224(``"s:" + canonical``)); IP set names derive from it."""
        if self._unique_id is None:
            self._unique_id = unique_id(self.canonical)
        return self._unique_id

    @property
    def compiled(self) -> Evaluator:
        """The compiled ``labels -> bool`` function (call it directly in hot loops)."""
        if self._compiled is None:
            self._compiled = compile_selector(self.root)
        return self._compiled

    def evaluate(self, labels: Mapping[str, str]) -> bool:
        """Does the selector match ``labels``? Uses the compiled evaluator."""
        fn = self.compiled
        # Shadow this method with the compiled function itself: later calls skip a Python frame.
        self.evaluate = fn  # type: ignore[method-assign]
        return fn(labels)

    def evaluate_interpreted(self, labels: Mapping[str, str]) -> bool:
        """Same answer as :meth:`evaluate`, via the tree-walking oracle."""
        return interpret(self.root, labels)

    @property
    def label_restrictions(self) -> Mapping[str, LabelRestriction]:
        """Read-only per-label restrictions every matching label set satisfies."""
        if self._restrictions is None:
            self._restrictions = MappingProxyType(label_restrictions(self.root))
        return self._restrictions

    def __reduce__(self) -> tuple[object, tuple[str]]:
        # Pickle as source text: the compiled function cannot be pickled, and re-parsing is cheap.
        return (parse_uncached, (self.text,))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selector):
            return NotImplemented
        return self.canonical == other.canonical

    def __hash__(self) -> int:
        return hash(self.canonical)

    def __str__(self) -> str:
        return self.canonical

    def __repr__(self) -> str:
        return f"Selector({self.canonical!r})"


def parse_uncached(text: str) -> Selector:
    """Parse ``text``; raises :class:`SelectorParseError`."""
    return Selector(text, parse_ast(text))


@lru_cache(maxsize=16384)
def parse(text: str) -> Selector:
    """Parse ``text`` (memoised: policies repeat selectors); raises SelectorParseError."""
    return parse_uncached(text)


def validate(text: str) -> None:
    """Raise :class:`SelectorParseError` if ``text`` is not a valid selector.

    Through the ``parse`` memo: a Felix start validates every policy selector twice (the v3
    model, then the calc graph's validation filter) before the label index parses it again,
    and at 10,000 policies that re-tokenising was the largest single cost (design/performance.md
    "Full-Felix scale"). Invalid text is not memoised (lru_cache keeps no exceptions), so its
    error is raised afresh, the same as ``parse_ast``'s."""
    parse(text)


def normalise(text: str) -> str:
    """Canonical form of ``text``, or ``text`` unchanged if it does not parse (as upstream)."""
    try:
        return parse(text).canonical
    except SelectorParseError:
        return text
