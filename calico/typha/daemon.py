"""``calico component typha``: one datastore connection fanned out to many syncer clients.

Start-up: early logging; load ``TYPHA_*`` + ``typha.cfg``; open the datastore, retrying every
second. Then one pipeline per syncer type, in upstream's order felix, bgp,
tunnel-ip-allocation, node-status: ``WatcherSyncer`` -> ``SnapshotCache`` (validation and
breadcrumbs), served by one ``SyncServer`` on ``ServerPort`` (5473). Health: ``SyncServer``
(live, refreshed by the governor) and ``<type>-cache`` (live, ready when in sync) reporters,
timeout 20 s; Typha is ready once every cache is in sync. The felix pipeline counts Nodes
(``NodeCounter``); with ``ConnectionRebalancingMode=kubernetes`` a ``Rebalancer`` sets the
governor's limit from that count and the Typha service's endpoints. SIGTERM/SIGINT: graceful
shutdown (spread disconnects), then exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
import time
from typing import Any

import click

from calico.datastore import Backend
from calico.datastore.errors import DatastoreConfigError
from calico.health import HealthAggregator, HealthServer
from calico.logutils import configure_early_logging_from_env, configure_formatter
from calico.logutils.levels import LogLevelError, parse_level
from calico.syncer.api import SyncStatus
from calico.syncer.definitions import FELIX, SYNCER_TYPES, new_syncer
from calico.syncer.typhaclient import tls
from calico.typha import config as cfg
from calico.typha.metrics import MetricsServer, TyphaMetrics
from calico.typha.rebalance import REQUEST_TIMEOUT, NodeCounter, Rebalancer, TyphaCounter
from calico.typha.server import ServerConfig, SyncServer
from calico.typha.snapcache import Breadcrumb, SnapshotCache

log = logging.getLogger(__name__)

SERVER_HEALTH = "SyncServer"
HEALTH_TIMEOUT = 20.0
HEALTH_INTERVAL = 10.0


def cache_health_name(syncer_type: str) -> str:
    return f"{syncer_type}-cache"


def server_config(config: cfg.TyphaConfig) -> ServerConfig:
    use_tls = tls.check_settings(
        config.server_key_file,
        config.server_cert_file,
        config["CAFile"],
        config["ClientCN"],
        config["ClientURISAN"],
        "Typha (ServerKeyFile, ServerCertFile, CAFile, ClientCN, ClientURISAN)",
    )
    ctx = (
        tls.server_context(config.server_key_file, config.server_cert_file, config["CAFile"])
        if use_tls
        else None
    )
    return ServerConfig(
        host=config.server_host,
        port=config.listen_port,
        max_message_size=config.server_max_message_size,
        max_fall_behind=config.server_max_fall_behind_secs,
        new_client_grace=config.server_new_client_fall_behind_grace_period,
        ping_interval=config.server_ping_interval_secs,
        pong_timeout=config.server_pong_timeout_secs,
        handshake_timeout=config.server_handshake_timeout_secs,
        write_timeout=config.server_write_timeout_secs,
        max_conns=config.max_connections_upper_limit,
        drop_interval=config.connection_drop_interval_secs,
        shutdown_timeout=config.shutdown_timeout_secs,
        shutdown_max_drop_interval=config.shutdown_connection_drop_interval_max_secs,
        tls_context=ctx,
        client_cn=config["ClientCN"],
        client_uri_san=config["ClientURISAN"],
    )


def rebalancing_client(config: cfg.TyphaConfig, env: Any = None) -> Any:
    """The Kubernetes client rebalancing polls with (``KUBECONFIG``, else in-cluster), or None
    when ``ConnectionRebalancingMode`` is ``none``; DatastoreConfigError when unusable."""
    if config.connection_rebalancing_mode != "kubernetes":
        return None
    import os

    from calico.datastore.kubernetes.kubeconfig import config_from_flags
    from calico.datastore.kubernetes.rest import Rest

    env = os.environ if env is None else env
    return Rest(config_from_flags(env.get("KUBECONFIG", ""), env), timeout=REQUEST_TIMEOUT)


def freeze_heap() -> None:
    """After the initial sync, move everything alive into the GC's permanent generation.

    The caches and syncers then hold hundreds of thousands of long-lived objects that a full
    collection would traverse on every gen-2 pass (0.7 s for 100,000 workload endpoints
    measured on the shared dev machine), stalling every client's deltas; frozen, they are
    skipped (``gc.freeze``). Objects made later are collected as usual.
    """
    import gc

    gc.collect()
    gc.freeze()
    log.info("In sync: %d objects moved out of the collector's way", gc.get_freeze_count())


def raise_fd_limit() -> None:
    """Serve up to MaxConnectionsUpperLimit sockets: lift the soft open-files limit to the
    hard one (as the Go runtime does for upstream's Typha)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("Cannot raise the open-files limit from %d: %s", soft, exc)


class TyphaDaemon:
    def __init__(
        self, config: cfg.TyphaConfig, server_cfg: ServerConfig, k8s_rest: Any = None
    ) -> None:
        self.config = config
        self.server_cfg = server_cfg
        self.k8s_rest = k8s_rest  # rebalancing's API client (None: mode none)
        self.health = HealthAggregator()
        self.health.register_reporter(SERVER_HEALTH, live=True, ready=False, timeout=HEALTH_TIMEOUT)
        for name in SYNCER_TYPES:  # before the health server: not ready until every cache is
            self.health.register_reporter(
                cache_health_name(name), live=True, ready=True, timeout=HEALTH_TIMEOUT
            )
        self.health_server = HealthServer(self.health)
        self.metrics = TyphaMetrics()
        self._stop = threading.Event()
        self.caches: dict[str, SnapshotCache] = {}
        self._in_sync: set[str] = set()
        self._frozen = False
        self.syncers: list[Any] = []
        self.node_counter: NodeCounter | None = None

    # -- pieces ----------------------------------------------------------------------------------

    def _connect(self) -> Backend | None:
        from calico.datastore.factory import open_backend

        while not self._stop.is_set():
            try:
                return open_backend(cfg.datastore_settings(self.config))
            except Exception as exc:
                log.warning("Failed to connect to the datastore, retrying in 1s: %s", exc)
                self._stop.wait(1.0)
        return None

    def _on_cache_status(self, name: str, status: SyncStatus) -> None:
        self._report_cache(name, status)
        if status is SyncStatus.IN_SYNC and not self._frozen:
            self._in_sync.add(name)
            if len(self._in_sync) == len(SYNCER_TYPES):
                self._frozen = True
                freeze_heap()

    def _report_cache(self, name: str, status: SyncStatus) -> None:
        self.health.report(
            cache_health_name(name),
            live=True,
            ready=status is SyncStatus.IN_SYNC,
            detail="" if status is SyncStatus.IN_SYNC else f"status {status.value}",
        )

    def _make_cache(self, name: str) -> SnapshotCache:
        m = self.metrics

        def on_crumb(crumb: Breadcrumb) -> None:
            m.breadcrumb_seq_number.labels(name).set(crumb.seq)
            m.cache_size.labels(name).set(crumb.size)
            m.breadcrumb_size.labels(name).observe(len(crumb.deltas))

        def on_counts(total: int, skipped: int) -> None:
            m.updates_total.labels(name).inc(total)
            if skipped:
                m.updates_skipped.labels(name).inc(skipped)

        return SnapshotCache(
            name,
            self.config.snapshot_cache_max_batch_size,
            on_crumb=on_crumb,
            on_status=lambda status: self._on_cache_status(name, status),
            on_update_counts=on_counts,
        )

    # -- run -------------------------------------------------------------------------------------

    def run(self) -> int:
        c = self.config
        raise_fd_limit()
        for sig in (signal.SIGTERM, signal.SIGINT):  # until the server's loop takes over
            signal.signal(sig, lambda *_: self._stop.set())
        self.health_server.serve(c.health_enabled, c.health_host, c.health_port)
        metrics_server = None
        if c.prometheus_metrics_enabled:
            if c.prometheus_process_metrics_enabled:
                from prometheus_client import ProcessCollector

                ProcessCollector(registry=self.metrics.registry)
            metrics_server = MetricsServer(
                self.metrics.registry, c.prometheus_metrics_host, c.prometheus_metrics_port
            )
            metrics_server.start()
        backend = self._connect()
        if backend is None:
            return 0
        try:
            for name in SYNCER_TYPES:
                cache = self.caches[name] = self._make_cache(name)
                callbacks: Any = cache
                if name == FELIX:
                    callbacks = self.node_counter = NodeCounter(cache)
                self.syncers.append(new_syncer(name, backend, callbacks))
            asyncio.run(self._serve())
            return 0
        finally:
            for syncer in self.syncers:
                syncer.stop(1.0)
            for cache in self.caches.values():
                cache.stop(1.0)
            backend.close()
            if metrics_server is not None:
                metrics_server.stop()
            if self.k8s_rest is not None:
                self.k8s_rest.close()
            self.health_server.serve(False)

    def _rebalancer(self, server: SyncServer) -> Rebalancer | None:
        c = self.config
        if self.k8s_rest is None or self.node_counter is None:
            return None
        typhas = TyphaCounter(self.k8s_rest, c.k8s_namespace, c.k8s_service_name, c.k8s_port_name)
        log.info(
            "Connection rebalancing from Kubernetes: service %s/%s port %s, every %.1fs",
            c.k8s_namespace, c.k8s_service_name, c.k8s_port_name, c.k8s_service_poll_interval_secs,
        )  # fmt: skip
        return Rebalancer(
            typhas.count,
            self.node_counter.num_nodes,
            c.max_connections_lower_limit,
            c.max_connections_upper_limit,
            c.k8s_service_poll_interval_secs,
            server.set_max_conns,
        )

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        server = SyncServer(
            self.caches,
            self.server_cfg,
            self.metrics,
            on_governor_tick=lambda: self.health.report(SERVER_HEALTH, live=True, ready=True),
        )
        await server.start()
        self.health.report(SERVER_HEALTH, live=True, ready=True)
        rebalancer = self._rebalancer(server)
        rebalance_task = asyncio.create_task(rebalancer.run()) if rebalancer else None
        for cache in self.caches.values():
            cache.start(loop)
        for syncer in self.syncers:
            syncer.start()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if self._stop.is_set():  # signalled while starting
            stop.set()
        while not stop.is_set():
            for name, cache in self.caches.items():
                self._report_cache(name, cache.latest().status)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(HEALTH_INTERVAL):
                    await stop.wait()
        log.info("Received shutdown signal; shutting down gracefully")
        self._stop.set()
        if rebalance_task is not None:
            rebalance_task.cancel()
        started = time.monotonic()
        await server.graceful_shutdown()
        log.info("Graceful shutdown took %.1fs", time.monotonic() - started)


@click.command(
    "typha", help="Run Typha, the syncer fan-out (config: /etc/calico/typha.cfg and TYPHA_*)."
)
@click.option("-c", "--config-file", default=cfg.DEFAULT_CONFIG_FILE, show_default=True)
def typha_command(config_file: str) -> None:
    configure_early_logging_from_env("typha")
    configure_formatter("typha")
    try:
        config = cfg.load(config_file)
        if config.errors:
            raise cfg.TyphaConfigError("; ".join(config.errors))
        logging.getLogger().setLevel(parse_level(config.log_severity_screen))
        server_cfg = server_config(config)
        cfg.datastore_settings(config)  # validate before starting anything
        k8s_rest = rebalancing_client(config)
    except (cfg.TyphaConfigError, DatastoreConfigError, LogLevelError, ValueError, OSError) as exc:
        log.error("Invalid Typha configuration: %s", exc)
        click.echo(f"Error: invalid Typha configuration: {exc}", err=True)
        sys.exit(1)
    code = TyphaDaemon(config, server_cfg, k8s_rest).run()
    sys.stdout.flush()
    sys.exit(code)
