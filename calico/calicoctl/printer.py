"""``get`` output: ps/wide tables laid out like Go's tabwriter, YAML, JSON, custom columns.

What gets printed is a list of *results*: single resources (``get KIND NAME``) and kind lists
(``get KIND``). As upstream, one result prints as an object and several as a sequence; a kind
list is a ``<Kind>List`` object; each result gets its own table followed by a blank line.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from calico.api import API_VERSION, Resource, resource_to_wire
from calico.calicoctl.errors import CtlError
from calico.calicoctl.resources import TableContext, default_headings, table_for

# Upstream's tabwriter.NewWriter(os.Stdout, minwidth 5, tabwidth 1, padding 3, ' ', 0).
MIN_WIDTH = 5
PADDING = 3
EXPORT_STRIPPED = (
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


@dataclass
class KindList:
    """The result of listing a kind: printed as ``<Kind>List`` or as one table."""

    kind: type[Resource]
    items: list[Resource]
    revision: str


Result = Resource | KindList


@dataclass(frozen=True)
class OutputFormat:
    name: str  # ps | wide | yaml | json | custom-columns
    columns: tuple[str, ...] = ()


def parse_output(text: str) -> OutputFormat:
    """``-o`` value -> format, with upstream's error messages."""
    if text in ("ps", "wide", "json"):
        return OutputFormat(text)
    if text in ("yaml", "yml"):
        return OutputFormat("yaml")
    key, sep, value = text.partition("=")
    if key == "custom-columns":
        if not value:
            raise CtlError("need to specify at least one column")
        return OutputFormat("custom-columns", tuple(value.split(",")))
    if key in ("go-template", "go-template-file"):
        if not sep or not value:
            what = "template" if key == "go-template" else "template file"
            raise CtlError(f"need to specify a {what}")
        raise CtlError(f"output format '{key}' is not supported by this calicoctl")
    raise CtlError(f"unrecognized output format '{text}'")


def tabwrite(rows: Sequence[Sequence[str]]) -> str:
    """Every cell tab-terminated, as upstream's templates write them: all columns padded."""
    if not rows:
        return ""
    ncols = max(len(r) for r in rows)
    widths = []
    for j in range(ncols):
        longest = max((len(r[j]) for r in rows if j < len(r)), default=0)
        widths.append(max(MIN_WIDTH, longest + PADDING))
    return "".join(
        "".join(cell.ljust(widths[j]) for j, cell in enumerate(row)) + "\n" for row in rows
    )


def _wire(resource: Resource, export: bool) -> dict[str, Any]:
    """One resource as upstream prints it; Go's zero ``metav1.Time`` prints as
    ``creationTimestamp: null`` (exported resources, the built-in profile)."""
    wire = resource_to_wire(resource)
    meta = wire.setdefault("metadata", {})
    if export:
        for key in EXPORT_STRIPPED:
            meta.pop(key, None)
    meta.setdefault("creationTimestamp", None)
    return wire


def _list_object(result: KindList, export: bool) -> dict[str, Any]:
    meta = {} if export or not result.revision else {"resourceVersion": result.revision}
    return {
        "kind": f"{result.kind.KIND}List",
        "apiVersion": API_VERSION,
        "metadata": meta,
        "items": [_wire(r, export) for r in result.items],
    }


def to_objects(results: Sequence[Result], export: bool = False) -> Any:
    """What ``-o yaml|json`` serialises: one object, or a sequence of them."""
    objs = [
        _list_object(r, export) if isinstance(r, KindList) else _wire(r, export) for r in results
    ]
    return objs[0] if len(objs) == 1 else objs


@functools.cache
def _go_style_dumper() -> type:
    """PyYAML's SafeDumper quoting strings the way Go's YAML encoder does: double quotes, not
    single. Built on first use: PyYAML is ~20 ms of every ``get`` that prints a table or JSON
    (design/performance.md "Start-up")."""
    import yaml

    class GoStyleDumper(yaml.SafeDumper):
        def choose_scalar_style(self) -> str:
            style = super().choose_scalar_style()
            return '"' if style == "'" else style

    return GoStyleDumper


def render_yaml(obj: Any) -> str:
    import yaml

    return yaml.dump(
        obj,
        Dumper=_go_style_dumper(),
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
    )


def render_json(obj: Any) -> str:
    """Go's encoder: 2-space indent, HTML-sensitive characters escaped."""
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        text = text.replace(ch, esc)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"


def render_tables(
    results: Sequence[Result],
    fmt: OutputFormat,
    print_namespace: bool,
    ctx: TableContext,
    export: bool = False,
) -> str:
    out = []
    for result in results:
        kind = result.kind if isinstance(result, KindList) else type(result)
        items = result.items if isinstance(result, KindList) else [result]
        if fmt.name == "custom-columns":
            headings = list(fmt.columns)
        else:
            headings = default_headings(kind, fmt.name == "wide", print_namespace)
        table = table_for(kind.KIND)
        for heading in headings:
            if heading not in table.columns:
                valid = ", ".join(sorted(table.columns))
                raise CtlError(f"Unknown heading {heading}, valid values are: {valid}")
        rows = [headings]
        for res in items:
            wire = _wire(res, export)
            rows.append([table.columns[h](wire, ctx) for h in headings])
        out.append(tabwrite(rows) + "\n")
    return "".join(out)


def render(
    results: Sequence[Result],
    fmt: OutputFormat,
    *,
    print_namespace: bool = False,
    export: bool = False,
    ctx: TableContext | None = None,
) -> str:
    if fmt.name == "yaml":
        return render_yaml(to_objects(results, export))
    if fmt.name == "json":
        return render_json(to_objects(results, export))
    return render_tables(results, fmt, print_namespace, ctx or TableContext(), export)


def echo(text: str) -> None:
    if text:
        click.echo(text, nl=False)
