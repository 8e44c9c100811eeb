"""A real ``calico component <name>`` child process for integration tests.

Output goes to a log file the tests read; ``wait_log`` polls it for a pattern and fails fast
(with the log) if the process has already exited. ``tests/conftest.py`` puts ``tests/`` on the
path; import this as ``from component_process import ComponentProcess``.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path


class ComponentProcess:
    """``calico component <component>`` with ``env``, its output in ``log_path``."""

    WAIT_TIMEOUT = 30.0

    def __init__(self, calico_bin: str, component: str, env: dict[str, str], log_path: Path):
        self.component = component
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [calico_bin, "component", component],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, pattern: str, timeout: float | None = None) -> re.Match[str]:
        """The first match of the regex ``pattern`` in the log, waiting up to ``timeout``."""
        timeout = self.WAIT_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log())
            if m:
                return m
            assert self.proc.poll() is None, f"{self.component} exited early:\n{self.log()}"
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not logged within {timeout}s:\n{self.log()}")

    def stop(self) -> int:
        """SIGTERM (SIGKILL after 15 s); the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
