"""Worked path <-> key examples, one or more per row of the key path grammar."""

from __future__ import annotations

from ipaddress import ip_address, ip_network
from typing import Any

import pytest

from calico.model import (
    ActiveStatusReportKey,
    BlockAffinityKey,
    BlockKey,
    GlobalBGPConfigKey,
    GlobalBGPPeerKey,
    GlobalConfigKey,
    HostConfigKey,
    HostEndpointKey,
    HostEndpointStatusKey,
    HostMetadataKey,
    InvalidKeyError,
    IPAMHandleKey,
    IPPoolKey,
    Key,
    LastStatusReportKey,
    NetworkSetKey,
    NodeBGPConfigKey,
    NodeBGPPeerKey,
    PolicyKey,
    ProfileLabelsKey,
    ProfileRulesKey,
    ReadyFlagKey,
    ResourceKey,
    TierKey,
    WireguardKey,
    WorkloadEndpointKey,
    WorkloadEndpointStatusKey,
    block_affinity_prefix,
    escape_name,
    felix_status_prefix,
    host_config_prefix,
    host_workload_prefix,
    ip_pool_prefix,
    ipam_block_prefix,
    key_from_default_path,
    policy_prefix,
    resource_prefix,
    unescape_name,
    upgrade_legacy_policy,
)
from calico.model.resources import KINDS

WEP = WorkloadEndpointKey("node1", "k8s", "default/nginx-abc", "eth0")

# (canonical path, key): parse(path) == key and key.default_path() == path.
CANONICAL: list[tuple[str, Key]] = [
    ("/calico/v1/Ready", ReadyFlagKey()),
    ("/calico/v1/config/LogSeverityScreen", GlobalConfigKey("LogSeverityScreen")),
    ("/calico/v1/config/a/b%2f", GlobalConfigKey("a/b%2f")),  # config names are not escaped
    ("/calico/v1/host/node1/config/IpInIpTunnelAddr", HostConfigKey("node1", "IpInIpTunnelAddr")),
    ("/calico/v1/host/node1/workload/k8s/default%2fnginx-abc/endpoint/eth0", WEP),
    (
        "/calico/v1/host/h/workload/o%25x/ns%2fw%252f/endpoint/e%2f1",
        WorkloadEndpointKey("h", "o%x", "ns/w%2f", "e/1"),
    ),
    ("/calico/v1/host/node1/endpoint/eth0", HostEndpointKey("node1", "eth0")),
    ("/calico/v1/host/node1/endpoint/a%2fb%25", HostEndpointKey("node1", "a/b%")),
    ("/calico/v1/host/node1/metadata", HostMetadataKey("node1")),
    ("/calico/v1/host/node1/wireguard", WireguardKey("node1")),
    (
        "/calico/v1/policy/GlobalNetworkPolicy//allow-dns",
        PolicyKey("GlobalNetworkPolicy", "", "allow-dns"),
    ),
    (
        "/calico/v1/policy/NetworkPolicy/prod/default.web",
        PolicyKey("NetworkPolicy", "prod", "default.web"),
    ),
    ("/calico/v1/policy/tier/security/metadata", TierKey("security")),
    ("/calico/v1/policy/profile/kns.default/rules", ProfileRulesKey("kns.default")),
    ("/calico/v1/policy/profile/kns.default/labels", ProfileLabelsKey("kns.default")),
    ("/calico/v1/policy/profile/a%2fb%25c/rules", ProfileRulesKey("a/b%c")),
    ("/calico/v1/netset/ns%2fname", NetworkSetKey("ns/name")),
    ("/calico/v1/netset/global-set", NetworkSetKey("global-set")),
    ("/calico/v1/ipam/v4/pool/10.0.0.0-8", IPPoolKey(ip_network("10.0.0.0/8"))),
    ("/calico/v1/ipam/v6/pool/fd00::-64", IPPoolKey(ip_network("fd00::/64"))),
    (
        "/calico/ipam/v2/assignment/ipv4/block/192.168.0.64-26",
        BlockKey(ip_network("192.168.0.64/26")),
    ),
    ("/calico/ipam/v2/assignment/ipv6/block/fd00:1::-122", BlockKey("fd00:1::/122")),
    (
        "/calico/ipam/v2/host/node1/ipv4/block/10.0.1.0-26",
        BlockAffinityKey("node1", "10.0.1.0/26"),
    ),
    (
        "/calico/ipam/v2/host/node1/ipv6/block/fd00::40-122",
        BlockAffinityKey("node1", "fd00::40/122"),
    ),
    ("/calico/ipam/v2/handle/k8s-pod-network.abc123", IPAMHandleKey("k8s-pod-network.abc123")),
    ("/calico/bgp/v1/global/as_num", GlobalBGPConfigKey("as_num")),
    (
        "/calico/bgp/v1/global/prefix_advertisements/ip_v4",
        GlobalBGPConfigKey("prefix_advertisements/ip_v4"),
    ),
    ("/calico/bgp/v1/global/peer_v4", GlobalBGPConfigKey("peer_v4")),
    ("/calico/bgp/v1/host/node1/ip_addr_v4", NodeBGPConfigKey("node1", "ip_addr_v4")),
    ("/calico/bgp/v1/global/peer_v4/10.0.0.1", GlobalBGPPeerKey(ip_address("10.0.0.1"))),
    ("/calico/bgp/v1/global/peer_v6/fd00::1-1790", GlobalBGPPeerKey("fd00::1", 1790)),
    ("/calico/bgp/v1/host/node1/peer_v4/10.0.0.2", NodeBGPPeerKey("node1", "10.0.0.2")),
    ("/calico/bgp/v1/host/node1/peer_v6/fd00::2-180", NodeBGPPeerKey("node1", "fd00::2", 180)),
    ("/calico/resources/v3/projectcalico.org/nodes/node1", ResourceKey("Node", "node1")),
    (
        "/calico/resources/v3/projectcalico.org/networkpolicies/prod/allow",
        ResourceKey("NetworkPolicy", "allow", "prod"),
    ),
    (
        "/calico/resources/v3/projectcalico.org/bgpfilters/f1",
        ResourceKey("BGPFilter", "f1"),
    ),
    ("/calico/felix/v1/host/node1/endpoint/eth0", HostEndpointStatusKey("node1", "eth0")),
    ("/calico/felix/v1/host/node1/endpoint/a%2fb", HostEndpointStatusKey("node1", "a/b")),
    ("/calico/felix/v2/no-region/host/node1/status", ActiveStatusReportKey("node1")),
    (
        "/calico/felix/v2/region-eu/host/node1/last_reported_status",
        LastStatusReportKey("node1", "region-eu"),
    ),
    (
        "/calico/felix/v2/no-region/host/node1/workload/k8s/default%2fnginx/endpoint/eth0",
        WorkloadEndpointStatusKey("node1", "k8s", "default/nginx", "eth0"),
    ),
]

# (non-canonical path, key): parses to key, but key renders the canonical form.
NON_CANONICAL: list[tuple[str, Key]] = [
    ("calico/v1/config/Foo", GlobalConfigKey("Foo")),  # v1 paths may omit the leading slash
    ("calico/v1/host/node1/workload/k8s/default%2fnginx-abc/endpoint/eth0", WEP),
    (
        "calico/v1/policy/GlobalNetworkPolicy//allow-dns",
        PolicyKey("GlobalNetworkPolicy", "", "allow-dns"),
    ),
    ("calico/ipam/v2/handle/h1", IPAMHandleKey("h1")),
    ("calico/bgp/v1/global/as_num", GlobalBGPConfigKey("as_num")),
    ("calico/felix/v2/no-region/host/n/status", ActiveStatusReportKey("n")),
    ("/calico/v1/ipam/v4/pool/10.1.2.3-8", IPPoolKey("10.0.0.0/8")),  # masked to the network
    ("/calico/ipam/v2/assignment/ipv6/block/fd00::1:2-64", BlockKey("fd00::/64")),
    ("/calico/ipam/v2/host/n/ipv4/block/10.0.1.5-26", BlockAffinityKey("n", "10.0.1.0/26")),
    ("/calico/bgp/v1/global/peer_v4/10.0.0.1-179", GlobalBGPPeerKey("10.0.0.1")),
    ("/calico/v1/ipam/v6/pool/FD00:0::-64", IPPoolKey("fd00::/64")),
]

# Legacy tier-scoped policy paths are upgraded to the kind/namespace/name form.
LEGACY: list[tuple[str, PolicyKey]] = [
    (
        "/calico/v1/policy/tier/default/policy/default.allow-dns",
        PolicyKey("GlobalNetworkPolicy", "", "default.allow-dns"),
    ),
    (
        "/calico/v1/policy/tier/default/policy/prod%2fdefault.web",
        PolicyKey("NetworkPolicy", "prod", "default.web"),
    ),
    (
        "calico/v1/policy/tier/sec/policy/staged:sec.p1",
        PolicyKey("StagedGlobalNetworkPolicy", "", "sec.p1"),
    ),
    (
        "/calico/v1/policy/tier/default/policy/ns%2fstaged:default.p",
        PolicyKey("StagedNetworkPolicy", "ns", "default.p"),
    ),
    (
        "/calico/v1/policy/tier/default/policy/ns%2fknp.default.web",
        PolicyKey("KubernetesNetworkPolicy", "ns", "knp.default.web"),
    ),
    (
        "/calico/v1/policy/tier/default/policy/ns%2fstaged:knp.default.web",
        PolicyKey("StagedKubernetesNetworkPolicy", "ns", "knp.default.web"),
    ),
]

UNKNOWN_OR_MALFORMED = [
    "",
    "/",
    "calico",
    "/calico/v1",
    "/calico/v2/config/Foo",
    "/other/v1/config/Foo",
    "//calico/v1/config/Foo",
    "calico/v1/Ready",  # the Ready key requires the leading slash
    "/calico/v1/Ready/",
    "/calico/v1/config",
    "/calico/v1/config/",
    "/calico/v1/host/node1",
    "/calico/v1/host//metadata",
    "/calico/v1/host/node1/metadata/x",
    "/calico/v1/host/node1/wireguard/x",
    "/calico/v1/host/node1/bird_ip",
    "/calico/v1/host/node1/config/",
    "/calico/v1/host/node1/workload/k8s/default/nginx/endpoint/eth0",  # 10 segments
    "/calico/v1/host/node1/workload/k8s/nginx/endpoint",  # 8 segments
    "/calico/v1/host/node1/workload/k8s/nginx/endpoints/eth0",
    "/calico/v1/host/node1/workload/k8s//endpoint/eth0",
    "/calico/v1/host/node1/endpoint/a/b",
    "/calico/v1/host/node1/endpoint/",
    "/calico/v1/policy/GlobalNetworkPolicy/allow-dns",  # 5 segments
    "/calico/v1/policy/NetworkPolicy/ns/a/b",  # 7 segments
    "/calico/v1/policy/NetworkPolicy/ns/",
    "/calico/v1/policy//ns/name",
    "/calico/v1/policy/tier/default/meta",
    "/calico/v1/policy/tier//metadata",
    "/calico/v1/policy/tier/default/policy/a%2fb%2fc",
    "/calico/v1/policy/tier/default/policy/%2fname",
    "/calico/v1/policy/tier/default/policy/ns%2fstaged:",
    "/calico/v1/policy/tier/default/policies/x",
    "/calico/v1/policy/profile/p/tags",
    "/calico/v1/policy/profile//rules",
    "/calico/v1/netset/a/b",
    "/calico/v1/netset/",
    "/calico/v1/ipam/v4/pool/10.0.0.0",
    "/calico/v1/ipam/v4/pool/10.0.0.0-33",
    "/calico/v1/ipam/v4/pool/fd00::-64",  # family mismatch
    "/calico/v1/ipam/v6/pool/10.0.0.0-8",
    "/calico/v1/ipam/v4/pool/10.0.0.0-255.0.0.0",  # no netmask form
    "/calico/v1/ipam/v4/pool/10.0.0.0-+8",
    "/calico/v1/ipam/v5/pool/10.0.0.0-8",
    "/calico/v1/ipam/v4/pools/10.0.0.0-8",
    "/calico/ipam/v2/assignment/ipv4/block/garbage",
    "/calico/ipam/v2/assignment/ipv4/blocks/10.0.0.0-26",
    "/calico/ipam/v2/assignment/ipv6/block/10.0.0.0-26",
    "/calico/ipam/v2/host/node1/ipv4/block/10.0.0.0-26/x",
    "/calico/ipam/v2/host//ipv4/block/10.0.0.0-26",
    "/calico/ipam/v2/handle/a/b",
    "/calico/ipam/v2/handle/",
    "/calico/ipam/v2/config",
    "/calico/ipam/v1/handle/h",
    "/calico/bgp/v1/global",
    "/calico/bgp/v1/global/",
    "/calico/bgp/v1/global/peer_v4/not-an-ip",
    "/calico/bgp/v1/global/peer_v4/10.0.0.1-99999",
    "/calico/bgp/v1/global/peer_v4/10.0.0.1-0",
    "/calico/bgp/v1/global/peer_v4/fd00::1",
    "/calico/bgp/v1/global/peer_v6/10.0.0.1",
    "/calico/bgp/v1/global/peer_v6/fe80::1%eth0",
    "/calico/bgp/v1/global/peer_v4/10.0.0.1/x",
    "/calico/bgp/v1/host/node1",
    "/calico/bgp/v1/host//as_num",
    "/calico/bgp/v1/host/node1/peer_v4/x/y",
    "/calico/bgp/v2/global/as_num",
    "calico/resources/v3/projectcalico.org/nodes/node1",  # v3 keys require the leading slash
    "/calico/resources/v3/projectcalico.org/unknownthings/x",
    "/calico/resources/v3/projectcalico.org/nodes/ns/node1",  # global kind with a namespace
    "/calico/resources/v3/projectcalico.org/networkpolicies/allow",  # namespaced kind without
    "/calico/resources/v3/projectcalico.org/networkpolicies//allow",
    "/calico/resources/v3/projectcalico.org/nodes/",
    "/calico/resources/v3/projectcalico.org/NetworkPolicies/ns/allow",
    "/calico/resources/v3/example.org/nodes/node1",
    "/calico/resources/v2/projectcalico.org/nodes/node1",
    "/calico/resources/v3/projectcalico.org/nodes/a/b/c",
    "/calico/felix/v1/host/node1/endpoint",
    "/calico/felix/v1/host/node1/status",
    "/calico/felix/v2/no-region/host/node1/status/x",
    "/calico/felix/v2//host/node1/status",
    "/calico/felix/v2/no-region/hosts/node1/status",
    "/calico/felix/v2/no-region/host/node1/endpoint/eth0",
    "/calico/felix/v2/no-region/host/node1/workload/k8s/w/endpoint",
    "/calico/felix/v3/no-region/host/node1/status",
]


@pytest.mark.parametrize(("path", "key"), CANONICAL, ids=[p for p, _ in CANONICAL])
def test_canonical_paths(path: str, key: Key) -> None:
    assert key_from_default_path(path) == key
    assert key.default_path() == path
    assert key.default_delete_path() == path


@pytest.mark.parametrize(("path", "key"), NON_CANONICAL, ids=[p for p, _ in NON_CANONICAL])
def test_non_canonical_paths_parse(path: str, key: Key) -> None:
    parsed = key_from_default_path(path)
    assert parsed == key
    assert key_from_default_path(key.default_path()) == key


@pytest.mark.parametrize(("path", "key"), LEGACY, ids=[p for p, _ in LEGACY])
def test_legacy_policy_paths_upgrade(path: str, key: PolicyKey) -> None:
    assert key_from_default_path(path) == key


@pytest.mark.parametrize("path", UNKNOWN_OR_MALFORMED)
def test_unknown_or_malformed_paths_give_none(path: str) -> None:
    assert key_from_default_path(path) is None


def test_every_key_type_has_a_canonical_example() -> None:
    import calico.model as model

    key_types = {
        obj
        for obj in vars(model).values()
        if isinstance(obj, type) and issubclass(obj, Key) and obj is not Key
    }
    assert key_types == {type(k) for _, k in CANONICAL}


def test_keys_are_frozen_and_hashable() -> None:
    with pytest.raises(AttributeError):
        WEP.hostname = "other"  # type: ignore[misc]
    same = WorkloadEndpointKey("node1", "k8s", "default/nginx-abc", "eth0")
    assert {WEP: 1}[same] == 1
    # Same fields, different types: different keys.
    assert ProfileRulesKey("p") != ProfileLabelsKey("p")
    assert len({ProfileRulesKey("p"), ProfileLabelsKey("p")}) == 2


def test_cidr_fields_are_masked_and_accept_strings() -> None:
    assert IPPoolKey("10.1.2.3/8") == IPPoolKey(ip_network("10.0.0.0/8"))
    assert IPPoolKey("10.1.2.3/8").default_path() == "/calico/v1/ipam/v4/pool/10.0.0.0-8"
    assert (
        BlockKey("fd00::1/64").default_path() == "/calico/ipam/v2/assignment/ipv6/block/fd00::-64"
    )
    assert GlobalBGPPeerKey("10.0.0.1", 0) == GlobalBGPPeerKey("10.0.0.1", 179)


def test_resource_kind_is_canonicalised() -> None:
    assert ResourceKey("networkpolicy", "a", "ns") == ResourceKey("NetworkPolicy", "a", "ns")
    assert ResourceKey("node", "n").default_path().endswith("/nodes/n")


#: Keys whose path would not parse back to them: (type, constructor arguments).
UNRENDERABLE: list[tuple[type[Key], tuple[Any, ...]]] = [
    (GlobalConfigKey, ("",)),
    (
        HostConfigKey,
        (
            "a/b",
            "x",
        ),
    ),
    (
        HostConfigKey,
        (
            "h",
            "",
        ),
    ),
    (
        WorkloadEndpointKey,
        (
            "",
            "k8s",
            "w",
            "e",
        ),
    ),
    (
        WorkloadEndpointKey,
        (
            "h/x",
            "k8s",
            "w",
            "e",
        ),
    ),
    (
        WorkloadEndpointKey,
        (
            "h",
            "k8s",
            "",
            "e",
        ),
    ),
    (
        HostEndpointKey,
        (
            "h",
            "",
        ),
    ),
    (HostMetadataKey, ("",)),
    (WireguardKey, ("a/b",)),
    (
        PolicyKey,
        (
            "tier",
            "default",
            "metadata",
        ),
    ),  # would collide with TierKey's path
    (
        PolicyKey,
        (
            "profile",
            "p",
            "rules",
        ),
    ),
    (
        PolicyKey,
        (
            "NetworkPolicy",
            "a/b",
            "n",
        ),
    ),
    (
        PolicyKey,
        (
            "NetworkPolicy",
            "ns",
            "a/b",
        ),
    ),
    (
        PolicyKey,
        (
            "",
            "",
            "n",
        ),
    ),
    (TierKey, ("",)),
    (ProfileRulesKey, ("",)),
    (NetworkSetKey, ("",)),
    (IPAMHandleKey, ("a/b",)),
    (
        BlockAffinityKey,
        (
            "",
            "10.0.0.0/26",
        ),
    ),
    (GlobalBGPConfigKey, ("peer_v4/10.0.0.1",)),  # would collide with the peering path
    (
        NodeBGPConfigKey,
        (
            "n",
            "peer_v6/x",
        ),
    ),
    (
        NodeBGPConfigKey,
        (
            "",
            "as_num",
        ),
    ),
    (
        ResourceKey,
        (
            "Unknown",
            "x",
        ),
    ),
    (
        ResourceKey,
        (
            "Node",
            "x",
            "ns",
        ),
    ),
    (
        ResourceKey,
        (
            "NetworkPolicy",
            "x",
        ),
    ),
    (
        ResourceKey,
        (
            "Node",
            "a/b",
        ),
    ),
    (
        HostEndpointStatusKey,
        (
            "h",
            "",
        ),
    ),
    (
        ActiveStatusReportKey,
        (
            "h",
            "a/b",
        ),
    ),
    (
        LastStatusReportKey,
        (
            "",
            "no-region",
        ),
    ),
    (
        WorkloadEndpointStatusKey,
        (
            "h",
            "o",
            "w",
            "e",
            "",
        ),
    ),
]


@pytest.mark.parametrize(("cls", "args"), UNRENDERABLE, ids=lambda v: repr(v))
def test_keys_without_a_valid_path_cannot_be_built(cls: type[Key], args: tuple[Any, ...]) -> None:
    """The constructor renders the path once: no key in flight lacks a valid path."""
    with pytest.raises(InvalidKeyError):
        cls(*args)


def test_invalid_constructor_values() -> None:
    with pytest.raises(InvalidKeyError):
        GlobalBGPPeerKey("10.0.0.1", 70000)
    with pytest.raises(InvalidKeyError):
        GlobalBGPPeerKey("fe80::1%eth0")
    with pytest.raises(ValueError):
        IPPoolKey("not-a-cidr")


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [("a", "a"), ("ns/pod", "ns%2fpod"), ("%", "%25"), ("%2f", "%252f"), ("a%/b", "a%25%2fb")],
)
def test_escape_name(raw: str, escaped: str) -> None:
    assert escape_name(raw) == escaped
    assert unescape_name(escaped) == raw


def test_upgrade_legacy_policy_rejects_bad_names() -> None:
    assert upgrade_legacy_policy("", "x") is None
    assert upgrade_legacy_policy("t", "") is None
    assert upgrade_legacy_policy("t", "/x") is None


def test_list_prefixes_cover_their_keys() -> None:
    assert WEP.default_path().startswith(host_workload_prefix("node1"))
    assert WEP.default_path().startswith(host_workload_prefix("node1", "k8s", "default/nginx-abc"))
    assert not WEP.default_path().startswith(host_workload_prefix("node"))
    assert host_config_prefix("n") == "/calico/v1/host/n/config/"
    assert PolicyKey("NetworkPolicy", "ns", "p").default_path().startswith(policy_prefix())
    assert policy_prefix("GlobalNetworkPolicy", "") == "/calico/v1/policy/GlobalNetworkPolicy//"
    assert ipam_block_prefix() == "/calico/ipam/v2/assignment/"
    assert ipam_block_prefix(6) == "/calico/ipam/v2/assignment/ipv6/block/"
    assert (
        BlockAffinityKey("n", "10.0.0.0/26")
        .default_path()
        .startswith(block_affinity_prefix("n", 4))
    )
    assert ip_pool_prefix(4) == "/calico/v1/ipam/v4/pool/"
    assert resource_prefix("NetworkPolicy", "prod") == (
        "/calico/resources/v3/projectcalico.org/networkpolicies/prod/"
    )
    assert (
        ActiveStatusReportKey("n").default_path().startswith(felix_status_prefix("n", "no-region"))
    )
    with pytest.raises(InvalidKeyError):
        resource_prefix("Node", "ns")
    with pytest.raises(InvalidKeyError):
        policy_prefix("tier")
    with pytest.raises(InvalidKeyError):
        host_workload_prefix("n", workload_id="w")
    with pytest.raises(InvalidKeyError):
        ipam_block_prefix(5)


def test_kind_table_matches_api_models() -> None:
    """Our plural table must agree with the v3 resource models wherever both know a kind."""
    base = pytest.importorskip("calico.api.base")
    pytest.importorskip("calico.api")
    for kind, cls in base.kinds().items():
        assert kind in KINDS, f"model kind table lacks {kind}"
        assert KINDS[kind].plural == cls.PLURAL, kind
        assert KINDS[kind].namespaced == cls.NAMESPACED, kind
