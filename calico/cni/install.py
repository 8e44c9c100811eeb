"""``calico component cni install``: the conflist and the two plugin launchers.

Launchers are tiny shell scripts so the plugins always run the ``calico`` entry point of this
environment (no copy of the code to go stale): :func:`calico.cli.main.main`, the console
script's own entry. ``calico-ipam`` must see that basename as argv[0]; a shebang script cannot
carry argv[0] through ``exec -a``, so each launcher passes its name to ``main``. With a daemon
socket (``--daemon-socket``), the launchers also default ``CALICO_CNI_DAEMON_SOCKET`` to it, so
calls go to that resident helper (a value the caller set wins; without the option the plugin's
own default applies). Every file is rewritten only when its content changes.

When the interpreter can be asked where its packages live, the launchers start it with ``-S
-P`` and put exactly those directories on ``sys.path``: the ``site`` module's work (``.pth``
files, setuptools' editable-install finder) is ~18 ms of CPU on every pod start, and ``-P``
keeps the runtime's working directory off ``sys.path`` (a ``calico/`` or ``json.py`` there
would otherwise shadow the real modules). An interpreter that cannot be asked gets the plain
launcher.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from calico.cni.daemon_client import SOCKET_ENV
from calico.datastore.config import DEFAULT_LOCAL_PATH

CONFLIST_NAME = "10-calico.conflist"
DEFAULT_CONF_DIR = "/etc/cni/net.d"
DEFAULT_BIN_DIR = "/opt/cni/bin"
DEFAULT_MTU = 1500
DEFAULT_ENDPOINT_STATUS_DIR = "/var/run/calico/endpoint-status"

# Placeholders as upstream's installer substitutes them (plus our local datastore path).
TEMPLATE = """{
  "name": "__NETWORK_NAME__",
  "cniVersion": "1.0.0",
  "plugins": [
    {
      "type": "calico",
      "log_level": "__LOG_LEVEL__",
      "log_file_path": "__LOG_FILE_PATH__",
      "datastore_type": "__DATASTORE_TYPE__",
      "datastore_path": "__DATASTORE_PATH__",
      "nodename": "__KUBERNETES_NODE_NAME__",
      "mtu": __CNI_MTU__,
      "ipam": {"type": "calico-ipam"},
      "container_settings": {"allow_ip_forwarding": false},
      "policy_setup_timeout_seconds": 0,
      "endpoint_status_dir": "__ENDPOINT_STATUS_DIR__"
    }
  ]
}
"""


@dataclass(frozen=True)
class InstallOptions:
    conf_dir: str = DEFAULT_CONF_DIR
    bin_dir: str = DEFAULT_BIN_DIR
    mtu: int = DEFAULT_MTU
    datastore_type: str = "local"
    datastore_path: str = DEFAULT_LOCAL_PATH
    # Added to the calico plugin's entry (after datastore_path) unless the template sets it.
    etcd_endpoints: str = ""
    nodename: str = ""
    network_name: str = "k8s-pod-network"
    log_level: str = "info"
    log_file_path: str = ""
    conflist_name: str = CONFLIST_NAME
    template: str = TEMPLATE
    python: str = sys.executable
    # Written into the launchers as the default CALICO_CNI_DAEMON_SOCKET (None: not written).
    daemon_socket: str | None = None
    endpoint_status_dir: str = DEFAULT_ENDPOINT_STATUS_DIR
    # Added to the calico plugin's entry when set (several nodes on one host each need their
    # own): upstream's ipam_lock_file, and our mtu_file (the file Felix writes the pod MTU to).
    ipam_lock_file: str = ""
    mtu_file: str = ""
    # Dual stack: the calico-ipam entry asks for an IPv6 address too (upstream's
    # "assign_ipv6": "true" in the ipam section).
    assign_ipv6: bool = False


def default_nodename() -> str:
    env = os.environ
    return env.get("KUBERNETES_NODE_NAME") or env.get("NODENAME") or socket.gethostname().lower()


def render_conflist(opts: InstallOptions) -> str:
    """Substitute the placeholders; the result must be valid JSON (checked)."""

    def js(value: str) -> str:
        return json.dumps(value)[1:-1]  # JSON-escaped, without the quotes

    text = opts.template
    for key, value in (
        ("__NETWORK_NAME__", js(opts.network_name)),
        ("__LOG_LEVEL__", js(opts.log_level)),
        ("__LOG_FILE_PATH__", js(opts.log_file_path)),
        ("__DATASTORE_TYPE__", js(opts.datastore_type)),
        ("__DATASTORE_PATH__", js(opts.datastore_path)),
        ("__KUBERNETES_NODE_NAME__", js(opts.nodename or default_nodename())),
        ("__CNI_MTU__", str(int(opts.mtu))),
        ("__ENDPOINT_STATUS_DIR__", js(opts.endpoint_status_dir)),
    ):
        text = text.replace(key, value)
    doc = json.loads(text)  # raises ValueError for a broken template
    if opts.etcd_endpoints:
        for i, plugin in enumerate(doc.get("plugins", [])):
            if plugin.get("type") == "calico" and "etcd_endpoints" not in plugin:
                doc["plugins"][i] = _with_etcd_endpoints(plugin, opts.etcd_endpoints)
    extra = {"ipam_lock_file": opts.ipam_lock_file, "mtu_file": opts.mtu_file}
    for plugin in doc.get("plugins", []):
        if plugin.get("type") == "calico":
            for key, value in extra.items():
                if value:
                    plugin.setdefault(key, value)
            ipam = plugin.get("ipam")
            if opts.assign_ipv6 and isinstance(ipam, dict) and ipam.get("type") == "calico-ipam":
                ipam.setdefault("assign_ipv4", "true")
                ipam.setdefault("assign_ipv6", "true")
    return json.dumps(doc, indent=2) + "\n"


def _with_etcd_endpoints(plugin: dict[str, object], endpoints: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in plugin.items():
        out[key] = value
        if key == "datastore_path":
            out["etcd_endpoints"] = endpoints
    out.setdefault("etcd_endpoints", endpoints)
    return out


# Run by the launcher's interpreter at install time: the sys.path entries -S leaves out.
_PATHS_PROBE = """
import json, os, sys, sysconfig
import calico
paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
paths.append(os.path.dirname(os.path.dirname(os.path.abspath(calico.__file__))))
print(json.dumps([p for i, p in enumerate(paths) if p not in paths[:i]]))
"""


def package_paths(python: str) -> list[str] | None:
    """Where ``python`` finds its site packages and ``calico``; None if it cannot tell us."""
    try:
        res = subprocess.run(
            [python, "-P", "-c", _PATHS_PROBE],
            capture_output=True, text=True, timeout=60, cwd="/", check=False,
        )  # fmt: skip
        paths = json.loads(res.stdout) if res.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        return None
    return paths


def launcher_scripts(
    python: str, daemon_socket: str | None = None, paths: list[str] | None = None
) -> dict[str, str]:
    """The two launchers; with ``paths`` (:func:`package_paths`) they skip ``site``."""
    py = shlex.quote(python)
    head = "#!/bin/sh\n# Installed by 'calico component cni install'; do not edit.\n"
    if daemon_socket is not None:
        var = SOCKET_ENV
        head += (
            f"# The resident CNI helper's socket, unless the caller chose one.\n"
            f'if [ -z "${{{var}+set}}" ]; then\n'
            f"    {var}={shlex.quote(daemon_socket)}\n"
            f"    export {var}\n"
            "fi\n"
        )
    flags, prelude = "", ""
    if paths:
        flags = "-S -P "
        prelude = f"import sys; sys.path += {json.dumps(paths)}; "
    code = {name: f'{prelude}from calico.cli.main import main; main("{name}")'
            for name in ("calico", "calico-ipam")}  # fmt: skip
    return {name: head + f'exec {py} {flags}-c {shlex.quote(c)} "$@"\n' for name, c in code.items()}


def write_if_changed(path: str, content: str, mode: int) -> bool:
    """Atomically replace ``path`` when its content or mode differs; True if written."""
    try:
        with open(path, encoding="utf-8") as f:
            same = f.read() == content
        if same and (os.stat(path).st_mode & 0o777) == mode:
            return False
    except FileNotFoundError:
        pass
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".calico-install.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def install(opts: InstallOptions) -> list[tuple[str, bool]]:
    """Install everything; returns (path, changed) per file."""
    results: list[tuple[str, bool]] = []
    paths = package_paths(opts.python)
    for name, script in launcher_scripts(opts.python, opts.daemon_socket, paths).items():
        path = os.path.join(opts.bin_dir, name)
        results.append((path, write_if_changed(path, script, 0o755)))
    conflist = os.path.join(opts.conf_dir, opts.conflist_name)
    results.append((conflist, write_if_changed(conflist, render_conflist(opts), 0o644)))
    return results
