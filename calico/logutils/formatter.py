"""The log line formatter."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from calico.logutils.levels import level_name

# Fields attached with ``extra=fields(k=v)`` live under this record attribute.
FIELDS_ATTR = "calico_fields"
_SKIPPED_FIELDS = frozenset({"__flush__"})


def fields(**kv: Any) -> dict[str, dict[str, Any]]:
    """Structured key/values for one log call: ``log.info("msg", extra=fields(ifaceName=n))``."""
    return {FIELDS_ATTR: kv}


# strconv.Quote's short escapes.
_GO_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\t": "\\t",
    "\r": "\\r",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\v": "\\v",
}


def go_quote(text: str) -> str:
    """Quote a string the way Go's strconv.Quote does (printable Unicode kept as is)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif not ch.isprintable():
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def format_value(value: Any) -> str:
    """Render a field value: strings quoted, errors and "stringers" raw, others Go %#v-like."""
    if isinstance(value, str):
        return go_quote(value)
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, BaseException):
        return str(value)
    if type(value).__str__ is not object.__str__:
        return str(value)
    return repr(value)


class CalicoFormatter(logging.Formatter):
    """``YYYY-MM-DD HH:MM:SS.mmm [LEVEL][PID] <component>/<file> <line>: <msg> k=v ...``."""

    def __init__(self, component: str = "") -> None:
        super().__init__()
        self.component = component
        self._pid = os.getpid()

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        millis = int(record.msecs)
        pid = record.process if record.process is not None else self._pid
        if record.pathname:
            where = f"{os.path.basename(record.pathname)} {record.lineno}"
        else:
            where = "<nil>"
        if self.component:
            where = f"{self.component}/{where}"
        line = (
            f"{stamp}.{millis:03d} [{level_name(record.levelno)}][{pid}] {where}: "
            f"{record.getMessage()}"
        )
        kv: dict[str, Any] = dict(getattr(record, FIELDS_ATTR, None) or {})
        if record.exc_info and record.exc_info[1] is not None and "error" not in kv:
            kv["error"] = record.exc_info[1]
        for key in sorted(kv):
            if key in _SKIPPED_FIELDS:
                continue
            line += f" {key}={format_value(kv[key])}"
        if record.exc_info and logging.getLogger().isEnabledFor(logging.DEBUG):
            line += "\n" + self.formatException(record.exc_info)
        return line
