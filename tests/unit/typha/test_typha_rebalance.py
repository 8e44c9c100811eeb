"""Typha's Kubernetes rebalancing: the limit formula at its boundaries, endpoint counting,
the node counter and the poll's apply-on-change rule (calico.typha.rebalance)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.datastore.errors import ConnectionFailedError, DatastoreConfigError
from calico.datastore.kubernetes.kubeconfig import config_from_flags
from calico.model import ResourceKey
from calico.model.keys import GlobalConfigKey
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.typha import config as cfg
from calico.typha.daemon import rebalancing_client
from calico.typha.rebalance import (
    CountUnavailable,
    NodeCounter,
    Rebalancer,
    TyphaCounter,
    count_typhas,
    max_conn_limit,
)

LOW, UP = 400, 10000


@pytest.mark.parametrize(
    ("typhas", "nodes", "expected"),
    [
        (None, 100, UP),  # typha count failed
        (3, None, UP),  # node count failed (not in sync)
        (0, 5000, UP),  # nothing seen: treated as alone
        (1, 5000, UP),  # lone Typha
        (2, 0, LOW),  # 4 * (1 + 0) = 4 -> lower limit
        (3, 100, LOW),  # upstream's example: 4 * (1 + 12000/2/100) = 244 -> 400
        (-1, 100, UP),
    ],
)
def test_formula_clamps_and_fallbacks(typhas: int | None, nodes: int | None, expected: int) -> None:
    assert max_conn_limit(typhas, nodes, LOW, UP) == expected


def test_formula_integer_division_left_to_right() -> None:
    # 2 Typhas: 4 * (1 + nodes*120 // 1 // 100)
    assert max_conn_limit(2, 83, LOW, UP) == 4 * (1 + 99)  # 9960 // 100 = 99 -> 400
    assert max_conn_limit(2, 84, LOW, UP) == 4 * (1 + 100)  # 10080 // 100 = 100 -> 404
    # 3 Typhas: the division by (typhas - 1) truncates before the one by 100
    assert max_conn_limit(3, 1001, LOW, UP) == 4 * (1 + 120120 // 2 // 100)  # 4 * 601
    assert max_conn_limit(4, 10, 1, UP) == 4 * (1 + 1200 // 3 // 100)  # 400 // 100 = 4 -> 20
    assert max_conn_limit(4, 9, 1, UP) == 4 * (1 + 1080 // 3 // 100)  # 360 // 100 = 3 -> 16
    # (nodes*120/(t-1))/100, not nodes*120/((t-1)*100) rounded differently: 7 nodes, 4 typhas
    assert max_conn_limit(4, 7, 1, UP) == 4 * (1 + 840 // 3 // 100)  # 280 -> 2 -> 12


def test_lower_and_upper_clamps_at_their_edges() -> None:
    # 2 Typhas, 8 nodes: 4 * (1 + 960 // 100) = 40
    assert max_conn_limit(2, 8, 40, UP) == 40
    assert max_conn_limit(2, 8, 41, UP) == 41  # below the lower limit: raised
    assert max_conn_limit(2, 8, 1, 40) == 40
    assert max_conn_limit(2, 8, 1, 39) == 39  # above the upper limit: capped
    assert max_conn_limit(2, 8, 50, 45) == 45  # lower above upper: the cap wins
    # the default upper: 2 Typhas, 20,832 nodes -> 4 * (1 + 24998) = 99,996 -> 10,000
    assert max_conn_limit(2, 20832, LOW, UP) == UP
    assert max_conn_limit(2, 2082, LOW, UP) == 4 * (1 + 2498)  # 9996: just under the cap
    assert max_conn_limit(2, 2084, LOW, UP) == UP  # 4 * 2501 = 10004: capped


@given(st.integers(2, 50), st.integers(0, 100_000), st.integers(1, 20_000), st.integers(1, 20_000))
def test_limit_is_always_within_bounds_and_monotonic_in_nodes(
    typhas: int, nodes: int, lower: int, upper: int
) -> None:
    limit = max_conn_limit(typhas, nodes, lower, upper)
    assert limit <= upper
    assert limit >= min(lower, upper)
    assert max_conn_limit(typhas, nodes + 1, lower, upper) >= limit
    assert max_conn_limit(typhas + 1, nodes, lower, upper) <= limit


def _slice(port: str | None, *addresses: list[str]) -> dict[str, Any]:
    return {
        "ports": [{"name": port, "port": 5473}],
        "endpoints": [{"addresses": a, "conditions": {"ready": False}} for a in addresses],
    }


def test_count_typhas_unique_addresses_of_slices_with_the_named_port() -> None:
    slices = [
        _slice("calico-typha", ["10.0.0.1"], ["10.0.0.2", "fd00::2"]),
        _slice("calico-typha", ["10.0.0.1"]),  # the same address in two slices: one Typha
        _slice("metrics", ["10.0.0.9"]),  # no port of that name: not counted
        _slice(None, ["10.0.0.8"]),  # unnamed port
        {"ports": None, "endpoints": [{"addresses": ["10.0.0.7"]}]},
        {"ports": [{"name": "calico-typha"}], "endpoints": None},
        {"ports": [{"name": "calico-typha"}], "endpoints": [{"addresses": None}]},
    ]
    assert count_typhas(slices, "calico-typha") == 3  # readiness is not checked
    assert count_typhas(slices, "metrics") == 1
    assert count_typhas([], "calico-typha") == 0


class _Rest:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, dict[str, str]]] = []

    def request(self, method: str, path: str, query: dict[str, str]) -> Any:
        self.calls.append((method, path, query))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_typha_counter_lists_the_service_slices_and_maps_errors() -> None:
    rest = _Rest({"items": [_slice("p", ["1.1.1.1"], ["1.1.1.2"])]})
    assert TyphaCounter(rest, "ns", "svc", "p").count() == 2
    assert rest.calls == [
        (
            "GET",
            "/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices",
            {"labelSelector": "kubernetes.io/service-name=svc"},
        )
    ]
    for bad in (ConnectionFailedError("refused"), {"items": [{"ports": 5}]}, ["not", "a dict"]):
        with pytest.raises(CountUnavailable, match="cannot list Typha endpoint slices"):
            TyphaCounter(_Rest(bad), "ns", "svc", "p").count()


class _Sink:
    def __init__(self) -> None:
        self.got: list[Any] = []

    def on_updates(self, updates: list[Update]) -> None:
        self.got.append(updates)

    def on_status_updated(self, status: SyncStatus) -> None:
        self.got.append(status)


def _node(name: str, value: Any = "v") -> Update:
    kind = UpdateType.DELETED if value is None else UpdateType.NEW
    return Update(ResourceKey("Node", name), value, "1", kind)


def test_node_counter_errors_until_in_sync_and_counts_names() -> None:
    sink = _Sink()
    counter = NodeCounter(sink)
    other = Update(GlobalConfigKey("X"), "1", "1", UpdateType.NEW)
    counter.on_updates([_node("a"), _node("b"), other, _node("a")])
    with pytest.raises(CountUnavailable, match="not in sync"):
        counter.num_nodes()
    counter.on_status_updated(SyncStatus.RESYNC_IN_PROGRESS)
    with pytest.raises(CountUnavailable):
        counter.num_nodes()
    counter.on_status_updated(SyncStatus.IN_SYNC)
    assert counter.num_nodes() == 2
    counter.on_updates([_node("a", None), _node("never-seen", None)])
    assert counter.num_nodes() == 1
    assert sink.got[0][2] is other and sink.got[-1][0].key.name == "a"  # passed through
    assert SyncStatus.IN_SYNC in sink.got


def test_rebalancer_applies_only_changes_and_falls_back_on_errors() -> None:
    applied: list[int] = []
    state: dict[str, Any] = {"typhas": 2, "nodes": 0}

    def value(name: str) -> int:
        v = state[name]
        if isinstance(v, Exception):
            raise v
        return int(v)

    r = Rebalancer(lambda: value("typhas"), lambda: value("nodes"), 2, 12, 30.0, applied.append)
    assert r.limit == 12
    r.poll_once(r.compute())  # 4 * (1 + 0) = 4
    r.poll_once(r.compute())  # unchanged: not applied again
    assert applied == [4]
    state["nodes"] = 1  # 4 * (1 + 120 // 100) = 8
    r.poll_once(r.compute())
    state["typhas"] = CountUnavailable("API down")
    r.poll_once(r.compute())
    r.poll_once(r.compute())
    state["typhas"], state["nodes"] = 2, CountUnavailable("not in sync")
    r.poll_once(r.compute())  # still the upper limit: nothing new
    state["nodes"] = 0
    r.poll_once(r.compute())
    assert applied == [4, 8, 12, 4]


def test_rebalancing_client_from_kubeconfig_or_in_cluster(tmp_path: Any) -> None:
    none = cfg.load(str(tmp_path / "missing.cfg"), env={})
    assert rebalancing_client(none, env={}) is None
    k8s = cfg.load(str(tmp_path / "m.cfg"), env={"TYPHA_CONNECTIONREBALANCINGMODE": "Kubernetes"})
    assert k8s.connection_rebalancing_mode == "kubernetes"
    assert (k8s.k8s_namespace, k8s.k8s_service_name, k8s.k8s_port_name) == (
        "kube-system",
        "calico-typha",
        "calico-typha",
    )
    assert k8s.k8s_service_poll_interval_secs == 30.0
    with pytest.raises(DatastoreConfigError, match="no Kubernetes API configured"):
        rebalancing_client(k8s, env={})
    with pytest.raises(DatastoreConfigError, match="does not exist"):
        rebalancing_client(k8s, env={"KUBECONFIG": str(tmp_path / "nope")})
    kc = tmp_path / "kc"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    rest = rebalancing_client(k8s, env={"KUBECONFIG": str(kc)})
    try:
        assert rest.configuration.host == "http://127.0.0.1:1"
        assert rest.timeout == 30.0
    finally:
        rest.close()
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("tok\n")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    conf = config_from_flags("", env, sa)
    assert conf.host == "https://[fd00::1]:443"
    assert conf.api_key == {"BearerToken": "Bearer tok"}


def test_kubernetes_mode_without_an_api_is_a_clear_start_up_error(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from calico.typha.daemon import typha_command

    env = {
        "TYPHA_CONNECTIONREBALANCINGMODE": "kubernetes",
        "KUBECONFIG": str(tmp_path / "absent"),
        "DATASTORE_TYPE": "local",
        "CALICO_DATASTORE_PATH": str(tmp_path / "c.db"),
    }
    result = CliRunner().invoke(typha_command, ["-c", str(tmp_path / "none.cfg")], env=env)
    assert result.exit_code == 1
    assert "invalid Typha configuration: kubeconfig" in result.output
    assert "does not exist (KUBECONFIG)" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
