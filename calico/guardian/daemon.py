"""``calico component guardian``: wire config, tunnel, reverse proxy, listener and health.

Start-up errors (bad config, unreadable certificates) are one ``Error:`` line and exit 1.
SIGTERM/SIGINT: Go Away to the peer, wait up to 10 s for the tunnel to close, stop listening
and stop the health server, exit 0. A tunnel that is closed for good exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Mapping

import click

from calico.buildinfo import version_text
from calico.guardian.config import ConfigError, GuardianConfig, load_config
from calico.guardian.dialer import DialError, DialSettings
from calico.guardian.proxy import ProxyConnection
from calico.guardian.proxyenv import proxy_for
from calico.guardian.streams import SocketStream, forward
from calico.guardian.targets import Target, calico_targets
from calico.guardian.tlsconfig import (
    TLSConfigError,
    stream_server_tls,
    tunnel_client_tls,
)
from calico.guardian.tlsstream import TLSStream
from calico.guardian.tunnel import Tunnel, TunnelClosedError
from calico.guardian.upstream import Upstream
from calico.guardian.yamux import Session, SessionConfig, Stream
from calico.health import HealthAggregator, HealthServer
from calico.logutils import LogLevelError, configure_formatter, parse_level

log = logging.getLogger(__name__)

REPORTER = "guardian"
SHUTDOWN_WAIT = 10.0
ACCEPT_BACKLOG = 1000


class Guardian:
    def __init__(self, cfg: GuardianConfig, environ: Mapping[str, str]) -> None:
        self.cfg = cfg
        tunnel_tls = tunnel_client_tls(cfg)
        self._stream_tls = stream_server_tls(cfg)
        self.targets: list[Target] = calico_targets(cfg)
        self._upstreams = {t.path: Upstream(t) for t in self.targets}
        host, port = cfg.voltron_host_port
        proxy = proxy_for(host, port, environ)
        self.dial_settings = DialSettings(
            host=host,
            port=port,
            tls=tunnel_tls.context,
            server_name=tunnel_tls.server_name,
            proxy=proxy,
            timeout=cfg.tunnel_dial_timeout,
            retry_attempts=cfg.tunnel_dial_retry_attempts,
            retry_interval=cfg.tunnel_dial_retry_interval,
        )
        session_config = SessionConfig(
            accept_backlog=ACCEPT_BACKLOG,
            enable_keepalive=cfg.keep_alive_enable,
            keepalive_interval=cfg.keep_alive_interval,
        )
        self.health = HealthAggregator()
        self.health.register_reporter(REPORTER, live=True, ready=True)
        self.tunnel = Tunnel(
            self.dial_settings,
            session_config,
            self._serve_stream,
            recreate=cfg.tunnel_dial_recreate_on_tunnel_close,
            on_state=self._on_tunnel_state,
        )
        self.listen_port: int | None = None
        self._listener: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        for t in self.targets:
            log.info("Will route traffic to %s for requests matching %s", t.dest, t.path)

    def _on_tunnel_state(self, up: bool, detail: str) -> None:
        self.health.report(REPORTER, live=True, ready=up, detail=detail)

    # -- management -> managed ------------------------------------------------------------------

    async def _serve_stream(self, stream: Stream, session: Session) -> None:
        try:
            tls = await TLSStream.wrap(stream, self._stream_tls, server_side=True)
        except (OSError, TimeoutError) as exc:
            log.warning("TLS handshake on tunnelled stream %d failed: %s", stream.stream_id, exc)
            stream.abort()
            return
        await ProxyConnection(tls, self.targets, self._upstreams, session.peer_host).serve()

    # -- managed -> management ------------------------------------------------------------------

    async def _on_local_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        local = SocketStream(reader, writer)
        try:
            stream = await self.tunnel.open_stream(
                self.cfg.connection_retry_attempts, self.cfg.connection_retry_interval
            )
        except TunnelClosedError as exc:
            log.error("failed to open connection to the tunnel: %s", exc)
            local.abort()
            return
        await forward(local, stream, "local connection")

    async def start_listener(self) -> None:
        host = self.cfg.listen_host or None
        self._listener = await asyncio.start_server(
            self._on_local_connection, host, self.cfg.listen_port, reuse_address=True
        )
        self.listen_port = self._listener.sockets[0].getsockname()[1]
        log.info(
            "Listening on %s:%s for connections to proxy to voltron",
            self.cfg.listen_host,
            self.listen_port,
        )

    # -- lifecycle ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> int:
        tunnel_task = asyncio.create_task(self.tunnel.run())
        if self.cfg.listen:
            try:
                await self.start_listener()
            except OSError as exc:
                log.error(
                    "failed to listen on %s:%s: %s", self.cfg.listen_host, self.cfg.listen_port, exc
                )
                tunnel_task.cancel()
                return 1
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({tunnel_task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        code = 0
        if tunnel_task.done():
            stopper.cancel()
            exc = tunnel_task.exception()
            if isinstance(exc, (DialError, TunnelClosedError)):
                log.error("Serving the tunnel exited: %s", exc)
            elif exc is not None:
                log.error("Serving the tunnel failed unexpectedly: %r", exc)
            code = 1
        else:
            log.info("Received shutdown signal, shutting server down.")
        await self.shutdown(tunnel_task)
        return code

    async def shutdown(self, tunnel_task: asyncio.Task[None]) -> None:
        log.info("Waiting for tunnel to close...")
        try:
            await asyncio.wait_for(self.tunnel.close(), SHUTDOWN_WAIT)
            log.info("Tunnel is closed.")
        except TimeoutError:
            log.warning("failed to wait for tunnel to close within %ss", SHUTDOWN_WAIT)
        tunnel_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await tunnel_task
        if self._listener is not None:
            self._listener.close()
        for upstream in self._upstreams.values():
            with contextlib.suppress(Exception):
                await upstream.close()
        log.info("Server shutdown complete.")


def _apply_log_level(cfg: GuardianConfig) -> None:
    try:
        level = parse_level(cfg.log_level)
    except LogLevelError:
        log.error("Invalid logging level passed in. Will use default level set to WARN")
        level = logging.WARNING
    logging.getLogger().setLevel(level)


async def _main(cfg: GuardianConfig, environ: Mapping[str, str]) -> int:
    guardian = Guardian(cfg, environ)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = HealthServer(guardian.health)
    server.serve(cfg.health_enabled, "", cfg.health_port)
    try:
        return await guardian.run(stop)
    finally:
        await asyncio.to_thread(server.serve, False)


@click.command(
    "guardian",
    help="Run Guardian, the managed cluster's tunnel to the management "
    "cluster (config: GUARDIAN_* environment variables).",
)
@click.option("--version", "show_version", is_flag=True, help="Print version and exit.")
def guardian_command(show_version: bool) -> None:
    if show_version:
        click.echo(version_text())
        return
    configure_formatter("guardian")
    logging.getLogger().setLevel(logging.INFO)
    environ = dict(os.environ)
    try:
        cfg = load_config(environ)
        _apply_log_level(cfg)
        log.info(
            "Starting guardian with configuration voltron_url=%s ca_type=%s",
            cfg.voltron_url,
            cfg.voltron_ca_type,
        )
        code = asyncio.run(_main(cfg, environ))
    except (ConfigError, TLSConfigError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    sys.stdout.flush()
    sys.exit(code)
