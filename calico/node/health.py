"""``calico component node health``: is this node's Felix and BIRD healthy?

Felix is asked over its health endpoint (``FELIX_HEALTHHOST``:``FELIX_HEALTHPORT``, default
localhost:9099). BIRD liveness: the runit services (when runit manages them) must be running
and BIRD must answer on its control socket; readiness: every BGP peer Established while the
node is young (nodename file newer than ``--threshold-time``), afterwards at least one, and no
graceful restart in progress. Checks run concurrently; every failure is reported, one line each.

Where BIRD is: ``CALICO_BIRD_SOCKET``/``CALICO_BIRD6_SOCKET`` and the runit tree in ``SVDIR``
(what ``calico node run`` exports to its services, so each node checks its own daemons under
its state dir), else upstream's ``/var/run/calico/bird{,6}.ctl`` and ``/etc/service/enabled``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests

from calico.node import bird
from calico.node.nodename import nodename_file

RUN_DIR = "/var/run/calico"
SERVICE_DIR = "/etc/service/enabled"
NO_CHECKS = (
    "calico/node check error: must specify at least one of --bird-live, --bird6-live, "
    "--felix-live, --bird-ready, --bird6-ready or --felix-ready"
)


@dataclass(frozen=True)
class HealthOptions:
    felix_live: bool = False
    felix_ready: bool = False
    bird_ready: bool = False
    bird6_ready: bool = False
    bird_live: bool = False
    bird6_live: bool = False
    threshold: float = 30.0

    def any(self) -> bool:
        return any(
            (
                self.felix_live,
                self.felix_ready,
                self.bird_ready,
                self.bird6_ready,
                self.bird_live,
                self.bird6_live,
            )
        )


def felix_endpoint(env: Mapping[str, str], kind: str) -> str:
    host = env.get("FELIX_HEALTHHOST") or "localhost"
    port = env.get("FELIX_HEALTHPORT") or "9099"
    if not port.isdigit():
        raise ValueError(f"Failed to parse value for port {port!r} (FELIX_HEALTHPORT)")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}/{kind}"


def check_felix(url: str, kind: str, timeout: float) -> str | None:
    """None when healthy, else why not."""
    try:
        resp = requests.get(url, timeout=timeout)
    except requests.Timeout:
        return f"{kind} probe timed out after {timeout:g}s ({url})"
    except requests.RequestException as exc:
        reason = "connection refused" if isinstance(exc, requests.ConnectionError) else str(exc)
        return f"cannot reach Felix at {url}: {reason}"
    if not 200 <= resp.status_code < 400:
        return f"{kind} probe reporting {resp.status_code}"
    return None


def bird_socket(version: int, run_dir: str = RUN_DIR) -> str:
    """bird6.ctl for BIRD 1.x's separate IPv6 daemon, else the shared bird.ctl."""
    if version == 6 and os.path.exists(os.path.join(run_dir, "bird6.ctl")):
        return os.path.join(run_dir, "bird6.ctl")
    path = os.path.join(run_dir, "bird.ctl")
    if run_dir == RUN_DIR and not os.path.exists(path) and os.path.exists("/var/run/bird/bird.ctl"):
        return "/var/run/bird/bird.ctl"  # a BIRD installed on the host rather than in the image
    return path


def socket_from_env(version: int, env: Mapping[str, str], run_dir: str = RUN_DIR) -> str:
    """The node's own socket when its environment names one, else :func:`bird_socket`."""
    name = "CALICO_BIRD_SOCKET" if version == 4 else "CALICO_BIRD6_SOCKET"
    return env.get(name) or bird_socket(version, run_dir)


def _not_running(path: str) -> str:
    return f"BIRD is not running (no control socket at {path})"


def check_service(name: str, service_dir: str = SERVICE_DIR) -> str | None:
    """runit must report the service as running; skipped when runit does not manage it."""
    path = os.path.join(service_dir, name)
    sv = shutil.which("sv")
    if not os.path.isdir(path) or sv is None:
        return None
    res = subprocess.run([sv, "status", path], capture_output=True, text=True, timeout=5)
    if not res.stdout.startswith("run"):
        return f"Service {name} is not running. Output << {res.stdout.strip()} >>"
    return None


def check_bird_live(
    version: int,
    run_dir: str = RUN_DIR,
    service_dir: str = SERVICE_DIR,
    socket: str | None = None,
) -> str | None:
    daemon = "bird" if version == 4 else "bird6"
    for svc in ("confd", daemon):
        problem = check_service(svc, service_dir)
        if problem:
            return problem
    path = socket or bird_socket(version, run_dir)
    if not os.path.exists(path):
        return _not_running(path)
    birdcl = shutil.which("birdcl")
    if birdcl is not None:
        res = subprocess.run(
            [birdcl, "-s", path, "show", "status"], capture_output=True, text=True, timeout=5
        )
        if res.returncode != 0:
            return f"birdcl failed: {(res.stderr or res.stdout).strip()}"
        if not res.stdout.startswith("BIRD"):
            return f"bad response from {daemon}: {res.stdout.strip()}"
        return None
    try:
        return None if bird.status_ok(path) else f"bad response from {daemon}"
    except bird.BirdError as exc:
        return str(exc)


def check_bird_ready(
    version: int,
    threshold: float,
    started_at: float | None,
    run_dir: str = RUN_DIR,
    now: Callable[[], float] = time.time,
    socket: str | None = None,
) -> str | None:
    """``started_at``: the nodename file's mtime (None when missing: startup never finished)."""
    if started_at is None:
        return "Failed to stat() nodename file: startup has not completed"
    path = socket or bird_socket(version, run_dir)
    if not os.path.exists(path):
        return _not_running(path)
    try:
        peers = bird.get_peers(path, version)
        down = [p.ip for p in peers if p.bgp_state != "Established"]
        if not peers:
            return None
        if now() - started_at < threshold:
            if down:
                return f"BGP not established with {','.join(down)}"
            if bird.graceful_restart_in_progress(path):
                return "graceful restart in progress"
            return None
        if len(down) < len(peers):
            return None
        return f"BGP not established with {','.join(down)}"
    except bird.BirdError as exc:
        return str(exc)


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def run_checks(
    opts: HealthOptions,
    env: Mapping[str, str],
    run_dir: str = RUN_DIR,
    service_dir: str | None = None,
) -> list[str]:
    """The failure lines, in a fixed order; empty when everything asked for is healthy."""
    started = _mtime(str(nodename_file(env)))
    svdir = service_dir or env.get("SVDIR") or SERVICE_DIR
    sock4, sock6 = (socket_from_env(v, env, run_dir) for v in (4, 6))
    checks: list[tuple[str, Callable[[], str | None]]] = []
    if opts.felix_live:
        url = felix_endpoint(env, "liveness")
        checks.append(("Felix is not live", lambda: check_felix(url, "liveness", opts.threshold)))
    if opts.bird_live:
        checks.append(("bird/confd is not live", lambda: check_bird_live(4, run_dir, svdir, sock4)))
    if opts.bird6_live:
        checks.append(
            ("bird6/confd is not live", lambda: check_bird_live(6, run_dir, svdir, sock6))
        )
    if opts.felix_ready:
        url_r = felix_endpoint(env, "readiness")
        checks.append(
            ("felix is not ready", lambda: check_felix(url_r, "readiness", opts.threshold))
        )
    if opts.bird_ready:
        checks.append(
            (
                "BIRD is not ready",
                lambda: check_bird_ready(4, opts.threshold, started, run_dir, socket=sock4),
            )
        )
    if opts.bird6_ready:
        checks.append(
            (
                "BIRD6 is not ready",
                lambda: check_bird_ready(6, opts.threshold, started, run_dir, socket=sock6),
            )
        )
    return _run_all(checks)


def _run_all(checks: Sequence[tuple[str, Callable[[], str | None]]]) -> list[str]:
    with ThreadPoolExecutor(max_workers=max(1, len(checks))) as pool:
        results = list(pool.map(lambda c: c[1](), checks))
    return [
        f"calico/node is not ready: {label}: {why}"
        for (label, _), why in zip(checks, results, strict=True)
        if why
    ]
