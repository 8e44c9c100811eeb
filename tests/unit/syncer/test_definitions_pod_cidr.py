"""Which Felix syncer list host-local IPAM (``usePodCIDR``) selects."""

from __future__ import annotations

from calico.datastore.config import DatastoreConfig
from calico.model import processors as p
from calico.syncer.definitions import felix_resource_types, uses_pod_cidr


class _Backend:
    def __init__(self, extra: dict[str, object] | None) -> None:
        self.config = DatastoreConfig("kubernetes", extra=extra or {})


def test_pod_cidr_mode_drops_the_block_watch_and_swaps_the_node_processor() -> None:
    normal = {rt.kind: rt for rt in felix_resource_types(kubernetes=True)}
    host_local = {rt.kind: rt for rt in felix_resource_types(True, use_pod_cidr=True)}
    assert set(normal) - set(host_local) == {"IPAMBlock"}
    assert set(host_local) - set(normal) == set()
    assert normal["Node"].processor is p.node
    assert host_local["Node"].processor is p.node_pod_cidr


def test_uses_pod_cidr_only_for_a_true_setting() -> None:
    assert uses_pod_cidr(_Backend({"usePodCIDR": True}))
    assert not uses_pod_cidr(_Backend({"usePodCIDR": False}))
    assert not uses_pod_cidr(_Backend(None))
    assert not uses_pod_cidr(object())  # a backend without a config (tests' fakes)
