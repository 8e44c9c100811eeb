"""Every reference in a docstring or design doc resolves: design docs and their sections,
Sphinx roles and ``calico.`` dotted names in docstrings, file paths in design/*.md.

A reference that no longer resolves is a doc that no longer matches the code; this keeps the
two honest as modules move.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "calico"
DESIGN = ROOT / "design"
SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "_pb2" not in p.name)

DESIGN_REF = re.compile(r"design/([\w.-]+?\.md)(?:,?\s*\"([^\"]+)\")?")
ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc):`~?([\w.]+)`")
DOTTED = re.compile(r"``(calico(?:\.\w+)+)``")
DOC_PATH = re.compile(r"`((?:calico|tests|benchmarks|node|manifests|scripts)/[\w./-]+)`")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef))]
    return [d for n in nodes if (d := ast.get_docstring(n))]


def headings(doc: Path) -> list[str]:
    return [
        ln.lstrip("#").strip().lower() for ln in doc.read_text().splitlines() if ln.startswith("#")
    ]


def has_attr(obj: Any, attr: str) -> bool:
    """An attribute, or a field declared without a class-level default (dataclasses)."""
    if hasattr(obj, attr):
        return True
    return inspect.isclass(obj) and any(
        attr in getattr(c, "__annotations__", {}) for c in obj.__mro__
    )


def resolve_dotted(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not has_attr(obj, attr):
                return False
            obj = getattr(obj, attr, None)
        return True
    return False


def resolve_in_module(module: Any, name: str) -> bool:
    if name.startswith("calico."):
        return resolve_dotted(name)
    head, _, rest = name.partition(".")
    namespace = vars(module)
    if head in namespace:
        obj = namespace[head]
        for attr in rest.split(".") if rest else ():
            if not has_attr(obj, attr):
                return False
            obj = getattr(obj, attr, None)
        return True
    if rest:
        return False
    # An unqualified method or attribute: some class defined in the module has it.
    return any(
        has_attr(obj, head)
        for obj in namespace.values()
        if inspect.isclass(obj) and obj.__module__ == module.__name__
    )


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_docstring_references_resolve(path: Path) -> None:
    module = importlib.import_module(module_name(path))
    problems = []
    for doc in docstrings(path):
        for file, section in DESIGN_REF.findall(doc):
            target = DESIGN / file
            if not target.is_file():
                problems.append(f"design/{file} does not exist")
            elif section and not any(
                " ".join(section.lower().split()) in h for h in headings(target)
            ):
                problems.append(f'design/{file} has no section "{section}"')
        for name in ROLE.findall(doc):
            if not resolve_in_module(module, name):
                problems.append(f"role target {name!r} does not resolve")
        for name in DOTTED.findall(doc):
            if not resolve_dotted(name):
                problems.append(f"``{name}`` does not resolve")
        if "§" in doc:
            problems.append("a § reference (section numbers of documents outside this repo)")
    assert not problems, problems


DOCS = sorted([ROOT / "DESIGN.md", *DESIGN.glob("*.md")])
#: Files that exist only in built distributions (generated, git-ignored).
GENERATED = {"calico/_buildinfo.json"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_design_doc_paths_and_links_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    problems = []
    for link in re.findall(r"\]\(([^)#]+)", text):
        if not (doc.parent / link).exists():
            problems.append(f"link {link} does not exist")
    for ref in DOC_PATH.findall(text):
        candidate = ref.rstrip(".,")
        if any(ch in candidate for ch in "*<>{") or not candidate or candidate in GENERATED:
            continue
        if not (ROOT / candidate).exists():
            problems.append(f"path {candidate} does not exist")
    assert not problems, problems
