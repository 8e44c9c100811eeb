"""EncapsulationResolver scenarios: IP pools through the real processor, status via the
Dispatcher's status fan-out."""

from __future__ import annotations

from recording_callbacks import RecordingCallbacks, feed

from calico.felix.calc.dispatcher import Dispatcher
from calico.felix.calc.encap_resolver import EncapsulationResolver
from calico.felix.messages import Encapsulation
from calico.syncer.api import SyncStatus


def pool(name: str, cidr: str, ipip: str = "Never", vxlan: str = "Never") -> str:
    return f"""
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {{name: {name}}}
spec: {{cidr: "{cidr}", ipipMode: {ipip}, vxlanMode: {vxlan}}}
"""


def make(**overrides: bool | None) -> tuple[Dispatcher, RecordingCallbacks]:
    rec = RecordingCallbacks()
    dispatcher = Dispatcher()
    EncapsulationResolver(rec, **overrides).register(dispatcher)
    return dispatcher, rec


def test_nothing_before_in_sync_then_one_update() -> None:
    dispatcher, rec = make()
    dispatcher.on_status(SyncStatus.RESYNC_IN_PROGRESS)
    feed(dispatcher, pool("a", "10.0.0.0/16", ipip="Always"))
    assert rec.take() == []
    dispatcher.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == [("on_encap_update", Encapsulation(ipip_enabled=True))]
    dispatcher.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == []


def test_empty_datastore_sends_all_off_at_in_sync() -> None:
    dispatcher, rec = make()
    dispatcher.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == [("on_encap_update", Encapsulation())]


def test_pool_changes_after_in_sync() -> None:
    dispatcher, rec = make()
    dispatcher.on_status(SyncStatus.IN_SYNC)
    rec.take()
    feed(dispatcher, pool("a", "10.0.0.0/16", vxlan="CrossSubnet"))
    assert rec.take() == [("on_encap_update", Encapsulation(vxlan_enabled=True))]
    feed(dispatcher, pool("b", "10.1.0.0/16", vxlan="Always"))  # no change in result
    assert rec.take() == []
    feed(dispatcher, pool("v6", "fd00::/64", vxlan="Always"))
    assert rec.take() == [
        ("on_encap_update", Encapsulation(vxlan_enabled=True, vxlan_enabled_v6=True))
    ]
    feed(dispatcher, pool("a", "10.0.0.0/16", vxlan="CrossSubnet"), delete=True)
    feed(dispatcher, pool("b", "10.1.0.0/16"))  # switched to no encap
    assert rec.take() == [("on_encap_update", Encapsulation(vxlan_enabled_v6=True))]


def test_updating_a_pool_replaces_its_old_mode() -> None:
    dispatcher, rec = make()
    dispatcher.on_status(SyncStatus.IN_SYNC)
    feed(dispatcher, pool("a", "10.0.0.0/16", ipip="Always"))
    feed(dispatcher, pool("a", "10.0.0.0/16", vxlan="Always"))
    assert rec.take()[1:] == [
        ("on_encap_update", Encapsulation(ipip_enabled=True)),
        ("on_encap_update", Encapsulation(vxlan_enabled=True)),
    ]


def test_config_overrides_win_over_pools() -> None:
    dispatcher, rec = make(ipip_enabled=False, vxlan_enabled=True)
    feed(dispatcher, pool("a", "10.0.0.0/16", ipip="Always"))
    dispatcher.on_status(SyncStatus.IN_SYNC)
    assert rec.take() == [("on_encap_update", Encapsulation(vxlan_enabled=True))]
