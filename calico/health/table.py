"""The plain-text status table that health endpoints return and logs print."""

from __future__ import annotations

from collections.abc import Sequence

HEADERS = ("COMPONENT", "TIMEOUT", "LIVENESS", "READINESS", "DETAIL")


def render_table(rows: Sequence[Sequence[str]], headers: Sequence[str] = HEADERS) -> str:
    """An ASCII box table (``+---+`` borders, ``| cell |`` rows), trailing whitespace trimmed.

    The header row is always present; rows are rendered in the order given.
    """
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: Sequence[str]) -> str:
        return "|" + "|".join(f" {c.ljust(w)} " for c, w in zip(cells, widths, strict=True)) + "|"

    out = [border, line(headers), border]
    out.extend(line(r) for r in rows)
    if rows:
        out.append(border)
    return "\n".join(out).strip()
