"""Scalar value parsers for Felix parameters: each turns one raw string (from env, felix.cfg
or the datastore) into a typed value, or raises ParseError saying why not.

Every parser also knows its type's *zero* value (what ``none`` selects) and, where the type
has a canonical text form, ``format`` (its inverse) so that values can be written back out and
round-trip. The rules follow upstream's param_types: case-insensitive enums canonicalised,
Go-style integers (``0x`` prefixes), durations as (fractional) *seconds*, not Go durations.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any

from calico.durations import DurationError, format_duration, parse_duration
from calico.logutils.levels import DISABLED, parse_level


class ParseError(ValueError):
    """A raw value that is not valid for its parameter's type; the message says why."""


@dataclass(frozen=True)
class Parser:
    """Base: the type's name (for docs/errors) and its zero value."""

    kind: str = "string"
    zero: Any = ""

    def parse(self, raw: str) -> Any:
        return raw

    def format(self, value: Any) -> str:
        """The canonical text for a value this parser produced (parse(format(v)) == v)."""
        return str(value)


_TRUE = frozenset({"true", "1", "yes", "y", "t"})
_FALSE = frozenset({"false", "0", "no", "n", "f"})


@dataclass(frozen=True)
class BoolParser(Parser):
    """``true/1/yes/y/t`` or ``false/0/no/n/f``, any case. ``optional``: zero is None (unset),
    for tri-state params such as IpInIpEnabled whose absence means "derive it"."""

    kind: str = "bool"
    zero: Any = False
    optional: bool = False

    def __post_init__(self) -> None:
        if self.optional:
            object.__setattr__(self, "zero", None)

    def parse(self, raw: str) -> bool:
        low = raw.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ParseError("invalid boolean")

    def format(self, value: Any) -> str:
        return "true" if value else "false"


_OCTAL = re.compile(r"[+-]?0[0-7]+")


def go_int(raw: str) -> int:
    """An integer as Go's ParseInt(raw, 0, 64) reads it: decimal, ``0x``, ``0o``, ``0b`` or a
    leading-zero octal."""
    text = raw.strip()
    if text != raw or not text:
        raise ParseError("invalid int")
    if _OCTAL.fullmatch(text):
        sign = -1 if text[0] == "-" else 1
        return sign * int(text.lstrip("+-"), 8)
    try:
        return int(text, 0)
    except ValueError:
        raise ParseError("invalid int") from None


def _check_range(value: int, lo: int | None, hi: int | None) -> None:
    """Raise ParseError unless lo <= value <= hi (a None bound is open)."""
    if lo is not None and value < lo:
        raise ParseError(f"value must be at least {lo}")
    if hi is not None and value > hi:
        raise ParseError(f"value must be at most {hi}")


@dataclass(frozen=True)
class IntParser(Parser):
    """An integer within [lo, hi] (either bound may be None = unbounded)."""

    kind: str = "int"
    zero: Any = 0
    lo: int | None = None
    hi: int | None = None

    def parse(self, raw: str) -> int:
        value = go_int(raw)
        _check_range(value, self.lo, self.hi)
        return value


def go_float_text(value: float) -> str:
    """A float the way Go's ``%v`` prints it (``90``, ``0.05``)."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def _finite_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ParseError("invalid float") from None
    if not math.isfinite(value) or raw.strip() != raw:
        raise ParseError("invalid float")
    return value


@dataclass(frozen=True)
class FloatParser(Parser):
    """A finite number written in ``unit``s, returned as ``number * unit``; the bounds apply to
    the written number's integer part (either may be None = unbounded)."""

    kind: str = "float"
    zero: Any = 0.0
    unit: float = 1.0
    lo: int | None = None
    hi: int | None = None

    def parse(self, raw: str) -> float:
        number = _finite_float(raw)
        _check_range(int(number), self.lo, self.hi)
        return number * self.unit

    def format(self, value: Any) -> str:
        return go_float_text(value / self.unit)


@dataclass(frozen=True)
class SecondsParser(FloatParser):
    """A duration written as a number of ``unit`` (1 = seconds, 0.001 = the ``...Millis``
    params); the value is in seconds. Upstream does not accept Go duration text here."""

    kind: str = "seconds"


@dataclass(frozen=True)
class ChoiceParser(Parser):
    """One of a fixed set of options, matched case-insensitively, returned in canonical case."""

    kind: str = "oneof"
    options: tuple[str, ...] = ()

    def parse(self, raw: str) -> str:
        for option in self.options:
            if option.lower() == raw.lower():
                return option
        raise ParseError(f"unknown option (valid: {', '.join(self.options)})")


@dataclass(frozen=True)
class PatternParser(Parser):
    """A string that must fully match ``regex`` (hostnames, authorities, interface names...)."""

    regex: re.Pattern[str] = field(default=re.compile(r"[^\n]*"))
    message: str = "invalid string"

    def parse(self, raw: str) -> str:
        if not self.regex.fullmatch(raw):
            raise ParseError(self.message)
        return raw


LOG_SEVERITIES = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")


def severity_level(value: str) -> int:
    """The logging level for a resolved LogSeverity* value; ``""`` (set via ``none``) means the
    target is disabled."""
    return DISABLED if not value else parse_level(value)


@dataclass(frozen=True)
class RegexParser(Parser):
    """A regular expression (compiled). ``nil_on_empty``: an empty value means "no filter"."""

    kind: str = "regexp"
    zero: Any = None
    nil_on_empty: bool = False

    def parse(self, raw: str) -> re.Pattern[str] | None:
        if raw == "" and self.nil_on_empty:
            return None
        try:
            return re.compile(raw)
        except re.error as exc:
            raise ParseError(f"invalid regexp: {exc}") from None

    def format(self, value: Any) -> str:
        return "" if value is None else value.pattern


@dataclass(frozen=True)
class FileParser(Parser):
    """A file path. ``must_exist``: it must be there now; ``executable``: looked up next to
    this program, then on PATH, and resolved to the full path."""

    kind: str = "file"
    must_exist: bool = False
    executable: bool = False

    def parse(self, raw: str) -> str:
        if self.executable:
            found = shutil.which(raw)
            if found is None and self.must_exist:
                raise ParseError("missing file")
            return found or ""
        if self.must_exist and raw and not os.path.exists(raw):
            raise ParseError("failed to access file")
        return raw


@dataclass(frozen=True)
class MarkMaskParser(IntParser):
    """A 32-bit mark mask (``0xffff0000``) with at least two bits set."""

    kind: str = "mark-bitmask"
    lo: int | None = 0
    hi: int | None = 0xFFFFFFFF

    def parse(self, raw: str) -> int:
        try:
            value = super().parse(raw)
        except ParseError:
            raise ParseError("invalid mark: should be 32-bit int") from None
        if value.bit_count() < 2:
            raise ParseError("invalid mark: needs to have 2 bits set")
        return value

    def format(self, value: Any) -> str:
        return f"{value:#010x}"


_KEY = re.compile(r"[^=,\s]+")


def _pairs(raw: str) -> list[tuple[str, str]]:
    out = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _KEY.fullmatch(key):
            raise ParseError(f"invalid key=value pair {item!r}")
        out.append((key, value.strip()))
    return out


@dataclass(frozen=True)
class KeyValueListParser(Parser):
    """``key=value,key2=value2`` into a dict (later keys win)."""

    kind: str = "keyvaluelist"
    zero: Any = field(default_factory=dict)

    def parse(self, raw: str) -> dict[str, str]:
        return dict(_pairs(raw))

    def format(self, value: Any) -> str:
        return ",".join(f"{k}={v}" for k, v in value.items())


@dataclass(frozen=True)
class KeyDurationListParser(Parser):
    """``name=<Go duration>,...`` (HealthTimeoutOverrides) into {name: seconds}."""

    kind: str = "keydurationlist"
    zero: Any = field(default_factory=dict)

    def parse(self, raw: str) -> dict[str, float]:
        out = {}
        for key, text in _pairs(raw):
            try:
                out[key] = round(parse_duration(text), 9)  # Go durations are whole ns
            except DurationError as exc:
                raise ParseError(f"{key}: {exc}") from None
        return out

    def format(self, value: Any) -> str:
        return ",".join(f"{k}={format_duration(v)}" for k, v in value.items())
