"""Garbage collection of leaked addresses, leaked handles and dead nodes' blocks."""

from __future__ import annotations

from ipam_helpers import add_node, add_pool

from calico.api.ipam import BlockAffinity
from calico.ipam import garbage_collect


def test_leaked_addresses_are_released(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    add_node(client, "n1")
    live, _ = ipam.auto_assign(1, 0, "live", {"pod": "a"}, "n1")
    dead, _ = ipam.auto_assign(2, 0, "dead", {"pod": "b"}, "n1")
    tunnel, _ = ipam.auto_assign(1, 0, "ipip-tunnel-addr-n1", {"node": "n1"}, "n1")
    seen: list[tuple[str, dict]] = []

    def in_use(handle: str, attrs: dict) -> bool:
        seen.append((handle, attrs))
        return handle == "live"

    result = garbage_collect(ipam, in_use)
    assert sorted(result.released_ips) == sorted(str(a.ip) for a in dead)
    assert ("dead", {"pod": "b"}) in seen
    assert all(h != "ipip-tunnel-addr-n1" for h, _ in seen)  # tunnels judged by node
    assert ipam.ips_by_handle("live") == [str(live[0].ip)]
    assert ipam.ips_by_handle("ipip-tunnel-addr-n1") == [str(tunnel[0].ip)]
    assert ipam.store.get_handle("dead") is None


def test_leaked_handles_are_deleted(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    add_node(client, "n1")
    ipam.store.create_handle("orphan", {"10.0.0.0/26": 1})
    result = garbage_collect(ipam, lambda h, a: True)
    assert result.deleted_handles == ["orphan"]


def test_deleted_node_loses_affinity_and_empty_blocks(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    add_node(client, "alive")
    ipam.auto_assign(1, 0, "a", None, "alive")
    (gone,), _ = ipam.auto_assign(1, 0, "g", None, "gone")
    # First pass: the dead node's workload is leaked, so its address goes, then its block.
    result = garbage_collect(ipam, lambda h, a: h == "a")
    assert result.released_ips == [str(gone.ip)]
    assert result.released_affinities == [f"gone/{gone.network}"]
    assert ipam.store.get_block(gone.network) is None
    assert [a.spec.node for a in client.list(BlockAffinity).items] == ["alive"]


def test_non_empty_block_of_deleted_node_is_kept(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    (ip,), _ = ipam.auto_assign(1, 0, "a", None, "gone")
    result = garbage_collect(ipam, lambda h, a: True)
    assert result.released_affinities == []
    assert ipam.store.get_block(ip.network) is not None


def test_virtual_affinities_name_no_node(client, ipam) -> None:
    add_pool(client, "lb", "10.4.0.0/24", allowedUses=["LoadBalancer"])
    (lb,), _ = ipam.auto_assign(1, 0, "lb-x", None, "load-balancer", intended_use="LoadBalancer")
    result = garbage_collect(ipam, lambda h, a: True, node_exists=lambda n: False)
    assert result.released_affinities == [] and result.deleted_blocks == []
    assert [a.spec.type for a in ipam.store.list_affinities()] == ["virtual"]
    assert ipam.ips_by_handle("lb-x") == [str(lb.ip)]
