"""The demo's traffic: an HTTP server inside one sandbox, GET requests from others.

Both run with ``ip netns exec`` and this environment's Python, so the demo needs nothing that
a fresh Debian might lack (curl is optional there).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SERVER_PORT = 8080

GET = """
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])) as r:
        print(r.status, r.read(200).decode(errors="replace").strip())
except Exception as e:
    print(0, type(e).__name__, getattr(e, "reason", e))
"""


@dataclass(frozen=True)
class Answer:
    ok: bool
    text: str  # what to print: "HTTP 200 'hello ...'" or why it failed
    seconds: float


class Server:
    """``python -m http.server`` in a sandbox, serving one greeting page; owned and stopped."""

    def __init__(self, netns: str, greeting: str) -> None:
        self.netns = netns
        self.greeting = greeting
        self._dir = tempfile.TemporaryDirectory(prefix="calico-demo-")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        Path(self._dir.name, "index.html").write_text(self.greeting + "\n", encoding="utf-8")
        self.proc = subprocess.Popen(
            [
                *("ip", "netns", "exec", self.netns, sys.executable, "-m", "http.server"),
                *(str(SERVER_PORT), "--bind", "0.0.0.0", "--directory", self._dir.name),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
        self._dir.cleanup()


def http_get(netns: str, url: str, timeout: float = 1.0) -> Answer:
    start = time.monotonic()
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, "-c", GET, url, str(timeout)],
        capture_output=True,
        text=True,
        timeout=timeout + 15,
        check=False,
    )
    took = time.monotonic() - start
    status, _, rest = proc.stdout.strip().partition(" ")
    if status.isdigit() and 200 <= int(status) < 400:
        return Answer(True, f"HTTP {status} {rest!r}", took)
    if status == "0" and "timed out" in rest.lower():
        return Answer(False, f"no answer within {timeout:.0f}s", took)
    why = rest or proc.stderr.strip() or "no output"
    return Answer(False, f"HTTP {status}: {why}" if status not in ("", "0") else why, took)


def wait_for(netns: str, url: str, want_ok: bool, within: float) -> tuple[Answer, float]:
    """Ask until the answer is what we want (or ``within`` runs out); returns it and the wait."""
    start = time.monotonic()
    while True:
        answer = http_get(netns, url)
        waited = time.monotonic() - start
        if answer.ok == want_ok or waited >= within:
            return answer, waited
        time.sleep(0.2)
