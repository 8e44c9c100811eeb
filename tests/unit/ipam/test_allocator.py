"""IPAMClient behaviour on an in-memory datastore."""

from __future__ import annotations

import ipaddress
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ipam_helpers import add_node, add_pool, add_reservation
from memstore import MemoryBackend

from calico.api.ipam import BlockAffinity, IPAMConfigurationSpec
from calico.datastore.client import Client
from calico.ipam import (
    AddressInUseError,
    IPAMClient,
    IPAMError,
    NoFreeAddressesError,
    ReleaseOptions,
)


def strict(ipam: IPAMClient, **extra: object) -> None:
    ipam.set_ipam_config(IPAMConfigurationSpec.model_validate({"strictAffinity": True, **extra}))


def test_first_assignment_claims_a_26_block_with_confirmed_affinity(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/16")
    v4, v6 = ipam.auto_assign(1, 0, "h1", {"pod": "a"}, "node1")
    assert v6 == [] and len(v4) == 1
    assert v4[0].network.prefixlen == 26
    affs = client.list(BlockAffinity).items
    assert [(a.spec.node, a.spec.state, a.spec.cidr) for a in affs] == [
        ("node1", "confirmed", str(v4[0].network))
    ]
    assert (
        affs[0].metadata.name == f"node1-{str(v4[0].network).replace('.', '-').replace('/', '-')}"
    )
    block = ipam.store.get_block(v4[0].network).block
    assert block.affinity == "host:node1"
    # The first address is the block's first ordinal: nothing is held back.
    assert v4[0].ip == v4[0].network.network_address


def test_ipv6_uses_122_blocks(client, ipam) -> None:
    add_pool(client, "p6", "fd00::/64")
    _, v6 = ipam.auto_assign(0, 2, "h", None, "n")
    assert [a.network.prefixlen for a in v6] == [122, 122]


def test_per_pool_block_size(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24", blockSize=28)
    v4, _ = ipam.auto_assign(17, 0, "h", None, "n")
    assert {a.network.prefixlen for a in v4} == {28}
    assert len({a.network for a in v4}) == 2


def test_host_keeps_using_its_block_and_other_host_gets_another(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    a, _ = ipam.auto_assign(3, 0, "h1", None, "n1")
    b, _ = ipam.auto_assign(1, 0, "h2", None, "n1")
    c, _ = ipam.auto_assign(1, 0, "h3", None, "n2")
    assert {x.network for x in a + b} == {a[0].network}
    assert c[0].network != a[0].network


def test_release_is_fifo_across_the_allocator(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    ips, _ = ipam.auto_assign(5, 0, "h", None, "n")
    order = [str(ips[3].ip), str(ips[1].ip)]
    assert ipam.release_ips(order) == []
    more, _ = ipam.auto_assign(59, 0, "h2", None, "n")  # the rest of the block, then...
    again, _ = ipam.auto_assign(2, 0, "h3", None, "n")
    assert [str(x.ip) for x in again] == order  # ...the released ones, oldest first
    assert all(x.network == ips[0].network for x in more + again)


def test_release_by_handle_and_ips_by_handle(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    add_pool(client, "p6", "fd00::/120")
    v4, v6 = ipam.auto_assign(2, 1, "net.cid", {"pod": "x"}, "n")
    want = sorted(str(a.ip) for a in v4 + v6)
    assert sorted(ipam.ips_by_handle("net.cid")) == want
    assert sorted(ipam.release_by_handle("net.cid")) == want
    assert ipam.store.get_handle("net.cid") is None
    assert ipam.release_by_handle("net.cid") == []


def test_release_unknown_ip_reports_it(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    ips, _ = ipam.auto_assign(1, 0, "h", None, "n")
    other = str(ips[0].ip + 1)
    assert sorted(ipam.release_ips([other, "192.168.9.9"])) == sorted([other, "192.168.9.9"])


def test_release_with_wrong_handle_is_refused(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    (ip,), _ = ipam.auto_assign(1, 0, "h", None, "n")
    assert ipam.release_ips([ReleaseOptions(str(ip.ip), "other")]) == [str(ip.ip)]
    assert ipam.ips_by_handle("h") == [str(ip.ip)]


def test_cooldown_delays_reuse(client) -> None:
    from datetime import UTC, datetime, timedelta

    now = [datetime(2024, 1, 1, tzinfo=UTC)]
    ipam = IPAMClient(client, clock=lambda: now[0])
    add_pool(client, "p", "10.0.0.0/30", blockSize=30)
    ipam.set_ipam_config(IPAMConfigurationSpec.model_validate({"ipCooldownSeconds": 60}))
    ips, _ = ipam.auto_assign(4, 0, "h", None, "n")
    ipam.release_ips([str(ips[0].ip)])
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 0, "h2", None, "n")
    now[0] += timedelta(seconds=61)
    again, _ = ipam.auto_assign(1, 0, "h2", None, "n")
    assert again[0].ip == ips[0].ip


def test_borrowing_only_without_strict_affinity(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/26")  # a single block
    first, _ = ipam.auto_assign(1, 0, "h1", None, "n1")
    borrowed, _ = ipam.auto_assign(1, 0, "h2", None, "n2")
    assert borrowed[0].network == first[0].network
    assert ipam.store.get_block(first[0].network).block.affinity == "host:n1"
    strict(ipam)
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 0, "h3", None, "n2")
    assert ipam.store.get_handle("h3") is None


def test_max_blocks_per_host_caps_claims_not_allocations(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24", blockSize=28)
    strict(ipam, maxBlocksPerHost=2)
    got, _ = ipam.auto_assign(32, 0, "h", None, "n")
    assert len({a.network for a in got}) == 2
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 0, "h2", None, "n")
    ipam.release_ips([str(got[0].ip)])
    again, _ = ipam.auto_assign(1, 0, "h2", None, "n")  # existing blocks still fill
    assert again[0].ip == got[0].ip
    # The request-level cap applies too (min of both).
    other, _ = ipam.auto_assign(17, 0, "h3", None, "m", max_blocks_per_host=5)
    assert len({a.network for a in other}) == 2


def test_default_cap_is_20_blocks(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/16", blockSize=32)
    strict(ipam)
    got, _ = ipam.auto_assign(20, 0, "h", None, "n")
    assert len(got) == 20
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 0, "h2", None, "n")


def test_auto_allocate_blocks_false_never_claims(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    strict(ipam, autoAllocateBlocks=False)
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 0, "h", None, "n")


def test_reservations_are_never_handed_out(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/28", blockSize=28)
    add_reservation(client, "r", ["10.0.0.0/30", "10.0.0.9"])
    got, _ = ipam.auto_assign(11, 0, "h", None, "n")
    ips = {str(a.ip) for a in got}
    assert ips.isdisjoint({"10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.9"})
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 0, "h2", None, "n")
    # A fully reserved block is not even claimed.
    add_pool(client, "q", "10.1.0.0/28", blockSize=28)
    add_reservation(client, "r2", ["10.1.0.0/28"])
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 0, "h3", None, "m", ipv4_pools=["q"])
    assert ipam.store.get_block(ipaddress.ip_network("10.1.0.0/28")) is None
    # AssignIP of a reserved address is allowed (reservations only limit auto-assign).
    assert str(ipam.assign_ip("10.0.0.9", "h4", None, "n").ip) == "10.0.0.9"


def test_node_selector_uses_node_labels(client, ipam) -> None:
    add_pool(client, "rack1", "10.1.0.0/24", nodeSelector="rack == 'one'")
    add_pool(client, "all", "10.2.0.0/24")
    add_node(client, "n1", {"rack": "one"})
    add_node(client, "n2", {"rack": "two"})
    a, _ = ipam.auto_assign(1, 0, "a", None, "n1", ipv4_pools=["rack1"])
    assert a[0].ip in ipaddress.ip_network("10.1.0.0/24")
    b, _ = ipam.auto_assign(1, 0, "b", None, "n2")
    assert b[0].ip in ipaddress.ip_network("10.2.0.0/24")
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 0, "c", None, "n2", ipv4_pools=["rack1"])


def test_missing_node_matches_only_all_pools(client, ipam) -> None:
    add_pool(client, "neg", "10.1.0.0/24", nodeSelector="!has(x)")
    with pytest.raises(NoFreeAddressesError, match="no configured Calico pools"):
        ipam.auto_assign(1, 0, "a", None, "ghost")
    add_pool(client, "all", "10.2.0.0/24")
    got, _ = ipam.auto_assign(1, 0, "a", None, "ghost")
    assert got[0].ip in ipaddress.ip_network("10.2.0.0/24")


def test_disabled_and_allowed_uses(client, ipam) -> None:
    add_pool(client, "off", "10.1.0.0/24", disabled=True)
    add_pool(client, "tun", "10.2.0.0/24", allowedUses=["Tunnel"])
    add_pool(client, "wl", "10.3.0.0/24", allowedUses=["Workload"])
    w, _ = ipam.auto_assign(1, 0, "w", None, "n")
    t, _ = ipam.auto_assign(1, 0, "t", None, "n", intended_use="Tunnel")
    assert w[0].ip in ipaddress.ip_network("10.3.0.0/24")
    assert t[0].ip in ipaddress.ip_network("10.2.0.0/24")
    with pytest.raises(IPAMError, match="disabled"):
        ipam.auto_assign(1, 0, "x", None, "n", ipv4_pools=["off"])
    with pytest.raises(IPAMError, match="does not exist"):
        ipam.auto_assign(1, 0, "x", None, "n", ipv4_pools=["nope"])
    with pytest.raises(IPAMError, match="does not allow"):
        ipam.assign_ip("10.2.0.77", "x", None, "n", intended_use="Workload")


def test_requested_pool_by_cidr(client, ipam) -> None:
    add_pool(client, "a", "10.1.0.0/24")
    add_pool(client, "b", "10.2.0.0/24")
    got, _ = ipam.auto_assign(1, 0, "h", None, "n", ipv4_pools=["10.2.0.0/24"])
    assert got[0].ip in ipaddress.ip_network("10.2.0.0/24")


def test_dual_stack_is_all_or_nothing(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    with pytest.raises(NoFreeAddressesError):
        ipam.auto_assign(1, 1, "h", None, "n")  # no IPv6 pool
    assert ipam.store.get_handle("h") is None
    assert all(s.block.is_empty() for s in ipam.store.list_blocks())


def test_assign_ip(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    got = ipam.assign_ip("10.0.0.70", "h", {"pod": "a"}, "n")
    assert str(got) == "10.0.0.70/26"
    assert ipam.store.get_block(got.network).block.affinity == "host:n"
    with pytest.raises(AddressInUseError):
        ipam.assign_ip("10.0.0.70", "h2", None, "n")
    with pytest.raises(IPAMError, match="not in a configured pool"):
        ipam.assign_ip("192.168.0.1", "h", None, "n")
    assert ipam.get_assignment_attributes("10.0.0.70") == ("h", {"pod": "a"})


def test_claim_and_release_affinity(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/24")
    claimed, failed = ipam.claim_affinity("10.0.0.0/25", "n1")
    assert claimed == ["10.0.0.0/26", "10.0.0.64/26"] and failed == []
    assert ipam.claim_affinity("10.0.0.0/26", "n2") == ([], ["10.0.0.0/26"])
    assert [a.spec.node for a in client.list(BlockAffinity).items] == ["n1", "n1"]
    got = ipam.assign_ip("10.0.0.1", "h", None, "n1")
    assert ipam.release_affinity("10.0.0.0/26", "n1") is False  # not empty
    assert ipam.store.get_affinity("n1", got.network).spec.state == "confirmed"
    ipam.release_ips(["10.0.0.1"])
    assert ipam.release_affinity("10.0.0.0/26", "n1") is True
    assert ipam.store.get_block(got.network) is None
    assert ipam.store.get_affinity("n1", got.network) is None


def test_pending_affinity_is_ignored_and_interrupted_claim_is_finished(client, ipam) -> None:
    add_pool(client, "p", "10.0.0.0/26")
    net = ipaddress.ip_network("10.0.0.0/26")
    ipam.store.create_affinity("other", net, "pending")  # never got its block
    got, _ = ipam.auto_assign(1, 0, "h", None, "n")
    assert got[0].network == net  # pending claims do not own anything
    # A claim interrupted after creating the block is confirmed on the next assignment.
    add_pool(client, "q", "10.9.0.0/26")
    q = ipaddress.ip_network("10.9.0.0/26")
    ipam.store.create_affinity("m", q, "pending")
    from calico.ipam.blocks import Block

    ipam.store.create_block(Block.new(q, "host:m"))
    again, _ = ipam.auto_assign(1, 0, "h2", None, "m", ipv4_pools=["q"])
    assert again[0].network == q
    assert ipam.store.get_affinity("m", q).spec.state == "confirmed"


def test_config_validation(ipam) -> None:
    assert ipam.get_ipam_config().auto_allocate_blocks is True
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ipam.set_ipam_config(
            IPAMConfigurationSpec.model_construct(
                strict_affinity=False, auto_allocate_blocks=True, max_blocks_per_host=3
            )
        )


def test_threads_never_duplicate(client) -> None:
    add_pool(client, "p", "10.0.0.0/24", blockSize=28)
    results: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        ipam = IPAMClient(client)
        for j in range(8):
            got, _ = ipam.auto_assign(1, 0, f"h{i}-{j}", None, f"n{i % 3}")
            with lock:
                results.append(str(got[0].ip))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 64 and len(set(results)) == 64


step = st.one_of(
    st.tuples(st.just("alloc"), st.sampled_from(["n1", "n2", "n3"]), st.integers(1, 3)),
    st.tuples(st.just("release"), st.integers(0, 1000), st.none()),
    st.tuples(st.just("strict"), st.booleans(), st.none()),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=30))
def test_random_interleavings_never_duplicate(steps: list[tuple]) -> None:
    client = Client(MemoryBackend())
    add_pool(client, "p", "10.0.0.0/27", blockSize=29)
    ipam = IPAMClient(client)
    held: dict[str, str] = {}  # ip -> handle
    n = 0
    for kind, a, b in steps:
        if kind == "alloc":
            n += 1
            try:
                got, _ = ipam.auto_assign(b, 0, f"h{n}", None, a)
            except NoFreeAddressesError:
                continue
            for ip in got:
                assert str(ip.ip) not in held
                held[str(ip.ip)] = f"h{n}"
        elif kind == "release" and held:
            ip = sorted(held)[a % len(held)]
            handle = held.pop(ip)
            if a % 2:
                assert ipam.release_ips([ip]) == []
            else:
                for other in ipam.release_by_handle(handle):
                    held.pop(other, None)
        elif kind == "strict":
            ipam.set_ipam_config(IPAMConfigurationSpec.model_validate({"strictAffinity": a}))
    stored = {
        str(s.block.ip(o))
        for s in ipam.store.list_blocks()
        for o in range(s.block.size)
        if s.block.attr_of(o) is not None
    }
    assert stored == set(held)


def test_load_balancer_use_allocates_with_a_virtual_affinity(client, ipam) -> None:
    add_pool(client, "wl", "10.3.0.0/24")
    add_pool(client, "lb", "10.4.0.0/24", allowedUses=["LoadBalancer"])
    (a,), _ = ipam.auto_assign(1, 0, "lb-x", None, "load-balancer", intended_use="LoadBalancer")
    (b,), _ = ipam.auto_assign(1, 0, "lb-y", None, "load-balancer", intended_use="LoadBalancer")
    assert a.ip in ipaddress.ip_network("10.4.0.0/24") and b.network == a.network
    (stored,) = ipam.store.list_blocks()
    assert stored.block.affinity == "virtual:load-balancer"
    assert stored.block.host() is None  # no node owns it
    (aff,) = ipam.store.list_affinities()
    assert (aff.spec.node, aff.spec.type, aff.spec.state) == (
        "load-balancer",
        "virtual",
        "confirmed",
    )
    # a workload allocation for a host called "load-balancer" is a different owner
    (w,), _ = ipam.auto_assign(1, 0, "w", None, "load-balancer")
    assert w.ip in ipaddress.ip_network("10.3.0.0/24")
    kinds = sorted(s.block.affinity for s in ipam.store.list_blocks())
    assert kinds == ["host:load-balancer", "virtual:load-balancer"]
