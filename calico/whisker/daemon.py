"""``calico component whisker-backend``: env config, the Goldmane channel, the HTTP(S) server.

Bad configuration or unreadable certificates: one ``Error:`` line, exit 1. SIGTERM/SIGINT stop
the server (open event streams are cancelled) and exit 0. See design/whisker.md.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import ssl
import sys
import threading

import click
import grpc

from calico.buildinfo import version_text
from calico.logutils import LogLevelError, configure_formatter, parse_level
from calico.whisker.api import WhiskerServer
from calico.whisker.config import ConfigError, WhiskerConfig, load_config

log = logging.getLogger(__name__)


def _read(path: str, var: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{var}: cannot read {path}: {exc.strerror}") from None


# A restarted Goldmane is found again within seconds (gRPC's default backs off to 120 s, and
# meanwhile every request and every reopened browser stream would fail).
CHANNEL_OPTIONS = [("grpc.max_reconnect_backoff_ms", 5000)]


def goldmane_channel(cfg: WhiskerConfig) -> grpc.Channel:
    """mTLS to Goldmane with TLS_CERT_PATH/TLS_KEY_PATH (CA_CERT_PATH verifies it), else plain."""
    if not cfg.goldmane_tls:
        return grpc.insecure_channel(cfg.goldmane_host, options=CHANNEL_OPTIONS)
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(cfg.ca_cert_path, "CA_CERT_PATH"),
        private_key=_read(cfg.tls_key_path, "TLS_KEY_PATH"),
        certificate_chain=_read(cfg.tls_cert_path, "TLS_CERT_PATH"),
    )
    return grpc.secure_channel(cfg.goldmane_host, creds, options=CHANNEL_OPTIONS)


def server_context(cfg: WhiskerConfig) -> ssl.SSLContext | None:
    if not cfg.server_tls:
        return None
    _read(cfg.server_tls_cert_path, "SERVER_TLS_CERT_PATH")
    _read(cfg.server_tls_key_path, "SERVER_TLS_KEY_PATH")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cfg.server_tls_cert_path, cfg.server_tls_key_path)
    except ssl.SSLError as exc:
        raise ConfigError(f"SERVER_TLS_CERT_PATH/SERVER_TLS_KEY_PATH: {exc.reason}") from None
    return ctx


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host or host == "" else socket.AF_INET


def run(cfg: WhiskerConfig, stop: threading.Event) -> int:
    tls = server_context(cfg)
    channel = goldmane_channel(cfg)
    host = cfg.bind_host
    try:
        server = WhiskerServer((host.strip("[]") or "::", cfg.port), channel, _family(host))
    except OSError as exc:
        log.error("Failed to listen on %s:%d: %s", host, cfg.port, exc.strerror)
        channel.close()
        return 1
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    scheme = "https" if tls else "http"
    log.info(
        "whisker-backend listening on %s://%s:%d (Goldmane %s, %s)",
        scheme,
        host or "[::]",
        port,
        cfg.goldmane_host,
        "mTLS" if cfg.goldmane_tls else "plaintext",
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.2,), name="whisker-http")
    thread.start()
    stop.wait()
    log.info("Received shutdown signal, stopping")
    server.stopping.set()
    server.shutdown()
    thread.join()
    server.server_close()
    channel.close()
    return 0


@click.command(
    "whisker-backend",
    help="Run whisker-backend: Whisker's REST API over Goldmane and the Whisker UI (config: "
    "environment variables GOLDMANE_HOST, HOST, PORT, SERVER_TLS_CERT_PATH, ... as upstream).",
)
@click.option("--version", "show_version", is_flag=True, help="Print version and exit.")
def whisker_backend_command(show_version: bool) -> None:
    if show_version:
        click.echo(version_text())
        return
    configure_formatter("whisker-backend")
    logging.getLogger().setLevel(logging.INFO)
    try:
        cfg = load_config(dict(os.environ))
        try:
            logging.getLogger().setLevel(parse_level(cfg.log_level))
        except LogLevelError:
            raise ConfigError(f"LOG_LEVEL: unknown level {cfg.log_level!r}") from None
        server_context(cfg)  # certificate errors before anything starts
        goldmane_channel(cfg).close()
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        code = run(cfg, stop)
    except ConfigError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    sys.exit(code)
