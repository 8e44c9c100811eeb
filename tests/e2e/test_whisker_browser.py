"""The Whisker UI in headless Chromium: live flows, the denied filter, the policy trace.

Goldmane and whisker-backend are real processes; the flows enter Goldmane through its
FlowCollector gRPC API exactly as Felix sends them. The screenshot is left in the test's tmp dir.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from cdp_browser import Browser
from whisker_support import GoldmaneProc, WhiskerProc, allowed_flow, denied_flow, push


def free_port() -> int:
    """A port for Goldmane that it can bind again after a restart (the kernel picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


ROWS = "[...document.querySelectorAll('#flow-rows tr.flow-row')]"


def test_whisker_shows_flows_filters_denied_and_the_policy_trace(
    calico_bin: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PORT", "HOST", "HEALTH_PORT")}
    gm_env = {**env, "PORT": str(free_port()), "HEALTH_PORT": "0", "AGGREGATION_WINDOW": "1s"}
    goldmane = GoldmaneProc(calico_bin, "goldmane", gm_env, tmp_path / "goldmane.log")
    whisker = browser = None
    try:
        whisker = WhiskerProc(
            calico_bin,
            "whisker-backend",
            {**env, "PORT": "0", "GOLDMANE_HOST": f"127.0.0.1:{goldmane.port}"},
            tmp_path / "whisker.log",
        )
        browser = Browser(tmp_path / "chrome-profile", tmp_path / "chromium.log")
        browser.navigate(whisker.url + "/")
        assert browser.wait_for("document.getElementById('stream-state').textContent") in (
            "connecting",
            "live",
        )
        browser.wait_for("document.getElementById('stream-state').textContent === 'live'")
        assert browser.evaluate(f"{ROWS}.length") == 0

        assert push(goldmane.port, [allowed_flow(), denied_flow()]) == 2
        actions = browser.wait_for(
            f"(() => {{ const a = {ROWS}.map(r => r.dataset.action).sort();"
            " return a.length === 2 && a; })()"
        )
        assert actions == ["Allow", "Deny"]
        row_text = browser.evaluate(
            f"{ROWS}.map(r => [...r.cells].slice(2).map(c => c.textContent))"
        )
        assert ["Deny", "demo", "client-*", "demo", "server-*", "tcp", "81", "Dst"] in row_text
        browser.wait_for("document.getElementById('denied-count').textContent === '1'")
        # Filter options come from /flows-filter-hints.
        browser.wait_for(
            "[...document.getElementById('f-policy-name').options].map(o => o.value)"
            ".join() === ',allow-http,staged-lockdown'"
        )

        browser.evaluate(
            "(() => { const s = document.getElementById('f-action'); s.value = 'Deny';"
            " s.dispatchEvent(new Event('change')); })()"
        )
        browser.wait_for(
            f"(() => {{ const r = {ROWS}; return r.length === 1 &&"
            " r[0].dataset.action === 'Deny'; })()"
        )
        browser.evaluate(f"{ROWS}[0].click()")
        enforced = browser.wait_for(
            "(() => { const h = [...document.querySelectorAll('tr.details .enforced tr.hit')];"
            " return h.length && h.map(r => [...r.cells].map(c => c.textContent)); })()"
        )
        assert enforced == [
            ["1", "EndOfTier", "default", "-", "", "Deny", "-", "CalicoNetworkPolicy allow-http"]
        ]
        assert browser.evaluate("document.querySelector('tr.details .pending').textContent") == (
            "Pending policiesnone"
        )
        # Paused: a new denied flow is held back (buffered, not lost) until Play.
        browser.evaluate("document.getElementById('pause').click()")
        assert browser.evaluate("document.getElementById('pause').textContent") == "Play"
        later = denied_flow()
        later.Key.dest_port = 82
        assert push(goldmane.port, [later]) == 1
        browser.wait_for("state.pending.length === 1")
        assert browser.evaluate(f"{ROWS}.length") == 1
        browser.evaluate("document.getElementById('pause').click()")
        ports = browser.wait_for(
            f"(() => {{ const r = {ROWS}; return r.length === 2 &&"
            " r.map(x => x.cells[8].textContent); })()"
        )
        assert ports == ["82", "81"]  # newest first
        png = browser.screenshot(tmp_path / "whisker.png")
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000

        # Goldmane restarts (same port, empty): the page reopens its stream by itself, without
        # duplicating rows, and shows what the new Goldmane receives.
        assert goldmane.stop() == 0
        browser.wait_for("document.getElementById('stream-state').textContent === 'reconnecting'")
        goldmane = GoldmaneProc(calico_bin, "goldmane", gm_env, tmp_path / "goldmane-2.log")
        goldmane.wait_log(r"gRPC server listening")
        browser.wait_for("document.getElementById('stream-state').textContent === 'live'")
        browser.wait_for(f"{ROWS}.length === 0")
        assert push(goldmane.port, [denied_flow()]) == 1
        browser.wait_for(
            f"(() => {{ const r = {ROWS}; return r.length === 1 &&"
            " r[0].cells[8].textContent === '81'; })()"
        )
    finally:
        if browser is not None:
            browser.close()
        if whisker is not None:
            whisker.stop()
        goldmane.stop()
