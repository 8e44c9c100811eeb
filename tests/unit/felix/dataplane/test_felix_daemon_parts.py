"""Daemon wiring pieces that need no kernel: the config connector (restart decisions), the
start-up datastore config loader, and metric names as exposed."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from calico.api.io import parse_resource
from calico.datastore.client import Client
from calico.datastore.config import DatastoreConfig
from calico.datastore.factory import open_backend
from calico.felix.config import resolve
from calico.felix.config.sources import Source
from calico.felix.daemon import ConfigConnector, FelixDaemon
from calico.felix.dataplane.metrics import FelixMetrics
from calico.felix.messages import ConfigUpdate, DatastoreNotReady, InSync
from calico.felix.startup_config import load_datastore_config


def _connector(**env: str) -> tuple[ConfigConnector, list[object], list[str]]:
    config = resolve({Source.ENVIRONMENT: env}, hostname="h1")
    forwarded: list[object] = []
    restarts: list[str] = []
    return ConfigConnector(config, forwarded.extend, restarts.append), forwarded, restarts


def test_unchanged_or_hot_config_does_not_restart() -> None:
    conn, forwarded, restarts = _connector(LogSeverityScreen="Info")
    conn([ConfigUpdate({"LogSeverityScreen": "Debug"}), InSync()])  # env wins: no change
    conn([ConfigUpdate({"HealthTimeoutOverrides": "CalculationGraph=60s"})])
    assert restarts == [] and len(forwarded) == 3


def test_changed_config_or_not_ready_requests_one_restart_and_stops_forwarding() -> None:
    conn, forwarded, restarts = _connector()
    conn([ConfigUpdate({"RouteRefreshInterval": "30"}), InSync()])
    assert restarts == ["configuration changed: RouteRefreshInterval"] and forwarded == []
    conn([DatastoreNotReady()])
    assert len(restarts) == 1
    conn2, _, restarts2 = _connector()
    conn2([DatastoreNotReady()])
    assert restarts2 and "not ready" in restarts2[0]


def test_the_dataplanes_idle_point_collects_then_asks_for_policies_to_prepare() -> None:
    """The dataplane's on_idle: garbage collection (calico.felix.idle_gc), then a request
    for inactive policies to prepare once the calc graph exists (PolicyPrepare)."""
    order: list[str] = []

    class Collector:
        def collect_if_due(self) -> None:
            order.append("collect")

    class Calc:
        def request_prepare(self) -> None:
            order.append("prepare")

    daemon = FelixDaemon()
    daemon.idle_gc = Collector()  # type: ignore[assignment]
    daemon._on_dataplane_idle()  # no pipeline yet
    daemon._calc = Calc()
    daemon._on_dataplane_idle()
    assert order == ["collect", "collect", "prepare"]


def test_startup_config_matches_what_the_calc_graph_sends(tmp_path: Path) -> None:
    backend = open_backend(DatastoreConfig(local_path=str(tmp_path / "c.db")))
    client = Client(backend)
    for name, spec in (
        ("default", {"routeRefreshInterval": "30s", "logSeverityScreen": "Warning"}),
        ("node.h1", {"logSeverityScreen": "Debug"}),
        ("node.other", {"logSeverityScreen": "Error"}),
    ):
        doc = {
            "apiVersion": "projectcalico.org/v3",
            "kind": "FelixConfiguration",
            "metadata": {"name": name},
            "spec": spec,
        }
        client.apply(parse_resource(doc))
    loaded = load_datastore_config(backend, "h1")
    assert loaded.ready
    assert loaded.global_config["RouteRefreshInterval"] == "30"
    assert loaded.host_config == {"LogSeverityScreen": "Debug"}
    config = resolve({}, hostname="h1").with_datastore(
        loaded.global_config, loaded.selector_config, loaded.host_config
    )
    assert config.route_refresh_interval == 30 and config.log_severity_screen == "DEBUG"
    backend.close()


def test_metric_names_are_upstreams() -> None:
    m = FelixMetrics()
    m.messages.inc(1, "InSync")
    m.resyncs_started.inc()
    text = generate_latest(m.registry).decode()
    assert 'felix_int_dataplane_messages{type="InSync"} 1.0' in text
    assert "\nfelix_resyncs_started 1.0" in text
    assert "_total" not in text
    for name in ("felix_int_dataplane_apply_time_seconds_count", "felix_cluster_num_hosts"):
        assert name in text


def test_metrics_only_when_enabled() -> None:
    from calico.felix.daemon import FelixDaemon

    daemon = FelixDaemon("/nonexistent/felix.cfg")
    off = resolve({Source.ENVIRONMENT: {}}, hostname="h1")
    assert not off.prometheus_metrics_enabled  # the default
    assert daemon._start_metrics(off) is None
    assert daemon._owned == []
    on = resolve(
        {
            Source.ENVIRONMENT: {
                "PrometheusMetricsEnabled": "true",
                "PrometheusMetricsHost": "127.0.0.1",
                "PrometheusMetricsPort": "0",
            }
        },
        hostname="h1",
    )
    metrics = daemon._start_metrics(on)
    try:
        assert isinstance(metrics, FelixMetrics)
        assert [name for name, _ in daemon._owned] == ["metrics server"]
        metrics.cluster_stats().on_resync_started()
        assert metrics.resyncs_started.value() == 1.0
    finally:
        daemon._shutdown()


def test_felix_modules_import_no_http_stack() -> None:
    """What a Felix start with metrics off imports (daemon, dataplane, calc graph, health)
    pulls in neither prometheus_client nor http.server's chain, nor subprocess (BPF mode's
    tc calls) or configparser (a felix.cfg that exists)."""
    import subprocess
    import sys

    code = (
        "import sys, calico.felix.daemon, calico.felix.dataplane.build, "
        "calico.felix.calc.calc_graph, calico.health.server\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('prometheus_client', 'email', 'ssl', 'socketserver', 'wsgiref') "
        "or m in ('http.server', 'http.client', 'subprocess', 'configparser'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


#: Kinds Felix never reads, in modules of their own (design/performance.md "Cold start: the
#: kinds Felix never reads").
NOT_FELIX = (
    "calico.api.kubecontrollers",
    "calico.api.migration",
    "calico.api.nodestatus",
    "calico.api.ipamalloc",
    "calico.model.processors.affinity",
)
NOT_FELIX_KINDS = (
    "KubeControllersConfiguration",
    "DatastoreMigration",
    "CalicoNodeStatus",
    "IPReservation",
    "IPAMConfiguration",
    "IPAMHandle",
    "BlockAffinity",
)

FELIX_KINDS = """
from calico.model.resources import ResourceKey
import calico.model.processors as p
meta = {"name": "n1", "resourceVersion": "1"}
docs = {
    "Node": {"spec": {"bgp": {"ipv4Address": "10.0.0.1/24"}}},
    "ClusterInformation": {"spec": {"datastoreReady": True}},
    "IPPool": {"spec": {"cidr": "10.65.0.0/16"}},
    "IPAMBlock": {"spec": {"cidr": "10.65.0.0/30", "allocations": [None] * 4,
                           "unallocated": [0, 1, 2, 3], "attributes": []}},
    "FelixConfiguration": {"spec": {"logSeverityScreen": "Info"}},
}
for kind, doc in docs.items():
    name = "default" if kind in ("ClusterInformation", "FelixConfiguration") else "n1"
    p.process(ResourceKey(kind, name), {"metadata": {**meta, "name": name}, **doc})
"""


def test_felix_start_defines_none_of_the_kinds_it_never_reads() -> None:
    """Felix's start-up modules, and converting the cluster and IPAM kinds Felix reads (Node,
    ClusterInformation, IPPool, IPAMBlock, FelixConfiguration), import none of the modules that
    hold KubeControllersConfiguration, DatastoreMigration, CalicoNodeStatus, IPReservation,
    IPAMConfiguration, IPAMHandle or BlockAffinity."""
    import subprocess
    import sys

    code = (
        "import sys, calico.felix.daemon, calico.felix.startup_config, "
        "calico.felix.dataplane.build, calico.felix.calc.calc_graph, calico.felix.status, "
        "calico.syncer.definitions, calico.health.server, calico.felix.bpf.off, "
        "calico.api.cluster, calico.api.ipam, calico.api.felixconfig\n"
        + FELIX_KINDS
        + f"print(','.join(sorted(m for m in {NOT_FELIX!r} if m in sys.modules)))\n"
        "from calico.api.base import Resource\n"
        "subs = lambda c: [c, *(d for s in c.__subclasses__() for d in subs(s))]\n"
        "print(','.join(sorted(c.KIND for c in subs(Resource) if c.KIND in "
        f"{NOT_FELIX_KINDS!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["", ""], out.stdout
