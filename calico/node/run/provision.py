"""The one-shot steps before the daemons start: node startup, then the CNI plugin install.

Both run as ``calico component ...`` child processes, never by import (node depends on no
other component): startup as ``calico component node startup``, exactly as the node image's
rc.local runs it, with its log appended to ``<log dir>/startup.log``; the install as
``calico component cni install`` with every setting on its command line and nothing else in its
environment, so the files it writes depend only on what the node asked for. The installed
launchers point at the node's resident CNI helper (``cni-daemon``), so CNI calls on this node
take the fast path while the node runs and fall back in-process otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from calico.node.errors import NodeError
from calico.node.run.layout import CNI_CONFLIST_NAME, Layout, NodeSettings

STARTUP_TIMEOUT = 120.0
CNI_INSTALL_TIMEOUT = 60.0
# How ``calico component cni install`` reports each file, one line each.
INSTALL_REPORT_WORDS = ("Wrote", "Unchanged")


def calico_exe() -> str:
    """The ``calico`` console script of this environment."""
    candidate = Path(sys.executable).parent / "calico"
    return str(candidate) if candidate.exists() else "calico"


def run_component(
    args: Sequence[str],
    what: str,
    timeout: float,
    env: Mapping[str, str],
    output: IO[bytes] | int,
    hint: str = "",
) -> subprocess.CompletedProcess[bytes]:
    """``calico component <args>``: stdout to ``output`` (PIPE to capture), stderr with it."""
    try:
        return subprocess.run(
            [calico_exe(), "component", *args],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise NodeError(f"{what} did not finish within {timeout:.0f}s{hint}") from None


def startup_env(settings: NodeSettings, layout: Layout, base: Mapping[str, str]) -> dict[str, str]:
    env = dict(base)
    env.update(settings.datastore_env())
    env["CALICO_NODENAME_FILE"] = str(layout.nodename_file)
    if settings.name:
        env["NODENAME"] = settings.name
    env.update(settings.address_env())
    return env


def run_startup(settings: NodeSettings, layout: Layout) -> str:
    """Provision the Node, default pools and cluster defaults; returns the node name."""
    log_path = Path(settings.log_dir) / "startup.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        start = log.tell()
        proc = run_component(
            ["node", "startup"],
            "node startup",
            STARTUP_TIMEOUT,
            startup_env(settings, layout, os.environ),
            log,
            hint=f" (see {log_path})",
        )
    if proc.returncode != 0:
        with open(log_path, "rb") as f:
            f.seek(start)
            output = f.read()
        raise NodeError(f"node startup failed: {last_error(output)} (see {log_path})")
    name = layout.nodename_file.read_text(encoding="utf-8").strip()
    if not name:
        raise NodeError(f"node startup wrote an empty nodename file {layout.nodename_file}")
    return name


def last_error(output: bytes) -> str:
    """The child's ``Error: ...`` line (its last line when there is none)."""
    lines = [ln.strip() for ln in output.decode(errors="replace").splitlines() if ln.strip()]
    for line in reversed(lines):
        if line.startswith("Error:"):
            return line.removeprefix("Error:").strip()
    return lines[-1] if lines else "no output"


def cni_install_args(settings: NodeSettings, daemon_socket: str | None) -> list[str]:
    """``calico component cni install``'s command line for this node."""
    args = [
        *("cni", "install"),
        *("--cni-conf-dir", settings.cni_conf_dir),
        *("--cni-bin-dir", settings.cni_bin_dir),
        *("--conflist-name", CNI_CONFLIST_NAME),
        *("--datastore-type", settings.datastore),
        *("--datastore-path", settings.datastore_path),
        *("--nodename", settings.name),
        *("--log-file-path", str(Path(settings.log_dir) / "cni" / "cni.log")),
    ]
    if settings.datastore == "etcdv3":
        args += ["--etcd-endpoints", settings.etcd_endpoints]
    if daemon_socket is not None:
        args += ["--daemon-socket", daemon_socket]
    return args


def install_cni(settings: NodeSettings, daemon_socket: str | None = None) -> list[str]:
    """Write the plugin launchers and the conflist; returns the files (for ``--cleanup``).

    ``daemon_socket``: the launchers' default daemon socket (the node's own resident helper,
    or "off"); None leaves the plugin's default lookup.
    """
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    proc = run_component(
        cni_install_args(settings, daemon_socket),
        "installing the CNI plugin",
        CNI_INSTALL_TIMEOUT,
        env,
        subprocess.PIPE,
    )
    if proc.returncode != 0:
        # The installer words a file error "install failed: <error>"; say it once.
        why = last_error(proc.stdout).removeprefix("install failed: ")
        raise NodeError(f"installing the CNI plugin failed: {why}")
    files = []
    for line in proc.stdout.decode(errors="replace").splitlines():
        word, _, path = line.partition(" ")
        if word in INSTALL_REPORT_WORDS and path:
            files.append(path)
    return files
