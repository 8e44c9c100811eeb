"""Log levels with upstream (logrus) names, mapped onto Python's numeric levels."""

from __future__ import annotations

import logging

TRACE = 5
FATAL = logging.CRITICAL
PANIC = 60
# A level above everything: what upstream's "none" severity means for a log target.
DISABLED = 100

_NAMES = {
    TRACE: "TRACE",
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    FATAL: "FATAL",
    PANIC: "PANIC",
}

_PARSE = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "fatal": FATAL,
    "critical": FATAL,
    "panic": PANIC,
    "none": DISABLED,
}

for _level, _name in _NAMES.items():
    logging.addLevelName(_level, _name)


class LogLevelError(ValueError):
    """A log severity that is not one of upstream's names."""


def parse_level(text: str) -> int:
    """Parse an upstream severity name (case-insensitive: ``Info``, ``DEBUG``, ``none``...)."""
    try:
        return _PARSE[text.strip().lower()]
    except KeyError:
        valid = ", ".join(k for k in _PARSE if k not in ("warn", "critical"))
        raise LogLevelError(f'invalid log level "{text}"; valid levels: {valid}') from None


def level_name(levelno: int) -> str:
    """Upper-case upstream name for a numeric level (nearest lower named level)."""
    if levelno in _NAMES:
        return _NAMES[levelno]
    best = max((lvl for lvl in _NAMES if lvl <= levelno), default=TRACE)
    return _NAMES[best]
