"""The WorkloadEndpoint processor's shared strings (design/performance.md "Full-Felix memory"):
the output equals what it was before sharing, and repeated strings are one object."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calico.model import ResourceKey
from calico.model import processors as p
from calico.model.processors import common, endpoints

_word = st.text("abcxyz019", min_size=1, max_size=6)
_labels = st.dictionaries(st.sampled_from(["app", "role", "team", "pcns.x"]), _word, max_size=4)


def _wep(node: str, pod: str, labels: dict[str, str], profiles: list[str]) -> dict[str, Any]:
    spec = {
        "orchestrator": "k8s",
        "node": node,
        "pod": pod,
        "endpoint": "eth0",
        "interfaceName": "cali0123456789a",
        "ipNetworks": ["10.65.0.2/32"],
        "profiles": profiles,
        "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
    }
    meta = {"name": f"{node}-k8s-{pod}-eth0", "namespace": "ns1", "labels": labels}
    return {"apiVersion": "projectcalico.org/v3", "kind": "WorkloadEndpoint", "metadata": meta,
            "spec": spec}  # fmt: skip


def _run(doc: dict[str, Any]) -> dict[Any, Any]:
    key = ResourceKey("WorkloadEndpoint", doc["metadata"]["name"], "ns1")
    return dict(p.workload_endpoint(key, json.loads(json.dumps(doc))))  # fresh strings


@given(_word, _labels, st.lists(_word.map(lambda w: "kns." + w), max_size=2))
def test_shared_output_equals_unshared(node: str, labels: dict[str, str], profiles) -> None:
    doc = _wep(node, "pod1", labels, profiles)
    shared = _run(doc)
    with pytest.MonkeyPatch.context() as mp:  # the reference: no sharing at all
        mp.setattr(common, "share", lambda s: s)
        mp.setattr(endpoints, "share", lambda s: s)
        mp.setattr("calico.model.names.sys.intern", lambda s: s)
        unshared = _run(doc)
    assert shared == unshared


@given(_word, _labels, st.lists(_word.map(lambda w: "kns." + w), min_size=1, max_size=2))
def test_two_endpoints_share_their_repeated_strings(node, labels, profiles) -> None:
    (k1, a), (k2, b) = (
        next(iter(_run(_wep(node, pod, labels, profiles)).items())) for pod in ("p1", "p2")
    )
    assert k1.hostname is k2.hostname and k1.endpoint_id is k2.endpoint_id
    assert k1.workload_id != k2.workload_id
    for (ka, va), (kb, vb) in zip(a.labels.items(), b.labels.items(), strict=True):
        assert ka is kb and va is vb
    assert all(x is y for x, y in zip(a.profile_ids, b.profile_ids, strict=True))
    assert a.ports[0].name is b.ports[0].name and a.ports[0].protocol is b.ports[0].protocol


def test_share_leaves_non_str_alone() -> None:
    class Sub(str):
        pass

    s = Sub("x")
    assert common.share(s) is s  # sys.intern would raise TypeError on a subclass
