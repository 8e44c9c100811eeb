"""Kind names and aliases resolve from the kind table, importing only the kind's module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from calico.api import kinds, resource_class
from calico.api.kind_table import KINDS, v3_kind_named

# calicoctl's names as upstream documents them (a sample across every module).
EXPECTED = {
    "wep": "WorkloadEndpoint",
    "WEPS": "WorkloadEndpoint",
    "policy": "NetworkPolicy",
    "pols": "NetworkPolicy",
    "gnp": "GlobalNetworkPolicy",
    "GlobalNetworkPolicy": "GlobalNetworkPolicy",
    "globalnetworkpolicy": "GlobalNetworkPolicy",
    "sknp": "StagedKubernetesNetworkPolicy",
    "pool": "IPPool",
    "affinities": "BlockAffinity",
    "bgpconfig": "BGPConfiguration",
    "bfs": "BGPFilter",
    "no": "Node",
    "clusterinfo": "ClusterInformation",
    "felixconfigs": "FelixConfiguration",
    "kubecontrollersconfig": "KubeControllersConfiguration",
}


@pytest.mark.parametrize(("name", "kind"), sorted(EXPECTED.items()))
def test_alias_resolves_to_its_kind(name: str, kind: str) -> None:
    cls = resource_class(name)
    assert cls is not None and kind == cls.KIND


@pytest.mark.parametrize("name", ["", "ippoolz", "kubernetesservice", "pod", "networkpolicie"])
def test_unknown_names_and_non_v3_kinds_resolve_to_nothing(name: str) -> None:
    assert resource_class(name) is None
    assert v3_kind_named(name) is None


def test_every_class_alias_resolves_to_that_class_and_starts_with_the_kind() -> None:
    for kind, cls in kinds().items():
        assert cls.ALIASES[0] == kind.lower()
        assert cls.ALIASES[1:] == KINDS[kind].aliases
        assert cls.PLURAL in cls.ALIASES
        for alias in cls.ALIASES:
            assert resource_class(alias) is cls
            assert resource_class(alias.upper()) is cls


def test_an_alias_loads_only_its_own_model_module() -> None:
    """``calicoctl get wep`` used to import every model module (130 pydantic classes) to
    search their aliases."""
    code = (
        "import json, sys; from calico.api import resource_class; "
        "c = resource_class(sys.argv[1]); "
        "print(json.dumps([c.KIND, sorted(m for m in sys.modules if m.startswith('calico.api.')"
        " and m.split('.')[2] in ('bgp', 'cluster', 'felixconfig', 'ipam', 'policy',"
        " 'endpoints'))]))"
    )
    for alias, kind, module in (
        ("wep", "WorkloadEndpoint", "endpoints"),
        ("gnp", "GlobalNetworkPolicy", "policy"),
    ):
        out = subprocess.run(
            [sys.executable, "-c", code, alias],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        assert json.loads(out) == [kind, [f"calico.api.{module}"]]
