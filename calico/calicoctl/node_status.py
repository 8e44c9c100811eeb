"""``calicoctl node status``: is Calico running, and BIRD's BGP sessions per IP version, read
from BIRD's own control sockets (design/confd.md "calicoctl node status").

Output as upstream: ``Calico process is running.``, then ``IPv4 BGP status`` with a table of
the BGP protocols named ``Global_*``/``Node_*``/``Mesh_*`` (PEER ADDRESS, PEER TYPE, STATE,
SINCE, INFO), or ``No IPv4 peers found.``; the same for IPv6. Addition: configs confd refused
to install (BIRD rejected them) are listed, so a stuck session shows why.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from calico import birdctl

_NAME = re.compile(r"^(Global|Node|Mesh)_(.+)$")
_TYPES = {"Global": "global", "Node": "node specific", "Mesh": "node-to-node mesh"}
_PROCESS_NAMES = ("bird", "bird6")


def calico_running(proc: Path = Path("/proc")) -> bool:
    """A Calico node process on this host: ``calico component felix|confd`` or BIRD."""
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            argv = (pid_dir / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [os.path.basename(a.decode(errors="replace")) for a in argv if a]
        if not words:
            continue
        if words[0] in _PROCESS_NAMES:
            return True
        if "component" in words and ("felix" in words or "confd" in words):
            return True
    return False


def peer_address(rest: str, version: int) -> str:
    """``10_192_0_3`` -> ``10.192.0.3``; ``fd00__3_port_1790`` -> ``fd00::3`` (the port is
    dropped, as upstream shows only the address)."""
    rest = re.sub(r"_port_\d+$", "", rest)
    return rest.replace("_", "." if version == 4 else ":")


def _center(text: str, width: int) -> str:
    pad = width - len(text)
    return " " * (pad // 2) + text + " " * (pad - pad // 2)


def peer_table(rows: list[list[str]]) -> str:
    """Upstream's tablewriter layout: centred upper-case headers, left-aligned cells."""
    headers = ["PEER ADDRESS", "PEER TYPE", "STATE", "SINCE", "INFO"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    head = "|" + "|".join(f" {_center(h, w)} " for h, w in zip(headers, widths, strict=True)) + "|"
    body = [
        "|" + "|".join(f" {c.ljust(w)} " for c, w in zip(r, widths, strict=True)) + "|"
        for r in rows
    ]
    return "\n".join([border, head, border, *body, border])


def peers(version: int, path: str | None = None) -> list[list[str]]:
    """``path``: the socket (``--bird-socket``/``--bird6-socket``); by default the environment's
    or the image's, falling back to a host BIRD's."""
    default = birdctl.BIRD_SOCKET if version == 4 else birdctl.BIRD6_SOCKET
    path = path or birdctl.socket_path(version)
    fallback = birdctl.FALLBACK_SOCKETS[version]
    if path == default and not os.path.exists(path) and os.path.exists(fallback):
        path = fallback
    rows = []
    for p in birdctl.show_protocols(path):
        m = _NAME.match(p.name)
        if p.proto != "BGP" or not m:
            continue
        rows.append(
            [peer_address(m.group(2), version), _TYPES[m.group(1)], p.state, p.since, p.info]
        )
    return rows


@click.command("status")
@click.option(
    "--bird-socket",
    envvar="CALICO_BIRD_SOCKET",
    default=birdctl.BIRD_SOCKET,
    show_default=True,
    help="BIRD's control socket (a 'calico node run' node: <state dir>/bird.ctl).",
)
@click.option(
    "--bird6-socket",
    envvar="CALICO_BIRD6_SOCKET",
    default=birdctl.BIRD6_SOCKET,
    show_default=True,
    help="BIRD6's control socket (a 'calico node run' node: <state dir>/bird6.ctl).",
)
def status_command(bird_socket: str, bird6_socket: str) -> None:
    """Check the status of the Calico node instance (BGP peerings)."""
    if not calico_running():
        raise click.ClickException("Calico process is not running.")
    click.echo("Calico process is running.")
    failed = False
    for version in (4, 6):
        click.echo(f"\nIPv{version} BGP status")
        try:
            rows = peers(version, bird_socket if version == 4 else bird6_socket)
        except birdctl.BirdError as exc:
            click.echo(
                f"Error executing command: unable to connect to BIRDv{version} socket: {exc}"
            )
            continue
        click.echo(peer_table(rows) if rows else f"No IPv{version} peers found.")
    errors = birdctl.read_status(birdctl.status_file())
    for daemon, error in sorted(errors.items()):
        click.echo(
            f"\nconfd: {daemon} configuration rejected, still running the previous one: {error}"
        )
    click.echo("")
    if failed:
        raise SystemExit(1)
