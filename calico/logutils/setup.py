"""Process-wide logging set-up: install the formatter, pick the early level from env."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TextIO

from calico.logutils.formatter import CalicoFormatter
from calico.logutils.levels import LogLevelError, parse_level

_HANDLER_ATTR = "_calico_handler"


def configure_formatter(component: str, stream: TextIO | None = None) -> logging.Handler:
    """Make every root handler use the upstream line shape for ``component``.

    Idempotent: calling it again (e.g. the inner process of a wrapper) re-labels the same
    handler instead of stacking a second one. Adds a stdout handler when the root has none.
    """
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, _HANDLER_ATTR, False)]
    if ours:
        handler = ours[0]
        if stream is not None and isinstance(handler, logging.StreamHandler):
            # Not setStream(): it flushes the old stream, which may already be closed.
            handler.acquire()
            try:
                handler.stream = stream
            finally:
                handler.release()
    else:
        handler = logging.StreamHandler(stream if stream is not None else sys.stdout)
        setattr(handler, _HANDLER_ATTR, True)
        root.addHandler(handler)
    formatter = CalicoFormatter(component)
    for h in root.handlers:
        h.setFormatter(formatter)
    return handler


def configure_early_logging_from_env(
    component: str,
    env_prefix: str | None = None,
    environ: Mapping[str, str] | None = None,
    stream: TextIO | None = None,
) -> int:
    """Set the root level before config is loaded, as upstream's early logging does.

    Level from ``<P>_EARLYLOGSEVERITYSCREEN``, else ``<P>_LOGSEVERITYSCREEN``, else ERROR, where
    ``<P>`` defaults to the upper-cased component (``felix`` -> ``FELIX``). An invalid value is
    reported on the log and ignored rather than stopping the daemon before it can say why.
    """
    env = os.environ if environ is None else environ
    prefix = env_prefix or component.upper().replace("-", "_")
    configure_formatter(component, stream)
    level = logging.ERROR
    bad: str | None = None
    for var in (f"{prefix}_EARLYLOGSEVERITYSCREEN", f"{prefix}_LOGSEVERITYSCREEN"):
        raw = env.get(var)
        if raw:
            try:
                level = parse_level(raw)
            except LogLevelError as exc:
                bad = f"{var}: {exc}"
                continue
            break
    logging.getLogger().setLevel(level)
    if bad:
        logging.getLogger("calico.logutils").error("Ignoring invalid early log level %s", bad)
    return level
