"""Bucket ring behaviour at exact boundaries (the property test covers the combinations)."""

from __future__ import annotations

import pytest

from calico.goldmane.queries import QueryError
from calico.goldmane.ring import BucketRing
from calico.goldmane.types import Counters, Flow, FlowKey, PolicyHit
from calico.proto.goldmane import api_pb2 as pb

T0 = 1_700_000_010  # a multiple of 15
ALLOW_HIT = PolicyHit(pb.CalicoNetworkPolicy, "ns1", "allow-80", "default", pb.Allow, 0, 0)
DENY_HIT = PolicyHit(pb.CalicoNetworkPolicy, "ns1", "deny-all", "default", pb.Deny, 1, 2)
EOT_HIT = PolicyHit(
    pb.EndOfTier, "", "", "security", pb.Deny, 1, -1, trigger=DENY_HIT._replace(tier="security")
)


def key(src: str = "client-*", dst: str = "server-*", port: int = 80, **kw: object) -> FlowKey:
    return FlowKey(
        source_name=src,
        source_namespace="ns1",
        source_type=pb.WorkloadEndpoint,
        dest_name=dst,
        dest_namespace="ns2",
        dest_type=pb.WorkloadEndpoint,
        dest_port=port,
        proto="tcp",
        reporter=pb.Dst,
        action=pb.Allow,
        enforced=(ALLOW_HIT,),
    )._replace(**kw)


def flow(k: FlowKey, start: int, packets: int = 1, src_labels=("app=a", "env=x")) -> Flow:
    return Flow(
        k,
        start,
        start + 5,
        frozenset(src_labels),
        frozenset({"app=b"}),
        Counters(packets, 2 * packets, 10, 20, 1, 0, 1),
    )


def list_all(ring: BucketRing, now: int = T0, **kw: object) -> list:
    res = ring.list(pb.FlowListRequest(**kw), now)
    return res.flows


def test_geometry_head_is_one_interval_ahead_and_ring_spans_242_buckets() -> None:
    ring = BucketRing(T0 + 7)
    assert ring.head_start == T0 + 15
    assert ring.next_rollover == T0 + 15  # the filling bucket [T0, T0+15) ends there
    assert ring.streaming_start == T0 - 15
    assert ring.oldest_start == T0 + 15 - 241 * 15


def test_flow_lands_by_start_time_and_out_of_range_is_dropped() -> None:
    ring = BucketRing(T0)
    assert ring.add(flow(key(), T0 + 29))  # head bucket [T0+15, T0+30): clock skew allowed
    assert not ring.add(flow(key(), T0 + 30))  # beyond the head
    assert ring.add(flow(key(), ring.oldest_start))
    assert not ring.add(flow(key(), ring.oldest_start - 1))
    starts = sorted(r.flow.start_time for r in ring.backfill(ring.oldest_start, None, T0))
    assert starts == [ring.oldest_start]


def test_same_key_in_a_bucket_sums_counters_and_intersects_labels() -> None:
    ring = BucketRing(T0)
    ring.add(flow(key(), T0 + 1, packets=3))
    ring.add(flow(key(), T0 + 14, packets=4, src_labels=("app=a", "env=y")))
    [res] = list_all(ring)
    assert res.flow.counters.packets_in == 7
    assert res.flow.counters.packets_out == 14
    assert res.flow.source_labels == {"app=a"}
    assert (res.flow.start_time, res.flow.end_time) == (T0, T0 + 15)


def test_list_aggregates_a_key_over_buckets_in_range() -> None:
    ring = BucketRing(T0)
    ring.add(flow(key(), T0 - 30, packets=1))
    ring.add(flow(key(), T0, packets=2))
    [res] = list_all(ring)
    assert (res.flow.start_time, res.flow.end_time, res.flow.counters.packets_in) == (
        T0 - 30,
        T0 + 15,
        3,
    )
    # [gte, lt) on bucket starts: lt == a bucket's start excludes that bucket.
    [res] = list_all(ring, start_time_gte=T0 - 30, start_time_lt=T0)
    assert res.flow.counters.packets_in == 1
    [res] = list_all(ring, start_time_gte=-15)  # relative: from now-15 = T0-15
    assert res.flow.counters.packets_in == 2
    assert list_all(ring, start_time_gte=T0 - 29, start_time_lt=T0) == []


def test_time_validation_messages() -> None:
    ring = BucketRing(T0)
    with pytest.raises(QueryError, match=r"startTimeGt \(5\) must be less than startTimeLt \(5\)"):
        ring.list(pb.FlowListRequest(start_time_gte=5, start_time_lt=5), T0)
    with pytest.raises(QueryError, match="at most one sort order is supported"):
        ring.list(pb.FlowListRequest(sort_by=[pb.SortOption(), pb.SortOption()]), T0)
    with pytest.raises(QueryError, match="unsupported sort order: DestType"):
        ring.list(pb.FlowListRequest(sort_by=[pb.SortOption(sort_by=pb.DestType)]), T0)
    with pytest.raises(QueryError, match="multiple of 15"):
        ring.list(pb.FlowListRequest(aggregation_interval=20), T0)
    with pytest.raises(QueryError, match="page must not be negative"):
        ring.list(pb.FlowListRequest(page=-1), T0)


def test_time_sort_newest_first_ties_by_newest_key_and_pagination() -> None:
    ring = BucketRing(T0)
    ring.add(flow(key(dst="old"), T0 - 15))
    for name in ("x", "y", "z"):
        ring.add(flow(key(dst=name), T0))
    names = [r.flow.key.dest_name for r in list_all(ring)]
    assert names == ["z", "y", "x", "old"]
    res = ring.list(pb.FlowListRequest(page=1, page_size=3), T0)
    assert [r.flow.key.dest_name for r in res.flows] == ["old"]
    assert (res.page.total_results, res.page.total_pages) == (4, 2)
    res = ring.list(pb.FlowListRequest(page=2, page_size=3), T0)
    assert (res.flows, res.page.total_results, res.page.total_pages) == ([], 0, 0)
    res = ring.list(pb.FlowListRequest(sort_by=[pb.SortOption(sort_by=pb.DestName)]), T0)
    assert [r.flow.key.dest_name for r in res.flows] == ["old", "x", "y", "z"]


def test_rollover_streams_the_completed_bucket_and_forgets_expired_keys() -> None:
    ring = BucketRing(T0, num_buckets=4)  # buckets T0-30, T0-15, T0 (now), T0+15 (head)
    ring.add(flow(key(dst="oldest"), T0 - 30))
    ring.add(flow(key(dst="streaming"), T0 - 15))
    first_id = ring.id_of(key(dst="oldest"))
    streamed = ring.rollover()
    assert [r.flow.key.dest_name for r in streamed] == ["streaming"]
    assert ring.id_of(key(dst="oldest")) == -1 and ring.num_keys == 1
    assert ring.head_start == T0 + 30 and ring.next_rollover == T0 + 30
    ring.add(flow(key(dst="oldest"), T0 + 1))
    assert ring.id_of(key(dst="oldest")) > first_id  # a new series, a new id


FILTER_CASES = [
    (pb.Filter(dest_names=[pb.StringMatch(value="serv", type=pb.Fuzzy)]), ["server-*"]),
    (pb.Filter(dest_names=[pb.StringMatch(value="serv")]), []),
    (pb.Filter(dest_names=[pb.StringMatch(value="PUBLIC NETWORK")]), ["pub"]),
    (pb.Filter(dest_names=[pb.StringMatch(value="PUBLIC", type=pb.Fuzzy)]), ["pub"]),
    (pb.Filter(dest_names=[pb.StringMatch(value="PRIVATE NETWORK")]), []),
    (pb.Filter(dest_names=[pb.StringMatch(value="pub")]), ["pub"]),
    (pb.Filter(dest_ports=[pb.PortMatch(port=81)]), ["pub"]),
    (pb.Filter(actions=[pb.Deny]), ["pub"]),
    (pb.Filter(reporter=pb.Src), ["pub"]),
    (pb.Filter(protocols=[pb.StringMatch(value="udp")]), ["pub"]),
    (pb.Filter(pending_actions=[pb.Deny]), ["pub"]),
    (pb.Filter(policies=[pb.PolicyMatch(name=pb.StringMatch(value="deny-all"))]), ["pub"]),
    (pb.Filter(policies=[pb.PolicyMatch(kind=pb.EndOfTier)]), ["pub"]),
    (
        pb.Filter(policies=[pb.PolicyMatch(action=pb.Allow, tier=pb.StringMatch(value="default"))]),
        ["server-*"],
    ),
    (pb.Filter(actions=[pb.Deny], dest_ports=[pb.PortMatch(port=80)]), []),
    (pb.Filter(dest_ports=[pb.PortMatch(port=80), pb.PortMatch(port=81)]), ["pub", "server-*"]),
]


@pytest.mark.parametrize(("flt", "expected"), FILTER_CASES)
def test_every_filter_field(flt: pb.Filter, expected: list[str]) -> None:
    ring = BucketRing(T0)
    ring.add(flow(key(), T0))
    denied = key(
        dst="pub",
        port=81,
        proto="udp",
        reporter=pb.Src,
        action=pb.Deny,
        enforced=(EOT_HIT,),
        pending=(DENY_HIT,),
        dest_type=pb.Network,
    )
    ring.add(flow(denied, T0))
    res = ring.list(
        pb.FlowListRequest(filter=flt, sort_by=[pb.SortOption(sort_by=pb.DestName)]), T0
    )
    assert [r.flow.key.dest_name for r in res.flows] == expected


def test_filter_hints_for_names_and_policies() -> None:
    ring = BucketRing(T0)
    ring.add(flow(key(), T0))
    ring.add(
        flow(
            key(
                dst="pub",
                enforced=(EOT_HIT,),
                pending=(PolicyHit(pb.Profile, "", "kns.ns1", "__PROFILE__", pb.Allow, 0, 0),),
            ),
            T0,
        )
    )

    def hints(t: int, **kw: object) -> list[str]:
        return ring.filter_hints(pb.FilterHintsRequest(type=t, **kw), T0)[0]

    assert hints(pb.FilterTypeDestName) == ["pub", "server-*"]
    assert hints(pb.FilterTypePolicyTier) == ["default", "security"]  # EndOfTier -> trigger's
    assert hints(pb.FilterTypePolicyName) == ["allow-80", "deny-all"]  # Profile skipped
    assert hints(pb.FilterTypePolicyKind) == ["CalicoNetworkPolicy"]
    values, page = ring.filter_hints(
        pb.FilterHintsRequest(type=pb.FilterTypeDestName, page=1, page_size=1), T0
    )
    assert (values, page.total_results, page.total_pages) == (["server-*"], 2, 2)
    with pytest.raises(QueryError, match="unsupported filter type 'FilterTypeUnspecified'"):
        hints(pb.FilterTypeUnspecified)


def test_statistics_per_policy_rule_with_time_series() -> None:
    ring = BucketRing(T0)
    ring.add(flow(key(), T0 - 15, packets=1))
    ring.add(flow(key(), T0, packets=2))
    ring.add(flow(key(src="other", enforced=(DENY_HIT,), reporter=pb.Src), T0, packets=5))
    req = pb.StatisticsRequest(group_by=pb.PolicyRule, type=pb.PacketCount, time_series=True)
    allow, deny = ring.statistics(req, T0)
    assert (allow.policy.name, allow.direction, list(allow.x)) == (
        "allow-80",
        pb.Ingress,
        [T0 - 15, T0],
    )
    assert (list(allow.allowed_in), list(allow.allowed_out), list(allow.denied_in)) == (
        [1, 2],
        [2, 4],
        [0, 0],
    )
    assert (deny.policy.rule_index, deny.direction, list(deny.denied_in)) == (2, pb.Egress, [5])
    req = pb.StatisticsRequest(group_by=pb.Policy, policy_match=pb.PolicyMatch(action=pb.Allow))
    [only] = ring.statistics(req, T0)
    assert (only.policy.name, list(only.allowed_in), list(only.x), only.direction) == (
        "allow-80",
        [3],
        [],
        pb.Any,
    )


def test_display_aliases_match_stored_values_not_substrings_of_them() -> None:
    ring = BucketRing(T0)
    ring.add(flow(key(dst="pubsub"), T0))
    ring.add(flow(key(dst="pvt", dest_namespace="Global"), T0))

    def names(f: pb.Filter) -> list[str]:
        return sorted(
            r.flow.key.dest_name for r in ring.list(pb.FlowListRequest(filter=f), T0).flows
        )

    fuzzy = pb.Fuzzy
    assert names(pb.Filter(dest_names=[pb.StringMatch(value="PUBLIC NETWORK", type=fuzzy)])) == []
    assert names(pb.Filter(dest_names=[pb.StringMatch(value="PRIVATE", type=fuzzy)])) == ["pvt"]
    assert names(pb.Filter(dest_namespaces=[pb.StringMatch(value="-")])) == ["pvt"]
    assert names(pb.Filter(dest_namespaces=[pb.StringMatch(value="Glo", type=fuzzy)])) == ["pvt"]


def test_statistics_count_each_rule_once_and_end_of_tier_as_its_trigger() -> None:
    ring = BucketRing(T0)
    # DENY_HIT both enforced and pending: one contribution. The EndOfTier hit counts for its
    # trigger (deny-all in tier "security"), under the EndOfTier's action.
    ring.add(
        flow(key(action=pb.Deny, enforced=(DENY_HIT, EOT_HIT), pending=(DENY_HIT,)), T0, packets=4)
    )
    req = pb.StatisticsRequest(group_by=pb.PolicyRule, type=pb.PacketCount)
    got = {
        (s.policy.tier, s.policy.name, s.policy.rule_index): list(s.denied_in)
        for s in ring.statistics(req, T0)
    }
    assert got == {("default", "deny-all", 2): [4], ("security", "deny-all", -1): [4]}
    req = pb.StatisticsRequest(group_by=pb.PolicyRule, type=pb.LiveConnectionCount)
    [default, _] = ring.statistics(req, T0)
    assert (list(default.denied_in), list(default.denied_out)) == ([1], [0])  # Dst: ingress
    ring.add(flow(key(src="egress", reporter=pb.Src, enforced=(ALLOW_HIT,)), T0))
    req = pb.StatisticsRequest(
        group_by=pb.Policy,
        type=pb.LiveConnectionCount,
        policy_match=pb.PolicyMatch(action=pb.Allow),
    )
    [allow] = ring.statistics(req, T0)
    assert (allow.policy.name, list(allow.allowed_in), list(allow.allowed_out)) == (
        "allow-80",
        [0],
        [1],
    )


def test_emission_tiles_collections_behind_now_and_never_repeats() -> None:
    ring = BucketRing(T0)
    # Daemon defaults: 5 min collections (20 buckets), 2 buckets (30 s) behind "now".
    assert ring.emit_collections(20, 2) == []  # nothing ingested: nothing to push
    ring.add(flow(key(), T0, packets=2))
    ring.add(flow(key(), T0 + 1, packets=3))
    emitted = []
    for _ in range(25):
        ring.rollover()
        emitted += ring.emit_collections(20, 2)
    [c] = emitted
    # After 3 rollovers the bucket at T0 is 2 behind the filling one: the collection is the
    # 20 buckets ending at its end, [T0+15-300, T0+15).
    assert (c.start, c.end) == (T0 + 15 - 300, T0 + 15)
    [f] = c.flows
    assert (f.counters.packets_in, f.start_time, f.end_time) == (5, T0, T0 + 15)
    ring.add(flow(key(dst="late"), T0 + 5 * 15))
    later = []
    for _ in range(25):
        ring.rollover()
        later += ring.emit_collections(20, 2)
    # Empty collections are not pushed, so the next one is simply the newest window with data
    # whose first bucket is unpushed: on the first rollover it ends at T0+15+23*15.
    assert [(c.start, c.end, [f.key.dest_name for f in c.flows]) for c in later] == [
        (T0 + 60, T0 + 360, ["late"])
    ]
    with pytest.raises(ValueError, match="buckets_per_collection >= 1"):
        ring.emit_collections(0, 2)
