"""The cluster spec: addresses and names per node, validation, and the saved round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calico.node.cluster import ctl, nodes, spec
from calico.node.errors import NodeError


def test_build_addresses_names_and_dirs(tmp_path: Path) -> None:
    c = spec.build("cl", tmp_path, 3, "etcdv3", second_subnet=(3,))
    assert [n.name for n in c.nodes] == ["node1", "node2", "node3"]
    assert [n.netns for n in c.nodes] == ["cl-node1", "cl-node2", "cl-node3"]
    assert [n.ip for n in c.nodes] == ["172.30.0.11/24", "172.30.0.12/24", "172.30.1.13/24"]
    assert [n.ip6 for n in c.nodes][2] == "fd30:0:0:1::13/64"
    assert c.nodes[2].gateway == "172.30.1.1" and c.nodes[0].gateway6 == "fd30:0:0:0::1"
    assert spec.same_subnet(c.nodes[0], c.nodes[1]) and not spec.same_subnet(c.nodes[0], c.nodes[2])
    assert c.nodes[0].state_dir == tmp_path / "node1" / "state"
    assert (c.lan_netns, c.world_netns, c.sandbox("web")) == ("cl-lan", "cl-world", "cl-web")
    assert c.etcd_endpoint == "http://172.30.0.1:2379"


def test_node_run_flags_are_the_nodes_own(tmp_path: Path) -> None:
    c = spec.build("cl", tmp_path, 2, "local")
    argv = nodes.run_argv(c, c.nodes[1])
    assert argv[-1] == "--no-flow-logs"  # no per-node Goldmane/Whisker in a cluster
    pairs = dict(zip(argv[3:-1:2], argv[4:-1:2], strict=True))
    assert pairs["--name"] == "node2" and pairs["--ip"] == "172.30.0.12/24"
    assert pairs["--datastore"] == "local"
    assert pairs["--datastore-path"] == str(tmp_path / "calico.db")
    for flag, sub in (
        ("--state-dir", "state"),
        ("--log-dir", "log"),
        ("--cni-conf-dir", "net.d"),
        ("--cni-bin-dir", "cni-bin"),
    ):
        assert pairs[flag] == str(tmp_path / "node2" / sub)
    assert pairs["--networking-backend"] == "vxlan"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"name": ""}, "invalid cluster name"),
        ({"name": "a" * 21}, "invalid cluster name"),
        ({"name": "bad_name"}, "invalid cluster name"),
        ({"count": 0}, "1 to 50 nodes, not 0"),
        ({"count": 51}, "1 to 50 nodes, not 51"),
        ({"datastore": "kubernetes"}, "unknown datastore 'kubernetes'"),
        ({"second_subnet": (4,)}, "no node 4 in a 3-node cluster"),
    ],
)
def test_bad_specs_are_refused(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"name": "cl", "root": tmp_path, "count": 3, "datastore": "etcdv3"}
    with pytest.raises(NodeError, match=message):
        spec.build(**{**args, **kw})


def test_boundaries_accepted(tmp_path: Path) -> None:
    assert len(spec.build("a" * 20, tmp_path, 50).nodes) == 50
    assert len(spec.build("a", tmp_path, 1).nodes) == 1


def test_save_load_round_trip_with_pods(tmp_path: Path) -> None:
    c = spec.build("cl", tmp_path, 2, "etcdv3").with_pod("cl-web").with_pod("cl-web")
    assert c.pods == ("cl-web",)
    spec.save(c)
    assert spec.load(tmp_path) == c
    assert spec.load(tmp_path / "nothing") is None
    (tmp_path / "cluster.json").write_text("{not json")
    with pytest.raises(NodeError, match="cannot read the cluster spec"):
        spec.load(tmp_path)


def test_calicoctl_runs_in_the_lan_namespace_with_the_clusters_config(tmp_path: Path) -> None:
    c = spec.build("cl", tmp_path, 1)
    assert ctl.argv(c, "get", "nodes") == [
        *("ip", "netns", "exec", "cl-lan", ctl.calicoctl_exe()),
        *("get", "nodes", "-c", str(tmp_path / "calicoctl.cfg")),
    ]


@pytest.mark.parametrize(
    ("backend", "requested", "mode"),
    [
        ("bird", None, "Never"),
        ("bird", "Never", "Never"),
        ("vxlan", None, "Always"),
        ("vxlan", "CrossSubnet", "CrossSubnet"),
        ("none", None, "Always"),
    ],
)
def test_pool_mode_follows_the_backend(backend: str, requested: str | None, mode: str) -> None:
    from calico.node.cluster import lifecycle

    assert lifecycle.pool_vxlan_mode(backend, requested) == mode


@pytest.mark.parametrize("requested", ["Always", "CrossSubnet"])
def test_bird_with_an_encapsulated_pool_is_refused(requested: str) -> None:
    from calico.node.cluster import lifecycle

    with pytest.raises(
        NodeError, match=f"--vxlan-mode {requested} needs --networking-backend vxlan"
    ):
        lifecycle.pool_vxlan_mode("bird", requested)


def test_bird_node_status_uses_the_nodes_own_sockets(tmp_path: Path) -> None:
    c = spec.build("cl", tmp_path, 2, "etcdv3")
    argv = ctl.node_status_argv(c, c.nodes[1])
    state = c.nodes[1].state_dir
    assert argv[:5] == ["ip", "netns", "exec", "cl-node2", "env"]
    assert f"CALICO_BIRD_SOCKET={state / 'bird.ctl'}" in argv
    assert f"CALICO_BIRD6_SOCKET={state / 'bird6.ctl'}" in argv
    assert argv[-3:] == [ctl.calicoctl_exe(), "node", "status"]
    assert (
        nodes.run_argv(c, c.nodes[1], "bird")[
            nodes.run_argv(c, c.nodes[1], "bird").index("--networking-backend") + 1
        ]
        == "bird"
    )


def test_typha_option_round_trips_and_points_every_node_at_the_lan_typha(tmp_path: Path) -> None:
    from calico.node.cluster import typha

    plain = spec.build("ty", tmp_path)
    assert not plain.typha
    assert "FELIX_TYPHAADDR" not in nodes.run_env(plain)
    with_typha = spec.build("ty", tmp_path, typha=True)
    spec.save(with_typha)
    loaded = spec.load(tmp_path)
    assert loaded is not None and loaded.typha
    assert nodes.run_env(loaded)["FELIX_TYPHAADDR"] == "172.30.0.1:5473" == typha.address(loaded)
    old = json.loads(with_typha.spec_file.read_text())
    del old["typha"]  # a spec saved before the option existed still loads
    with_typha.spec_file.write_text(json.dumps(old))
    reloaded = spec.load(tmp_path)
    assert reloaded is not None and not reloaded.typha
