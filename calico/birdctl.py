"""BIRD's control socket and confd's status file: what ``calicoctl node status`` reads and
``calico component confd`` writes (design/confd.md "Status").

Ground floor because two components use it (confd writes the status, calicoctl reads it and
talks to BIRD) and components never import each other. Stdlib only.

BIRD's CLI protocol: every reply line starts with a 4-digit code, ``-`` when more lines of the
reply follow, a space on the last one; a line starting with a space continues the previous
code. Code ``0000`` ends a successful reply; 8xxx/9xxx are errors.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

BIRD_SOCKET = "/var/run/calico/bird.ctl"
BIRD6_SOCKET = "/var/run/calico/bird6.ctl"
FALLBACK_SOCKETS = {4: "/var/run/bird/bird.ctl", 6: "/var/run/bird/bird6.ctl"}
STATUS_FILE_ENV = "CALICO_CONFD_STATUS_FILE"
STATUS_FILE = "/var/run/calico/confd-status.json"
_LINE = re.compile(r"^(\d{4})([ -])(.*)$")


class BirdError(Exception):
    """The socket could not be reached, or BIRD answered with an error code."""


@dataclass(frozen=True)
class Protocol:
    """One row of ``show protocols``."""

    name: str
    proto: str
    table: str
    state: str
    since: str
    info: str


def socket_path(version: int, env: dict[str, str] | None = None) -> str:
    """``CALICO_BIRD_SOCKET``/``CALICO_BIRD6_SOCKET`` override the node image's paths."""
    env = dict(os.environ) if env is None else env
    name = "CALICO_BIRD_SOCKET" if version == 4 else "CALICO_BIRD6_SOCKET"
    return env.get(name) or (BIRD_SOCKET if version == 4 else BIRD6_SOCKET)


def command(path: str, cmd: str, timeout: float = 5.0) -> list[tuple[str, str]]:
    """Send one CLI command; the reply as ``(code, text)`` lines (continuations keep the code)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        reader = sock.makefile("r", encoding="utf-8", errors="replace")
        _read_reply(reader)  # the "0001 BIRD x.y ready." greeting
        sock.sendall(cmd.encode() + b"\n")
        return _read_reply(reader)
    except OSError as exc:
        raise BirdError(f"{path}: {exc.strerror or exc}") from None
    finally:
        sock.close()


def _read_reply(reader: object) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    code = "0000"
    while True:
        raw = reader.readline()  # type: ignore[attr-defined]
        if not raw:
            raise BirdError("connection closed by BIRD")
        line = raw.rstrip("\n")
        if line.startswith(" "):
            out.append((code, line[1:]))
            continue
        m = _LINE.match(line)
        if not m:
            raise BirdError(f"unexpected reply line {line!r}")
        code, more, text = m.groups()
        if code[0] in "89":
            raise BirdError(text.strip())
        out.append((code, text))
        if more == " ":
            return out


def show_protocols(path: str) -> list[Protocol]:
    """The protocol table (code 1002 rows; the 2002 row is the header)."""
    rows = []
    for code, text in command(path, "show protocols"):
        if code != "1002":
            continue
        parts = text.split(None, 5)
        if len(parts) < 5:
            continue
        name, proto, table, state = parts[:4]
        rest = text.split(None, 4)[4] if len(parts) >= 5 else ""
        since, info = _since_info(rest)
        rows.append(Protocol(name, proto, table, state, since, info))
    return rows


def _since_info(rest: str) -> tuple[str, str]:
    """``since`` is a time (``12:00:00``) or a date plus time (``2026-12-01 12:00:00``)."""
    words = rest.split()
    if len(words) >= 2 and re.fullmatch(r"\d{4}-\d{2}-\d{2}", words[0]):
        return f"{words[0]} {words[1]}", " ".join(words[2:])
    return (words[0] if words else ""), " ".join(words[1:])


# ---- confd's status file -------------------------------------------------------------------


def status_file(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    return Path(env.get(STATUS_FILE_ENV) or STATUS_FILE)


def write_status(path: Path, errors: dict[str, str]) -> None:
    """Record confd's current rejected configs (``{file: error}``, empty when all is well)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"time": time.time(), "errors": errors}, sort_keys=True))
    os.replace(tmp, path)


def read_status(path: Path) -> dict[str, str]:
    """The rejected configs confd last reported; empty when none (or no status file)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    errors = data.get("errors") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict) else {}
