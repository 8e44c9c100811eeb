"""The kinds Felix never reads live in modules of their own (design/performance.md "Cold start:
the kinds Felix never reads"); every name still resolves where it was defined before, as the
same object, and the kind table finds each kind in its new module."""

from __future__ import annotations

import pytest

from calico.api import cluster, ipam, ipamalloc, kind_class, kubecontrollers, migration, nodestatus
from calico.api.base import CalicoModel
from calico.api.kind_table import KIND_MODULES

MOVED = {cluster: (kubecontrollers, migration, nodestatus), ipam: (ipamalloc,)}


@pytest.mark.parametrize("old", list(MOVED), ids=lambda m: m.__name__)
def test_every_moved_name_resolves_through_its_old_module_as_the_same_object(old: object) -> None:
    for new in MOVED[old]:  # type: ignore[index]
        own = [
            name
            for name, value in vars(new).items()
            if (isinstance(value, type) and value.__module__ == new.__name__)
            or name == "EnabledDisabled"
        ]
        assert own, new.__name__
        for name in own:
            assert getattr(old, name) is getattr(new, name), (old, name)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchModel'"):
        _ = old.NoSuchModel  # type: ignore[attr-defined]


def test_old_import_statements_still_work() -> None:
    from calico.api.cluster import (
        CalicoNodeStatus,
        DatastoreMigration,
        KubeControllersConfiguration,
        KubeControllersConfigurationSpec,
    )
    from calico.api.ipam import BlockAffinity, IPAMConfigurationSpec, IPAMHandle, IPReservation

    assert KubeControllersConfiguration.__module__ == "calico.api.kubecontrollers"
    assert KubeControllersConfigurationSpec.__module__ == "calico.api.kubecontrollers"
    assert DatastoreMigration.__module__ == "calico.api.migration"
    assert CalicoNodeStatus.__module__ == "calico.api.nodestatus"
    for cls in (BlockAffinity, IPAMConfigurationSpec, IPAMHandle, IPReservation):
        assert cls.__module__ == "calico.api.ipamalloc"
        assert issubclass(cls, CalicoModel)


@pytest.mark.parametrize(
    ("kind", "module"),
    [
        ("KubeControllersConfiguration", "calico.api.kubecontrollers"),
        ("DatastoreMigration", "calico.api.migration"),
        ("CalicoNodeStatus", "calico.api.nodestatus"),
        ("IPReservation", "calico.api.ipamalloc"),
        ("IPAMConfiguration", "calico.api.ipamalloc"),
        ("IPAMHandle", "calico.api.ipamalloc"),
        ("BlockAffinity", "calico.api.ipamalloc"),
        ("Node", "calico.api.cluster"),
        ("ClusterInformation", "calico.api.cluster"),
        ("IPPool", "calico.api.ipam"),
        ("IPAMBlock", "calico.api.ipam"),
    ],
)
def test_the_kind_table_finds_each_kind_in_its_module(kind: str, module: str) -> None:
    assert KIND_MODULES[kind] == module
    cls = kind_class(kind)
    assert cls is not None and cls.__module__ == module and kind == cls.KIND
