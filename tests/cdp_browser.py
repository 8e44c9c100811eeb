"""Headless Chromium driven over the DevTools protocol, for the Whisker UI's browser test.

No WebDriver: Chromium starts with ``--remote-debugging-port=0`` and writes the port it chose to
``DevToolsActivePort`` in its profile directory, so tests never pick a port. ``evaluate`` runs
JavaScript in the page and returns its JSON value; ``wait_for`` polls an expression until it
is truthy (never a fixed sleep). Import as ``from cdp_browser import Browser``.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import requests
import websocket

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(AssertionError):
    """A DevTools command failed, or a page condition did not hold in time."""


class Browser:
    def __init__(self, profile: Path, log_path: Path) -> None:
        assert CHROMIUM, "chromium is not installed (scripts/setup-system.sh installs it)"
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",  # tests run as root
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--window-size=1400,900",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BrowserError(f"chromium did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        pages = requests.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        page = next(p for p in pages if p["type"] == "page")
        self._ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30)
        self._ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        self._ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    def navigate(self, url: str) -> None:
        self.send("Page.enable")
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"not true within {timeout}s: {expression}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self._ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._log.close()
