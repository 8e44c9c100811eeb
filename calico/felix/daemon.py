"""``calico component felix``: the per-node policy agent's process.

Pipeline: datastore -> felix syncer -> calc graph (AsyncCalcGraph) -> config connector ->
dataplane loop (nftables table, routes, status). This module only wires and supervises:

- start-up: early logging; config from defaults < datastore (global, node-selector, per-host)
  < ``/etc/calico/felix.cfg`` < ``FELIX_*``; the datastore itself from the libcalico
  environment (``DATASTORE_TYPE``, ``ETCD_ENDPOINTS``, ...) overridden by Felix's own
  ``DatastoreType``/``Etcd*`` (a bad value exits 1); retry until the datastore is reachable and
  ClusterInformation says ``datastoreReady`` (``FelixStartup`` is not ready meanwhile);
- run time: a resolved-config change (other than the hot-reloadable ones) or the datastore
  turning not-ready stops Felix with exit code 129 so its supervisor restarts it;
- shutdown (SIGTERM/SIGINT, or the above): threads stopped and joined within 10 s; the nftables
  table and routes are deliberately left programmed, so workloads keep working until the next
  Felix takes over (it replaces the table atomically, rewriting only what differs).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import click

from calico.backoff import Backoff
from calico.codecache import flush as flush_code_cache
from calico.datastore import Backend
from calico.datastore.config import DatastoreConfig
from calico.datastore.errors import DatastoreConfigError
from calico.felix.config import (
    CONFIG_CHANGED_EXIT_CODE,
    DEFAULT_CONFIG_FILE,
    Config,
    diff,
    felix_datastore_config,
    local_sources,
    needs_restart,
    resolve,
    severity_level,
)
from calico.felix.idle_gc import IdleCollector
from calico.felix.malloc_arenas import cap_arenas
from calico.felix.messages import ConfigUpdate, DatastoreNotReady, Encapsulation, ToDataplane
from calico.gcpause import resume as resume_gc
from calico.health import HealthAggregator, HealthServer
from calico.logutils import configure_early_logging_from_env, configure_formatter

log = logging.getLogger(__name__)

STARTUP_HEALTH = "FelixStartup"
SHUTDOWN_BUDGET = 10.0
RETRY_MIN, RETRY_MAX = 0.5, 5.0
# The garbage collector stays paused from the CLI's imports to the first in-sync apply
# (calico.gcpause); a Felix that is not in sync by then collects normally anyway. A snapshot
# of 250,000 endpoints takes 50-100 s to in-sync and makes ~1,500 garbage objects, while
# collecting from 30 s on cost 4-6 s of full collections (design/performance.md "Full-Felix
# scale: the snapshot path").
GC_PAUSE_LIMIT = 300.0


def describe(datastore: DatastoreConfig) -> str:
    """The datastore in a log line: type and where (never credentials: there are none here)."""
    if datastore.datastore_type == "local":
        return f"local {datastore.local_path}"
    if datastore.datastore_type == "etcdv3":
        return f"etcdv3 {','.join(datastore.etcd_endpoints)}"
    return datastore.datastore_type


class _TyphaSource:
    """The Typha client behind a dedupe buffer, started and stopped as one syncer."""

    def __init__(self, client: Any, buffer: Any) -> None:
        self._client, self._buffer = client, buffer

    def start(self) -> None:
        self._buffer.start()
        self._client.start()

    def stop(self, timeout: float) -> None:
        self._client.stop(timeout)
        self._buffer.stop(timeout)


def typha_source(config: Config, callbacks: Any) -> _TyphaSource:
    """Felix's syncer source when ``TyphaAddr`` is set: no datastore access for syncer data;
    the restart-aware dedupe buffer resyncs (with synthesised deletes) after a reconnect."""
    from calico.syncer import DedupeBuffer
    from calico.syncer.typhaclient import ClientSettings, SyncClient

    settings = ClientSettings(
        addr=config.typha_addr,
        syncer_type="felix",
        hostname=config.felix_hostname,
        info="felix",
        read_timeout=config.typha_read_timeout,
        write_timeout=config.typha_write_timeout,
        key_file=config.typha_key_file,
        cert_file=config.typha_cert_file,
        ca_file=config.typha_ca_file,
        cn=config.typha_cn,
        uri_san=config.typha_uri_san,
    )
    buffer = DedupeBuffer(callbacks)
    log.info("Syncing through Typha at %s", config.typha_addr)
    return _TyphaSource(SyncClient(settings, buffer), buffer)


def apply_log_level(config: Config) -> None:
    level = severity_level(config.log_severity_screen)
    logging.getLogger().setLevel(level)


class ConfigConnector:
    """The calc graph's sink: watches ``ConfigUpdate``/``DatastoreNotReady`` and asks for a
    restart; forwards everything else to the dataplane until a restart has been requested
    (so nothing is programmed under a config we are about to abandon)."""

    def __init__(
        self,
        config: Config,
        forward: Callable[[list[ToDataplane]], None],
        restart: Callable[[str], None],
        health: HealthAggregator | None = None,
        encap: Encapsulation | None = None,
    ) -> None:
        self.config = config
        self.encap = encap  # what the dataplane was built for (None: not checked)
        self._forward = forward
        self._restart = restart
        self._health = health
        self._restarting = False

    def __call__(self, batch: list[ToDataplane]) -> None:
        for msg in batch:
            if isinstance(msg, DatastoreNotReady):
                self._request("datastore is not ready (ClusterInformation datastoreReady=false)")
            elif isinstance(msg, ConfigUpdate):
                self._on_config(msg)
            elif isinstance(msg, Encapsulation) and self.encap is not None and msg != self.encap:
                self._request(f"encapsulation changed: {self.encap} -> {msg}")
        if not self._restarting:
            self._forward(batch)

    def _on_config(self, msg: ConfigUpdate) -> None:
        new = self.config.with_datastore(msg.config, {}, {})
        if needs_restart(self.config, new):
            changed = ", ".join(sorted(diff(self.config, new)))
            self._request(f"configuration changed: {changed}")
            return
        if self._health is not None and new.health_timeout_overrides != (
            self.config.health_timeout_overrides
        ):
            self._health.set_global_timeout_overrides(dict(new.health_timeout_overrides or {}))
        self.config = new

    def _request(self, why: str) -> None:
        if not self._restarting:
            self._restarting = True
            self._restart(why)


class FelixDaemon:
    def __init__(self, config_file: str = DEFAULT_CONFIG_FILE) -> None:
        self.config_file = config_file
        self.health = HealthAggregator()
        self.health.register_reporter(STARTUP_HEALTH, live=True, ready=True)
        self.health_server = HealthServer(self.health)
        self._stop = threading.Event()
        self.exit_code = 0
        self._owned: list[tuple[str, Callable[[], Any]]] = []  # (name, stop) in start order
        self._watch: list[tuple[str, Any]] = []  # threads whose death stops Felix
        self.startup_encap = Encapsulation()  # from the IP pools, read by connect()
        # Collections run when the dataplane is idle once start-up's objects are frozen
        # (calico.felix.idle_gc); before that the collector is paused or automatic.
        self.idle_gc = IdleCollector()
        self._calc: Any = None  # the AsyncCalcGraph, once the pipeline is built

    # ---- control -----------------------------------------------------------------------------

    def request_stop(self, code: int, why: str) -> None:
        if not self._stop.is_set():
            log.info("Felix stopping (exit code %d): %s", code, why)
            self.exit_code = code
            self._stop.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: self.request_stop(0, "received SIGTERM"))
        signal.signal(signal.SIGINT, lambda *_: self.request_stop(0, "received SIGINT"))
        signal.signal(
            signal.SIGHUP,
            lambda *_: self.request_stop(CONFIG_CHANGED_EXIT_CODE, "received SIGHUP"),
        )

    def _own(self, name: str, stop: Callable[[], Any]) -> None:
        self._owned.append((name, stop))

    # ---- start-up ----------------------------------------------------------------------------

    def _startup_not_ready(self, detail: str) -> None:
        self.health.report(STARTUP_HEALTH, live=True, ready=False, detail=detail)

    def connect(self, config: Config, datastore: DatastoreConfig) -> tuple[Backend, Config] | None:
        """Open the datastore and load its config; retry until ready (None if stopped)."""
        from calico.datastore.factory import open_backend
        from calico.felix.startup_config import load_datastore_config

        backoff = Backoff(RETRY_MIN, RETRY_MAX)
        backend: Backend | None = None
        while not self._stop.is_set():
            try:
                if backend is None:
                    backend = open_backend(datastore)
                loaded = load_datastore_config(backend, config.felix_hostname)
                if loaded.ready:
                    full = config.with_datastore(
                        loaded.global_config, loaded.selector_config, loaded.host_config
                    )
                    # Read here, inside the retry: the pools decide the VXLAN managers.
                    self.startup_encap = self._encapsulation(full, backend)
                    return backend, full
                log.warning("Datastore is not ready (datastoreReady=false); waiting")
                self._startup_not_ready("waiting for the datastore to become ready")
            except Exception as exc:
                log.warning("Failed to load configuration from the datastore: %s", exc)
                self._startup_not_ready(f"cannot read datastore: {exc}")
                if backend is not None:
                    try:
                        backend.close()
                    except Exception:
                        log.debug("Error closing backend", exc_info=True)
                    backend = None
            resume_gc()  # waiting for the datastore: the start-up pause ends here
            self._stop.wait(backoff.next())
        if backend is not None:
            backend.close()
        return None

    # ---- run ---------------------------------------------------------------------------------

    def run(self) -> int:
        config = resolve(local_sources(config_file=self.config_file))
        apply_log_level(config)
        if config.errors:
            log.error("Invalid Felix configuration, exiting: %s", "; ".join(config.errors))
            return 1
        try:
            datastore = felix_datastore_config(config)
        except DatastoreConfigError as exc:
            log.error("Invalid datastore configuration, exiting: %s", exc)
            return 1
        log.info("Datastore: %s (from %s)", describe(datastore), datastore.source)
        self._startup_not_ready("loading configuration")
        self.health_server.serve(config.health_enabled, config.health_host, config.health_port)
        self._own("health server", lambda: self.health_server.serve(False))
        try:
            connected = self.connect(config, datastore)
            if connected is None:
                return self.exit_code
            backend, config = connected
            self._own("datastore", backend.close)
            apply_log_level(config)
            if config.errors:
                log.error("Invalid Felix configuration, exiting: %s", "; ".join(config.errors))
                return 1
            log.info("Felix configuration loaded: %r", config)
            self.health.set_global_timeout_overrides(dict(config.health_timeout_overrides or {}))
            from calico.felix.dataplane.build import DataplaneStartError

            try:
                self._start_pipeline(config, backend, self.startup_encap)
            except DataplaneStartError as exc:
                log.error("Felix cannot start its dataplane, exiting: %s", exc)
                return 1
            self.health.report(STARTUP_HEALTH, live=True, ready=True)
            self._supervise()
            return self.exit_code
        finally:
            resume_gc()
            self._shutdown()

    @staticmethod
    def _encapsulation(config: Config, backend: Backend) -> Encapsulation:
        from calico.felix.startup_config import load_encapsulation

        encap = load_encapsulation(
            backend, ipip_enabled=config.ip_in_ip_enabled, vxlan_enabled=config.vxlan_enabled
        )
        log.info("Encapsulation at start-up: %s", encap)
        return encap

    def _start_pipeline(self, config: Config, backend: Backend, encap: Encapsulation) -> None:
        from calico.felix.calc.calc_graph import build_felix_calc_pipeline
        from calico.felix.dataplane.build import build_internal_dataplane
        from calico.felix.status import StatusReporter
        from calico.syncer.definitions import felix_syncer

        if config.typha_k8s_service_name and not config.typha_addr:
            log.warning(
                "TyphaK8sServiceName=%s ignored: Typha discovery needs the Kubernetes datastore; "
                "syncing from the datastore directly (set TyphaAddr to use Typha)",
                config.typha_k8s_service_name,
            )

        metrics = self._start_metrics(config)
        dataplane = build_internal_dataplane(
            config,
            health=self.health,
            metrics=metrics,
            on_in_sync=self._on_dataplane_in_sync,
            on_idle=self._on_dataplane_idle,
            encap=encap,
        )
        to_dataplane = dataplane.on_messages
        endpoint_listener = None
        if config["FlowLogsGoldmaneServer"]:
            to_dataplane, endpoint_listener = self._start_collector(
                config, to_dataplane, metrics.registry if metrics is not None else None
            )
        connector = ConfigConnector(
            config,
            to_dataplane,
            lambda why: self.request_stop(CONFIG_CHANGED_EXIT_CODE, why),
            self.health,
            encap=encap,
        )
        vxlan = encap.vxlan_enabled or encap.vxlan_enabled_v6
        calc = build_felix_calc_pipeline(
            config.felix_hostname,
            connector,
            health=self.health,
            workload_source_spoofing=config.workload_source_spoofing,
            stats=metrics.cluster_stats() if metrics is not None else None,
            ipip_enabled=config.ip_in_ip_enabled,
            vxlan_enabled=config.vxlan_enabled,
            # As upstream: the VXLAN and route resolvers exist only when VXLAN is on.
            enable_vxlan_resolver=vxlan,
            route_source=config.route_source if vxlan else None,
            endpoint_listener=endpoint_listener,
        )
        self._calc = calc  # asked for policies to prepare when the dataplane is idle
        syncer = typha_source(config, calc) if config.typha_addr else felix_syncer(backend, calc)
        reporter = StatusReporter(
            backend,
            config.felix_hostname,
            interval=config.reporting_interval_secs,
            ttl=config.reporting_ttl_secs,
            region=config.openstack_region,
        )
        dataplane.start()
        self._own("dataplane", lambda: dataplane.stop(3.0))
        calc.start()
        self._own("calculation graph", lambda: calc.stop(2.0))
        syncer.start()
        self._own("syncer", lambda: syncer.stop(2.0))
        reporter.start()
        self._own("status reporter", reporter.stop)
        self._watch = [("calculation graph", calc), ("dataplane", dataplane)]

    def _start_metrics(self, config: Config) -> Any:
        """Felix's metrics (calico.felix.dataplane.metrics) and their HTTP server, or None
        with PrometheusMetricsEnabled off: nothing could read them, and prometheus_client
        (with http.server, ~85 ms of a start) is then never imported. Not hot-reloadable, so
        a later change restarts Felix."""
        if not config.prometheus_metrics_enabled:
            return None
        from calico.felix.dataplane.metrics import FelixMetrics, MetricsServer

        metrics = FelixMetrics()
        server = MetricsServer(
            metrics.registry, config.prometheus_metrics_host, config.prometheus_metrics_port
        )
        server.start()
        self._own("metrics server", server.stop)
        return metrics

    def _start_collector(
        self, config: Config, to_dataplane: Callable[[list[Any]], None], registry: Any
    ) -> tuple[Callable[[list[Any]], None], Callable[[Any, Any], None] | None]:
        """Flow collection for Goldmane (design/felix-collector.md); the collector sees the same
        messages as the dataplane, plus every node's endpoint updates from the calc graph
        (names and labels); its metrics join Felix's registry. Without NFLOG access Felix runs
        on, without flow logs."""
        from calico.felix.collector import collector

        flows = collector.from_config(config, registry)
        try:
            flows.start()
        except OSError as e:
            log.error("Flow logs to Goldmane disabled: cannot read NFLOG groups: %s", e)
            return to_dataplane, None
        self._own("flow collector", flows.stop)
        log.info("Flow logs go to Goldmane at %s", config["FlowLogsGoldmaneServer"])

        def both(batch: list[Any]) -> None:
            flows.on_messages(batch)
            to_dataplane(batch)

        return both, flows.lookups.on_endpoint

    def _on_dataplane_idle(self) -> None:
        """The dataplane loop has nothing to do: collect garbage (calico.felix.idle_gc), then
        let the calc graph parse the next inactive policies to prepare (PolicyPrepare)."""
        self.idle_gc.collect_if_due()
        if self._calc is not None:
            self._calc.request_prepare()

    def _on_dataplane_in_sync(self) -> None:
        log.info("Dataplane is in sync with the datastore")
        resume_gc()  # start-up's objects are built: freeze them, collect normally from here
        self.idle_gc.start()  # ... at the dataplane's idle points (calico.felix.idle_gc)
        flush_code_cache()  # start-up's classes exist: keep their code for the next start

    def _supervise(self) -> None:
        gc_deadline = time.monotonic() + GC_PAUSE_LIMIT
        while not self._stop.wait(0.5):
            if gc_deadline and time.monotonic() >= gc_deadline:
                resume_gc()  # never in sync so far: run with normal collection regardless
                self.idle_gc.start()
                gc_deadline = 0.0
            for name, component in self._watch:
                if not component.is_alive():
                    err = getattr(component, "error", None)
                    self.request_stop(1, f"{name} thread died: {err!r}")

    def _shutdown(self) -> None:
        """Stop owned components in reverse start order, within the shutdown budget."""
        deadline = time.monotonic() + SHUTDOWN_BUDGET - 1.0
        for name, stop in reversed(self._owned):
            if time.monotonic() > deadline:
                log.warning("Shutdown budget exhausted; not waiting for %s", name)
                continue
            try:
                stop()
            except Exception as exc:
                log.warning("Error stopping %s: %s", name, exc)
        self._owned.clear()
        self.idle_gc.stop()
        log.info("Felix stopped; dataplane left programmed")


@click.command(
    "felix",
    help="Run Felix, the per-node policy agent (config: /etc/calico/felix.cfg and FELIX_*).",
)
@click.option("--config-file", default=DEFAULT_CONFIG_FILE, hidden=True)
def felix_command(config_file: str) -> None:
    cap_arenas()  # before any thread starts (calico.felix.malloc_arenas)
    configure_early_logging_from_env("felix")
    configure_formatter("felix")
    daemon = FelixDaemon(config_file)
    daemon.install_signal_handlers()
    code = daemon.run()
    sys.stdout.flush()
    sys.exit(code)
