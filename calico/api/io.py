"""Reading and writing v3 resources as YAML/JSON, the way calicoctl does.

Input: one document, a ``---`` separated YAML stream, a JSON object or array, a YAML sequence
of resources, or a ``List`` / ``<Kind>List`` document with ``items``. Every failure is one of
the documented ``APIError`` subclasses and names the source, the 1-based document (and item)
index, the kind/name and the field path, so nothing else ever escapes ``load_documents``.

Output: the upstream wire shape; one resource prints as an object, several as a sequence
(calicoctl's ``get -o yaml|json``), or as a ``<Kind>List`` when asked.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from calico.api.base import API_VERSION, Resource, kind_class, resource_class
from calico.api.errors import (
    DocumentFormatError,
    FieldIssue,
    ResourceValidationError,
    UnknownKindError,
)

Format = Literal["yaml", "json"]
UNKNOWN_FIELD = "field in document is not recognized or is in the wrong location"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TYPE_MESSAGES = {
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
    "missing": "field is required",
}


# --- Errors


def format_loc(loc: Iterable[str | int]) -> str:
    """``('spec', 'ingress', 0, 'protocol')`` -> ``spec.ingress[0].protocol``."""
    out = ""
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int) or not _IDENT.match(str(part)):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _lookup(data: Any, loc: Iterable[str | int]) -> Any:
    """The input value at ``loc`` (None when the path does not exist)."""
    for part in loc:
        in_dict = isinstance(data, dict) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if not (in_dict or in_list):
            return None
        data = data[part]
    return data


def issues_from_pydantic(exc: ValidationError, data: Any = None) -> list[FieldIssue]:
    """Pydantic errors as FieldIssues with wire (camelCase) paths and calicoctl wording.

    ``data`` (the decoded input) supplies the offending value where the error has none.
    """
    issues: list[FieldIssue] = []
    for err in exc.errors(include_url=False):
        path = format_loc(err["loc"])
        kind = err["type"]
        value = err.get("input")
        if value is None or isinstance(value, dict):
            value = _lookup(data, err["loc"])
        if kind == "extra_forbidden":
            message = f"{UNKNOWN_FIELD}: {path}"
        elif kind == "value_error":
            message = err["msg"].removeprefix("Value error, ")
        elif kind == "literal_error":
            expected = (err.get("ctx") or {}).get("expected", "")
            message = f"invalid value {_short(err.get('input'))}: expected {expected}"
        elif kind in _TYPE_MESSAGES:
            message = _TYPE_MESSAGES[kind]
        else:
            message = err["msg"]
        issue = FieldIssue(path, message, value)
        if issue not in issues:
            issues.append(issue)
    return issues


def _where(source: str, document: int | None, item: int | None) -> str:
    parts = [source] if source else []
    if document is not None:
        parts.append(f"document {document}")
    if item is not None:
        parts.append(f"item {item}")
    return ", ".join(parts)


# --- Parsing


def _parse(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """Yield (1-based document index, parsed document); empty documents are skipped."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            yield 1, json.loads(text)
            return
        except (ValueError, RecursionError):
            pass  # maybe YAML flow style; let the YAML parser have its say
    import yaml  # ~15 ms: not paid by readers of stored JSON (every datastore command)

    from calico.api.yamlload import GoLikeLoader

    index = 0
    try:
        for index, doc in enumerate(yaml.load_all(text, Loader=GoLikeLoader), start=1):
            if doc is not None:
                yield index, doc
    except yaml.YAMLError as exc:
        raise DocumentFormatError(
            f"{_where(source, index + 1, None)}: invalid YAML: {exc}"
        ) from None
    except (ValueError, RecursionError) as exc:
        msg = f"{_where(source, index + 1, None)}: document cannot be parsed: {exc}"
        raise DocumentFormatError(msg) from None


def _is_list_doc(doc: dict[Any, Any]) -> bool:
    kind = doc.get("kind")
    if not isinstance(kind, str) or "items" not in doc:
        return False
    return kind == "List" or (kind.endswith("List") and kind_class(kind[:-4]) is not None)


def _expand(doc: Any, source: str, index: int) -> Iterator[tuple[Any, int | None]]:
    """A document's resources with their 1-based item index (None for a plain document)."""
    if isinstance(doc, list):
        for i, item in enumerate(doc, start=1):
            yield item, i
        return
    if not isinstance(doc, dict) or not _is_list_doc(doc):
        yield doc, None
        return
    kind = doc["kind"]
    api_version = doc.get("apiVersion")
    allowed = (API_VERSION, "v1", None) if kind == "List" else (API_VERSION, None)
    if api_version not in allowed:
        raise UnknownKindError(
            f"{_where(source, index, None)}: apiVersion {_short(api_version)} is not supported "
            f"for {kind}; expected {API_VERSION}"
        )
    items = doc["items"]
    if items is None:
        return
    if not isinstance(items, list):
        raise DocumentFormatError(f"{_where(source, index, None)}: {kind} items must be a list")
    for i, item in enumerate(items, start=1):
        if kind != "List" and isinstance(item, dict):
            item = {"apiVersion": API_VERSION, "kind": kind[:-4], **item}
        yield item, i


def _unknown_kind(prefix: str, kind: Any, api_version: Any) -> UnknownKindError:
    """Upstream's loader wording for a kind/apiVersion pair it has no type for."""
    return UnknownKindError(
        f"{prefix}unknown resource type ({kind if kind else ''}) and/or version "
        f"({api_version if api_version else ''})"
    )


def parse_resource(
    data: Any,
    source: str = "",
    document: int | None = None,
    item: int | None = None,
    *,
    go_decode: bool = False,
) -> Resource:
    """Validate one decoded document (a mapping) into its Resource subclass.

    ``go_decode`` applies upstream's decoder semantics first (calico.api.godecode): field
    names matched case-insensitively, Go's scalar conversions and type errors. User input
    needs it; stored data (already canonical) does not.
    """
    where = _where(source, document, item)
    prefix = f"{where}: " if where else ""
    if not isinstance(data, dict):
        raise DocumentFormatError(
            f"{prefix}expected a resource (a mapping with apiVersion, kind, metadata and spec), "
            f"got {type(data).__name__}"
        )
    api_version, kind = data.get("apiVersion"), data.get("kind")
    given = api_version is not None and isinstance(kind, str) and kind
    if go_decode and given and api_version != API_VERSION:
        raise _unknown_kind(prefix, kind, api_version)
    if not isinstance(kind, str) or not kind:
        raise DocumentFormatError(f"{prefix}kind is required and must be a string")
    if api_version is None:
        raise DocumentFormatError(f"{prefix}apiVersion is required (expected {API_VERSION})")
    if api_version != API_VERSION:
        raise UnknownKindError(
            f"{prefix}{kind}: apiVersion {_short(api_version)} is not supported; "
            f"expected {API_VERSION}"
        )
    cls = kind_class(kind)
    if cls is None:
        if go_decode:
            raise _unknown_kind(prefix, kind, api_version)
        guess = resource_class(kind)
        hint = f" (did you mean {guess.KIND}?)" if guess else ""
        raise UnknownKindError(f"{prefix}resource kind {_short(kind)} is not supported{hint}")
    meta = data.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if go_decode:
        # Imported for user input only: readers of stored data never define its dataclasses.
        from calico.api.godecode import GoDecodeError, decode_model

        label = f"{kind}({name})" if isinstance(name, str) and name else kind
        at = f"{where}, {label}" if where else label
        try:
            data = decode_model(cls, data)
        except GoDecodeError as exc:
            raise DocumentFormatError(f"{at}: {exc}") from None
        except RecursionError:
            raise DocumentFormatError(f"{at}: document is nested too deeply") from None
        meta = data.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
    issues: list[FieldIssue] = []
    if (isinstance(meta, dict) or meta is None) and not name:
        issues.append(FieldIssue("metadata.name", "name is required", name or ""))
    try:
        resource = cls.model_validate(data)
    except ValidationError as exc:
        issues.extend(issues_from_pydantic(exc, data))
    except RecursionError:
        issues.append(FieldIssue("", "document is nested too deeply"))
    if issues:
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        raise ResourceValidationError(
            issues,
            kind=kind,
            name=name if isinstance(name, str) else "",
            source=source,
            document=document,
            extra={"namespace": namespace} if isinstance(namespace, str) else {},
            item=item,
        )
    return resource


Loaded = Resource | ResourceValidationError


def load_entries(text: str | bytes, source: str = "<stdin>") -> list[Loaded]:
    """Every document in ``text``, decoded as upstream's loader does, in order.

    A document that fails *validation* is returned as its ResourceValidationError (upstream
    reports those per resource, when it writes); anything upstream's decoder itself refuses
    (syntax, unknown kind or field, wrong JSON type) raises, since then nothing is processed.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentFormatError(f"{source}: not valid UTF-8 text: {exc}") from None
    out: list[Loaded] = []
    for index, doc in _parse(text, source):
        for data, item in _expand(doc, source, index):
            try:
                out.append(parse_resource(data, source, index, item, go_decode=True))
            except ResourceValidationError as exc:
                out.append(exc)
    return out


def load_documents(text: str | bytes, source: str = "<stdin>") -> list[Resource]:
    """Every resource in ``text`` (YAML stream, JSON, sequences and Lists), in order.

    Namespaces are left as written (None when absent); see ``with_default_namespace``.
    The first invalid document raises its ResourceValidationError.
    """
    out: list[Resource] = []
    for entry in load_entries(text, source):
        if isinstance(entry, ResourceValidationError):
            raise entry
        out.append(entry)
    return out


def load_file(path: str | os.PathLike[str]) -> list[Resource]:
    """``load_documents`` on a file; the file name is used as the error source."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise DocumentFormatError(f"{source}: cannot read file: {exc.strerror or exc}") from None
    return load_documents(raw, source)


def with_default_namespace(
    resources: Iterable[Resource], namespace: str = "default"
) -> list[Resource]:
    """Copies with ``namespace`` filled in on namespaced kinds that have none (calicoctl -n)."""
    out: list[Resource] = []
    for res in resources:
        if res.NAMESPACED and res.metadata.namespace is None:
            meta = res.metadata.model_copy(update={"namespace": namespace})
            res = res.model_copy(update={"metadata": meta})
        out.append(res)
    return out


# --- Dumping


def _tidy(value: Any) -> Any:
    """Integral floats print as ints (``order: 100``), as Go's encoder does."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    return value


# Go fields without ``omitempty`` whose zero value is also our default: always printed.
_KEEP_EMPTY: dict[str, frozenset[str]] = {
    "IPAMBlockSpec": frozenset({"allocations", "unallocated", "attributes", "deleted"}),
    "IPAMHandleSpec": frozenset({"block", "deleted"}),
    "IPAMConfigurationSpec": frozenset({"strictAffinity"}),
}


def _is_zero(value: Any) -> bool:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float | str | list | dict):
        return not value
    return False


@functools.cache
def _omittable(cls: type[BaseModel]) -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
    """(wire names dropped when zero, (attribute, wire) pairs that may hold models).

    A field is dropped when zero only if its default is that zero value: then it reads back
    unchanged, and it is what Go's ``omitempty`` on a non-pointer field prints. Optional
    fields (pointers in Go) print whenever set.
    """
    keep = _KEEP_EMPTY.get(cls.__name__, frozenset())
    drop: set[str] = set()
    nested: list[tuple[str, str]] = []
    for name, info in cls.model_fields.items():
        wire = info.alias or name
        nested.append((name, wire))
        if wire in keep or info.is_required():
            continue
        default = info.get_default(call_default_factory=True)
        if default is not None and _is_zero(default):
            drop.add(wire)
    return frozenset(drop), tuple(nested)


def _omit_empty(model: BaseModel, data: dict[str, Any]) -> None:
    """Remove, in place, what upstream's Go structs would not print (see ``_omittable``)."""
    drop, fields = _omittable(type(model))
    for name, wire in fields:
        if wire not in data:
            continue
        value = getattr(model, name)
        out = data[wire]
        if isinstance(value, BaseModel):
            if isinstance(out, dict):
                _omit_empty(value, out)
        elif isinstance(value, list) and isinstance(out, list):
            for item, item_out in zip(value, out, strict=False):
                if isinstance(item, BaseModel) and isinstance(item_out, dict):
                    _omit_empty(item, item_out)
        elif isinstance(value, dict) and isinstance(out, dict):
            for key, item in value.items():
                if isinstance(item, BaseModel) and isinstance(out.get(key), dict):
                    _omit_empty(item, out[key])
        if wire in drop and _is_zero(out):
            del data[wire]


def resource_to_wire(resource: Resource) -> dict[str, Any]:
    """The upstream JSON shape of one resource: kind, apiVersion, metadata, spec, status.

    Fields at their zero default are left out, as upstream's ``omitempty`` does, so that
    ``get -o yaml`` reproduces the manifest it was given.
    """
    wire = resource.to_wire()
    _omit_empty(resource, wire)
    body = _tidy(wire)
    head = {k: body.pop(k) for k in ("kind", "apiVersion", "metadata") if k in body}
    return {**head, **body}


def dump_resources(
    resources: Iterable[Resource],
    fmt: Format = "yaml",
    *,
    as_list: bool = False,
    list_metadata: dict[str, Any] | None = None,
) -> str:
    """Serialise like ``calicoctl get -o yaml|json``.

    One resource prints as an object and several as a sequence; ``as_list`` wraps them in a
    ``<Kind>List`` (``List`` if kinds are mixed), as ``get`` does for a whole kind.
    """
    items = [resource_to_wire(r) for r in resources]
    obj: Any
    if as_list:
        kinds_seen = {i["kind"] for i in items}
        list_kind = f"{kinds_seen.pop()}List" if len(kinds_seen) == 1 else "List"
        obj = {
            "kind": list_kind,
            "apiVersion": API_VERSION,
            "metadata": dict(list_metadata or {}),
            "items": items,
        }
    else:
        obj = items[0] if len(items) == 1 else items
    if fmt == "json":
        return json.dumps(obj, indent=2) + "\n"
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True)
    raise ValueError(f"unrecognized output format {fmt!r}")
