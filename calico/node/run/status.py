"""``calico node status``: is the node running, are its daemons healthy, what does it host.

Three questions, three sources: the pid file and ``sv status`` (processes), each component's
``/readiness`` endpoint (health), and the datastore (WorkloadEndpoints whose ``spec.node`` is
this node). A node that is not running is an error, worded as upstream's calicoctl.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from calico.health import probe
from calico.node.errors import NodeError
from calico.node.run.layout import Layout, NodeSettings, load_settings, read_pid

NOT_RUNNING = "Calico process is not running."


@dataclass(frozen=True)
class Report:
    pid: int
    settings: NodeSettings
    services: list[tuple[str, str]]  # (service, sv status line)
    readiness: list[tuple[str, str, bool, str]]  # (component, url, ok, why)
    endpoints: int | None
    endpoints_error: str = ""

    @property
    def healthy(self) -> bool:
        return all(ok for _, _, ok, _ in self.readiness) and all(
            line.startswith("run:") for _, line in self.services
        )


def sv_status(layout: Layout, service: str) -> str:
    try:
        proc = subprocess.run(
            ["sv", "status", str(layout.service_dir / service)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown: {exc}"
    line = (proc.stdout or proc.stderr).strip()
    return line.replace(f"{layout.service_dir / service}: ", "", 1)


def count_endpoints(settings: NodeSettings) -> int:
    from calico.datastore.client import Client
    from calico.datastore.config import DatastoreConfig
    from calico.datastore.factory import open_backend

    backend = open_backend(DatastoreConfig.from_env(settings.datastore_env()), initialize=False)
    try:
        weps = Client(backend).list("WorkloadEndpoint")
        return sum(1 for wep in weps.items if wep.spec.node == settings.name)
    finally:
        backend.close()


def gather(layout: Layout) -> Report:
    pid = read_pid(layout)
    settings = load_settings(layout)
    if pid is None or settings is None:
        raise NodeError(NOT_RUNNING)
    services = [(svc, sv_status(layout, svc)) for svc in settings.services]
    readiness = []
    if "felix" in settings.services:
        res = probe.check(settings.felix_health_host, settings.felix_health_port, "readiness", "3s")
        readiness.append(("felix", settings.health_url(), res.ok, res.message))
    try:
        endpoints: int | None = count_endpoints(settings)
        error = ""
    except Exception as exc:
        endpoints, error = None, str(exc)
    return Report(pid, settings, services, readiness, endpoints, error)


def print_report(report: Report, say: Callable[[str], None]) -> None:
    s = report.settings
    say("Calico process is running.")
    say(f"Node:       {s.name} (pid {report.pid}, state {s.state_dir})")
    say(f"Datastore:  {s.datastore_description()}")
    say("Processes:")
    for svc, line in report.services:
        say(f"  {svc:<14} {line}")
    say("Readiness:")
    for comp, url, ok, why in report.readiness:
        say(f"  {comp:<14} {'ready' if ok else 'NOT READY'}  {url}" + ("" if ok else f"  {why}"))
    if report.endpoints is None:
        say(f"Workload endpoints on this node: unknown ({report.endpoints_error})")
    else:
        say(f"Workload endpoints on this node: {report.endpoints}")
