"""Conntrack flushing over ctnetlink, and atomic endpoint status files."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from nlns import NS
from pyroute2 import Conntrack

from calico.felix.dataplane.conntrack import flush_ips
from calico.felix.dataplane.endpoint_status import (
    EndpointStatusContent,
    EndpointStatusFileReporter,
    EndpointStatusFiles,
)
from calico.felix.messages import WorkloadEndpointID

pytestmark = pytest.mark.root


def _enable_conntrack(host: NS) -> None:
    """A fresh netns tracks nothing until some netfilter rule needs conntrack."""
    if not shutil.which("nft"):
        pytest.skip("needs nft to switch conntrack on in the namespace")
    rules = (
        "add table inet caltest; "
        "add chain inet caltest out { type filter hook output priority 0; }; "
        "add rule inet caltest out ct state new counter"
    )
    subprocess.run(["ip", "netns", "exec", host.name, "nft", rules], check=True, timeout=10)


def _udp_flows(targets: list[tuple[int, str, int]]) -> None:
    for family, ip, port in targets:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.sendto(b"x", (ip, port))


def _tracked(host: NS, family: int) -> set[tuple[str, str]]:
    ct = Conntrack(nfgen_family=family, netns=host.name, flags=0)
    try:
        return {(e.tuple_orig.daddr, str(e.tuple_orig.dport)) for e in ct.dump_entries()}
    finally:
        ct.close()


def test_flush_removes_only_entries_for_given_ips(host: NS) -> None:
    _enable_conntrack(host)
    host.ip("addr", "add", "fd00:99::1/128", "dev", "lo", "nodad")
    host.call(
        _udp_flows,
        [
            (socket.AF_INET, "127.0.0.5", 5005),
            (socket.AF_INET, "127.0.0.6", 5006),
            (socket.AF_INET6, "fd00:99::1", 5007),
            (socket.AF_INET6, "::1", 5008),
        ],
    )
    before4 = _tracked(host, socket.AF_INET)
    before6 = _tracked(host, socket.AF_INET6)
    assert {("127.0.0.5", "5005"), ("127.0.0.6", "5006")} <= before4
    assert ("fd00:99::1", "5007") in before6

    res = flush_ips(["127.0.0.5", "fd00:99::1/128"], netns=host.name)
    assert res.ok and res.deleted == 2
    after4 = _tracked(host, socket.AF_INET)
    after6 = _tracked(host, socket.AF_INET6)
    assert ("127.0.0.5", "5005") not in after4 and ("127.0.0.6", "5006") in after4
    assert ("fd00:99::1", "5007") not in after6 and ("::1", "5008") in after6
    assert flush_ips(["127.0.0.5"], netns=host.name).deleted == 0  # idempotent


def test_status_files_are_replaced_atomically(tmp_path: Path) -> None:
    files = EndpointStatusFiles(tmp_path)
    wep = WorkloadEndpointID("k8s", "default/pod-a", "eth0")
    path = files.path_for(wep)
    stop = threading.Event()
    bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            try:
                json.loads(text)
            except ValueError:
                bad.append(text)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(300):
            nets = tuple(f"10.0.{i % 250}.{j}/32" for j in range(i % 40))
            files.write(wep, EndpointStatusContent(iface_name=f"cali{i}", ipv4_nets=nets))
    finally:
        stop.set()
        t.join(5)
    assert bad == []
    assert os.listdir(files.dir) == ["k8s default%2Fpod-a eth0"]  # no temp files left behind

    rep = EndpointStatusFileReporter(files)
    rep.mark_in_sync()
    assert rep.reconcile(full_resync=True) == []
    assert not path.exists()  # not desired by this (fresh) reporter: cleaned after in-sync
