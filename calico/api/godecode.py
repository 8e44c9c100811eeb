"""Decode a parsed document the way upstream's loader does: YAML -> JSON -> Go structs.

calicoctl reads manifests with a YAML-to-JSON converter that knows the target Go type, then
Go's ``encoding/json`` (strict: unknown fields are errors). This module reproduces what users
can observe of that before pydantic validates the result:

- field names match exactly, else case-insensitively (``spec: {Order: 10}`` is ``order``);
- ``null`` leaves a field at its zero value (a bare ``spec:`` is an empty spec);
- a scalar meant for a string field becomes a string as the converter renders it
  (``yes``/``on``/``true`` -> ``"true"``, ``5663`` -> ``"5663"``); a string for a bool is the
  converter's ``cannot parse string 'True' into field IPPoolSpec.disabled of type bool``;
  anything else of the wrong JSON type is Go's ``cannot unmarshal <type> into Go struct field
  <Struct>.<path> of type <T>``;
- an unknown field is ``field in document is not recognized or is in the wrong location: <f>``.

It walks the pydantic models' type hints, so it needs no per-kind table; targets it cannot
type exactly (unions, custom parsers) are left for pydantic.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator

from calico.api.errors import APIError

UNKNOWN_FIELD = "field in document is not recognized or is in the wrong location"


class GoDecodeError(APIError):
    """A document that Go's decoder would refuse (wrong JSON type or unknown field)."""


@dataclass(frozen=True)
class Target:
    """What a field decodes into: ``kind`` is str/bool/int/float/model/list/dict/any/custom."""

    kind: str
    model: type[BaseModel] | None = None
    item: Target | None = None
    custom: str = ""


ANY = Target("any")
_SCALARS = {str: "str", bool: "bool", int: "int", float: "float"}
_GO_NAMES = {"str": "string", "bool": "bool", "int": "int", "float": "float64"}


@functools.cache
def _custom_parsers() -> dict[Any, str]:
    """BeforeValidators whose Go types have their own JSON decoders (numorstring)."""
    from calico.api import bgp, rules

    return {bgp._as_number: "asnumber", rules._parse_port: "port"}


def _target(ann: Any) -> Target:
    origin = typing.get_origin(ann)
    if origin is Annotated:
        base, *meta = typing.get_args(ann)
        for m in meta:
            if isinstance(m, BeforeValidator):
                name = _custom_parsers().get(m.func)
                return Target("custom", custom=name) if name else ANY
        return _target(base)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        return _target(args[0]) if len(args) == 1 else ANY
    if origin is Literal:
        values = typing.get_args(ann)
        return Target("str") if all(isinstance(x, str) for x in values) else ANY
    if origin is list:
        (item,) = typing.get_args(ann) or (Any,)
        return Target("list", item=_target(item))
    if origin is dict:
        args = typing.get_args(ann)
        return Target("dict", item=_target(args[1]) if args else ANY)
    if isinstance(ann, type):
        if issubclass(ann, BaseModel):
            return Target("model", model=ann)
        if ann in _SCALARS:
            return Target(_SCALARS[ann])
    return ANY


@dataclass(frozen=True)
class _Fields:
    exact: dict[str, tuple[str, Target]]  # wire name -> (wire name, target)
    folded: dict[str, tuple[str, Target]]  # lower-case wire name -> same


@functools.cache
def _fields(cls: type[BaseModel]) -> _Fields:
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except (NameError, TypeError):  # an unresolvable hint: type what can be typed
        hints = {n: i.annotation for n, i in cls.model_fields.items()}
    exact: dict[str, tuple[str, Target]] = {}
    folded: dict[str, tuple[str, Target]] = {}
    for name, info in cls.model_fields.items():
        wire = info.alias or name
        entry = (wire, _target(hints.get(name, Any)))
        exact[wire] = entry
        folded.setdefault(wire.lower(), entry)
    return _Fields(exact, folded)


def go_type(t: Target) -> str:
    """How Go's decoder names the target type in its errors."""
    if t.kind in _GO_NAMES:
        return _GO_NAMES[t.kind]
    if t.kind == "model" and t.model is not None:
        return f"v3.{t.model.__name__}"
    if t.kind == "list" and t.item is not None:
        return f"[]{go_type(t.item)}"
    if t.kind == "dict" and t.item is not None:
        return f"map[string]{go_type(t.item)}"
    if t.custom == "asnumber":
        return "numorstring.ASNumber"
    if t.custom == "port":
        return "numorstring.Port"
    return "interface {}"


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def go_string(value: Any) -> str:
    """A YAML scalar as the YAML-to-JSON converter renders it for a string target."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    return str(value)


@dataclass
class _Walk:
    struct: str  # innermost Go struct name
    path: tuple[str, ...]  # JSON names from the document root

    def mismatch(self, value: Any, target: Target) -> GoDecodeError:
        field = ".".join((self.struct, *self.path))
        return GoDecodeError(
            f"cannot unmarshal {json_type(value)} into Go struct field {field} "
            f"of type {go_type(target)}"
        )


def _value(value: Any, target: Target, at: _Walk) -> Any:
    kind = target.kind
    if kind == "any":
        return value
    if kind == "str":
        if isinstance(value, dict | list):
            raise at.mismatch(value, target)
        return value if isinstance(value, str) else go_string(value)
    if kind == "bool":
        if isinstance(value, str):  # the converter's own wording (upstream's 'True' case)
            raise GoDecodeError(
                f"cannot parse string '{value}' into field {at.struct}.{at.path[-1]} of type bool"
            )
        if not isinstance(value, bool):
            raise at.mismatch(value, target)
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise at.mismatch(value, target)
        if isinstance(value, float):
            if not value.is_integer():
                raise GoDecodeError(
                    f"cannot unmarshal number {value!r} into Go struct field "
                    f"{'.'.join((at.struct, *at.path))} of type int"
                )
            return int(value)
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise at.mismatch(value, target)
        return value
    if kind == "model":
        if not isinstance(value, dict):
            raise at.mismatch(value, target)
        assert target.model is not None
        return decode_model(target.model, value, at.path)
    if kind == "list":
        if not isinstance(value, list):
            raise at.mismatch(value, target)
        assert target.item is not None
        return [v if v is None else _value(v, target.item, at) for v in value]
    if kind == "dict":
        if not isinstance(value, dict):
            raise at.mismatch(value, target)
        assert target.item is not None
        return {
            go_string(k): v if v is None else _value(v, target.item, at) for k, v in value.items()
        }
    return _custom(value, target, at)


def _custom(value: Any, target: Target, at: _Walk) -> Any:
    """numorstring types: a number in range or a string; other JSON types are Go errors."""
    if isinstance(value, bool | dict | list):
        raise at.mismatch(value, target)
    if isinstance(value, int):
        if target.custom == "asnumber" and not 0 <= value <= 0xFFFFFFFF:
            raise GoDecodeError(
                f"cannot unmarshal number into Go struct field "
                f"{'.'.join((at.struct, *at.path))} of type string"
            )
        if target.custom == "port" and not 0 <= value <= 0xFFFF:
            raise GoDecodeError(f"cannot unmarshal number {value} into Go value of type uint16")
    if target.custom == "port" and isinstance(value, str):
        _port_range(value)
    return value


def _port_range(text: str) -> None:
    """numorstring.Port's own decoding of ``min:max`` (its range errors are decode errors)."""
    low, sep, high = text.partition(":")
    if not sep or not (low.isdigit() and high.isdigit()):
        return  # a single port or a name: left to validation
    if int(low) > 0xFFFF:
        raise GoDecodeError(f"invalid minimum port number in range ({text})")
    if int(high) > 0xFFFF:
        raise GoDecodeError(f"invalid maximum port number in range ({text})")
    if int(low) > int(high):
        raise GoDecodeError(
            f"minimum port number ({int(low)}) is greater than maximum port number "
            f"({int(high)}) in port range"
        )


def decode_model(
    cls: type[BaseModel], data: dict[Any, Any], path: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``data`` with canonical field names and Go's scalar conversions, for ``cls``."""
    fields = _fields(cls)
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = go_string(raw_key)
        entry = fields.exact.get(key) or fields.folded.get(key.lower())
        if entry is None:
            raise GoDecodeError(f"{UNKNOWN_FIELD}: {key}")
        wire, target = entry
        if value is None:
            out.pop(wire, None)  # JSON null: the field keeps its zero value
            continue
        out[wire] = _value(value, target, _Walk(cls.__name__, (*path, wire)))
    return out
