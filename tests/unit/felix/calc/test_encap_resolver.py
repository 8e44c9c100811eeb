"""EncapsulationResolver scenarios: IP pools through the real processor, status via the
TypeFanout's status fan-out."""

from __future__ import annotations

from recording_callbacks import RecordingCallbacks, feed

from calico.felix.calc.encap_resolver import EncapsulationResolver
from calico.felix.calc.fanout import TypeFanout
from calico.felix.messages import Encapsulation
from calico.syncer.api import SyncStatus


def pool(name: str, cidr: str, ipip: str = "Never", vxlan: str = "Never") -> str:
    return f"""
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {{name: {name}}}
spec: {{cidr: "{cidr}", ipipMode: {ipip}, vxlanMode: {vxlan}}}
"""


def make(**overrides: bool | None) -> tuple[TypeFanout, RecordingCallbacks]:
    rec = RecordingCallbacks()
    fanout = TypeFanout()
    EncapsulationResolver(rec, **overrides).register(fanout)
    return fanout, rec


def test_nothing_before_in_sync_then_one_update() -> None:
    fanout, rec = make()
    fanout.on_status(SyncStatus.RESYNC_IN_PROGRESS)
    feed(fanout, pool("a", "10.0.0.0/16", ipip="Always"))
    assert rec.take() == []
    fanout.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == [("on_encap_update", Encapsulation(ipip_enabled=True))]
    fanout.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == []


def test_empty_datastore_sends_all_off_at_in_sync() -> None:
    fanout, rec = make()
    fanout.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == [("on_encap_update", Encapsulation())]


def test_pool_changes_after_in_sync() -> None:
    fanout, rec = make()
    fanout.on_status(SyncStatus.IN_SYNC)
    rec.take()
    feed(fanout, pool("a", "10.0.0.0/16", vxlan="CrossSubnet"))
    assert rec.take() == [("on_encap_update", Encapsulation(vxlan_enabled=True))]
    feed(fanout, pool("b", "10.1.0.0/16", vxlan="Always"))  # no change in result
    assert rec.take() == []
    feed(fanout, pool("v6", "fd00::/64", vxlan="Always"))
    assert rec.take() == [
        ("on_encap_update", Encapsulation(vxlan_enabled=True, vxlan_enabled_v6=True))
    ]
    feed(fanout, pool("a", "10.0.0.0/16", vxlan="CrossSubnet"), delete=True)
    feed(fanout, pool("b", "10.1.0.0/16"))  # switched to no encap
    assert rec.take() == [("on_encap_update", Encapsulation(vxlan_enabled_v6=True))]


def test_updating_a_pool_replaces_its_old_mode() -> None:
    fanout, rec = make()
    fanout.on_status(SyncStatus.IN_SYNC)
    feed(fanout, pool("a", "10.0.0.0/16", ipip="Always"))
    feed(fanout, pool("a", "10.0.0.0/16", vxlan="Always"))
    assert rec.take()[1:] == [
        ("on_encap_update", Encapsulation(ipip_enabled=True)),
        ("on_encap_update", Encapsulation(vxlan_enabled=True)),
    ]


def test_config_overrides_win_over_pools() -> None:
    fanout, rec = make(ipip_enabled=False, vxlan_enabled=True)
    feed(fanout, pool("a", "10.0.0.0/16", ipip="Always"))
    fanout.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == [("on_encap_update", Encapsulation(vxlan_enabled=True))]
