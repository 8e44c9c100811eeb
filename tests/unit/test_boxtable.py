"""The one box-table renderer (health endpoints, calicoctl ipam)."""

from __future__ import annotations

from calico.boxtable import render_box_table


def test_widths_alignment_and_borders() -> None:
    out = render_box_table(("NAME", "N"), [("a", "1"), ("longer", "100")], right=frozenset({1}))
    assert out.splitlines() == [
        "+--------+-----+",
        "| NAME   | N   |",  # header cells stay left-aligned
        "+--------+-----+",
        "| a      |   1 |",
        "| longer | 100 |",
        "+--------+-----+",
    ]


def test_header_only_without_rows_and_no_trailing_whitespace() -> None:
    out = render_box_table(("A", "EMPTY"), [])
    assert out == "+---+-------+\n| A | EMPTY |\n+---+-------+"
    rows = render_box_table(("A", "B"), [("x", "")]).splitlines()
    assert all(line == line.rstrip() for line in rows)
    assert rows[3] == "| x |   |"
