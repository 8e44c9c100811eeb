"""Canonical string form and unique ID.

The canonical form is what upstream's ``Selector.String()`` produces, byte for byte, because the
unique ID (and therefore every IP set name Felix programs) is a hash of it:

* ``&&``/``||`` groups are always parenthesised (``(a == "x" && has(b))``), never flattened;
* ``!`` is a bare prefix (``!has(a)``, ``!a == "x"``, ``!(a == "x" || b == "y")``);
* values are double-quoted unless they contain ``"`` (then single-quoted; no escapes exist, and a
  value can never contain both quote characters);
* sets render sorted and de-duplicated as ``{"a", "b"}``; the empty selector renders ``all()``.
"""

from __future__ import annotations

import base64
import hashlib

from calico.selector.ast import All, And, Compare, Global, Has, InSet, Node, Not, Or


def quote(value: str) -> str:
    """Quote a string value the way upstream does."""
    return f"'{value}'" if '"' in value else f'"{value}"'


def canonical(node: Node) -> str:
    """Render ``node`` in canonical form."""
    out: list[str] = []
    _render(node, out)
    return "".join(out)


def _render(node: Node, out: list[str]) -> None:
    match node:
        case Compare(label, op, value):
            out.append(f"{label} {op.value} {quote(value)}")
        case InSet(label, values, negated):
            keyword = "not in" if negated else "in"
            out.append(f"{label} {keyword} {{{', '.join(map(quote, values))}}}")
        case Has(label):
            out.append(f"has({label})")
        case All():
            out.append("all()")
        case Global():
            out.append("global()")
        case Not(operand):
            out.append("!")
            _render(operand, out)
        case And(operands) | Or(operands):
            sep = " && " if isinstance(node, And) else " || "
            out.append("(")
            for i, operand in enumerate(operands):
                if i:
                    out.append(sep)
                _render(operand, out)
            out.append(")")
        case _:  # pragma: no cover - exhaustive over Node
            raise TypeError(f"not a selector node: {node!r}")


def make_unique_id(prefix: str, content: str) -> str:
    """``prefix:`` + unpadded base64url(SHA-224(``prefix:`` + content)), as upstream's hash pkg.

    Encodes with ``surrogatepass`` so that any Python str (even one holding lone surrogates)
    hashes instead of raising.
    """
    data = f"{prefix}:{content}".encode("utf-8", "surrogatepass")
    digest = hashlib.sha224(data).digest()
    return f"{prefix}:" + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def unique_id(canonical_form: str) -> str:
    """The selector's unique ID (``s:...``) from its canonical form."""
    return make_unique_id("s", canonical_form)
