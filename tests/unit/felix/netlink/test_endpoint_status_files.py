"""Endpoint status file naming, content and reconciliation (on a temp directory)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from calico.felix.dataplane.endpoint_status import (
    EndpointStatusContent,
    EndpointStatusFileReporter,
    EndpointStatusFiles,
    parse_status_filename,
    status_filename,
)
from calico.felix.messages import WorkloadEndpoint, WorkloadEndpointID

WEP = WorkloadEndpointID("k8s", "default/nginx-1", "eth0")


@pytest.mark.parametrize(
    ("wep", "name"),
    [
        (WEP, "k8s default%2Fnginx-1 eth0"),
        (WorkloadEndpointID("cni", "a b", "x~y.z_1"), "cni a%20b x~y.z_1"),
        (WorkloadEndpointID("k8s", "ns/p$&+:=@", "e,;?#"), "k8s ns%2Fp$&+:=@ e%2C%3B%3F%23"),
        (WorkloadEndpointID("k8s", "ns/pöd", "eth0"), "k8s ns%2Fp%C3%B6d eth0"),
    ],
)
def test_filename_escaping_round_trips(wep: WorkloadEndpointID, name: str) -> None:
    assert status_filename(wep) == name
    assert parse_status_filename(name) == wep


def test_unparseable_names() -> None:
    assert parse_status_filename("just-one-field") is None
    assert parse_status_filename(".tmp.abc d e") is None


def test_content_json_matches_go_omitempty_layout() -> None:
    ep = WorkloadEndpoint(
        state="active", name="cali123", mac="ee:ee:ee:ee:ee:ee", ipv4_nets=("10.0.0.1/32",)
    )
    text = EndpointStatusContent.from_endpoint(ep).to_json()
    assert text == '{"ifaceName":"cali123","mac":"ee:ee:ee:ee:ee:ee","ipv4Nets":["10.0.0.1/32"]}'
    full = EndpointStatusContent("c", "m", ("10.0.0.1/32",), ("fd00::1/128",), "peer")
    assert list(json.loads(full.to_json())) == [
        "ifaceName",
        "mac",
        "ipv4Nets",
        "ipv6Nets",
        "bgpPeerName",
    ]
    assert EndpointStatusContent.from_json(full.to_json()) == full


def test_reporter_waits_for_in_sync_then_writes_and_deletes(tmp_path: Path) -> None:
    files = EndpointStatusFiles(tmp_path)
    rep = EndpointStatusFileReporter(files)
    content = EndpointStatusContent(iface_name="cali1", ipv4_nets=("10.0.0.1/32",))
    rep.endpoint_up(WEP, content)
    assert rep.reconcile() == []
    assert not files.dir.exists()  # nothing before the dataplane is in sync
    rep.mark_in_sync()
    assert rep.reconcile() == []
    path = tmp_path / "endpoint-status" / "k8s default%2Fnginx-1 eth0"
    assert json.loads(path.read_text()) == {"ifaceName": "cali1", "ipv4Nets": ["10.0.0.1/32"]}
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    rep.endpoint_down(WEP)
    assert rep.reconcile() == []
    assert not path.exists()
    assert os.listdir(files.dir) == []


def test_full_resync_removes_strays_and_repairs(tmp_path: Path) -> None:
    files = EndpointStatusFiles(tmp_path)
    files.ensure_dir()
    (files.dir / "k8s old%2Fpod eth0").write_text("{}")  # from before a restart
    (files.dir / ".tmp.leftover").write_text("x")
    rep = EndpointStatusFileReporter(files)
    rep.endpoint_up(WEP, EndpointStatusContent(iface_name="cali1"))
    rep.mark_in_sync()
    assert rep.reconcile() == []
    assert sorted(os.listdir(files.dir)) == ["k8s default%2Fnginx-1 eth0"]
    files.path_for(WEP).unlink()  # outside interference
    assert rep.reconcile() == []  # incremental: trusts its cache
    assert rep.reconcile(full_resync=True) == []
    assert files.path_for(WEP).exists()


def test_write_errors_are_returned_for_retry(tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    rep = EndpointStatusFileReporter(EndpointStatusFiles(blocker))
    rep.mark_in_sync()
    rep.endpoint_up(WEP, EndpointStatusContent(iface_name="cali1"))
    assert rep.reconcile() != []
