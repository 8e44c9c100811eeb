"""The ``calico health`` exec probe: GET /<type> and turn the answer into an exit code."""

from __future__ import annotations

from dataclasses import dataclass

import requests

from calico.durations import DurationError, parse_duration

CHECK_TYPES = ("readiness", "liveness")


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    message: str  # empty when ok; otherwise the stderr line


def _reason(exc: requests.RequestException, host: str, port: int) -> str:
    """A short, Go-like description of a failed request instead of urllib3's nested repr."""
    if isinstance(exc, requests.Timeout):
        return "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    cur: BaseException | None = exc
    seen: set[int] = set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError):
            return f"dial tcp {host}:{port}: connect: connection refused"
        if isinstance(cur, OSError) and cur.strerror:
            return f"dial tcp {host}:{port}: {cur.strerror.lower()}"
        nxt = cur.__cause__ or cur.__context__
        if nxt is None:
            nxt = next((a for a in cur.args if isinstance(a, BaseException)), None)
            if nxt is None and hasattr(cur, "reason") and isinstance(cur.reason, BaseException):
                nxt = cur.reason
        cur = nxt
    return str(exc)


def check(host: str, port: int, check_type: str, timeout: str) -> ProbeResult:
    """Run one probe. Never raises for network or HTTP problems: they become a failed result."""
    if check_type not in CHECK_TYPES:
        return ProbeResult(
            False, f'Invalid check type "{check_type}", expected "readiness" or "liveness"'
        )
    try:
        seconds = parse_duration(timeout)
    except DurationError as exc:
        return ProbeResult(False, f"Health check failed: {exc}")
    host_part = f"[{host}]" if ":" in host else host
    url = f"http://{host_part}:{port}/{check_type}"
    try:
        resp = requests.get(url, timeout=seconds if seconds > 0 else None, allow_redirects=True)
    except requests.RequestException as exc:
        return ProbeResult(False, f'Health check failed: Get "{url}": {_reason(exc, host, port)}')
    if 200 <= resp.status_code < 400:
        return ProbeResult(True, "")
    return ProbeResult(False, f"Health check failed with status code: {resp.status_code}")
