"""Go-style durations (``100ms``, ``1m30s``), as upstream's flags, config and tables spell them."""

from __future__ import annotations

import re

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # micro sign
    "μs": 1e-6,  # greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class DurationError(ValueError):
    """Text that is not a Go duration."""


def parse_duration(text: str) -> float:
    """Parse a Go duration into seconds; raises DurationError with the offending text."""
    s = text.strip()
    if not s:
        raise DurationError(f'invalid duration "{text}"')
    sign = 1.0
    if s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    pos = 0
    total = 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m:
            if re.fullmatch(r"\d+(\.\d*)?", s[pos:]):
                raise DurationError(f'missing unit in duration "{text}"')
            raise DurationError(f'invalid duration "{text}"')
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """Format seconds the way Go's time.Duration.String() does."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    neg = ns < 0
    ns = abs(ns)
    if ns < 1_000_000_000:
        if ns < 1_000:
            out = f"{ns}ns"
        elif ns < 1_000_000:
            out = _frac(ns, 1_000) + "µs"
        else:
            out = _frac(ns, 1_000_000) + "ms"
    else:
        hours, rem = divmod(ns, 3_600_000_000_000)
        minutes, rem = divmod(rem, 60_000_000_000)
        secs = _frac(rem, 1_000_000_000) + "s"
        if hours:
            out = f"{hours}h{minutes}m{secs}"
        elif minutes:
            out = f"{minutes}m{secs}"
        else:
            out = secs
    return "-" + out if neg else out


def _frac(value: int, unit: int) -> str:
    whole, rem = divmod(value, unit)
    if not rem:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{rem:0{digits}d}".rstrip("0")
