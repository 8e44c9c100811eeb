"""The WorkloadEndpoint processor's remembered labels and ports (calico.model.processors.
endpoints): the same v1 labels and ports as computing them afresh, whatever was remembered
before; a fresh labels dict per endpoint (changing one endpoint's labels cannot reach
another's); both memos bounded."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from calico.model.processors import endpoints
from calico.model.processors.common import endpoint_ports
from calico.model.processors.lean import LeanPort

_word = st.sampled_from(["web", "db", "a", "b"])
_labels = st.dictionaries(
    st.sampled_from(["app", "role", "pcns.team", "pcsa.x", "projectcalico.org/namespace"]),
    _word,
    max_size=4,
)
_opt = st.one_of(st.none(), st.just(""), _word)


def endpoint(labels: dict[str, str] | None, orch: str | None, sa: str | None) -> Any:
    spec = SimpleNamespace(orchestrator=orch, service_account_name=sa)
    return SimpleNamespace(metadata=SimpleNamespace(labels=labels), spec=spec)


@given(st.lists(st.tuples(st.one_of(st.none(), _labels), _word, _opt, _opt), max_size=6))
def test_remembered_labels_equal_fresh_ones(cases: list[tuple[Any, str, Any, Any]]) -> None:
    for labels, namespace, orch, sa in cases:  # earlier cases warm the memo for later ones
        res = endpoint(labels, orch, sa)
        expected = endpoints._wep_labels_uncached(labels or {}, namespace, res.spec)
        got = endpoints._wep_labels(res, namespace)
        assert got == expected and list(got) == list(expected)


def test_each_endpoint_gets_its_own_labels() -> None:
    first = endpoints._wep_labels(endpoint({"app": "web"}, "k8s", None), "ns1")
    first["app"] = "changed"
    second = endpoints._wep_labels(endpoint({"app": "web"}, "k8s", None), "ns1")
    assert second == {
        "app": "web",
        "projectcalico.org/namespace": "ns1",
        "projectcalico.org/orchestrator": "k8s",
    }


def test_memo_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(endpoints, "_LABELS_MEMO_MAX", 3)
    monkeypatch.setattr(endpoints, "_labels_memo", {})
    for i in range(10):
        endpoints._wep_labels(endpoint({"app": f"a{i}"}, None, None), "ns1")
        assert len(endpoints._labels_memo) <= 3


_lean_port = st.builds(
    LeanPort, st.sampled_from(["http", "dns", "metrics"]), st.sampled_from(["TCP", "UDP", 6, 17]),
    st.sampled_from([53, 80, 8080]),
)  # fmt: skip


@given(st.lists(st.lists(_lean_port, max_size=3), max_size=6))
def test_remembered_ports_equal_fresh_ones(cases: list[list[LeanPort]]) -> None:
    for ports in cases:
        assert endpoints._wep_ports(ports) == endpoint_ports(ports, named_only=True)


def test_ports_memo_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(endpoints, "_LABELS_MEMO_MAX", 2)
    monkeypatch.setattr(endpoints, "_ports_memo", {})
    for port in range(1, 8):
        endpoints._wep_ports([LeanPort("http", "TCP", port)])
        assert len(endpoints._ports_memo) <= 2
