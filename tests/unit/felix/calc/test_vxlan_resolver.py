"""VXLANResolver scenarios: Node resources through the real Node processor, which emits the
tunnel-address HostConfigKeys before the Node itself."""

from __future__ import annotations

import hashlib

import pytest
from recording_callbacks import RecordingCallbacks, feed

from calico.felix.calc.fanout import TypeFanout
from calico.felix.calc.vxlan_resolver import VXLANResolver, default_vtep_mac
from calico.felix.messages import VXLANTunnelEndpointUpdate as VTEP
from calico.model import HostConfigKey


def node(
    name: str, ip: str, tunnel: str = "", mac: str = "", v6: str = "", tunnel6: str = ""
) -> str:
    spec = [f"bgp: {{ipv4Address: {ip}/24{', ipv6Address: ' + repr(v6 + '/64') if v6 else ''}}}"]
    if tunnel:
        spec.append(f"ipv4VXLANTunnelAddr: {tunnel}")
    if mac:
        spec.append(f'vxlanTunnelMACAddr: "{mac}"')
    if tunnel6:
        spec.append(f'ipv6VXLANTunnelAddr: "{tunnel6}"')
    body = "\n".join("  " + s for s in spec)
    return f"""
apiVersion: projectcalico.org/v3
kind: Node
metadata: {{name: {name}}}
spec:
{body}
"""


@pytest.fixture
def setup() -> tuple[TypeFanout, RecordingCallbacks]:
    rec = RecordingCallbacks()
    fanout = TypeFanout()
    VXLANResolver(rec, "node1").register(fanout)
    return fanout, rec


def test_default_mac_is_f_plus_sha1_prefix() -> None:
    digest = hashlib.sha1(b"node2").digest()
    assert default_vtep_mac("node2") == "66:" + ":".join(f"{b:02x}" for b in digest[:5])
    assert default_vtep_mac("node2", 6) != default_vtep_mac("node2", 4)


def test_vtep_sent_once_complete(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, node("node2", "192.168.0.2", "10.0.2.0", "AA:BB:CC:DD:EE:FF"))
    vtep = VTEP(
        "node2", mac="aa:bb:cc:dd:ee:ff", ipv4_addr="10.0.2.0", parent_device_ip="192.168.0.2"
    )
    assert rec.take() == [("on_vtep_update", vtep)]
    feed(fanout, node("node2", "192.168.0.2", "10.0.2.0", "AA:BB:CC:DD:EE:FF"))
    assert rec.take() == []


def test_no_vtep_without_tunnel_address(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, node("node2", "192.168.0.2"))
    assert rec.take() == []
    feed(fanout, node("node2", "192.168.0.2", "10.0.2.0"))
    vtep = VTEP("node2", default_vtep_mac("node2"), "10.0.2.0", "192.168.0.2")
    assert rec.take() == [("on_vtep_update", vtep)]


def test_changed_vtep_is_remove_then_add(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, node("node2", "192.168.0.2", "10.0.2.0"))
    rec.take()
    feed(fanout, node("node2", "192.168.0.2", "10.0.2.1"))
    vtep = VTEP("node2", default_vtep_mac("node2"), "10.0.2.1", "192.168.0.2")
    assert rec.take() == [("on_vtep_remove", "node2"), ("on_vtep_update", vtep)]
    feed(fanout, node("node2", "192.168.0.9", "10.0.2.1"))
    vtep = VTEP("node2", default_vtep_mac("node2"), "10.0.2.1", "192.168.0.9")
    assert rec.take() == [("on_vtep_remove", "node2"), ("on_vtep_update", vtep)]


def test_node_delete_removes_vtep_once(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    text = node("node2", "192.168.0.2", "10.0.2.0", "aa:bb:cc:dd:ee:ff")
    feed(fanout, text)
    rec.take()
    feed(fanout, text, delete=True)
    assert rec.take() == [("on_vtep_remove", "node2")]
    feed(fanout, text)
    assert [c[0] for c in rec.take()] == ["on_vtep_update"]


def test_dual_stack_and_v6_only(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, node("node3", "192.168.0.3", "10.0.3.0", v6="fd00::3", tunnel6="fd00:3::"))
    vtep = VTEP(
        "node3",
        mac=default_vtep_mac("node3"),
        ipv4_addr="10.0.3.0",
        parent_device_ip="192.168.0.3",
        mac_v6=default_vtep_mac("node3", 6),
        ipv6_addr="fd00:3::",
        parent_device_ipv6="fd00::3",
    )
    assert rec.take() == [("on_vtep_update", vtep)]
    # The syncer turns "the Node lost its v4 tunnel address" into a delete of that key.
    fanout.on_update(HostConfigKey("node3", "IPv4VXLANTunnelAddr"), None)
    v6_only = VTEP(
        "node3",
        mac_v6=default_vtep_mac("node3", 6),
        ipv6_addr="fd00:3::",
        parent_device_ipv6="fd00::3",
    )
    assert rec.take() == [("on_vtep_remove", "node3"), ("on_vtep_update", v6_only)]


def test_local_host_vtep_also_sent(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, node("node1", "192.168.0.1", "10.0.1.0"))
    assert [c[0] for c in rec.take()] == ["on_vtep_update"]
