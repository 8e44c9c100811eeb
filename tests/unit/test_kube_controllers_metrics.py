"""kube-controllers' ipam_* exposition (calico.kube_controllers.metrics): upstream's series
names, no ``_total`` on the reclamation counter, gauges rewritten per pass, counter kept."""

from __future__ import annotations

from prometheus_client import generate_latest

from calico.kube_controllers.ipamgc import PassResult
from calico.kube_controllers.metrics import IPAMMetrics


def _text(m: IPAMMetrics) -> str:
    return generate_latest(m.registry).decode()


def test_reclamations_exported_under_exactly_upstreams_name_and_accumulate() -> None:
    m = IPAMMetrics()
    m.record(PassResult(reclaimed={("pool1", "node-a"): 2}))
    m.record(PassResult(reclaimed={("pool1", "node-a"): 3, ("pool2", "node-b"): 1}))
    text = _text(m)
    assert 'ipam_allocations_gc_reclamations{ippool="pool1",node="node-a"} 5.0' in text
    assert 'ipam_allocations_gc_reclamations{ippool="pool2",node="node-b"} 1.0' in text
    assert "_total" not in text  # neither the sample nor its HELP/TYPE lines
    assert "# TYPE ipam_allocations_gc_reclamations untyped" in text


def test_gauges_follow_the_latest_pass_only() -> None:
    m = IPAMMetrics()
    m.record(
        PassResult(
            in_use={("p", "a"): 3, ("p", "b"): 1, ("q", "a"): 2},
            borrowed={("p", "b"): 1},
            blocks={("p", "a"): 1, ("q", "a"): 1},
            pool_sizes={"p": 256, "q": 65536},
        )
    )
    r = m.registry
    assert r.get_sample_value("ipam_allocations_in_use", {"ippool": "q", "node": "a"}) == 2
    assert r.get_sample_value("ipam_allocations_per_node", {"node": "a"}) == 5
    assert r.get_sample_value("ipam_allocations_borrowed_per_node", {"node": "b"}) == 1
    assert r.get_sample_value("ipam_blocks_per_node", {"node": "a"}) == 2
    assert r.get_sample_value("ipam_ippool_size", {"ippool": "q"}) == 65536
    m.record(PassResult(in_use={("p", "b"): 1}, pool_sizes={"p": 256}))
    assert r.get_sample_value("ipam_allocations_in_use", {"ippool": "q", "node": "a"}) is None
    assert r.get_sample_value("ipam_allocations_per_node", {"node": "a"}) is None
    assert r.get_sample_value("ipam_allocations_per_node", {"node": "b"}) == 1
    assert r.get_sample_value("ipam_ippool_size", {"ippool": "q"}) is None
    assert r.get_sample_value("ipam_blocks_per_node", {"node": "a"}) is None
