"""ConfigBatcher scenarios: FelixConfiguration / ClusterInformation / Node through the real
processors, so parameter names and value rendering are the processors'."""

from __future__ import annotations

import pytest
from recording_callbacks import RecordingCallbacks, feed

from calico.felix.calc.config_batcher import ConfigBatcher
from calico.felix.calc.fanout import TypeFanout
from calico.syncer.api import SyncStatus

BASE = """
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: default}
spec: {logSeverityScreen: Info, reportingInterval: 30s}
---
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: node.node1}
spec: {logSeverityScreen: Debug}
---
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: node.node2}
spec: {logSeverityScreen: Warning}
---
apiVersion: projectcalico.org/v3
kind: ClusterInformation
metadata: {name: default}
spec: {clusterGUID: abc, datastoreReady: true}
"""
GLOBAL = {"LogSeverityScreen": "Info", "ReportingIntervalSecs": "30", "ClusterGUID": "abc"}
HOST = {"LogSeverityScreen": "Debug"}


def scoped(name: str, selector: str, created: str, **params: str) -> str:
    spec = ", ".join([f'nodeSelector: "{selector}"', *(f"{k}: {v}" for k, v in params.items())])
    return f"""
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {{name: {name}, creationTimestamp: "{created}"}}
spec: {{{spec}}}
"""


def node(labels: str) -> str:
    return f"""
apiVersion: projectcalico.org/v3
kind: Node
metadata: {{name: node1, labels: {{{labels}}}}}
spec: {{ipv4VXLANTunnelAddr: 10.0.1.0}}
"""


def ready(flag: str) -> str:
    return f"""
apiVersion: projectcalico.org/v3
kind: ClusterInformation
metadata: {{name: default}}
spec: {{clusterGUID: abc, datastoreReady: {flag}}}
"""


@pytest.fixture
def setup() -> tuple[TypeFanout, RecordingCallbacks]:
    rec = RecordingCallbacks()
    fanout = TypeFanout()
    ConfigBatcher(rec, "node1").register(fanout)
    return fanout, rec


def test_buffers_until_in_sync(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    fanout.on_status(SyncStatus.RESYNC_IN_PROGRESS)
    feed(fanout, BASE)
    assert rec.take() == []
    fanout.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == [("on_config_update", GLOBAL, {}, HOST)]
    fanout.on_status(SyncStatus.IN_SYNC)
    feed(fanout, BASE)  # no-op
    assert rec.take() == []


def test_changes_after_in_sync(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, BASE)
    fanout.on_status(SyncStatus.IN_SYNC)
    rec.take()
    feed(fanout, node("zone: a"))  # the Node's tunnel address is host config too
    assert rec.take() == [
        ("on_config_update", GLOBAL, {}, {**HOST, "IPv4VXLANTunnelAddr": "10.0.1.0"})
    ]
    feed(fanout, BASE.split("---")[1], delete=True)
    assert rec.take() == [("on_config_update", GLOBAL, {}, {"IPv4VXLANTunnelAddr": "10.0.1.0"})]
    feed(fanout, BASE.split("---")[2], delete=True)  # another host's config
    assert rec.take() == []


def test_selector_scoped_configs(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    fanout.on_status(SyncStatus.IN_SYNC)
    rec.take()
    old = scoped("old", "zone == 'a'", "2024-01-01T00:00:00Z", logSeverityScreen="Error")
    new = scoped("new", "zone == 'a'", "2025-01-01T00:00:00Z", logSeverityScreen="Debug")
    other = scoped("other", "zone == 'b'", "2023-01-01T00:00:00Z", logSeverityScreen="Fatal")
    feed(fanout, new + "---" + old + "---" + other)
    assert rec.take() == []  # no Node labels known yet: nothing matches, nothing changed
    host = {"IPv4VXLANTunnelAddr": "10.0.1.0"}
    feed(fanout, node("zone: a"))
    # One emission per dispatched key: the tunnel-address host key, then the labels.
    assert rec.take() == [
        ("on_config_update", {}, {}, host),
        ("on_config_update", {}, {"LogSeverityScreen": "Error"}, host),
    ]
    feed(fanout, old, delete=True)
    assert rec.take() == [("on_config_update", {}, {"LogSeverityScreen": "Debug"}, host)]
    feed(fanout, node("zone: b"))
    assert rec.take() == [("on_config_update", {}, {"LogSeverityScreen": "Fatal"}, host)]
    feed(fanout, new, delete=True)  # does not match this node: no change
    assert rec.take() == []


def test_datastore_not_ready(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, ready("false"))
    fanout.on_status(SyncStatus.IN_SYNC)
    cfg = ("on_config_update", {"ClusterGUID": "abc"}, {}, {})
    assert rec.take() == [("on_datastore_not_ready",), cfg]
    feed(fanout, ready("true"))  # recorded, but emits nothing by itself
    assert rec.take() == []
    feed(fanout, ready("false"))
    assert rec.take() == [("on_datastore_not_ready",), cfg]
    feed(fanout, ready("false"), delete=True)
    assert rec.take() == [("on_datastore_not_ready",), ("on_config_update", {}, {}, {})]
