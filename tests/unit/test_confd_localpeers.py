"""Endpoint status files -> local workload BGP peers (calico.confd.localpeers), and the
peerings they become (design/confd.md "Local workload peers")."""

from __future__ import annotations

import ipaddress
import json
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.api.io import load_documents
from calico.confd import keyspace
from calico.confd.localpeers import (
    LocalWorkload,
    StatusDir,
    StatusDirWatcher,
    parse_status,
    status_dir,
)
from calico.confd.state import state_from_resources

NODE = "kube-master"


def test_status_dir_from_env() -> None:
    assert status_dir({}) == Path("/var/run/calico/endpoint-status")
    assert status_dir({"CALICO_ENDPOINT_STATUS_PATH_PREFIX": "/x/y"}) == Path(
        "/x/y/endpoint-status"
    )
    assert status_dir({"CALICO_ENDPOINT_STATUS_PATH_PREFIX": " "}) == Path(
        "/var/run/calico/endpoint-status"
    )


@pytest.mark.parametrize(
    ("doc", "want"),
    [
        ({"ipv4Nets": ["10.0.0.1/32"], "bgpPeerName": "p"}, ("p", "10.0.0.1", "")),
        ({"ipv6Nets": ["fd00::1/128"], "bgpPeerName": "p"}, ("p", "", "fd00::1")),
        (
            {
                "ipv4Nets": ["10.0.0.1/32", "10.0.0.2/32"],
                "ipv6Nets": ["fd00::1/128"],
                "bgpPeerName": "p",
            },
            ("p", "10.0.0.1", "fd00::1"),
        ),
        ({"ipv4Nets": ["10.0.0.1/32"]}, None),  # not matched to any BGPPeer
        ({"ipv4Nets": ["10.0.0.1/32"], "bgpPeerName": ""}, None),
        ({"bgpPeerName": "p"}, None),  # no address yet
        ({"ipv4Nets": [], "ipv6Nets": [], "bgpPeerName": "p"}, None),
        ({"ipv4Nets": ["bogus"], "ipv6Nets": ["fd00::1/128"], "bgpPeerName": "p"}, None),
        ({"ipv4Nets": ["fd00::1/128"], "bgpPeerName": "p"}, None),  # wrong family
        ([1, 2], None),
    ],
)
def test_parse_status(doc: object, want: tuple[str, str, str] | None) -> None:
    got = parse_status("f", json.dumps(doc))
    assert (None if got is None else (got.bgp_peer_name, got.ipv4, got.ipv6)) == want


def test_parse_status_rejects_non_json_and_accepts_empty() -> None:
    assert parse_status("f", "{not json") is None
    assert parse_status("f", "") is None


@settings(deadline=None)  # a loaded CI machine must not turn slowness into a failure
@given(
    v4=st.lists(st.ip_addresses(v=4), max_size=3),
    v6=st.lists(st.ip_addresses(v=6), max_size=3),
    name=st.text(min_size=1, max_size=20),
)
def test_parse_status_takes_the_first_address_of_each_family(
    v4: list[ipaddress.IPv4Address], v6: list[ipaddress.IPv6Address], name: str
) -> None:
    doc = {
        "ifaceName": "cali1",
        "ipv4Nets": [f"{a}/32" for a in v4],
        "ipv6Nets": [f"{a}/128" for a in v6],
        "bgpPeerName": name,
    }
    got = parse_status("f", json.dumps(doc))
    if not v4 and not v6:
        assert got is None
    else:
        assert got == LocalWorkload("f", name, str(v4[0]) if v4 else "", str(v6[0]) if v6 else "")


def _write(d: Path, name: str, doc: dict) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(json.dumps(doc))


def test_status_dir_scan_tracks_creates_updates_deletes(tmp_path: Path) -> None:
    d = tmp_path / "endpoint-status"
    sd = StatusDir(d)
    assert sd.scan() is False and sd.active() == []  # no directory yet: nothing
    _write(d, "k8s a eth0", {"ipv4Nets": ["10.0.0.1/32"], "bgpPeerName": "p"})
    _write(d, "k8s b eth0", {"ipv4Nets": ["10.0.0.2/32"]})
    _write(d, ".tmp.x", {"ipv4Nets": ["10.0.0.3/32"], "bgpPeerName": "p"})
    (d / "subdir").mkdir()
    assert sd.scan() is True
    assert [w.ipv4 for w in sd.active()] == ["10.0.0.1"]
    assert sd.scan() is False  # nothing changed
    # b becomes a local peer; a's content changes (new address).
    _write(d, "k8s b eth0", {"ipv4Nets": ["10.0.0.2/32"], "bgpPeerName": "q"})
    _write(d, "k8s a eth0", {"ipv4Nets": ["10.0.0.11/32"], "bgpPeerName": "p"})
    assert sd.scan() is True
    assert [(w.name, w.bgp_peer_name, w.ipv4) for w in sd.active()] == [
        ("k8s a eth0", "p", "10.0.0.11"),
        ("k8s b eth0", "q", "10.0.0.2"),
    ]
    # A change that leaves the set of peers as it was is not a change.
    _write(
        d, "k8s a eth0", {"ifaceName": "cali9", "ipv4Nets": ["10.0.0.11/32"], "bgpPeerName": "p"}
    )
    assert sd.scan() is False
    (d / "k8s a eth0").unlink()
    assert sd.scan() is True
    assert [w.name for w in sd.active()] == ["k8s b eth0"]


def test_unchanged_files_are_not_reread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "endpoint-status"
    _write(d, "k8s a eth0", {"ipv4Nets": ["10.0.0.1/32"], "bgpPeerName": "p"})
    sd = StatusDir(d)
    sd.scan()
    reads: list[str] = []
    real = Path.read_text

    def counting(self: Path, *a: object, **kw: object) -> str:
        reads.append(self.name)
        return real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counting)
    sd.scan()
    assert reads == []
    st_ = os.stat(d / "k8s a eth0")
    os.utime(d / "k8s a eth0", ns=(st_.st_atime_ns, st_.st_mtime_ns + 1_000_000))
    sd.scan()
    assert reads == ["k8s a eth0"]


def test_watcher_reports_changes(tmp_path: Path) -> None:
    d = tmp_path / "endpoint-status"
    _write(d, "k8s a eth0", {"ipv4Nets": ["10.0.0.1/32"], "bgpPeerName": "p"})
    changed = threading.Event()
    w = StatusDirWatcher(StatusDir(d), changed.set, interval=0.05)
    w.start()
    try:
        assert [x.ipv4 for x in w.active()] == ["10.0.0.1"]  # scanned before start returns
        _write(d, "k8s b eth0", {"ipv4Nets": ["10.0.0.2/32"], "bgpPeerName": "p"})
        assert changed.wait(10)
        assert [x.ipv4 for x in w.active()] == ["10.0.0.1", "10.0.0.2"]
    finally:
        w.stop()


PEERS = """
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: kube-master}
spec: {bgp: {ipv4Address: 10.192.0.2/16}}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: kube-node-1}
spec: {bgp: {ipv4Address: 10.192.0.3/16}}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: lw}
spec:
  localWorkloadSelector: all()
  asNumber: 65001
  password: {secretKeyRef: {name: s, key: k}}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: lw-node1}
spec: {localWorkloadSelector: all(), node: kube-node-1, asNumber: 65002}
"""


def test_local_workload_peerings_in_the_key_space() -> None:
    state = state_from_resources(load_documents(PEERS), NODE)
    workloads = [
        LocalWorkload("a", "lw", "10.9.0.1", "fd00::1"),
        LocalWorkload("b", "lw-node1", "10.9.0.2", ""),
        LocalWorkload("c", "gone", "10.9.0.3", ""),
    ]
    ks = keyspace.build(state, NODE, {}, lambda name, key: f"{name}/{key}", workloads)
    peer = json.loads(ks["/calico/bgp/v1/global/peer_v4/10.9.0.1"])
    assert {k: peer[k] for k in ("as_num", "passive_mode", "local_bgp_peer", "source_addr")} == {
        "as_num": "65001",
        "passive_mode": True,
        "local_bgp_peer": True,
        "source_addr": "None",
    }
    assert peer["password"] == "s/k" and peer["calico_node"] is False
    assert "/calico/bgp/v1/global/peer_v6/fd00::1" in ks
    # lw-node1 is kube-node-1's: keyed under that host, so kube-master renders nothing for it.
    assert "/calico/bgp/v1/host/kube-node-1/peer_v4/10.9.0.2" in ks
    assert not any("10.9.0.3" in k for k in ks)
    # Local workload peers are never reversed: no node gets a peering back to them.
    assert not any(k.startswith("/calico/bgp/v1/host/kube-master/peer") for k in ks)
