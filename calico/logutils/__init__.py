"""Upstream-shaped log lines for every component.

``2026-08-22 06:33:20.123 [INFO][4321] felix/daemon.py 123: message k="v"``

Operators grep and parse these lines exactly as they do upstream's, so the shape is a contract.
"""

from calico.logutils.formatter import CalicoFormatter, fields, format_value, go_quote
from calico.logutils.levels import (
    FATAL,
    PANIC,
    TRACE,
    LogLevelError,
    level_name,
    parse_level,
)
from calico.logutils.setup import configure_early_logging_from_env, configure_formatter

__all__ = [
    "FATAL",
    "PANIC",
    "TRACE",
    "CalicoFormatter",
    "LogLevelError",
    "configure_early_logging_from_env",
    "configure_formatter",
    "fields",
    "format_value",
    "go_quote",
    "level_name",
    "parse_level",
]
