"""Kubernetes resource quantities (``1k``, ``4Gi``, ``1.5e3``), parsed as apimachinery's
ParseQuantity does, so annotations that carry them (the pod QoS ones) mean what they mean on
a real cluster: same accepted forms, same three error messages, same rounding of ``Value()``
(up, away from zero), same canonical text (``String()``) in messages that quote a limit."""

from __future__ import annotations

from fractions import Fraction

ERR_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
ERR_SUFFIX = "unable to parse quantity's suffix"

_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def _split(text: str) -> tuple[bool, str, str, str]:
    """(positive, numerator digits, fraction digits, suffix), apimachinery's scanner: leading
    zeros dropped, ``1.G`` allowed, anything after a suffix other than an exponent refused."""
    positive, pos, end = True, 0, len(text)
    if text[:1] in ("-", "+"):
        positive, pos = text[0] != "-", 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    num = text[start:pos] or "0"
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        frac = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    if pos < end:
        raise QuantityError(ERR_FORMAT)
    return positive, num, frac, text[suffix_start:]


def _scale(suffix: str) -> Fraction:
    """The multiplier a suffix stands for: an SI prefix, a binary one, or ``e<int>``."""
    if suffix in _DECIMAL:
        return Fraction(10) ** _DECIMAL[suffix]
    if suffix in _BINARY:
        return Fraction(2) ** _BINARY[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        exp = suffix[1:]
        body = exp[1:] if exp[0] in "+-" else exp
        if body.isascii() and body.isdigit():
            return Fraction(10) ** int(exp)
    raise QuantityError(ERR_SUFFIX)


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity string; QuantityError with apimachinery's message."""
    if not text:
        raise QuantityError(ERR_FORMAT)
    positive, num, frac, suffix = _split(text)
    value = (Fraction(int(num)) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)) * _scale(
        suffix
    )
    return value if positive else -value


def quantity_value(text: str) -> int:
    """``ParseQuantity(text).Value()``: the integer value, fractions rounded away from zero."""
    value = parse_quantity(text)
    magnitude = -(-abs(value.numerator) // value.denominator)
    return magnitude if value >= 0 else -magnitude


def canonical(value: int) -> str:
    """``String()`` of a DecimalSI integer quantity: the largest SI prefix that keeps the
    mantissa whole (``1000`` -> ``1k``, ``1010`` stays, ``1.01P`` -> ``1010T``)."""
    if value == 0:
        return "0"
    for prefix, exp in (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)):
        if value % 10**exp == 0:
            return f"{value // 10**exp}{prefix}"
    return str(value)
