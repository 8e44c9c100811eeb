"""What ``calico node run --networking-backend bird`` needs to run confd and BIRD
(design/confd.md "Node run wiring"): which runit services to add, in start order, and their
environment. Ground floor (stdlib only) so the node component can use it: components never
import each other, and node starts confd by command line through the image's run script.

The services are the node image's own (``node/filesystem/etc/service/available/{confd,bird,
bird6}``): confd renders into ``<confdir>/config``; bird/bird6 run ``bird -R -s <socket> -d -c
<confdir>/config/bird.cfg``. The scripts read ``CALICO_CONFD_DIR`` and
``CALICO_BIRD_SOCKET``/``CALICO_BIRD6_SOCKET`` (defaults: the image's paths), so a node under
a private state directory keeps its files there. ``SVDIR`` lets confd's ``sv hup bird`` find
the node's service directory.
"""

from __future__ import annotations

import shutil
from pathlib import Path

#: Start order: confd first (BIRD needs its config), then the two BIRD 1.x daemons.
BIRD_SERVICES = ("confd", "bird", "bird6")
SHIPPED_CONFD = Path(__file__).resolve().parents[1] / "node/filesystem/etc/calico/confd"


def bird_installed() -> bool:
    """Debian's BIRD 1.6 (``bird`` and ``bird6``): the default backend when present."""
    return shutil.which("bird") is not None and shutil.which("bird6") is not None


def prepare_confdir(confdir: Path, source: Path = SHIPPED_CONFD) -> None:
    """Copy the shipped conf.d/ and templates/ into ``confdir`` (refreshed on every start; the
    rendered ``config/`` is kept so BIRD has its last good files until confd renders)."""
    for sub in ("conf.d", "templates"):
        dst = confdir / sub
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(source / sub, dst)
    (confdir / "config").mkdir(parents=True, exist_ok=True)


def service_env(confdir: Path, run_dir: Path, service_dir: Path) -> dict[str, str]:
    """The environment the three services need on top of the node's (NODENAME, datastore)."""
    return {
        "CALICO_CONFD_DIR": str(confdir),
        "CALICO_BIRD_SOCKET": str(run_dir / "bird.ctl"),
        "CALICO_BIRD6_SOCKET": str(run_dir / "bird6.ctl"),
        "CALICO_CONFD_STATUS_FILE": str(run_dir / "confd-status.json"),
        # Felix's EndpointStatusPathPrefix on the node: confd's local workload peers.
        "CALICO_ENDPOINT_STATUS_PATH_PREFIX": str(run_dir),
        "SVDIR": str(service_dir),
    }
