"""Property tests: every key round-trips through its path; the parser never crashes."""

from __future__ import annotations

from ipaddress import ip_network

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.model import (
    KINDS,
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
    escape_name,
    host_workload_prefix,
    key_from_default_path,
    unescape_name,
)

# Characters that stress the encodings, plus arbitrary unicode (no lone surrogates).
_tricky = st.sampled_from(["/", "%", "-", "2f", "25", "%2f", "%25", "%2F", ".", ":", "é", "日"])
_char = st.one_of(_tricky, st.characters(blacklist_categories=("Cs",)))


def _text(min_size: int = 1) -> st.SearchStrategy[str]:
    return (
        st.lists(_char, min_size=min_size, max_size=8)
        .map("".join)
        .filter(lambda s: len(s) >= min_size)
    )


# Fields written verbatim as one segment: anything but '/'.
segment = _text().map(lambda s: s.replace("/", "_"))
# Escaped fields and multi-segment config names: anything at all.
anything = _text()
bgp_name = anything.filter(
    lambda s: s.partition("/")[0] not in ("peer_v4", "peer_v6") or "/" not in s
)
policy_kind = st.one_of(
    st.sampled_from(["GlobalNetworkPolicy", "NetworkPolicy", "StagedNetworkPolicy"]),
    segment.filter(lambda s: s not in ("tier", "profile")),
)


@st.composite
def networks(draw: st.DrawFn) -> object:
    version = draw(st.sampled_from([4, 6]))
    addr = draw(st.ip_addresses(v=version))
    plen = draw(st.integers(0, 32 if version == 4 else 128))
    return ip_network(f"{addr}/{plen}", strict=False)


@st.composite
def resource_keys(draw: st.DrawFn) -> ResourceKey:
    info = draw(st.sampled_from(list(KINDS.values())))
    namespace = draw(segment) if info.namespaced else ""
    return ResourceKey(info.kind, draw(segment), namespace)


ports = st.integers(1, 65535)

all_keys: st.SearchStrategy[Key] = st.one_of(
    st.just(ReadyFlagKey()),
    st.builds(GlobalConfigKey, anything),
    st.builds(HostConfigKey, segment, anything),
    st.builds(WorkloadEndpointKey, segment, anything, anything, anything),
    st.builds(HostEndpointKey, segment, anything),
    st.builds(HostMetadataKey, segment),
    st.builds(WireguardKey, segment),
    st.builds(PolicyKey, policy_kind, st.one_of(st.just(""), segment), segment),
    st.builds(TierKey, anything),
    st.builds(ProfileRulesKey, anything),
    st.builds(ProfileLabelsKey, anything),
    st.builds(NetworkSetKey, anything),
    st.builds(IPPoolKey, networks()),
    st.builds(BlockKey, networks()),
    st.builds(BlockAffinityKey, segment, networks()),
    st.builds(IPAMHandleKey, segment),
    st.builds(GlobalBGPConfigKey, bgp_name),
    st.builds(NodeBGPConfigKey, segment, bgp_name),
    st.builds(GlobalBGPPeerKey, st.ip_addresses(), ports),
    st.builds(NodeBGPPeerKey, segment, st.ip_addresses(), ports),
    resource_keys(),
    st.builds(HostEndpointStatusKey, segment, anything),
    st.builds(WorkloadEndpointStatusKey, segment, anything, anything, anything, segment),
    st.builds(ActiveStatusReportKey, segment, segment),
    st.builds(LastStatusReportKey, segment, segment),
)


@settings(max_examples=600)
@given(all_keys)
def test_round_trip(key: Key) -> None:
    path = key.default_path()
    assert path.startswith("/calico/")
    assert key_from_default_path(path) == key
    if not type(key).LEADING_SLASH_REQUIRED:
        assert key_from_default_path(path[1:]) == key
    else:
        assert key_from_default_path(path[1:]) is None


@given(anything)
def test_escape_round_trip(name: str) -> None:
    escaped = escape_name(name)
    assert "/" not in escaped
    assert unescape_name(escaped) == name


@given(segment, anything, anything, anything)
def test_workload_prefixes_cover_the_key(host: str, orch: str, wl: str, ep: str) -> None:
    path = WorkloadEndpointKey(host, orch, wl, ep).default_path()
    assert path.startswith(host_workload_prefix(host))
    assert path.startswith(host_workload_prefix(host, orch))
    assert path.startswith(host_workload_prefix(host, orch, wl))


_TOKENS = [
    "", "calico", "v1", "v2", "v3", "host", "workload", "endpoint", "config", "policy", "tier",
    "profile", "rules", "labels", "metadata", "wireguard", "netset", "ipam", "v4", "v6", "pool",
    "ipv4", "ipv6", "block", "assignment", "handle", "bgp", "global", "peer_v4", "peer_v6",
    "resources", "projectcalico.org", "nodes", "networkpolicies", "felix", "status",
    "last_reported_status", "Ready", "10.0.0.0-8", "10.1.2.3-33", "fd00::-64", "10.0.0.1",
    "fd00::1-200", "1.2.3.4-0", "a%2fb", "%25", "%2F", "x", "staged:x", "knp.default.y",
    "ns%2fn", "ns%2fstaged:knp.default.z", "GlobalNetworkPolicy", "no-region",
]  # fmt: skip
_token = st.sampled_from(_TOKENS)


@st.composite
def mutated_paths(draw: st.DrawFn) -> str:
    """A valid key path with one segment replaced, deleted or inserted: near-misses."""
    segments = draw(all_keys).default_path()[1:].split("/")
    index = draw(st.integers(0, len(segments)))
    action = draw(st.sampled_from(["replace", "delete", "insert"]))
    new = draw(st.one_of(_token, _text(0)))
    if action == "insert" or index == len(segments):
        segments.insert(index, new)
    elif action == "delete":
        del segments[index]
    else:
        segments[index] = new
    return ("/" if draw(st.booleans()) else "") + "/".join(segments)


token_paths = st.builds(
    lambda rooted, rest: ("/" if rooted else "") + "/".join(["calico", *rest]),
    st.booleans(),
    st.lists(_token, min_size=1, max_size=9),
)


@settings(max_examples=700)
@given(st.one_of(mutated_paths(), token_paths))
def test_parser_is_total_and_canonicalises(path: str) -> None:
    key = key_from_default_path(path)
    if key is not None:
        # Anything the parser accepts renders, and re-parses to the same key.
        assert key_from_default_path(key.default_path()) == key
