"""The ASCII box table upstream prints (go-pretty's default style) for health and calicoctl.

    +------+-------+
    | NAME | VALUE |
    +------+-------+
    | a    |     1 |
    +------+-------+

The header row is always present; rows are rendered in the order given, left-aligned except
the columns named in ``right`` (header cells stay left-aligned). No trailing newline; no
trailing whitespace on any line.
"""

from __future__ import annotations

from collections.abc import Sequence


def render_box_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()
) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: Sequence[str], header: bool) -> str:
        parts = [
            c.rjust(w) if (i in right and not header) else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(parts) + " |"

    out = [border, line(headers, True), border]
    out += [line(r, False) for r in rows]
    if rows:
        out.append(border)
    return "\n".join(out)
