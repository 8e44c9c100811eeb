"""The endpoint manager's per-interface dispatch map updates against the whole maps they
replace: after any sequence of workload adds, interface renames (also onto an interface
another workload uses) and removals, applied in batches, the workload dispatch maps are
exactly ``dispatch_maps`` of the interfaces still in use."""

from __future__ import annotations

from dataplane_fakes import FakeTable
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.dataplane.managers.endpoints import EndpointManager
from calico.felix.dataplane.managers.policy import PolicyManager
from calico.felix.messages import (
    WorkloadEndpoint,
    WorkloadEndpointID,
    WorkloadEndpointRemove,
    WorkloadEndpointUpdate,
)
from calico.felix.rules import RuleRenderer
from calico.felix.rules.endpoint_dispatch import FROM_WL, TO_WL

ids = st.integers(0, 5).map(lambda n: WorkloadEndpointID("k8s", f"ns/pod{n}", "eth0"))
ifaces = st.integers(0, 4).map(lambda n: f"cali{n}")
steps = st.lists(
    st.one_of(
        st.tuples(st.just("update"), ids, ifaces),
        st.tuples(st.just("remove"), ids, st.just("")),
        st.tuples(st.just("flush"), ids, st.just("")),
    ),
    max_size=40,
)


def wep(iface: str) -> WorkloadEndpoint:
    return WorkloadEndpoint(state="active", name=iface, profile_ids=("kns.ns",))


def workload_maps(table: FakeTable) -> dict[str, dict[str, tuple[str, str]]]:
    return {d.full_name: table.maps[d.full_name].elements for d in (FROM_WL, TO_WL)}


@settings(max_examples=300)
@given(steps)
def test_incremental_dispatch_maps_equal_whole_maps(
    sequence: list[tuple[str, object, str]],
) -> None:
    renderer = RuleRenderer()
    table = FakeTable()
    mgr = EndpointManager(table, renderer, PolicyManager(table, renderer), None)  # type: ignore[arg-type]
    mgr.complete_deferred_work()
    assert all(m == {} for m in workload_maps(table).values())
    for op, wep_id, iface in [*sequence, ("flush", None, "")]:
        if op == "update":
            mgr.on_update(WorkloadEndpointUpdate(wep_id, wep(iface)))  # type: ignore[arg-type]
        elif op == "remove":
            mgr.on_update(WorkloadEndpointRemove(wep_id))  # type: ignore[arg-type]
        else:
            mgr.complete_deferred_work()
            in_use = {ep.name for ep in mgr.weps.values()}
            reference = FakeTable()
            for vmap in renderer.dispatch_maps(in_use, {}):
                reference.set_map(vmap)
            assert workload_maps(table) == workload_maps(reference)


def test_one_new_workload_touches_only_its_entries() -> None:
    """The point: a new workload sets its two entries, it does not rebuild the maps."""
    renderer = RuleRenderer()
    table = FakeTable()
    mgr = EndpointManager(table, renderer, PolicyManager(table, renderer), None)  # type: ignore[arg-type]
    for n in range(3):
        mgr.on_update(
            WorkloadEndpointUpdate(WorkloadEndpointID("k8s", f"ns/p{n}", "eth0"), wep(f"cali{n}"))
        )
    mgr.complete_deferred_work()
    calls: list[str] = []
    table.set_map = lambda vmap: calls.append(f"set_map {vmap.name}")  # type: ignore[method-assign]
    original = table.set_map_element
    table.set_map_element = lambda name, key, v: (
        calls.append(f"{name} {key}"),
        original(name, key, v),
    )  # type: ignore[method-assign]
    mgr.on_update(WorkloadEndpointUpdate(WorkloadEndpointID("k8s", "ns/new", "eth0"), wep("cali9")))
    mgr.complete_deferred_work()
    assert sorted(calls) == [f"{FROM_WL.full_name} cali9", f"{TO_WL.full_name} cali9"]
