"""Go ``encoding/json`` semantics for the v1 value dataclasses, declared per field.

Each value class is a frozen, slotted dataclass whose fields are declared with the helpers
below; the helper records the field's JSON name, its Go shape (string, pointer, slice, map,
nested struct) and whether the Go tag says ``omitempty``. :class:`V1Value` turns that table
into ``to_json``/``from_json`` once per class, so the per-type modules stay declarative.

Why not pydantic: these values sit on the hot path (syncer -> calc graph, thousands per
second); a plain dataclass is built and compared several times faster, and the JSON shape only
matters where a value crosses a boundary (datastore, Typha wire, confd's key space).

Encoding rules (as Go's):

* ``omitempty`` drops "", 0, False, empty slices/maps and, for pointer fields, only None;
* a nil slice without ``omitempty`` is ``null`` (``nil=[]`` where upstream always emits ``[]``);
* decoding treats a missing key and ``null`` alike (the field's zero value) and refuses a value
  of the wrong JSON type with a :class:`ValueJSONError` naming the class and field.

Invariant (property-tested): ``cls.from_json(v.to_json()) == v`` for every value ``v``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Self


class ValueJSONError(ValueError):
    """A v1 JSON document that does not decode into its value type."""


# --- per-field decoders (raise ValueJSONError via _bad) -----------------------------------------


def _bad(cls: type, json_name: str, raw: Any, want: str) -> ValueJSONError:
    return ValueJSONError(f"{cls.__name__}.{json_name}: expected {want}, got {raw!r}")


def _is_int(raw: Any) -> bool:
    return isinstance(raw, int) and not isinstance(raw, bool)


def _number(raw: Any) -> bool:
    return isinstance(raw, int | float) and not isinstance(raw, bool)


def _dec_str(raw: Any) -> Any:
    return raw if isinstance(raw, str) else _INVALID


def _dec_bool(raw: Any) -> Any:
    return raw if isinstance(raw, bool) else _INVALID


def _dec_int(raw: Any) -> Any:
    return raw if _is_int(raw) else _INVALID


def _dec_float(raw: Any) -> Any:
    return float(raw) if _number(raw) else _INVALID


def _dec_opt_int(raw: Any) -> Any:
    return raw if raw is None or _is_int(raw) else _INVALID


def _dec_int_or_str(raw: Any) -> Any:
    return raw if _is_int(raw) or isinstance(raw, str) else _INVALID


def _dec_labels(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        return _INVALID
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        return _INVALID
    return dict(raw)


def _dec_any(raw: Any) -> Any:
    return raw


_INVALID = object()
_SCALARS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "str": (_dec_str, "a string"),
    "bool": (_dec_bool, "a boolean"),
    "int": (_dec_int, "an integer"),
    "int?": (_dec_opt_int, "an integer or null"),
    "float": (_dec_float, "a number"),
    "int|str": (_dec_int_or_str, "a number or a string"),
    "labels": (_dec_labels, "an object of strings"),
    "any": (_dec_any, "any JSON"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class FieldShape:
    """One field's JSON shape, kept in the dataclass field's ``metadata["json"]``."""

    json: str
    kind: str  # a key of _SCALARS, "nested" or "list"
    item: Any = None  # list items: a _SCALARS key or a V1Value class; nested: the class
    omitempty: bool = False
    pointer: bool = False  # emptiness (for omitempty) is "is None"
    nil: Any = None  # JSON for an empty non-omitempty slice/map


def _meta(json: str, kind: str, **shape: Any) -> dict[str, Any]:
    return {"json": FieldShape(json, kind, **shape)}


# --- field declarations (used by the value modules) ---------------------------------------------


def text(json: str, *, omitempty: bool = False, default: str = "") -> Any:
    """A Go ``string`` (``default`` is what a missing key decodes to)."""
    return dataclasses.field(default=default, metadata=_meta(json, "str", omitempty=omitempty))


def opt_text(json: str, *, omitempty: bool = False) -> Any:
    """A Go pointer to a string-like value (``*string``, ``*net.IP``, ``*net.MAC``)."""
    meta = _meta(json, "str", omitempty=omitempty, pointer=True)
    return dataclasses.field(default=None, metadata=meta)


def flag(json: str, *, omitempty: bool = False) -> Any:
    """A Go ``bool``."""
    return dataclasses.field(default=False, metadata=_meta(json, "bool", omitempty=omitempty))


def integer(json: str, *, omitempty: bool = False) -> Any:
    """A Go integer."""
    return dataclasses.field(default=0, metadata=_meta(json, "int", omitempty=omitempty))


def opt_integer(json: str, *, omitempty: bool = True) -> Any:
    """A Go ``*int``."""
    meta = _meta(json, "int", omitempty=omitempty, pointer=True)
    return dataclasses.field(default=None, metadata=meta)


def opt_number(json: str, *, omitempty: bool = True) -> Any:
    """A Go ``*float64``."""
    meta = _meta(json, "float", omitempty=omitempty, pointer=True)
    return dataclasses.field(default=None, metadata=meta)


def opt_int_or_text(json: str, *, omitempty: bool = True) -> Any:
    """A Go pointer to a number-or-name (``*numorstring.Protocol``)."""
    meta = _meta(json, "int|str", omitempty=omitempty, pointer=True)
    return dataclasses.field(default=None, metadata=meta)


def texts(json: str, *, omitempty: bool = False, nil: Any = None) -> Any:
    """A Go ``[]string`` (or a slice of string-like values such as CIDRs)."""
    meta = _meta(json, "list", item="str", omitempty=omitempty, nil=nil)
    return dataclasses.field(default=(), metadata=meta)


def port_list(json: str, *, omitempty: bool = True) -> Any:
    """A Go ``[]numorstring.Port``: numbers, ``"lo:hi"`` ranges and port names."""
    meta = _meta(json, "list", item="int|str", omitempty=omitempty)
    return dataclasses.field(default=(), metadata=meta)


def numbers(json: str, *, nullable: bool = False, omitempty: bool = False, nil: Any = None) -> Any:
    """A Go ``[]int`` (``[]*int`` when ``nullable``: items may be null)."""
    meta = _meta(json, "list", item="int?" if nullable else "int", omitempty=omitempty, nil=nil)
    return dataclasses.field(default=(), metadata=meta)


def items(json: str, cls: Any, *, omitempty: bool = False, nil: Any = None) -> Any:
    """A Go slice of structs; ``cls`` is a V1Value class."""
    meta = _meta(json, "list", item=cls, omitempty=omitempty, nil=nil)
    return dataclasses.field(default=(), metadata=meta)


def nested(json: str, cls: Any, *, omitempty: bool = True) -> Any:
    """A Go pointer to a struct."""
    meta = _meta(json, "nested", item=cls, omitempty=omitempty, pointer=True)
    return dataclasses.field(default=None, metadata=meta)


def string_map(json: str, *, omitempty: bool = True) -> Any:
    """A Go ``map[string]string``. Held as a dict that is never mutated after construction."""
    meta = _meta(json, "labels", omitempty=omitempty)
    return dataclasses.field(default_factory=dict, metadata=meta)


def raw(json: str, *, omitempty: bool = True) -> Any:
    """Any JSON value kept as decoded (for fields Felix carries but never reads)."""
    meta = _meta(json, "any", omitempty=omitempty, pointer=True)
    return dataclasses.field(default=None, metadata=meta)


# --- the base class -----------------------------------------------------------------------------


class V1Value:
    """Base of every v1 value dataclass: Go-compatible ``to_json``/``from_json``."""

    __slots__ = ()

    @classmethod
    def _shapes(cls) -> tuple[tuple[str, FieldShape], ...]:
        """(attribute, shape) of every field, read once per class."""
        shapes = cls.__dict__.get("_SHAPES")
        if shapes is None:
            fields = dataclasses.fields(cls)  # type: ignore[arg-type]
            shapes = tuple((f.name, f.metadata["json"]) for f in fields)
            type.__setattr__(cls, "_SHAPES", shapes)
        return shapes

    def to_json(self) -> dict[str, Any]:
        """The value as upstream's Go struct marshals it."""
        out: dict[str, Any] = {}
        for attr, shape in self._shapes():
            value = getattr(self, attr)
            if shape.omitempty and (value is None if shape.pointer else not value):
                continue
            out[shape.json] = _encode(shape, value)
        return out

    @classmethod
    def from_json(cls, data: Any) -> Self:
        """Decode upstream's JSON; ValueJSONError for anything of the wrong shape."""
        if not isinstance(data, Mapping):
            raise ValueJSONError(f"{cls.__name__}: expected a JSON object, got {data!r}")
        kwargs: dict[str, Any] = {}
        for attr, shape in cls._shapes():
            raw_value = data.get(shape.json)
            if raw_value is not None:
                kwargs[attr] = _decode(cls, shape, raw_value)
        return cls(**kwargs)


def _encode(shape: FieldShape, value: Any) -> Any:
    if shape.kind == "list":
        if not value:
            return shape.nil
        if isinstance(shape.item, type):
            return [v.to_json() for v in value]
        return list(value)
    if shape.kind == "nested":
        return None if value is None else value.to_json()
    if shape.kind == "labels":
        return dict(value) if value else shape.nil
    return value


def _decode(cls: type, shape: FieldShape, raw_value: Any) -> Any:
    if shape.kind == "list":
        if not isinstance(raw_value, list | tuple):
            raise _bad(cls, shape.json, raw_value, "a list")
        if isinstance(shape.item, type):
            return tuple(shape.item.from_json(v) for v in raw_value)
        decode, want = _SCALARS[shape.item]
        out = []
        for v in raw_value:
            value = decode(v)
            if value is _INVALID:
                raise _bad(cls, shape.json, v, f"list items that are each {want}")
            out.append(value)
        return tuple(out)
    if shape.kind == "nested":
        return shape.item.from_json(raw_value)
    decode, want = _SCALARS[shape.kind]
    value = decode(raw_value)
    if value is _INVALID:
        raise _bad(cls, shape.json, raw_value, want)
    return value
