"""The one-shot steps before the daemons start: node startup, then the CNI plugin install.

The installed launchers point at the node's resident CNI helper (``cni-daemon``), so CNI calls
on this node take the fast path while the node runs and fall back in-process otherwise.

Startup runs as ``calico component node startup`` in a child process, exactly as the node
image's rc.local runs it, with its log appended to ``<log dir>/startup.log``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from calico.cni import install as cni_install
from calico.node.errors import NodeError
from calico.node.run.layout import Layout, NodeSettings

STARTUP_TIMEOUT = 120.0


def calico_exe() -> str:
    """The ``calico`` console script of this environment."""
    candidate = Path(sys.executable).parent / "calico"
    return str(candidate) if candidate.exists() else "calico"


def startup_env(settings: NodeSettings, layout: Layout, base: Mapping[str, str]) -> dict[str, str]:
    env = dict(base)
    env.update(settings.datastore_env())
    env["CALICO_NODENAME_FILE"] = str(layout.nodename_file)
    if settings.name:
        env["NODENAME"] = settings.name
    if settings.ip:
        env["IP"] = settings.ip
    if settings.ip_autodetection_method:
        env["IP_AUTODETECTION_METHOD"] = settings.ip_autodetection_method
    return env


def run_startup(settings: NodeSettings, layout: Layout) -> str:
    """Provision the Node, default pools and cluster defaults; returns the node name."""
    log_path = Path(settings.log_dir) / "startup.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        start = log.tell()
        try:
            proc = subprocess.run(
                [calico_exe(), "component", "node", "startup"],
                env=startup_env(settings, layout, os.environ),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=STARTUP_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise NodeError(
                f"node startup did not finish within {STARTUP_TIMEOUT:.0f}s (see {log_path})"
            ) from None
    if proc.returncode != 0:
        raise NodeError(f"node startup failed: {_last_error(log_path, start)} (see {log_path})")
    name = layout.nodename_file.read_text(encoding="utf-8").strip()
    if not name:
        raise NodeError(f"node startup wrote an empty nodename file {layout.nodename_file}")
    return name


def _last_error(log_path: Path, start: int) -> str:
    with open(log_path, "rb") as f:
        f.seek(start)
        lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    for line in reversed(lines):
        if line.startswith("Error:"):
            return line.removeprefix("Error:").strip()
    return lines[-1] if lines else "no output"


def conflist_template(settings: NodeSettings) -> str:
    """The installer's template, plus the etcd endpoints when the node uses etcd."""
    template = cni_install.TEMPLATE
    if settings.datastore == "etcdv3":
        anchor = '"datastore_path": "__DATASTORE_PATH__",'
        endpoints = settings.etcd_endpoints.replace("\\", "\\\\").replace('"', '\\"')
        template = template.replace(anchor, f'{anchor}\n      "etcd_endpoints": "{endpoints}",')
    return template


def install_cni(settings: NodeSettings, daemon_socket: str | None = None) -> list[str]:
    """Write the plugin launchers and the conflist; returns the files (for ``--cleanup``).

    ``daemon_socket``: the launchers' default ``CALICO_CNI_DAEMON_SOCKET`` (the node's own
    resident helper, or "off"); None leaves the plugin's default lookup.
    """
    opts = cni_install.InstallOptions(
        conf_dir=settings.cni_conf_dir,
        bin_dir=settings.cni_bin_dir,
        datastore_type=settings.datastore,
        datastore_path=settings.datastore_path,
        nodename=settings.name,
        log_file_path=str(Path(settings.log_dir) / "cni" / "cni.log"),
        template=conflist_template(settings),
        daemon_socket=daemon_socket,
    )
    try:
        return [path for path, _ in cni_install.install(opts)]
    except (OSError, ValueError) as exc:
        raise NodeError(f"installing the CNI plugin failed: {exc}") from None
