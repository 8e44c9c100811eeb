"""``calico node run``: provision, install the CNI plugin, supervise until told to stop.

The process is the node's owner: its pid file marks the node as running, and whatever ends it
(Ctrl-C, SIGTERM from ``calico node stop``, runsvdir dying) goes through the same shutdown, which
leaves the dataplane programmed (upstream's restart doctrine).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import replace
from typing import IO

import click

from calico.health import probe
from calico.node.errors import NodeError
from calico.node.run import procs, provision, service_dir
from calico.node.run.environ import inherited
from calico.node.run.layout import (
    Layout,
    NodeSettings,
    read_pid,
    remove_stale_socket,
    save_settings,
)
from calico.node.run.supervisor import Supervisor
from calico.reaper import reap_children

READY_POLL = 0.5


def say(msg: str) -> None:
    click.echo(msg)


def preflight(layout: Layout) -> None:
    if os.geteuid() != 0:
        raise NodeError("calico node run must run as root (it programs nftables and routes)")
    for tool in ("runsvdir", "runsv", "sv", "svlogd"):
        if shutil.which(tool) is None:
            raise NodeError(f"{tool} not found: install runit (apt-get install runit)")
    pid = read_pid(layout)
    if pid is not None:
        raise NodeError(
            f"a Calico node is already running from {layout.state_dir} (pid {pid}); "
            "stop it with 'calico node stop'"
        )
    if procs.marked_pids(layout.state_dir):
        raise NodeError(
            f"processes of a previous node on {layout.state_dir} are still running; "
            "run 'calico node stop' first"
        )


class StopFlag:
    """Set by SIGINT/SIGTERM/SIGHUP; the main loop polls it."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name = ""

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        self.signal_name = signal.Signals(signum).name
        self.event.set()


def wait_ready(settings: NodeSettings, sup: Supervisor, stop: StopFlag, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not stop.event.is_set() and sup.alive():
        reap_children()
        result = probe.check(
            settings.felix_health_host, settings.felix_health_port, "readiness", "1s"
        )
        if result.ok:
            return True
        if time.monotonic() >= deadline:
            return False
        stop.event.wait(READY_POLL)
    return False


def run_node(settings: NodeSettings, layout: Layout, ready_timeout: float, print_logs: bool) -> int:
    preflight(layout)
    stop = StopFlag()
    stop.install()
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    layout.pid_file.write_text(f"{os.getpid()}\n", encoding="utf-8")
    sup: Supervisor | None = None
    output: IO[bytes] | int = subprocess.DEVNULL
    try:
        available = service_dir.available_dir()
        enabled = service_dir.enabled_services(settings.networking_backend)
        daemon_socket = service_dir.cni_daemon_socket(layout)
        if service_dir.CNI_DAEMON in enabled and daemon_socket is None:
            enabled.remove(service_dir.CNI_DAEMON)
            say(
                f"Note: {layout.cni_daemon_socket} is too long for a unix socket; "
                "CNI calls run without the resident helper (use a shorter --state-dir)"
            )
        say(f"Starting a Calico node; datastore {settings.datastore_description()}")
        say("[1/4] startup: Node resource, default IP pool, cluster defaults")
        name = provision.run_startup(settings, layout)
        settings = replace(settings, name=name, services=tuple(enabled))
        say(f"      node name {name!r} (startup log: {settings.log_dir}/startup.log)")
        if settings.networking_backend == "vxlan":
            say("      networking backend vxlan: allocating this node's tunnel addresses")
            provision.run_allocate_tunnel_addrs(settings, layout)
        elif settings.networking_backend == "bird":
            say(f"      networking backend bird: confd and BIRD files in {layout.confd_dir}")
        provision.write_calicoctl_config(settings, layout)
        if stop.event.is_set():
            return 0
        say("[2/4] CNI plugin: launchers and conflist")
        files = provision.install_cni(
            settings, daemon_socket if service_dir.CNI_DAEMON in enabled else "off", layout
        )
        settings = replace(settings, cni_files=tuple(files))
        save_settings(layout, settings)
        for path in files:
            say(f"      {path}")
        say(f"[3/4] runit: {', '.join(enabled)} (services in {layout.service_dir})")
        service_dir.build_service_dir(settings, layout, enabled, available)
        env = {**inherited(os.environ), **service_dir.service_env(settings, layout)}
        # The services' log/run also tee to runsvdir's stdout (the container log upstream).
        runsvdir_log = os.path.join(settings.log_dir, "runsvdir.log")
        output = 1 if print_logs else open(runsvdir_log, "ab")  # noqa: SIM115 - closed below
        sup = Supervisor(layout, enabled, env, output)
        sup.start()
        for svc in enabled:
            say(f"      logs: {settings.log_dir}/{svc}/current")
        say(f"[4/4] waiting for Felix to report ready at {settings.health_url()}")
        if wait_ready(settings, sup, stop, ready_timeout):
            say("Calico node is running. Ctrl-C or 'calico node stop' stops it.")
            if "whisker-backend" in enabled:
                say(f"Whisker (flow logs): {settings.whisker_url()}")
        elif not stop.event.is_set() and sup.alive():
            say(f"Felix is not ready after {ready_timeout:.0f}s; still supervising (see the logs)")
        return supervise(sup, stop)
    finally:
        if sup is not None:
            say("Stopping the Calico node (the dataplane stays programmed)...")
            sup.stop()
            for sock in (layout.cni_daemon_socket, layout.bird_socket, layout.bird6_socket):
                remove_stale_socket(sock)  # a killed daemon leaves it
            say("Calico node stopped.")
        if not isinstance(output, int):
            output.close()
        layout.pid_file.unlink(missing_ok=True)


def supervise(sup: Supervisor, stop: StopFlag) -> int:
    """Block until a stop signal (exit 0) or runsvdir dying on its own (exit 1)."""
    while not stop.event.wait(1.0):
        reap_children()
        if not sup.alive():
            raise NodeError("runsvdir exited unexpectedly; stopping the node")
    say(f"Received {stop.signal_name}.")
    return 0
