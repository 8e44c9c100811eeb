"""``calico component typha`` as a process: config from typha.cfg, health while the datastore is
unreachable, readiness once every cache is in sync, and a quick clean exit on SIGTERM."""

from __future__ import annotations

import time
from pathlib import Path

from typha_helpers import TyphaProcess, eventually, free_port


def test_config_file_health_and_sigterm(tmp_path: Path) -> None:
    port, health = free_port(), free_port()
    (tmp_path / "typha.cfg").write_text(
        f"[global]\nServerHost = 127.0.0.1\nServerPort = {port}\n"
        f"[health]\nHealthEnabled = true\nHealthPort = {health}\n"
    )
    typha = TyphaProcess(
        tmp_path, {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "c.db")}
    )
    # the file supplies the ports: drop the helper's own TYPHA_* choices for them
    for name in ("TYPHA_SERVERPORT", "TYPHA_HEALTHPORT", "TYPHA_HEALTHENABLED", "TYPHA_SERVERHOST"):
        typha.env.pop(name)
    typha.port, typha.health_port = port, health
    typha.start()
    try:
        typha.wait_ready()
        code, body = typha.http(health, "/readiness?detail=true")
        assert code == 200, body
        for name in ("felix-cache", "bgp-cache", "tunnel-ip-allocation-cache", "node-status-cache"):
            assert name in body
        assert "SyncServer" in body
        start = time.monotonic()
        assert typha.stop() == 0
        assert time.monotonic() - start < 5  # no connections: nothing to spread
        log = typha.log_path().read_text()
        assert "Graceful shutdown: 0 connection(s) to drop" in log
        assert "Server has shut down." in log
        assert "objects moved out of the collector's way" in log  # gc.freeze after the sync
    finally:
        typha.kill()


def test_unreachable_datastore_is_live_but_not_ready(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    typha = TyphaProcess(tmp_path, {"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": dead})
    typha.start()
    try:
        eventually(lambda: typha.http(typha.health_port, "/liveness")[0] == 200, timeout=20)
        time.sleep(2)
        assert typha.http(typha.health_port, "/liveness")[0] == 200
        code, _ = typha.http(typha.health_port, "/readiness")
        assert code == 503
    finally:
        typha.kill()


def test_metrics_use_upstreams_names(tmp_path: Path) -> None:
    typha = TyphaProcess(
        tmp_path, {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "c.db")}
    )
    typha.start()
    try:
        typha.wait_ready()
        text = typha.metrics()
        for name in (
            "typha_connections_accepted 0.0",
            "typha_connections_active 0.0",
            'typha_breadcrumb_seq_number{syncer="felix"}',
            'typha_cache_size{syncer="node-status"} 0.0',
            'typha_updates_total{syncer="bgp"}',
            'typha_snapshots_generated{syncer="tunnel-ip-allocation"} 0.0',
            "typha_ping_latency_count",
            "process_resident_memory_bytes",
        ):
            assert name in text, name
        assert "_total{" not in text.replace("typha_updates_total{", "")
    finally:
        typha.kill()


def test_sigterm_while_waiting_for_the_datastore_exits_cleanly(tmp_path: Path) -> None:
    # a datastore type the factory refuses: Typha keeps retrying the connection
    typha = TyphaProcess(tmp_path, {"DATASTORE_TYPE": "kubernetes"})
    typha.start()
    try:
        eventually(lambda: "Failed to connect to the datastore" in typha.log(), timeout=20)
        assert typha.stop(timeout=10) == 0
    finally:
        typha.kill()
