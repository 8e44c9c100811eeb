"""``calico component kube-controllers`` (design/kube-controllers.md "Process").

The outer process only supervises (``wrap_self`` with ``CALICO_KUBE_CONTROLLERS_INNER``);
the inner one: opens the Calico datastore (``DATASTORE_TYPE``, default ``etcdv3`` as
upstream's kube-controllers) and the Kubernetes API (``KUBECONFIG`` / ``K8S_API_ENDPOINT`` /
in-cluster; the same backend when the datastore is Kubernetes), retries
``EnsureInitialized`` every 5 s for at most 60 s, resolves the run config, serves health
(reporters ``Startup``, ``CalicoDatastore``, ``KubeAPIServer``: live+ready, no timeout) on
``--health-port`` and in ``--status-file``, Prometheus metrics on the configured port, and
runs the enabled controllers from one Kubernetes view. A change in the merged config exits
129 (the wrapper restarts us); SIGTERM/SIGINT exit 0.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

import click

import calico
from calico.cmdwrapper import RESTART_RETURN_CODE, wrap_self
from calico.datastore import Backend
from calico.datastore.client import Client
from calico.datastore.config import env_config
from calico.datastore.daemon_config import daemon_datastore_config
from calico.datastore.errors import DatastoreConfigError
from calico.health import HealthAggregator, HealthServer
from calico.ipam import IPAMClient
from calico.kube_controllers.config import ConfigError, RunConfig
from calico.kube_controllers.ipamgc import IPAMGarbageCollector
from calico.kube_controllers.kubecache import KubeCache
from calico.kube_controllers.loadbalancer import LoadBalancerController
from calico.kube_controllers.metrics import IPAMMetrics, MetricsServer
from calico.kube_controllers.node import NodeController
from calico.kube_controllers.runconfig import RunConfigWatcher
from calico.kube_controllers.services import ServiceCache
from calico.kube_controllers.sync import PodController, PolicyController, ProfileController
from calico.logutils import configure_formatter
from calico.logutils.levels import LogLevelError, parse_level

log = logging.getLogger(__name__)

INNER_ENV = "CALICO_KUBE_CONTROLLERS_INNER"
STARTUP, DATASTORE, APISERVER = "Startup", "CalicoDatastore", "KubeAPIServer"
INIT_RETRY, INIT_TIMEOUT = 5.0, 60.0
CONFIG_POLL = 5.0
DEBOUNCE = 0.5  # coalesce a burst of Kubernetes changes into one reconcile
LB_POOL_POLL = 5.0  # how often the LoadBalancer controller looks for IP pool changes


class Controller(Protocol):
    name: str

    def reconcile(self) -> Any: ...


class StatusFile:
    """Upstream's ``/status/status.json``: ``{"Readiness": {key: {"Ready", "Reason"}}}``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.state: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def set(self, key: str, ready: bool, reason: str = "") -> None:
        if not self.path:
            return
        with self.lock:
            if self.state.get(key) == {"Ready": ready, "Reason": reason}:
                return
            self.state[key] = {"Ready": ready, "Reason": reason}
            tmp = f"{self.path}.tmp"
            try:
                os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
                with open(tmp, "w") as f:
                    json.dump({"Readiness": self.state}, f)
                os.replace(tmp, self.path)
            except OSError as exc:
                log.warning("Cannot write status file %s: %s", self.path, exc)


class KubeControllers:
    def __init__(self, env: Mapping[str, str], status_file: str, health_port: int) -> None:
        self.env = dict(env)
        self.env.setdefault("DATASTORE_TYPE", "etcdv3")  # upstream's own default
        self.health = HealthAggregator()
        for name in (STARTUP, DATASTORE, APISERVER):
            self.health.register_reporter(name, live=True, ready=True)
        self.health_server = HealthServer(self.health)
        self.health_port = health_port
        self.status = StatusFile(status_file)
        self.stop = threading.Event()
        self.restart = threading.Event()

    def _report(self, name: str, ready: bool, reason: str = "") -> None:
        self.health.report(name, live=True, ready=ready, detail=reason)
        self.status.set(name, ready, reason)

    # -- start-up --------------------------------------------------------------------------

    def _open(self) -> tuple[Backend, Backend]:
        from calico.datastore.factory import open_backend
        from calico.datastore.kubernetes import KubernetesBackend

        ds = daemon_datastore_config(env=self.env)
        calico_backend = open_backend(ds)
        if ds.datastore_type == "kubernetes":
            return calico_backend, calico_backend
        kube_cfg = dataclasses.replace(env_config(self.env), datastore_type="kubernetes")
        return calico_backend, KubernetesBackend(kube_cfg)

    def _ensure_initialized(self, client: Client) -> bool:
        deadline = time.monotonic() + INIT_TIMEOUT
        while not self.stop.is_set():
            try:
                client.ensure_initialized(calico.__version__, "k8s")
                self._report(STARTUP, True)
                return True
            except Exception as exc:
                if time.monotonic() >= deadline:
                    log.error("Failed to initialize datastore: %s", exc)
                    return False
                log.warning("Failed to initialize datastore, retrying in 5s: %s", exc)
                self._report(STARTUP, False, f"Error initializing datastore: {exc}")
                self.stop.wait(INIT_RETRY)
        return False

    # -- loops -----------------------------------------------------------------------------

    def _health_loop(self, client: Client, kube: Backend) -> None:
        """Upstream's checks: the datastore answers, and the API server's ``/healthz`` is 200.
        Timeouts 4 s doubling to 16 s while unready; every 2 s while unready, 10 s when ready."""
        timeout = 4.0
        while not self.stop.is_set():
            ok = True
            try:
                client.get("ClusterInformation", "default")
                self._report(DATASTORE, True)
            except Exception as exc:
                ok = False
                self._report(DATASTORE, False, f"Error reaching datastore: {exc}")
            try:
                status = kube.rest.get_status("/healthz", timeout)  # type: ignore[attr-defined]
                if status != 200:
                    raise RuntimeError(f"/healthz answered {status}")
                self._report(APISERVER, True)
            except Exception as exc:
                ok = False
                self._report(APISERVER, False, f"Error reaching apiserver: {exc}")
            timeout = 4.0 if ok else min(timeout * 2, 16.0)
            self.stop.wait(10.0 if ok else 2.0)

    def _controller_loop(
        self, controllers: list[tuple[Controller, float]], cache: KubeCache
    ) -> None:
        last_run = {c.name: 0.0 for c, _ in controllers}
        generation = -1
        while not self.stop.is_set():
            new_gen = cache.wait_change(generation, 1.0)
            now = time.monotonic()
            due = [
                c
                for c, period in controllers
                if new_gen != generation or now - last_run[c.name] >= period
            ]
            if new_gen != generation:
                self.stop.wait(DEBOUNCE)
                generation = cache.generation
            for ctrl in due:
                if self.stop.is_set():
                    return
                try:
                    ctrl.reconcile()
                except Exception as exc:  # a failed pass is retried on the next change/period
                    log.warning("%s controller pass failed: %s", ctrl.name, exc)
                last_run[ctrl.name] = time.monotonic()

    def _lb_loop(self, ctrl: LoadBalancerController, services: ServiceCache, period: float) -> None:
        """The LoadBalancer controller's own trigger: a Service change (coalesced), a change
        of the LoadBalancer pools (polled every 5 s) or the reconciler period."""
        generation, pools, last = -1, None, 0.0
        while not self.stop.is_set():
            new_gen = services.wait_change(generation, LB_POOL_POLL)
            try:
                sig = ctrl.pool_signature()
            except Exception as exc:
                log.warning("loadbalancer controller: cannot list IP pools: %s", exc)
                continue
            if new_gen == generation and sig == pools and time.monotonic() - last < period:
                continue
            if new_gen != generation:
                self.stop.wait(DEBOUNCE)
            generation, pools = services.generation, sig
            try:
                ctrl.reconcile()
            except Exception as exc:  # retried on the next change/period
                log.warning("loadbalancer controller pass failed: %s", exc)
            last = time.monotonic()

    def _build(
        self,
        rc: RunConfig,
        client: Client,
        calico_backend: Backend,
        kdd: bool,
        cache: KubeCache,
        metrics: IPAMMetrics,
    ) -> list[tuple[Controller, float]]:
        out: list[tuple[Controller, float]] = []
        if "node" in rc.controllers:
            gc = IPAMGarbageCollector(IPAMClient(client), rc.leak_grace_period)
            node = NodeController(
                client,
                cache,
                gc,
                kubernetes_datastore=kdd,
                sync_labels=rc.sync_labels,
                auto_host_endpoints=rc.auto_host_endpoints,
                metrics=metrics,
            )
            out.append((node, rc.reconciler_period("node")))
        if kdd:
            return out  # the Kubernetes datastore synthesises the rest itself
        if "namespace" in rc.controllers:
            ctrl = ProfileController("namespace", client, cache, "kns.")
            out.append((ctrl, rc.reconciler_period("namespace")))
        if "serviceaccount" in rc.controllers:
            ctrl = ProfileController("serviceaccount", client, cache, "ksa.")
            out.append((ctrl, rc.reconciler_period("serviceaccount")))
        if "policy" in rc.controllers:
            out.append((PolicyController(client, cache), rc.reconciler_period("policy")))
        if "workloadendpoint" in rc.controllers:
            out.append(
                (PodController(calico_backend, cache), rc.reconciler_period("workloadendpoint"))
            )
        return out

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop.set())
        for name in (STARTUP, DATASTORE, APISERVER):
            self._report(name, False, "starting")
        if self.health_port:
            self.health_server.serve(True, "", self.health_port)
        try:
            calico_backend, kube_backend = self._open()
        except DatastoreConfigError as exc:
            log.error("Invalid datastore configuration: %s", exc)
            return 1
        client = Client(calico_backend)
        metrics_server = None
        cache = None
        services: ServiceCache | None = None
        try:
            if not self._ensure_initialized(client):
                return 0 if self.stop.is_set() else 1
            dtype = "kubernetes" if calico_backend is kube_backend else "etcdv3"
            watcher = RunConfigWatcher(client, self.env, dtype)
            try:
                rc = watcher.load()
            except (ConfigError, ValueError) as exc:
                log.error("Invalid kube-controllers configuration: %s", exc)
                return 1
            logging.getLogger().setLevel(parse_level(rc.log_level))
            log.info("Running with %s", rc)
            if not rc.health_enabled:
                self.health_server.serve(False)
            metrics = IPAMMetrics()
            if rc.metrics_port:
                try:
                    metrics_server = MetricsServer(metrics.registry, "", rc.metrics_port)
                    metrics_server.start()
                except OSError as exc:
                    log.error("Cannot serve metrics on port %d: %s", rc.metrics_port, exc)
            threading.Thread(
                target=self._health_loop, args=(client, kube_backend), daemon=True, name="health"
            ).start()
            cache = KubeCache(kube_backend)
            kdd = calico_backend is kube_backend
            controllers = self._build(rc, client, calico_backend, kdd, cache, metrics)
            cache.start()
            threading.Thread(
                target=self._controller_loop,
                args=(controllers, cache),
                daemon=True,
                name="controllers",
            ).start()
            if "loadbalancer" in rc.controllers:
                services = ServiceCache(kube_backend.rest)  # type: ignore[attr-defined]
                services.start()
                lb = LoadBalancerController(
                    IPAMClient(client),
                    services,
                    kube_backend.rest,  # type: ignore[attr-defined]
                    rc.assign_ips,
                )
                threading.Thread(
                    target=self._lb_loop,
                    args=(lb, services, rc.reconciler_period("loadbalancer")),
                    daemon=True,
                    name="loadbalancer",
                ).start()
            while not self.stop.wait(CONFIG_POLL):
                if watcher.changed(rc):
                    return RESTART_RETURN_CODE
            return 0
        finally:
            self.stop.set()
            if cache is not None:
                cache.stop()
            if services is not None:
                services.stop()
            if metrics_server is not None:
                metrics_server.stop()
            self.health_server.serve(False)
            calico_backend.close()
            if kube_backend is not calico_backend:
                kube_backend.close()


@click.command(
    "kube-controllers",
    help="Run kube-controllers: IPAM garbage collection and Kubernetes -> Calico sync.",
)
@click.option(
    "--status-file",
    default="/status/status.json",
    show_default=True,
    help="Where to write the readiness status JSON ('' = none).",
)
@click.option(
    "--health-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Serve /readiness and /liveness on this port (0 = off).",
)
def kube_controllers_command(status_file: str, health_port: int) -> None:
    configure_formatter("kube-controllers")
    level = os.environ.get("LOG_LEVEL", "info")
    try:
        logging.getLogger().setLevel(parse_level(level))
    except LogLevelError as exc:
        click.echo(f"Error: invalid LOG_LEVEL: {exc}", err=True)
        sys.exit(1)

    def inner() -> int:
        return KubeControllers(os.environ, status_file, health_port).run()

    code = wrap_self(INNER_ENV, inner)
    sys.stdout.flush()
    sys.exit(code)
