"""Owning runsvdir: start it, watch it, and take everything under it down cleanly.

runsvdir runs in its own session, so a Ctrl-C aimed at ``calico node run`` reaches only us and
the shutdown happens in order: ``sv force-stop`` every service (TERM, then KILL after the
timeout), then SIGHUP to runsvdir (it TERMs each runsv, which drains its log service and exits,
and runsvdir exits 111), then anything still carrying the node's mark is TERMed and KILLed.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from calico.node.run import procs
from calico.node.run.layout import Layout
from calico.reaper import reap_children

log = logging.getLogger(__name__)

SERVICE_STOP_TIMEOUT = 12  # Felix shuts down within 10 s
RUNSV_EXIT_TIMEOUT = 5.0


class Supervisor:
    """One runsvdir over ``layout.service_dir``; ``stop`` is idempotent."""

    def __init__(
        self, layout: Layout, services: list[str], env: Mapping[str, str], output: IO[bytes] | int
    ) -> None:
        self.layout = layout
        self.services = services
        self.env = dict(env)
        self.output = output
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        procs.become_subreaper()
        self.proc = subprocess.Popen(
            ["runsvdir", "-P", str(self.layout.service_dir)],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self.output,
            stderr=self.output,
            start_new_session=True,
            cwd="/",
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def service_paths(self) -> list[str]:
        return [str(self.layout.service_dir / svc) for svc in self.services]

    def stop(self) -> None:
        """Stop every service and every process we started; never leaves one behind."""
        if self.proc is None:
            return
        if self.alive():
            self._stop_services()
            self.proc.send_signal(signal.SIGHUP)
            try:
                self.proc.wait(timeout=RUNSV_EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=RUNSV_EXIT_TIMEOUT)
        procs.wait_gone(self.layout.state_dir, RUNSV_EXIT_TIMEOUT, reap=True)
        procs.kill_leftovers(self.layout.state_dir, grace=2.0, reap=True)
        reap_children()
        self.proc = None

    def _stop_services(self) -> None:
        paths = [p for p in self.service_paths() if Path(p, "supervise", "ok").exists()]
        if not paths:
            return
        try:
            subprocess.run(
                ["sv", "-w", str(SERVICE_STOP_TIMEOUT), "force-stop", *paths],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=SERVICE_STOP_TIMEOUT + 5,
                check=False,
                env={**os.environ, "SVWAIT": str(SERVICE_STOP_TIMEOUT)},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("sv force-stop failed: %s", exc)
