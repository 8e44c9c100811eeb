"""Dial the tunnel's TCP+TLS connection, directly or through an HTTP CONNECT proxy, with retries.

Each attempt is bounded by the dial timeout; failed attempts are retried every retry interval,
``retry_attempts`` times in all (-1: forever). Through a proxy: TCP (TLS for an ``https``
proxy) to the proxy, ``CONNECT host:port`` with Basic ``Proxy-Authorization`` from the URL's
user info, a 200 answer with nothing after it, then the mTLS handshake through the proxy.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from dataclasses import dataclass

from calico.guardian.proxyenv import ProxyURL

log = logging.getLogger(__name__)

MAX_CONNECT_RESPONSE = 16 * 1024


class DialError(ConnectionError):
    """Every dial attempt failed (or the retry budget is spent)."""


@dataclass(frozen=True)
class DialSettings:
    host: str
    port: int
    tls: ssl.SSLContext
    server_name: str
    proxy: ProxyURL | None = None
    timeout: float = 10.0
    retry_attempts: int = -1
    retry_interval: float = 5.0


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _target(settings: DialSettings) -> str:
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"{host}:{settings.port}"


async def _connect_via_proxy(settings: DialSettings) -> Connection:
    proxy = settings.proxy
    assert proxy is not None
    proxy_tls = ssl.create_default_context() if proxy.scheme == "https" else None
    try:
        reader, writer = await asyncio.open_connection(
            proxy.host, proxy.port, ssl=proxy_tls, limit=MAX_CONNECT_RESPONSE
        )
    except OSError as exc:
        raise DialError(f"dialing proxy {proxy.host}:{proxy.port} failed: {exc}") from exc
    dest = _target(settings)
    lines = [f"CONNECT {dest} HTTP/1.1", f"Host: {dest}"]
    if proxy.username is not None:
        creds = f"{proxy.username}:{proxy.password or ''}".encode()
        lines.append(f"Proxy-Authorization: Basic {base64.b64encode(creds).decode()}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    try:
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        writer.close()
        raise DialError(
            f"reading HTTP response from CONNECT to {dest} via proxy "
            f"{proxy.host}:{proxy.port} failed: {exc!r}"
        ) from exc
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or parts[1] != "200":
        writer.close()
        raise DialError(
            f"proxy error from {proxy.host}:{proxy.port} while dialing {dest}: "
            f"{' '.join(parts[1:]) or status_line!r}"
        )
    # The proxy must not speak before our TLS ClientHello (upstream refuses buffered data).
    buffered = len(getattr(reader, "_buffer", b""))
    if buffered:
        writer.close()
        raise DialError(
            f"unexpected {buffered} bytes of buffered data from CONNECT proxy "
            f"{proxy.host}:{proxy.port}"
        )
    try:
        await writer.start_tls(settings.tls, server_hostname=settings.server_name)
    except (OSError, ssl.SSLError) as exc:
        writer.close()
        raise DialError(f"TLS handshake with {dest} via proxy failed: {exc}") from exc
    return reader, writer


async def dial_once(settings: DialSettings) -> Connection:
    """One attempt, bounded by ``settings.timeout``."""
    dest = _target(settings)

    async def attempt() -> Connection:
        if settings.proxy is not None:
            log.info("Dialing to %s via HTTP proxy at %s", dest, settings.proxy.redacted())
            return await _connect_via_proxy(settings)
        log.info("Dialing directly to %s", dest)
        try:
            return await asyncio.open_connection(
                settings.host,
                settings.port,
                ssl=settings.tls,
                server_hostname=settings.server_name,
            )
        except (OSError, ssl.SSLError) as exc:
            raise DialError(f"TLS dial failed: {exc}") from exc

    try:
        return await asyncio.wait_for(attempt(), settings.timeout)
    except TimeoutError:
        raise DialError(f"dial to {dest} timed out after {settings.timeout}s") from None


async def dial(settings: DialSettings) -> Connection:
    """Dial with retries; DialError once ``retry_attempts`` attempts have failed."""
    attempt = 0
    while True:
        attempt += 1
        try:
            conn = await dial_once(settings)
        except DialError as exc:
            if 0 <= settings.retry_attempts <= attempt:
                raise DialError(f"{exc} (gave up after {attempt} attempts)") from exc
            log.info(
                "TLS dial attempt %d failed, will retry in %ss: %s",
                attempt,
                settings.retry_interval,
                exc,
            )
            await asyncio.sleep(settings.retry_interval)
            continue
        log.info(
            "TLS dial to %s succeeded: basis connection for the tunnel has been established",
            _target(settings),
        )
        return conn
