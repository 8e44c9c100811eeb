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

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from calico.node.errors import NodeError
from calico.node.run.environ import inherited
from calico.node.run.layout import CNI_CONFLIST_NAME, Layout, NodeSettings

STARTUP_TIMEOUT = 120.0
TUNNEL_ADDRS_TIMEOUT = 60.0
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
    """``base`` (the caller's environment) minus node-owned variables, plus the node's own."""
    env = inherited(base)
    env.update(settings.datastore_env())
    env["CALICO_NETWORKING_BACKEND"] = settings.networking_backend
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


def run_allocate_tunnel_addrs(settings: NodeSettings, layout: Layout) -> None:
    """``allocate-tunnel-addrs --run-once`` (upstream's rc.local does it before the services),
    so Felix finds this node's VTEP address on its first pass; log appended to startup.log."""
    log_path = Path(settings.log_dir) / "startup.log"
    with open(log_path, "ab") as log:
        start = log.tell()
        proc = run_component(
            ["node", "allocate-tunnel-addrs", "--run-once"],
            "allocating tunnel addresses",
            TUNNEL_ADDRS_TIMEOUT,
            startup_env(settings, layout, os.environ),
            log,
            hint=f" (see {log_path})",
        )
    if proc.returncode != 0:
        with open(log_path, "rb") as f:
            f.seek(start)
            output = f.read()
        raise NodeError(
            f"allocating tunnel addresses failed: {last_error(output)} (see {log_path})"
        )


def write_calicoctl_config(settings: NodeSettings, layout: Layout) -> None:
    """A CalicoAPIConfig naming this node's datastore, for ``calicoctl -c <state>/calicoctl.cfg``
    (the node's own tools use it instead of the host-wide /etc/calico/calicoctl.cfg)."""
    spec = (
        f"  etcdEndpoints: {json.dumps(settings.etcd_endpoints)}\n"
        if settings.datastore == "etcdv3"
        else f"  localDatastorePath: {json.dumps(settings.datastore_path)}\n"
    )
    text = (
        "apiVersion: projectcalico.org/v3\n"
        "kind: CalicoAPIConfig\n"
        "metadata: {}\n"
        "spec:\n"
        f"  datastoreType: {settings.datastore}\n"
        f"{spec}"
    )
    layout.calicoctl_config_file.write_text(text, encoding="utf-8")


def last_error(output: bytes) -> str:
    """The child's ``Error: ...`` line (its last line when there is none)."""
    lines = [ln.strip() for ln in output.decode(errors="replace").splitlines() if ln.strip()]
    for line in reversed(lines):
        if line.startswith("Error:"):
            return line.removeprefix("Error:").strip()
    return lines[-1] if lines else "no output"


def cni_install_args(
    settings: NodeSettings, daemon_socket: str | None, layout: Layout | None = None
) -> list[str]:
    """``calico component cni install``'s command line for this node.

    With the node's ``layout``, the conflist names the node's own endpoint status dir, IPAM
    lock and MTU file, and ``mtu 0`` (the MTU Felix detects, as upstream's ``veth_mtu: "0"``).
    """
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
    if layout is not None:
        args += [
            *("--mtu", "0"),
            *("--mtu-file", str(layout.mtu_file)),
            *("--endpoint-status-dir", str(layout.endpoint_status_dir)),
            *("--ipam-lock-file", str(layout.ipam_lock_file)),
        ]
    if settings.ip6 and settings.ip6.lower() != "none":
        args.append("--assign-ipv6")  # a dual-stack node gives its pods both families
    if daemon_socket is not None:
        args += ["--daemon-socket", daemon_socket]
    return args


def install_cni(
    settings: NodeSettings, daemon_socket: str | None = None, layout: Layout | None = None
) -> list[str]:
    """Write the plugin launchers and the conflist; returns the files (for ``--cleanup``).

    ``daemon_socket``: the launchers' default daemon socket (the node's own resident helper,
    or "off"); None leaves the plugin's default lookup.
    """
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    proc = run_component(
        cni_install_args(settings, daemon_socket, layout),
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
