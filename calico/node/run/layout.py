"""Where a running node keeps its state, and the settings it was started with.

One state directory per node: the pid file of the ``calico node run`` process, the settings it
resolved (JSON, so ``stop``/``status``/the demo need no flags but ``--state-dir``), the generated
runit service directory, the nodename file, the CNI daemon's socket, and every file a node
shares with its own services only (endpoint status files, the pod MTU file, the IPAM lock,
felix.cfg, calicoctl.cfg). Several nodes in several network namespaces of one machine therefore
never share a file (design/node-run.md "State directory"). Every other path is overridable so
tests can run a node without touching the host's ``/var/run``, ``/etc/cni`` or ``/opt/cni/bin``.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from calico.bird_services import bird_installed
from calico.datastore.config import DEFAULT_LOCAL_PATH
from calico.node.errors import NodeError

DEFAULT_STATE_DIR = "/var/run/calico/node-run"
DEFAULT_LOG_DIR = "/var/log/calico"
DEFAULT_CNI_CONF_DIR = "/etc/cni/net.d"
DEFAULT_CNI_BIN_DIR = "/opt/cni/bin"
# The conflist the node installs (handed to the installer as --conflist-name) and reads back.
CNI_CONFLIST_NAME = "10-calico.conflist"
DEFAULT_HEALTH_PORT = 9099
DEFAULT_GOLDMANE_PORT = 7443  # upstream's goldmane Service port
DEFAULT_WHISKER_PORT = 8081  # upstream's Whisker UI port
STATE_DIR_ENV = "CALICO_NODE_STATE_DIR"
# Exported to every supervised process: its value (the state dir) identifies our processes in
# /proc, even after their parent died and they were re-parented.
MARKER_ENV = "CALICO_NODE_RUN_STATE"
NETWORKING_BACKENDS = ("vxlan", "bird", "none")
DEFAULT_NETWORKING_BACKEND = "vxlan"


def default_networking_backend() -> str:
    """``bird`` when Debian's BIRD is installed (as the issue asks), else ``vxlan``."""
    return "bird" if bird_installed() else DEFAULT_NETWORKING_BACKEND


@dataclass(frozen=True)
class NodeSettings:
    """What ``calico node run`` was asked for, resolved to concrete values."""

    state_dir: str = DEFAULT_STATE_DIR
    log_dir: str = DEFAULT_LOG_DIR
    name: str = ""
    datastore: str = "local"
    datastore_path: str = DEFAULT_LOCAL_PATH
    etcd_endpoints: str = ""
    ip: str = ""
    ip_autodetection_method: str = ""
    ip6: str = ""
    networking_backend: str = DEFAULT_NETWORKING_BACKEND
    cni_conf_dir: str = DEFAULT_CNI_CONF_DIR
    cni_bin_dir: str = DEFAULT_CNI_BIN_DIR
    felix_health_host: str = "localhost"
    felix_health_port: int = DEFAULT_HEALTH_PORT
    goldmane_port: int = DEFAULT_GOLDMANE_PORT
    whisker_port: int = DEFAULT_WHISKER_PORT
    services: tuple[str, ...] = ()
    cni_files: tuple[str, ...] = field(default=())

    def datastore_env(self) -> dict[str, str]:
        """The upstream variables every component (and calicoctl) reads."""
        if self.datastore == "etcdv3":
            return {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": self.etcd_endpoints}
        return {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": self.datastore_path}

    def address_env(self) -> dict[str, str]:
        """``IP``, ``IP_AUTODETECTION_METHOD``, ``IP6`` when set (startup and node-services)."""
        pairs = (
            ("IP", self.ip),
            ("IP_AUTODETECTION_METHOD", self.ip_autodetection_method),
            ("IP6", self.ip6),
        )
        return {name: value for name, value in pairs if value}

    def datastore_description(self) -> str:
        if self.datastore == "etcdv3":
            return f"etcdv3 ({self.etcd_endpoints})"
        return f"local ({self.datastore_path})"

    def health_url(self, check: str = "readiness") -> str:
        return f"http://{self.felix_health_host}:{self.felix_health_port}/{check}"

    def whisker_url(self) -> str:
        """Whisker's UI (whisker-backend serves plain HTTP on loopback in a node run)."""
        return f"http://127.0.0.1:{self.whisker_port}/"


@dataclass(frozen=True)
class Layout:
    """Paths inside one state directory."""

    state_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "node.pid"

    @property
    def settings_file(self) -> Path:
        return self.state_dir / "node.json"

    @property
    def service_dir(self) -> Path:
        return self.state_dir / "service"

    @property
    def nodename_file(self) -> Path:
        return self.state_dir / "nodename"

    @property
    def demo_file(self) -> Path:
        return self.state_dir / "demo.json"

    @property
    def cni_daemon_socket(self) -> Path:
        """The resident CNI helper's socket: per state dir, so nodes never share one."""
        return self.state_dir / "cni-daemon.sock"

    @property
    def endpoint_status_prefix(self) -> Path:
        """Felix's EndpointStatusPathPrefix (upstream /var/run/calico): per node."""
        return self.state_dir

    @property
    def endpoint_status_dir(self) -> Path:
        """Where Felix writes and the CNI plugin reads endpoint status files."""
        return self.state_dir / "endpoint-status"

    @property
    def mtu_file(self) -> Path:
        """The pod MTU Felix detects (upstream /var/lib/calico/mtu); the CNI plugin reads it."""
        return self.state_dir / "mtu"

    @property
    def ipam_lock_file(self) -> Path:
        """The CNI IPAM plugin's host lock (upstream /var/run/calico/ipam.lock)."""
        return self.state_dir / "ipam.lock"

    @property
    def felix_config_file(self) -> Path:
        """The image's felix.cfg, copied per node (upstream /etc/calico/felix.cfg)."""
        return self.state_dir / "felix.cfg"

    @property
    def calicoctl_config_file(self) -> Path:
        """A CalicoAPIConfig for this node's datastore (``calicoctl -c``)."""
        return self.state_dir / "calicoctl.cfg"

    @property
    def run_dir(self) -> Path:
        """The node's runtime dir (upstream /var/run/calico): bird.ctl, bird6.ctl, confd's
        status file."""
        return self.state_dir

    @property
    def confd_dir(self) -> Path:
        """confd's conf.d/, templates/ and rendered config/ (upstream /etc/calico/confd)."""
        return self.state_dir / "confd"

    @property
    def bird_socket(self) -> Path:
        """BIRD's control socket (upstream /var/run/calico/bird.ctl)."""
        return self.run_dir / "bird.ctl"

    @property
    def bird6_socket(self) -> Path:
        return self.run_dir / "bird6.ctl"


def layout_for(state_dir: str | os.PathLike[str]) -> Layout:
    return Layout(Path(state_dir).absolute())


def save_settings(layout: Layout, settings: NodeSettings) -> None:
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    tmp = layout.settings_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(settings), indent=2) + "\n", encoding="utf-8")
    tmp.replace(layout.settings_file)


def load_settings(layout: Layout) -> NodeSettings | None:
    """The settings the last ``calico node run`` on this state dir used (None: never ran)."""
    try:
        doc: dict[str, Any] = json.loads(layout.settings_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise NodeError(f"cannot read {layout.settings_file}: {exc}") from None
    known = set(NodeSettings.__dataclass_fields__)
    values = {k: v for k, v in doc.items() if k in known}
    for key in ("services", "cni_files"):
        values[key] = tuple(values.get(key) or ())
    return NodeSettings(**values)


def read_pid(layout: Layout) -> int | None:
    """The pid in the pid file, if that process is still alive."""
    try:
        pid = int(layout.pid_file.read_text(encoding="utf-8").strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def remove_stale_socket(path: Path) -> None:
    """Remove ``path`` if it is a unix socket (a killed daemon cannot remove its own)."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
