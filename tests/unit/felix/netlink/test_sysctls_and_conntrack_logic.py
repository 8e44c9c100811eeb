"""Sysctl selection/writing against a fake /proc/sys tree, and conntrack entry matching."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from calico.felix.dataplane.conntrack import entry_matches
from calico.felix.dataplane.sysctls import (
    configure_global,
    configure_workload_iface,
    read_sysctl,
    workload_iface_sysctls,
    write_sysctl,
)


def fake_proc(tmp_path: Path, iface: str, *, default_rp: str = "1") -> Path:
    for d in (
        f"net/ipv4/conf/{iface}",
        f"net/ipv4/neigh/{iface}",
        f"net/ipv6/conf/{iface}",
        "net/ipv4/conf/default",
        "net/ipv6/conf/all",
        "net/netfilter",
    ):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
    for f in (
        "route_localnet",
        "proxy_arp",
        "forwarding",
        "rp_filter",
    ):
        (tmp_path / f"net/ipv4/conf/{iface}/{f}").write_text("0\n")
    (tmp_path / f"net/ipv4/neigh/{iface}/proxy_delay").write_text("80\n")
    for f in ("accept_ra", "proxy_ndp", "forwarding"):
        (tmp_path / f"net/ipv6/conf/{iface}/{f}").write_text("1\n")
    (tmp_path / "net/ipv4/conf/default/rp_filter").write_text(f"{default_rp}\n")
    (tmp_path / "net/ipv4/ip_forward").write_text("0\n")
    (tmp_path / "net/ipv6/conf/all/forwarding").write_text("0\n")
    (tmp_path / "net/netfilter/nf_conntrack_acct").write_text("0\n")
    return tmp_path


def read(root: Path, path: str) -> str:
    return (root / path).read_text().strip()


def test_selection_by_family() -> None:
    v4 = {
        s.path.rsplit("/", 1)[1]
        for s in workload_iface_sysctls("c", ipv4=True, ipv6=False, rp_filter="1")
    }
    assert v4 == {
        "accept_ra",
        "route_localnet",
        "proxy_delay",
        "proxy_arp",
        "forwarding",
        "rp_filter",
    }
    v6 = {s.path for s in workload_iface_sysctls("c", ipv4=False, ipv6=True, rp_filter=None)}
    assert v6 == {
        "net/ipv6/conf/c/accept_ra",
        "net/ipv6/conf/c/proxy_ndp",
        "net/ipv6/conf/c/forwarding",
    }


@pytest.mark.parametrize(
    ("default_rp", "spoof", "expected"), [("1", False, "1"), ("2", False, "2"), ("1", True, "0")]
)
def test_workload_iface_values(tmp_path: Path, default_rp: str, spoof: bool, expected: str) -> None:
    root = fake_proc(tmp_path, "cali1", default_rp=default_rp)
    errs = configure_workload_iface(
        "cali1", ipv4=True, ipv6=True, allow_source_spoofing=spoof, root=root
    )
    assert errs == []
    assert read(root, "net/ipv4/conf/cali1/proxy_arp") == "1"
    assert read(root, "net/ipv4/conf/cali1/route_localnet") == "1"
    assert read(root, "net/ipv4/conf/cali1/forwarding") == "1"
    assert read(root, "net/ipv4/neigh/cali1/proxy_delay") == "0"
    assert read(root, "net/ipv4/conf/cali1/rp_filter") == expected
    assert read(root, "net/ipv6/conf/cali1/accept_ra") == "0"
    assert read(root, "net/ipv6/conf/cali1/proxy_ndp") == "1"


def test_missing_iface_returns_errors_but_warn_only_ones_are_skipped(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, "other")
    errs = configure_workload_iface("cali9", ipv4=True, root=root)
    paths = {e.path for e in errs}
    assert "net/ipv4/conf/cali9/proxy_arp" in paths
    assert "net/ipv6/conf/cali9/accept_ra" not in paths  # best effort
    assert "net/ipv4/neigh/cali9/proxy_delay" not in paths


def test_global(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, "x")
    assert configure_global(ip_forwarding=True, ipv6=True, root=root) == []
    assert read(root, "net/ipv4/ip_forward") == "1"
    assert read(root, "net/ipv6/conf/all/forwarding") == "1"
    assert read(root, "net/netfilter/nf_conntrack_acct") == "1"


def _tuple(s: str, d: str) -> SimpleNamespace:
    return SimpleNamespace(saddr=s, daddr=d)


@pytest.mark.parametrize(
    ("orig", "reply", "hit"),
    [
        (("10.0.0.1", "8.8.8.8"), ("8.8.8.8", "192.168.1.1"), True),  # orig src
        (("1.1.1.1", "10.96.0.10"), ("10.0.0.1", "1.1.1.1"), True),  # reply src (DNAT'd)
        (("1.1.1.1", "2.2.2.2"), ("2.2.2.2", "1.1.1.1"), False),
    ],
)
def test_conntrack_entry_matching(orig: tuple, reply: tuple, hit: bool) -> None:
    entry = SimpleNamespace(tuple_orig=_tuple(*orig), tuple_reply=_tuple(*reply))
    assert entry_matches(entry, {"10.0.0.1"}) is hit


def test_conntrack_ipv6_matching_is_normalised() -> None:
    entry = SimpleNamespace(tuple_orig=_tuple("fd00:0::1", "::2"), tuple_reply=None)
    assert entry_matches(entry, {"fd00::1"})


def test_sysctl_reads_and_writes_without_text_io(tmp_path: Path) -> None:
    """``read_sysctl``/``write_sysctl`` use plain ``os`` calls (a text-mode open costs ~10x):
    same values as a text read, None for what cannot be read, and a missing file is an error
    (as under /proc/sys, where an interface's directory may not exist yet), not created."""
    root = fake_proc(tmp_path, "cali1")
    (root / "long").write_text("x" * 10000 + "\n")
    for path in ("net/ipv4/conf/cali1/proxy_arp", "net/ipv4/neigh/cali1/proxy_delay", "long"):
        assert read_sysctl(path, root=root) == (root / path).read_text().strip()
    assert read_sysctl("net/ipv4/conf/cali9/proxy_arp", root=root) is None
    assert read_sysctl("net/ipv4/conf/cali1", root=root) is None  # a directory
    assert read_sysctl("kernel/ostype") == "Linux"  # the real /proc/sys (a read only)
    assert write_sysctl("net/ipv4/neigh/cali1/proxy_delay", "0", root=root) is None
    assert (root / "net/ipv4/neigh/cali1/proxy_delay").read_text() == "0"  # truncated
    err = write_sysctl("net/ipv4/conf/cali9/proxy_arp", "1", root=root)
    assert err == "No such file or directory"
    assert not (root / "net/ipv4/conf/cali9").exists()
