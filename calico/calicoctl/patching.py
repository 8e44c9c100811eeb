"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) on plain JSON values.

Small and dependency-free: calicoctl only patches one resource document at a time. The
"strategic" patch type of Kubernetes has no patch-strategy metadata for Calico's types, under
which it behaves as a merge patch (lists replaced, ``null`` deletes a key); that is what it means
here.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """The patch cannot be applied (bad path, failed test, wrong operation)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}: must start with '/'")
    return [_unescape(t) for t in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, append: bool) -> int:
    if append and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in {path}")
    idx = int(token)
    limit = len(container) if append else len(container) - 1
    if idx > limit:
        raise PatchError(f"array index {idx} out of range in {path}")
    return idx


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"path {path} does not exist")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path, append=False)]
        else:
            raise PatchError(f"path {path} does not exist")
    return node


def _existing(doc: Any, tokens: list[str], path: str) -> tuple[Any, Any]:
    """The container of the value ``path`` names and its key or index there (it must exist)."""
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path} does not exist")
        return parent, last
    if isinstance(parent, list):
        return parent, _index(parent, last, path, append=False)
    raise PatchError(f"path {path} does not exist")


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent, key = _existing(doc, tokens, path)
    return parent[key]


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, key = _existing(doc, tokens, path)
    return doc, parent.pop(key)


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, append=True), value)
    else:
        raise PatchError(f"path {path} does not exist")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 on a copy of ``target``: add, remove, replace, move, copy, test."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be an array of operations")
    doc = copy.deepcopy(target)
    for n, op in enumerate(operations, start=1):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise PatchError(f"operation {n} must be an object with an 'op' string")
        kind, path = op["op"], op.get("path")
        if not isinstance(path, str):
            raise PatchError(f"operation {n} ({kind}) needs a 'path' string")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {n} ({kind}) needs a 'value'")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(f"operation {n} ({kind}) needs a 'from' string")
            if kind == "move":
                if path.startswith(source + "/"):
                    raise PatchError(f"cannot move {source} into its own child {path}")
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"test operation {n} failed at {path}")
        else:
            raise PatchError(f"operation {n}: unknown op {kind!r}")
    return doc
