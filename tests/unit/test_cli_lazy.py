"""The ``calico`` tree and ``calico.model.values`` import other components' commands and the
IPAM/BGP/host values only when used (design/performance.md "Imports"); every command is still
registered, and ``calico.__version__`` is what ``importlib.metadata`` reports.

Imports are checked in a fresh interpreter: this test process has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import click
import pytest

import calico
from calico.calicoctl import ctl
from calico.cli import root
from calico.model import values

PROBE = """
import json, sys
import calico.cli.root
import calico.model.values
from calico.model.values import Policy
print(json.dumps(sorted(sys.modules)))
"""

LAZY = (
    "calico.node.run.cli",
    "calico.node.cluster.cli",
    "calico.felix.bpf.debugcli",
    "calico.calicoctl.node_status",
    "calico.cli.health_cmd",
    "calico.buildinfo",
    "calico.model.values.bgp",
    "calico.model.values.ipam",
    "calico.model.values.hosts",
    "calico.model.values.registry",
    "importlib.metadata",
)


def test_root_and_values_import_nothing_lazy() -> None:
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    loaded = set(json.loads(run.stdout))
    assert "calico.model.values.policy" in loaded
    assert [m for m in LAZY if m in loaded] == []


def test_every_root_command_resolves() -> None:
    ctx = click.Context(root.cli)
    names = root.cli.list_commands(ctx)
    assert names == ["bpf", "component", "ctl", "health", "node", "version"]
    for name in names:
        command = root.cli.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name, name
    assert root.cli.get_command(ctx, "nosuch") is None
    node = root.cli.get_command(ctx, "node")
    assert isinstance(node, click.Group) and "cluster" in node.commands


def test_ctl_node_is_node_plus_status() -> None:
    ctx = click.Context(ctl)
    assert ctl.list_commands(ctx)[-1] == "node"
    ctl_node = ctl.get_command(ctx, "node")
    assert isinstance(ctl_node, click.Group)
    node = root.cli.get_command(click.Context(root.cli), "node")
    assert isinstance(node, click.Group)
    assert set(ctl_node.commands) == {*node.commands, "status"}
    assert ctl.get_command(ctx, "node") is ctl_node  # built once
    with pytest.raises(AttributeError):
        root.__getattr__("nosuch")


def test_attach_lazy_refuses_a_taken_name() -> None:
    with pytest.raises(AssertionError):
        ctl.attach_lazy("node", "calico.cli.root:ctl_node_command", "again")
    with pytest.raises(AssertionError):
        ctl.attach_lazy("get", "calico.cli.root:ctl_node_command", "a calicoctl command")


def test_values_names_resolve_to_their_modules() -> None:
    from calico.model.values import bgp, codec, ipam, registry

    assert values.BGPPeer is bgp.BGPPeer
    assert values.IPPool is ipam.IPPool
    assert values.V1Value is codec.V1Value
    assert values.decode_value is registry.decode_value
    for name in values.__all__:
        assert getattr(values, name) is not None, name
    assert set(values.__all__) <= set(dir(values))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = values.Nope  # type: ignore[attr-defined]


def test_version_is_the_installed_distributions(tmp_path: Path) -> None:
    """Read from the dist-info (outside the source tree); an egg-info met first on sys.path
    (a source tree's, as under pytest) is left to importlib.metadata."""
    probe = (
        "import calico; from importlib import metadata\n"
        "print(calico._dist_info_version(), calico.__version__, metadata.version('calico'))"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert run.stdout.split() == [metadata.version("calico")] * 3
    (tmp_path / "calico.egg-info").mkdir()  # no metadata in it: importlib.metadata says None
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert run.stdout.split() == ["None", "None", "None"]
    assert calico.__version__ == metadata.version("calico")
