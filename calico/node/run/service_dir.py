"""The runit service directory ``calico node run`` supervises.

Built from the node image's own services (``node/filesystem/etc/service/available``), so the
single-host node and the container run the same scripts. Each generated ``run`` exports the
environment the service needs (the container gets it from its pod spec; here it comes from the
node's settings) and then execs the image's script; ``log/run`` is the image's, with
``CALICO_LOG_DIR`` pointing at the chosen log directory. The node knows which of the image's
services it can run (:data:`SERVICE_COMPONENTS`: the ones whose ``calico component`` exists,
plus the BIRD daemons); with ``--networking-backend bird`` confd, bird and bird6 join after felix
(design/confd.md "Node run wiring"), their files and control sockets under the state dir.
``cni-daemon`` (the resident CNI helper)
listens on ``<state dir>/cni-daemon.sock``: its generated ``run`` hands the image's script that
socket as its argument, which the script passes on as ``--socket``; the installed launchers use
the same socket. Felix gets the node's own copy of the image's ``felix.cfg``
(``<state>/felix.cfg``, passed as ``--config-file``) and per-node endpoint status and MTU paths,
so no two nodes on one machine share a file. goldmane and whisker-backend (flow logs,
design/whisker.md) run on every backend, on GOLDMANE_PORT and WHISKER_PORT (loopback HTTP).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import calico
from calico import bird_services
from calico.node.errors import NodeError
from calico.node.run.layout import MARKER_ENV, Layout, NodeSettings

AVAILABLE_ENV = "CALICO_NODE_SERVICES_AVAILABLE"
CNI_DAEMON = "cni-daemon"
SOCKADDR_UN_PATH_MAX = 107  # sun_path is 108 bytes, NUL included
# The image's services this node runs, in start order -> the ``calico component`` each runs
# (None: a binary of its own, not a component).
SERVICE_COMPONENTS: dict[str, str | None] = {
    "felix": "felix",
    "node-services": "node",
    CNI_DAEMON: "cni",
    "confd": "confd",
    "bird": None,
    "bird6": None,
    "goldmane": "goldmane",
    "whisker-backend": "whisker-backend",
}
# The services only one networking backend runs.
BACKEND_SERVICES: dict[str, tuple[str, ...]] = {"bird": bird_services.BIRD_SERVICES}


def image_felix_cfg(available: Path) -> Path:
    """The image's ``/etc/calico/felix.cfg``, next to its services (``etc/service/available``)."""
    return available.parent.parent / "calico" / "felix.cfg"


def write_felix_cfg(layout: Layout, available: Path) -> None:
    """The node's felix.cfg: the image's when there is one, else an empty file (so the
    host-wide /etc/calico/felix.cfg never applies to a node started here)."""
    src = image_felix_cfg(available)
    text = src.read_text(encoding="utf-8") if src.is_file() else ""
    layout.felix_config_file.parent.mkdir(parents=True, exist_ok=True)
    layout.felix_config_file.write_text(text, encoding="utf-8")


def available_dir() -> Path:
    """The image's service templates: $CALICO_NODE_SERVICES_AVAILABLE, else the source tree."""
    override = os.environ.get(AVAILABLE_ENV)
    path = (
        Path(override)
        if override
        else Path(calico.__file__).resolve().parent.parent / "node/filesystem/etc/service/available"
    )
    if not (path / "felix" / "run").is_file():
        raise NodeError(
            f"cannot find the runit service templates in {path}; run from a source checkout "
            f"or set {AVAILABLE_ENV}"
        )
    return path


def enabled_services(backend: str = "vxlan") -> list[str]:
    """The services to run for ``backend``, in start order (BIRD's after felix)."""
    optional = {svc for extra in BACKEND_SERVICES.values() for svc in extra}
    wanted = set(BACKEND_SERVICES.get(backend, ()))
    return [svc for svc in SERVICE_COMPONENTS if svc not in optional or svc in wanted]


def cni_daemon_socket(layout: Layout) -> str | None:
    """The node's CNI daemon socket; None when the path is too long for a unix socket."""
    path = str(layout.cni_daemon_socket)
    return path if len(os.fsencode(path)) <= SOCKADDR_UN_PATH_MAX else None


def service_env(settings: NodeSettings, layout: Layout) -> dict[str, str]:
    """Everything the services need, beyond what the image's scripts derive themselves."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    env = {
        "PATH": f"{bin_dir}:{path}" if bin_dir not in path.split(":") else path,
        "NODENAME": settings.name,
        "CALICO_NODENAME_FILE": str(layout.nodename_file),
        "CALICO_LOG_DIR": settings.log_dir,
        **settings.datastore_env(),
        "FELIX_HEALTHENABLED": "true",
        "FELIX_HEALTHHOST": settings.felix_health_host,
        "FELIX_HEALTHPORT": str(settings.felix_health_port),
        "FELIX_ENDPOINTSTATUSPATHPREFIX": str(layout.endpoint_status_prefix),
        "FELIX_MTUFILEPATH": str(layout.mtu_file),
        "CALICO_NETWORKING_BACKEND": settings.networking_backend,
        # goldmane and whisker-backend both read upstream's PORT; their run scripts map these.
        "GOLDMANE_PORT": str(settings.goldmane_port),
        "WHISKER_PORT": str(settings.whisker_port),
        MARKER_ENV: str(layout.state_dir),
    }
    if settings.networking_backend == "vxlan":
        env["FELIX_VXLANENABLED"] = "true"
    if settings.networking_backend == "bird":
        env.update(bird_env(layout))
    if settings.datastore == "local":
        # The felix script maps ETCD_* but not the local path: Felix has its own name for it.
        env["FELIX_CALICODATASTOREPATH"] = settings.datastore_path
    env.update(settings.address_env())
    return env


def bird_env(layout: Layout) -> dict[str, str]:
    """confd's and BIRD's per-node paths (also what ``calicoctl node status`` and the health
    checks read to find this node's sockets)."""
    return bird_services.service_env(layout.confd_dir, layout.run_dir, layout.service_dir)


def service_args(service: str, layout: Layout) -> list[str]:
    """Arguments for the image's ``run`` script: the CNI daemon's socket for ``cni-daemon``,
    the node's felix.cfg for ``felix``."""
    if service == "felix":
        return ["--config-file", str(layout.felix_config_file)]
    if service != CNI_DAEMON:
        return []
    socket = cni_daemon_socket(layout)
    if socket is None:
        raise NodeError(f"{layout.cni_daemon_socket} is too long for a unix socket")
    return [socket]


def _interpreter(script: Path) -> str:
    first = script.read_text(encoding="utf-8").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else "/bin/sh"


def _run_script(template: Path, env: Mapping[str, str], args: Sequence[str] = ()) -> str:
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
    command = shlex.join([str(template), *args])
    return (
        "#!/bin/sh\n"
        "# Generated by 'calico node run'; rewritten on every start.\n"
        f"{exports}"
        f"exec {_interpreter(template)} {command}\n"
    )


def build_service_dir(
    settings: NodeSettings, layout: Layout, services: list[str], available: Path
) -> None:
    """(Re)create ``layout.service_dir`` with one runit service per entry of ``services``."""
    if layout.service_dir.exists():
        shutil.rmtree(layout.service_dir)
    write_felix_cfg(layout, available)
    if any(svc in bird_services.BIRD_SERVICES for svc in services):
        bird_services.prepare_confdir(layout.confd_dir)
    env = service_env(settings, layout)
    for svc in services:
        src = available / svc
        dst = layout.service_dir / svc
        (dst / "log").mkdir(parents=True)
        _write_exec(dst / "run", _run_script(src / "run", env, service_args(svc, layout)))
        if (src / "log" / "run").is_file():
            _write_exec(dst / "log" / "run", _run_script(src / "log" / "run", env))
        else:
            shutil.rmtree(dst / "log")


def _write_exec(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
