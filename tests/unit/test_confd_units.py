"""confd's pieces one at a time: router id hash, filter name truncation, peer keys, log levels,
the krt_tunnel branch, staging/compare/check, conf.d loading errors, and change detection."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path

import pytest
from confd_render_support import GOLDEN, NODE, make_renderer, render_state, scenario_state

from calico.confd import keyspace
from calico.confd.birdconfig import hash_router_id
from calico.confd.filters import function_name, truncate_name
from calico.confd.install import CheckFailed, install_set
from calico.confd.peers import parse_peer_ip, peer_key
from calico.confd.resources import ConfigError, TemplateResource, load_resources

needs_bird = pytest.mark.skipif(shutil.which("bird") is None, reason="BIRD not installed")


def test_hash_router_id_documented_example() -> None:
    assert hash_router_id("kube-master") == "25.79.212.8"


@pytest.mark.parametrize("name", ["a", "node-1", "x" * 300])
def test_hash_router_id_is_a_unicast_quad(name: str) -> None:
    octets = [int(x) for x in hash_router_id(name).split(".")]
    assert len(octets) == 4 and octets[0] <= 223


def test_truncate_name_boundary() -> None:
    assert truncate_name("n" * 45, 45) == "n" * 45
    long = "n" * 46
    out = truncate_name(long, 45)
    assert len(out) == 45 and out.startswith("n" * 28 + "_")
    assert out[29:] == hashlib.sha256(long.encode()).hexdigest().upper()[:16]


def test_function_name_fits_64() -> None:
    name = function_name("f" * 253, "import", 4)
    assert len(name.strip("'")) == 64
    assert function_name("short", "export", 6) == "'bgp_short_exportFilterV6'"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("10.0.0.1", ("10.0.0.1", 0)),
        ("10.0.0.1:179", ("10.0.0.1", 179)),
        ("[fd00::0001]:50", ("fd00::1", 50)),
        ("fd00::1", ("fd00::1", 0)),
    ],
)
def test_parse_peer_ip(text: str, want: tuple[str, int]) -> None:
    assert parse_peer_ip(text) == want


def test_peer_key_default_port_has_no_suffix() -> None:
    assert peer_key("10.0.0.1", 0) == peer_key("10.0.0.1", 179) == "10.0.0.1"
    assert peer_key("10.0.0.1", 180) == "10.0.0.1-180"


@pytest.mark.parametrize(
    ("severity", "level"),
    [(None, "info"), ("Info", "info"), ("Debug", "debug"), ("Warning", "none"), ("Fatal", "none")],
)
def test_loglevel_key(severity: str | None, level: str) -> None:
    assert keyspace._loglevel(severity) == level


@pytest.mark.parametrize(
    ("case", "statement"),
    [
        (
            "ipip-always-pcr-enabled",
            'if (net ~ 192.168.0.0/16) then { krt_tunnel="tunl0"; accept; }',
        ),
        (
            "ipip-crosssubnet-pcr-enabled",
            "if (net ~ 192.168.0.0/16) then { if (defined(bgp_next_hop)&&(bgp_next_hop ~ "
            '10.192.0.0/16)) then krt_tunnel=""; else krt_tunnel="tunl0"; accept; }',
        ),
    ],
)
def test_ipip_with_calicos_bird_sets_krt_tunnel(case: str, statement: str, tmp_path: Path) -> None:
    """With Calico's BIRD fork (krt_tunnel known), BIRD-owned IPIP pools get krt_tunnel."""
    r = make_renderer(tmp_path / "c", {"NODENAME": NODE}, krt_tunnel=True)
    r.resources = [dataclasses.replace(res, check_cmd="") for res in r.resources]
    r.dirty = set(r.resources)
    st = scenario_state(GOLDEN / case)
    r.update(keyspace.build(st, NODE))
    r.process(st.global_config().spec, st.filters)
    assert statement in (tmp_path / "c" / "config" / "bird_ipam.cfg").read_text()


def _res(tmp_path: Path, check: str = "") -> TemplateResource:
    return TemplateResource(tmp_path / "x.toml", "x", tmp_path / "out" / "f.cfg", (), check, "")


def test_install_compares_content_and_mode(tmp_path: Path) -> None:
    res = _res(tmp_path)
    assert install_set([(res, "a\n")]) is True
    assert oct(res.dest.stat().st_mode & 0o777) == "0o644"
    assert install_set([(res, "a\n")]) is False  # same content, same mode: nothing to do
    res.dest.chmod(0o600)
    assert install_set([(res, "a\n")]) is False  # mode of the existing file is kept
    assert install_set([(res, "b\n")]) is True
    assert res.dest.read_text() == "b\n" and oct(res.dest.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in res.dest.parent.iterdir()] == ["f.cfg"]  # no stage files left


def test_install_keep_stage_file(tmp_path: Path) -> None:
    res = _res(tmp_path)
    install_set([(res, "a\n")], keep_stage=True)  # renamed into place: no stage left
    assert list(res.dest.parent.glob(".f.cfg*")) == []
    install_set([(res, "a\n")], keep_stage=True)  # unchanged: the stage stays for inspection
    assert len(list(res.dest.parent.glob(".f.cfg*"))) == 1


@needs_bird
def test_rejected_config_is_never_installed(tmp_path: Path) -> None:
    res = _res(tmp_path, check="bird -p -c {{.src}}")
    good = "router id 1.1.1.1;\nprotocol device {}\n"
    install_set([(res, good)])
    with pytest.raises(CheckFailed, match=r"f\.cfg: .*syntax error"):
        install_set([(res, "router id ;\nprotocol device {}\n")])
    assert res.dest.read_text() == good
    assert [p.name for p in res.dest.parent.iterdir()] == ["f.cfg"]


def test_conf_d_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no template resources"):
        load_resources(tmp_path, NODE)
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "a.toml").write_text("[template]\nsrc = 'a.template'\n")
    with pytest.raises(ConfigError, match="invalid template resource"):
        load_resources(tmp_path, NODE)
    (tmp_path / "conf.d" / "a.toml").write_text(
        "[template]\nsrc = 'a.template'\ndest = 'config/a'\nkeys = ['/x']\n"
    )
    with pytest.raises(ConfigError, match=r"template a\.template not found"):
        load_resources(tmp_path, NODE)


def test_nodename_substitution_in_keys(tmp_path: Path) -> None:
    r = make_renderer(tmp_path / "c", {"NODENAME": NODE})
    aggr = next(res for res in r.resources if res.dest.name == "bird_aggr.cfg")
    assert "/calico/ipam/v2/host/kube-master/ipv4/block" in aggr.keys
    assert aggr.watches("/calico/ipam/v2/host/kube-master/ipv4/block/10.0.0.0-30")
    assert not aggr.watches("/calico/ipam/v2/host/kube-master-2/ipv4/block/10.0.0.0-30")


@needs_bird
def test_only_templates_watching_a_changed_key_render(tmp_path: Path) -> None:
    st = scenario_state(GOLDEN / "mesh-3node")
    r = render_state(st, tmp_path / "c", {"NODENAME": NODE})
    assert r.renders == 6 and not r.dirty
    ks = keyspace.build(st, NODE)
    r.update(dict(ks))
    assert not r.dirty  # identical key space
    ks["/calico/v1/ipam/v4/pool/10.9.0.0-16"] = '{"cidr": "10.9.0.0/16"}'
    r.update(ks)
    assert {res.dest.name for res in r.dirty} == {"bird_ipam.cfg"}


def test_global_peering_wins_over_node_specific(tmp_path: Path) -> None:
    from calico.api.io import load_documents
    from calico.confd.state import state_from_resources

    text = """
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: kube-master}
spec: {bgp: {ipv4Address: 10.192.0.2/16}}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: a-node}
spec: {peerIP: 10.50.0.1, asNumber: 65001, node: kube-master}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: b-global}
spec: {peerIP: 10.50.0.1, asNumber: 65002}
"""
    ks = keyspace.build(state_from_resources(load_documents(text), NODE), NODE)
    assert '"as_num": "65002"' in ks["/calico/bgp/v1/global/peer_v4/10.50.0.1"]
    assert "/calico/bgp/v1/host/kube-master/peer_v4/10.50.0.1" not in ks


def test_reload_runs_only_when_a_file_changed(tmp_path: Path) -> None:
    marker = tmp_path / "reloaded"
    res = dataclasses.replace(_res(tmp_path), reload_cmd=f"echo x >> {marker}")
    other = dataclasses.replace(res, dest=tmp_path / "out" / "g.cfg", reload_cmd="")
    install_set([(res, "a\n"), (other, "b\n")])
    assert marker.read_text() == "x\n"  # one reload for the whole set
    install_set([(res, "a\n"), (other, "b\n")])
    assert marker.read_text() == "x\n"
    install_set([(res, "a\n"), (other, "c\n")])
    assert marker.read_text() == "x\nx\n"
