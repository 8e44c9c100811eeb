"""The VXLAN desired-state computation (calico.felix.dataplane.vxlan_model)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.dataplane.vxlan_model import (
    RouteSpec,
    Settings,
    VTEPError,
    compute_desired,
    exclusive_proto,
    parse_vtep,
    route_for,
    select_vteps,
)
from calico.felix.messages import IPPoolType, RouteType, RouteUpdate, VXLANTunnelEndpointUpdate

ME = "me"
S4 = Settings(version=4, hostname=ME, mtu=1450)
S6 = Settings(version=6, hostname=ME, mtu=1430)


def vtep(node: str, n: int, **kw) -> VXLANTunnelEndpointUpdate:
    base = dict(
        node=node,
        mac=f"66:00:00:00:00:{n:02x}",
        ipv4_addr=f"10.244.{n}.0",
        parent_device_ip=f"10.0.0.{n}",
        mac_v6=f"66:00:00:00:06:{n:02x}",
        ipv6_addr=f"fd10:{n}::",
        parent_device_ipv6=f"fd00::{n}",
    )
    base.update(kw)
    return VXLANTunnelEndpointUpdate(**base)


def route(dst: str, node: str, *types: RouteType, **kw) -> RouteUpdate:
    return RouteUpdate(
        dst=dst,
        types=frozenset(types or (RouteType.REMOTE_WORKLOAD,)),
        ip_pool_type=kw.pop("pool", IPPoolType.VXLAN),
        dst_node_name=node,
        dst_node_ip=kw.pop("node_ip", "10.0.0.2"),
        **kw,
    )


def test_exclusive_proto_follows_device_route_protocol():
    assert exclusive_proto(3) == 80
    assert exclusive_proto(99) == 99


def test_own_vtep_makes_the_device_and_remotes_make_l2_entries():
    d = compute_desired(S4, {ME: vtep(ME, 1), "b": vtep("b", 2)}, {})
    assert d.device is not None
    assert (d.device.name, d.device.vni, d.device.port, d.device.mtu) == (
        "vxlan.calico",
        4096,
        4789,
        1450,
    )
    assert (d.device.mac, d.device.local_ip, d.device.address) == (
        "66:00:00:00:00:01",
        "10.0.0.1",
        "10.244.1.0",
    )
    assert d.neighbours == {"10.244.2.0": "66:00:00:00:00:02"}
    assert d.fdb == {"66:00:00:00:00:02": "10.0.0.2"}
    assert d.remote_node_ips == {"10.0.0.2"}
    assert d.errors == []


def test_v6_device_shares_vni_and_port_and_uses_v6_fields():
    d = compute_desired(S6, {ME: vtep(ME, 1), "b": vtep("b", 2)}, {})
    assert d.device is not None
    assert (d.device.name, d.device.vni, d.device.port) == ("vxlan-v6.calico", 4096, 4789)
    assert (d.device.mac, d.device.local_ip, d.device.address) == (
        "66:00:00:00:06:01",
        "fd00::1",
        "fd10:1::",
    )
    assert d.neighbours == {"fd10:2::": "66:00:00:00:06:02"}
    assert d.fdb == {"66:00:00:00:06:02": "fd00::2"}


def test_no_own_vtep_means_no_device_but_remote_entries_are_known():
    d = compute_desired(S4, {"b": vtep("b", 2)}, {})
    assert d.device is None
    assert d.fdb == {"66:00:00:00:00:02": "10.0.0.2"}


def test_vtep_lacking_the_family_is_ignored():
    v4_only = vtep("b", 2, ipv6_addr="", mac_v6="", parent_device_ipv6="")
    assert parse_vtep(v4_only, 6) is None
    assert compute_desired(S6, {"b": v4_only}, {}).fdb == {}


def test_remote_block_goes_via_peer_tunnel_ip_onlink_with_mtu_and_boot_proto():
    vteps = {ME: vtep(ME, 1), "b": vtep("b", 2)}
    d = compute_desired(S4, vteps, {"r": route("10.244.2.0/26", "b")})
    assert d.routes == {
        "10.244.2.0/26": RouteSpec(
            "10.244.2.0/26",
            device="vxlan.calico",
            gateway="10.244.2.0",
            proto=3,
            onlink=True,
            mtu=1450,
        )
    }


def test_remote_route_waits_for_the_peer_vtep():
    d = compute_desired(S4, {ME: vtep(ME, 1)}, {"r": route("10.244.2.0/26", "b")})
    assert d.routes == {}


def test_cross_subnet_same_subnet_goes_direct_on_the_parent_with_proto_80():
    r = route("10.244.2.0/26", "b", same_subnet=True)
    vteps = {ME: vtep(ME, 1), "b": vtep("b", 2)}
    d = compute_desired(S4, vteps, {"r": r}, parent="eth0")
    assert d.routes["10.244.2.0/26"] == RouteSpec(
        "10.244.2.0/26", device="eth0", gateway="10.0.0.2", proto=80, onlink=True
    )
    # Parent not known yet: the tunnel route instead (traffic still flows).
    d = compute_desired(S4, vteps, {"r": r}, parent="")
    assert d.routes["10.244.2.0/26"].device == "vxlan.calico"


def test_own_blocks_are_blackholed_except_single_ips_and_local_workloads():
    routes = {
        "blk": route("10.244.1.0/26", ME, RouteType.LOCAL_WORKLOAD),
        "one": route("10.244.1.7/32", ME, RouteType.LOCAL_WORKLOAD),
        "wl": route("10.244.1.64/26", ME, RouteType.LOCAL_WORKLOAD, local_workload=True),
    }
    d = compute_desired(S4, {ME: vtep(ME, 1)}, routes)
    assert d.routes == {"10.244.1.0/26": RouteSpec("10.244.1.0/26", proto=80)}
    assert d.routes["10.244.1.0/26"].blackhole


def test_peer_tunnel_ip_routes_are_scope_link_on_the_device():
    vteps = {ME: vtep(ME, 1), "b": vtep("b", 2)}
    dedicated = route("10.99.0.2/32", "b", RouteType.REMOTE_TUNNEL, RouteType.REMOTE_WORKLOAD)
    borrowed = route("10.99.0.3/32", "b", RouteType.REMOTE_TUNNEL, borrowed=True)
    plain = route("10.99.0.4/32", "b", RouteType.REMOTE_TUNNEL)
    d = compute_desired(S4, vteps, {"a": dedicated, "b": borrowed, "c": plain})
    assert set(d.routes) == {"10.99.0.2/32", "10.99.0.3/32"}
    assert d.routes["10.99.0.2/32"] == RouteSpec(
        "10.99.0.2/32", device="vxlan.calico", proto=3, scope=253, mtu=1450
    )


@pytest.mark.parametrize(
    "r",
    [
        route("10.244.2.0/26", "b", pool=IPPoolType.NO_ENCAP),
        route("10.244.2.0/26", "b", pool=IPPoolType.IPIP),
        route("10.0.0.2/32", "b", RouteType.REMOTE_HOST),
        route("fd10:2::/122", "b"),  # other family
        route("10.244.1.0/26", ME, RouteType.LOCAL_TUNNEL),
    ],
)
def test_routes_this_manager_does_not_program(r):
    assert route_for(S4, r, {}, "eth0") is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mac", "zz:zz", "node b: malformed VXLAN tunnel MAC 'zz:zz'"),
        ("mac", "67:00:00:00:00:02", "is a multicast address"),
        ("ipv4_addr", "10.244.x", "node b: malformed VXLAN tunnel address '10.244.x'"),
        ("ipv4_addr", "fd10::1", "VXLAN tunnel address 'fd10::1' is not IPv4"),
        ("parent_device_ip", "nope", "node b: malformed VXLAN node address 'nope'"),
    ],
)
def test_malformed_vteps_raise_specific_errors(field, value, message):
    with pytest.raises(VTEPError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_vtep(vtep("b", 2, **{field: value}), 4)


def test_bad_vtep_is_skipped_and_others_survive():
    vteps = {ME: vtep(ME, 1), "b": vtep("b", 2, mac="bogus"), "c": vtep("c", 3)}
    d = compute_desired(S4, vteps, {})
    assert d.fdb == {"66:00:00:00:00:03": "10.0.0.3"}
    assert d.errors == ["node b: malformed VXLAN tunnel MAC 'bogus'; ignoring its VTEP"]


def test_duplicate_tunnel_ip_first_by_name_wins_own_node_first():
    vteps = {
        "zed": vtep("zed", 9, ipv4_addr="10.244.2.0"),
        "b": vtep("b", 2),
        ME: vtep(ME, 1, ipv4_addr="10.244.2.0"),  # own node claims it too
    }
    own, remotes, errors = select_vteps(S4, vteps)
    assert own is not None and own.tunnel_ip == "10.244.2.0"
    assert remotes == {}
    assert errors == [
        "nodes me and b both claim VXLAN tunnel address 10.244.2.0; ignoring b's VTEP",
        "nodes me and zed both claim VXLAN tunnel address 10.244.2.0; ignoring zed's VTEP",
    ]


def test_duplicate_mac_is_reported():
    vteps = {"b": vtep("b", 2), "c": vtep("c", 3, mac="66:00:00:00:00:02")}
    _, remotes, errors = select_vteps(S4, vteps)
    assert list(remotes) == ["b"]
    assert errors == [
        "nodes b and c both claim VXLAN tunnel MAC 66:00:00:00:00:02; ignoring c's VTEP"
    ]


def test_mac_is_canonicalised():
    got = parse_vtep(vtep("b", 2, mac="66-AA-bb-CC-dd-EE"), 4)
    assert got is not None and got.mac == "66:aa:bb:cc:dd:ee"


# -- properties ----------------------------------------------------------------------------

nodes = st.dictionaries(
    st.sampled_from(["me", "a", "b", "c", "d", "e"]),
    st.tuples(st.integers(1, 6), st.integers(1, 6), st.booleans()),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(nodes)
def test_desired_l2_state_is_consistent_and_order_independent(spec):
    """Whatever the (possibly clashing, possibly broken) VTEPs: each tunnel IP and MAC has one
    owner, neighbour and FDB entries pair up, the own node never appears as a remote, and
    the result does not depend on message order."""
    vteps = {
        node: vtep(
            node,
            1,
            ipv4_addr=f"10.244.{ip}.0",
            mac=f"66:00:00:00:00:{mac:02x}" if ok else "broken",
            parent_device_ip=f"10.0.0.{ip}",
        )
        for node, (ip, mac, ok) in spec.items()
    }
    d = compute_desired(S4, vteps, {})
    rev = compute_desired(S4, dict(reversed(list(vteps.items()))), {})
    assert (d.neighbours, d.fdb, d.device, sorted(d.errors)) == (
        rev.neighbours,
        rev.fdb,
        rev.device,
        sorted(rev.errors),
    )
    assert sorted(d.neighbours.values()) == sorted(d.fdb)  # one MAC per neighbour, and back
    if d.device is not None:
        assert d.device.address not in d.neighbours
        assert d.device.mac not in d.fdb
    accepted = len(d.neighbours) + (d.device is not None)
    assert accepted + len(d.errors) == len(vteps)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 255), st.sampled_from([24, 26, 32]), st.booleans(), st.booleans()),
        max_size=12,
    )
)
def test_every_route_is_tunnel_direct_or_blackhole_of_its_family(items):
    vteps = {ME: vtep(ME, 1), "b": vtep("b", 2)}
    routes = {}
    for i, (octet, plen, local, same) in enumerate(items):
        net = ipaddress.ip_network(f"10.244.{octet}.0/{plen}", strict=False)
        node = ME if local else "b"
        kind = RouteType.LOCAL_WORKLOAD if local else RouteType.REMOTE_WORKLOAD
        routes[str(i)] = route(str(net), node, kind, same_subnet=same and not local)
    d = compute_desired(S4, vteps, routes, parent="eth0")
    for cidr, spec in d.routes.items():
        net = ipaddress.ip_network(cidr)
        assert net.version == 4
        if spec.blackhole:
            assert net.prefixlen < 32 and spec.proto == 80
        elif spec.device == "eth0":
            assert (spec.gateway, spec.proto, spec.onlink, spec.mtu) == ("10.0.0.2", 80, True, 0)
        else:
            assert (spec.device, spec.gateway, spec.onlink, spec.mtu, spec.proto) == (
                "vxlan.calico",
                "10.244.2.0",
                True,
                1450,
                3,
            )
