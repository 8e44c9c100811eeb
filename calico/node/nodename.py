"""Which node this is: the name every other node component must agree on.

Order (upstream's): ``NODENAME``; the nodename file startup wrote last time
(``CALICO_NODENAME_FILE``, default /var/lib/calico/nodename); lower-cased ``HOSTNAME``; the
lower-cased OS hostname. The file sits second so a renamed host keeps its Calico identity.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

from calico.node.errors import NodeError

log = logging.getLogger(__name__)

DEFAULT_NODENAME_FILE = "/var/lib/calico/nodename"


def nodename_file(env: Mapping[str, str]) -> Path:
    return Path(env.get("CALICO_NODENAME_FILE") or DEFAULT_NODENAME_FILE)


def read_nodename_file(path: Path) -> str:
    """The stored name, or "" when there is no file yet."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise NodeError(f"cannot read the nodename file {path}: {exc.strerror}") from None


def write_nodename_file(path: Path, name: str) -> None:
    """Persist the name for the daemons (runit exports it as NODENAME) and later restarts."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(name, encoding="utf-8")
        tmp.chmod(0o644)
        os.replace(tmp, path)
    except OSError as exc:
        raise NodeError(f"unable to write the nodename file {path}: {exc.strerror}") from None


def determine_node_name(
    env: Mapping[str, str], hostname: Callable[[], str] = socket.gethostname
) -> str:
    if name := env.get("NODENAME", "").strip():
        log.info("Using NODENAME environment for node name %s", name)
        return name
    path = nodename_file(env)
    if name := read_nodename_file(path):
        log.info("Using stored node name %s from %s", name, path)
        return name
    if name := env.get("HOSTNAME", "").strip().lower():
        log.info("Using HOSTNAME environment (lowercase) for node name %s", name)
        return name
    try:
        name = hostname().strip().lower()
    except OSError as exc:
        raise NodeError(f"unable to determine the hostname: {exc}") from None
    if not name:
        raise NodeError("unable to determine the node name: set NODENAME")
    log.warning("Using auto-detected node name %s; set NODENAME to choose one explicitly", name)
    return name
