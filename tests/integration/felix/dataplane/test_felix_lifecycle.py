"""Felix's process lifecycle against the real kernel: drift repair, restarts (config change ->
exit 129, SIGTERM), established connections across a restart, datastore outage and the
datastore-ready flag. Each test runs its own Felix."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from felix_dp_fixtures import Cluster, cluster, need_root
from harness import (
    PersistentConnection,
    eventually,
    in_ns,
    nft_table,
    servers,
    tcp,
    workload,
)

pytestmark = pytest.mark.root

DENY_SERVER = {
    "kind": "NetworkPolicy",
    "metadata": {"name": "deny-server", "namespace": "ns1"},
    "spec": {"selector": "app == 'server'", "types": ["Ingress"]},
}


@pytest.fixture
def two_workloads(tmp_path: Path) -> Iterator[Cluster]:
    need_root()
    with (
        cluster(tmp_path) as c,
        workload(c.host, c.ds, "client", "10.65.0.1", labels={"app": "client"}) as w1,
        workload(c.host, c.ds, "server", "10.65.0.2", labels={"app": "server"}) as w2,
        workload(c.host, c.ds, "guarded", "10.65.0.3", labels={"app": "guarded"}) as w3,
        servers(w2, "tcp:8080", "tcp:7000"),
        servers(w3, "tcp:8080"),
    ):
        c.w.update(client=w1, server=w2, guarded=w3)
        eventually(lambda: tcp(w1, w2.ip, 8080), "ok")
        yield c


def _deny_guarded(c: Cluster) -> None:
    doc = {**DENY_SERVER, "spec": {"selector": "app == 'guarded'", "types": ["Ingress"]}}
    c.ds.apply(doc)
    eventually(lambda: tcp(c.w["client"], c.w["guarded"].ip, 8080), "timeout")


def test_deleted_table_is_repaired_within_refresh_interval(two_workloads: Cluster) -> None:
    c = two_workloads
    _deny_guarded(c)
    in_ns(c.host, "nft", "delete", "table", "inet", "calico")
    assert nft_table(c.host) == []
    start = time.monotonic()
    eventually(lambda: bool(nft_table(c.host)), True, timeout=10)
    assert time.monotonic() - start < 2 + 3  # NftablesRefreshInterval=2 plus slack
    assert tcp(c.w["client"], c.w["guarded"].ip, 8080) == "timeout"
    assert tcp(c.w["client"], c.w["server"].ip, 8080) == "ok"
    # A hand-deleted rule in one chain is also put back.
    chain = next(
        o["chain"]["name"]
        for o in nft_table(c.host)
        if "chain" in o and o["chain"]["name"].startswith("filter-cali-tw-")
    )
    in_ns(c.host, "nft", "flush", "chain", "inet", "calico", chain)
    eventually(
        lambda: any("rule" in o and o["rule"]["chain"] == chain for o in nft_table(c.host)),
        True,
        timeout=10,
    )


def test_config_change_exits_129_and_restart_keeps_connections(two_workloads: Cluster) -> None:
    c = two_workloads
    _deny_guarded(c)
    conn = PersistentConnection(c.w["client"], c.w["server"].ip, 7000)
    try:
        assert conn.echo("before") == "before"
        c.ds.apply(
            {
                "kind": "FelixConfiguration",
                "metadata": {"name": "default"},
                "spec": {"reportingTTL": "100s"},
            }
        )
        assert c.felix.wait_exit(timeout=15) == 129
        assert "configuration changed: ReportingTTLSecs" in c.felix.log()
        assert conn.echo("while-down") == "while-down"  # the table stays programmed
        c.felix.start()
        c.felix.wait_ready()
        assert conn.echo("after") == "after"
        assert tcp(c.w["client"], c.w["guarded"].ip, 8080) == "timeout"
        assert tcp(c.w["client"], c.w["server"].ip, 8080) == "ok"
        start = time.monotonic()
        assert c.felix.stop(timeout=10) == 0
        assert time.monotonic() - start < 10
        assert conn.echo("stopped") == "stopped"
    finally:
        conn.close()


def test_datastore_outage_keeps_dataplane_and_reports_not_ready(two_workloads: Cluster) -> None:
    c = two_workloads
    _deny_guarded(c)
    assert c.felix.stop() == 0
    before = nft_table(c.host)
    # Restart against an etcd that is not there: nothing may change, readiness must say so.
    c.felix.env.update(
        {"FELIX_DATASTORETYPE": "etcdv3", "FELIX_ETCDENDPOINTS": "http://127.0.0.1:1"}
    )
    c.felix.start()
    eventually(lambda: c.felix.get("/readiness")[0], 503)
    time.sleep(2.5)  # longer than the refresh interval a running dataplane would use
    code, body = c.felix.get("/readiness")
    assert code == 503 and "FelixStartup" in body
    assert c.felix.get("/liveness")[0] == 200
    assert nft_table(c.host) == before
    assert tcp(c.w["client"], c.w["guarded"].ip, 8080) == "timeout"
    assert tcp(c.w["client"], c.w["server"].ip, 8080) == "ok"
    assert c.felix.stop(timeout=10) == 0


def test_waits_while_datastore_not_ready(two_workloads: Cluster) -> None:
    c = two_workloads
    cinfo = c.ds.client.get("ClusterInformation", "default")
    spec = cinfo.spec.model_dump(by_alias=True, exclude_none=True)
    doc = {"kind": "ClusterInformation", "metadata": {"name": "default"}}
    # At run time, datastoreReady=false stops Felix for its supervisor to restart it...
    c.ds.apply({**doc, "spec": {**spec, "datastoreReady": False}})
    assert c.felix.wait_exit(timeout=15) == 129
    # ... and the new Felix waits, not ready, without touching the dataplane.
    c.felix.start()
    eventually(lambda: c.felix.get("/readiness")[0], 503)
    time.sleep(1.0)
    assert c.felix.proc is not None and c.felix.proc.poll() is None
    c.ds.apply({**doc, "spec": {**spec, "datastoreReady": True}})
    c.felix.wait_ready()
    assert tcp(c.w["client"], c.w["server"].ip, 8080) == "ok"


def test_removed_workload_loses_route_and_status(two_workloads: Cluster) -> None:
    c = two_workloads
    w = c.w["guarded"]
    status = c.workdir / "endpoint-status" / f"k8s ns1%2F{w.name} eth0"
    eventually(status.exists, True)
    c.ds.delete("WorkloadEndpoint", w.wep_name, "ns1")
    eventually(status.exists, False)
    routes = lambda: w.ip in in_ns(c.host, "ip", "route").stdout  # noqa: E731
    eventually(routes, False, timeout=20)  # after the stale-route grace period
