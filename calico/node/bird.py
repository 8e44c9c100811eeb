"""Talk to BIRD over its control socket: BGP peer states and graceful-restart status.

BIRD answers each command with numbered lines (``0001`` greeting, ``2002-`` table heading,
``1002-`` first row, `` `` continuation rows, ``0000`` end). Only our own peer names
(``Mesh_``/``Node_``/``Global_`` + the address with ``_`` separators) count as peers.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

TIMEOUT = 2.0
_PEER_NAME = re.compile(r"^(Global|Node|Mesh)_(.+)$")
_HEADINGS = ["name", "proto", "table", "state", "since", "info"]


class BirdError(Exception):
    """BIRD could not be asked, or answered something we do not understand."""


@dataclass(frozen=True)
class Peer:
    ip: str
    kind: str  # Global, Node or Mesh
    state: str
    since: str
    bgp_state: str


def _ask(path: str, command: str, timeout: float = TIMEOUT) -> list[str]:
    """Send one command; return the reply lines up to and including the terminating one."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(command.encode() + b"\n")
            buf = b""
            lines: list[str] = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return lines
                buf += chunk
                *done, buf = buf.split(b"\n")
                for raw in done:
                    line = raw.decode(errors="replace")
                    lines.append(line)
                    # A four-digit code followed by a space ends a reply (0001 is the greeting).
                    if re.match(r"^\d{4} ", line) and not line.startswith("0001"):
                        return lines
    except OSError as exc:
        raise BirdError(f"unable to query BIRD at {path}: {exc.strerror or exc}") from None


def _parse_peer(line: str) -> Peer | None:
    cols = line.split()
    if len(cols) < 6 or cols[1] != "BGP":
        return None
    m = _PEER_NAME.match(cols[0])
    if not m:
        return None
    text = m.group(2).replace("_", ".")
    try:
        ip = str(ipaddress.IPv4Address(text))
    except ValueError:
        ip = m.group(2).replace("_", ":")
    return Peer(ip, m.group(1), cols[3], cols[4], cols[5])


def parse_protocols(lines: list[str], version: int) -> list[Peer]:
    peers = []
    for line in lines:
        if line.startswith(("0000", "0001")):
            continue
        if line.startswith("2002"):
            if line[5:].lower().split() != _HEADINGS:
                raise BirdError("unknown BIRD table output format")
            continue
        if line.startswith("1002"):
            peer = _parse_peer(line[5:])
        elif line.startswith(" "):
            peer = _parse_peer(line[1:])
        else:
            raise BirdError(f"unexpected output line from BIRD: {line!r}")
        if peer is not None and (":" in peer.ip) == (version == 6):
            peers.append(peer)
    return peers


def get_peers(path: str, version: int) -> list[Peer]:
    return parse_protocols(_ask(path, "show protocols"), version)


def graceful_restart_in_progress(path: str) -> bool:
    """``show status`` includes a 0024 block while a graceful restart is recovering."""
    return any(line.startswith("0024") for line in _ask(path, "show status"))


def status_ok(path: str) -> bool:
    """BIRD answers ``show status`` with its version banner (what birdcl prints as "BIRD ...")."""
    return any(line.startswith(("1000-BIRD", "1000 BIRD")) for line in _ask(path, "show status"))
