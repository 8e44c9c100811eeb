"""``calico component goldmane``: config from the environment, gRPC services, rollover, health.

Bad configuration or unreadable certificates: one ``Error:`` line, exit 1. With both
SERVER_CERT_PATH and SERVER_KEY_PATH the gRPC port requires client certificates signed by
CA_CERT_PATH; otherwise it is plaintext. SIGTERM/SIGINT stop the server (in-flight calls get a
second to finish) and exit 0. Health reporters: "startup" (ready once serving) and
"aggregator" (reports every rollover; stale after four bucket intervals).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import click
import grpc

from calico.buildinfo import version_text
from calico.goldmane.config import ConfigError, GoldmaneConfig, emit_shape, load_config
from calico.goldmane.emitter import Checkpoint, Emitter, SinkSwitch, make_session
from calico.goldmane.metrics import registry_for
from calico.goldmane.server import Goldmane, add_services
from calico.health import HealthAggregator, HealthServer
from calico.logutils import LogLevelError, configure_formatter, parse_level
from calico.prometheus import MetricsServer

log = logging.getLogger(__name__)

GRACE = 1.0


def _read(path: str, var: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{var}: cannot read {path}: {exc.strerror}") from None


def server_credentials(cfg: GoldmaneConfig) -> grpc.ServerCredentials | None:
    if not cfg.tls:
        return None
    return grpc.ssl_server_credentials(
        [
            (
                _read(cfg.server_key_path, "SERVER_KEY_PATH"),
                _read(cfg.server_cert_path, "SERVER_CERT_PATH"),
            )
        ],
        root_certificates=_read(cfg.ca_cert_path, "CA_CERT_PATH"),
        require_client_auth=True,
    )


async def serve(cfg: GoldmaneConfig, stop: asyncio.Event) -> int:
    creds = server_credentials(cfg)
    interval = int(cfg.aggregation_window)
    health = HealthAggregator()
    health.register_reporter("startup", live=False, ready=True)
    health.register_reporter("aggregator", live=True, ready=True, timeout=4 * interval)
    gm = Goldmane(interval)
    gm.on_rollover = lambda: health.report("aggregator", live=True, ready=True)
    health.report("aggregator", live=True, ready=True)
    health_server = HealthServer(health)
    health_server.serve(cfg.health_enabled, cfg.health_host, cfg.health_port)
    emitter = start_emitter(cfg, gm)
    metrics = None
    if cfg.prometheus_port:
        metrics = MetricsServer(registry_for(gm), "", cfg.prometheus_port)
        try:
            metrics.start()
        except OSError as exc:
            log.error("Failed to serve metrics on port %d: %s", cfg.prometheus_port, exc)
            metrics = None

    server = grpc.aio.server()
    add_services(server, gm)
    address = f"[::]:{cfg.port}"
    try:
        port = (
            server.add_secure_port(address, creds) if creds else server.add_insecure_port(address)
        )
    except RuntimeError as exc:
        log.error("Failed to listen on port %d: %s", cfg.port, exc)
        await asyncio.to_thread(health_server.serve, False)
        return 1
    await server.start()
    log.info(
        "Goldmane gRPC server listening on port %d (%s)", port, "mTLS" if creds else "plaintext"
    )
    health.report("startup", live=True, ready=True)
    rollovers = asyncio.create_task(gm.run_rollovers(stop))
    await stop.wait()
    log.info("Received shutdown signal, stopping")
    await server.stop(GRACE)
    await rollovers
    if emitter is not None:
        await asyncio.to_thread(emitter.stop)
    if metrics is not None:
        await asyncio.to_thread(metrics.stop)
    await asyncio.to_thread(health_server.serve, False)
    return 0


def start_emitter(cfg: GoldmaneConfig, gm: Goldmane) -> Emitter | None:
    """With PUSH_URL: the HTTP emitter as the engine's sink, switched by FILE_CONFIG_PATH."""
    if not cfg.push_url:
        return None
    session = make_session(
        cfg.client_cert_path, cfg.client_key_path, cfg.ca_cert_path, cfg.server_name
    )
    emitter = Emitter(cfg.push_url, Checkpoint(cfg.emitter_state_path), session)
    emitter.start()
    gm.sink = emitter.receive
    gm.sink_enabled = SinkSwitch(cfg.file_config_path, gm.clock).enabled
    gm.emit_shape = emit_shape(cfg)
    return emitter


async def _main(cfg: GoldmaneConfig) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return await serve(cfg, stop)


@click.command(
    "goldmane",
    help="Run Goldmane, the flow aggregator behind Whisker (config: environment variables "
    "PORT, AGGREGATION_WINDOW, SERVER_CERT_PATH, ... as upstream).",
)
@click.option("--version", "show_version", is_flag=True, help="Print version and exit.")
def goldmane_command(show_version: bool) -> None:
    if show_version:
        click.echo(version_text())
        return
    configure_formatter("goldmane")
    logging.getLogger().setLevel(logging.INFO)
    try:
        cfg = load_config(dict(os.environ))
        try:
            logging.getLogger().setLevel(parse_level(cfg.log_level))
        except LogLevelError:
            raise ConfigError(f"LOG_LEVEL: unknown level {cfg.log_level!r}") from None
        if cfg.profile_port:
            log.info("PROFILE_PORT=%d ignored: there is no Go profiler here", cfg.profile_port)
        server_credentials(cfg)  # certificate errors before anything starts
        code = asyncio.run(_main(cfg))
    except ConfigError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    sys.exit(code)
