"""What reading enforced policies costs in model definitions and schema builds
(design/performance.md "Schema builds"): the staged kinds, QoSPolicy and the Go decoder stay
unimported until used, and a deferred model builds the models it holds first, each once, with
the same validation as building them inline. Checked in fresh interpreters, since this test
process has long imported and built everything."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from calico.api import kind_class, policy, qos, stagedpolicy


def _run(code: str) -> object:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return json.loads(out)


DOCS = """
TIER = {"apiVersion": "projectcalico.org/v3", "kind": "Tier", "metadata": {"name": "t1"},
        "spec": {"order": 10}}
RULES = [{"action": "Allow", "protocol": "TCP", "source": {"selector": "app == 'a'"},
          "destination": {"ports": [80, "http"]}},
         {"action": "Deny", "protocol": "ICMP", "icmp": {"type": 8, "code": 0}},
         {"action": "Pass", "source": {"nets": ["10.0.0.0/16"], "notSelector": "x == 'y'"}}]
NP = {"apiVersion": "projectcalico.org/v3", "kind": "NetworkPolicy",
      "metadata": {"name": "t1.p", "namespace": "ns1"},
      "spec": {"tier": "t1", "selector": "all()", "ingress": RULES, "egress": RULES}}
GNP = {"apiVersion": "projectcalico.org/v3", "kind": "GlobalNetworkPolicy",
       "metadata": {"name": "g"}, "spec": {"selector": "all()", "ingress": RULES}}
"""


def test_enforced_policy_readers_do_not_define_staged_qos_or_decoder_models() -> None:
    got = _run(
        DOCS
        + """
import json, sys
from calico.api import parse_resource
for doc in (TIER, NP, GNP):
    parse_resource(doc)
before = sorted(m for m in ("calico.api.stagedpolicy", "calico.api.qos", "calico.api.godecode")
                if m in sys.modules)
from calico.api.policy import QoSPolicy, StagedNetworkPolicy
print(json.dumps({"before": before, "staged": StagedNetworkPolicy.__module__,
                  "qos": QoSPolicy.__module__}))
"""
    )
    assert got == {"before": [], "staged": "calico.api.stagedpolicy", "qos": "calico.api.qos"}


def test_moved_names_are_the_same_classes_through_calico_api_policy() -> None:
    for name in stagedpolicy.__dict__:
        value = getattr(stagedpolicy, name)
        if isinstance(value, type) and value.__module__ == stagedpolicy.__name__:
            assert getattr(policy, name) is value, name
    assert policy.QoSPolicy is qos.QoSPolicy and policy.QoSRule is qos.QoSRule
    for kind, module in (
        ("StagedNetworkPolicy", "calico.api.stagedpolicy"),
        ("StagedGlobalNetworkPolicy", "calico.api.stagedpolicy"),
        ("StagedKubernetesNetworkPolicy", "calico.api.stagedpolicy"),
        ("QoSPolicy", "calico.api.qos"),
        ("NetworkPolicy", "calico.api.policy"),
    ):
        cls = kind_class(kind)
        assert cls is not None and cls.__module__ == module, kind
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchModel'"):
        _ = policy.NoSuchModel


def test_a_kind_builds_the_models_it_holds_once_and_reuses_them() -> None:
    got = _run(
        DOCS
        + """
import collections, json
from pydantic._internal import _generate_schema as g
from calico.api import parse_resource
from calico.api.base import ObjectMeta
from calico.api.rules import EntityRule, Rule
generated = collections.Counter()
orig = g.GenerateSchema._model_schema
def count(self, cls):
    if "__pydantic_core_schema__" not in cls.__dict__ or not cls.__pydantic_complete__:
        generated[cls.__name__] += 1
    return orig(self, cls)
g.GenerateSchema._model_schema = count
parse_resource(NP)
complete = [m.__pydantic_complete__ for m in (ObjectMeta, Rule, EntityRule)]
parse_resource(GNP)
parse_resource(TIER)
print(json.dumps({"complete": complete, "Rule": generated["Rule"],
                  "EntityRule": generated["EntityRule"], "ObjectMeta": generated["ObjectMeta"]}))
"""
    )
    # Built inside each kind instead (pydantic's deferred build), Rule and EntityRule were
    # generated four times each and ObjectMeta three times, and none of them was complete.
    assert got == {"complete": [True, True, True], "Rule": 1, "EntityRule": 1, "ObjectMeta": 1}


BAD = [
    ("GlobalNetworkPolicy", {"ingress": [{"action": "Allow", "destination": {"ports": [80]}}]}),
    ("GlobalNetworkPolicy", {"ingress": [{"action": "Allow", "protocol": "TCPX"}]}),
    ("GlobalNetworkPolicy", {"egress": [{"action": "Allow", "source": {"selector": "a ==="}}]}),
    ("GlobalNetworkPolicy", {"ingress": [{"action": "Deny", "icmp": {"code": 3}}]}),
    ("GlobalNetworkPolicy", {"ingress": [{"action": "Allow", "bogus": 1}]}),
    ("GlobalNetworkPolicy", {"ingress": [{"action": "Allow", "source": {"nets": ["10.0.0/8"]}}]}),
    ("NetworkPolicy", {"egress": [{"action": "Allow", "http": {"methods": ["GET"]}}]}),
    ("NetworkPolicy", {"ingress": [{"action": "Allow", "source": {"ports": ["a-b"]}}]}),
    ("Tier", {"order": "high"}),
]

VALIDATE_BAD = """
import json, sys
from pydantic import BaseModel
from calico.api import APIError, parse_resource
from calico.api.base import kind_class
BAD = json.loads(sys.argv[1])
if sys.argv[2] == "inline":
    # pydantic's own build: every held model generated inside the kind's schema
    for kind in ("GlobalNetworkPolicy", "NetworkPolicy", "Tier"):
        BaseModel.model_rebuild.__func__(kind_class(kind))
out = []
for kind, spec in BAD:
    meta = {"name": "p", "namespace": "ns"} if kind == "NetworkPolicy" else {"name": "p"}
    doc = {"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": meta, "spec": spec}
    try:
        out.append(["ok", parse_resource(doc).to_wire()])
    except APIError as exc:
        out.append(["error", str(exc)])
print(json.dumps(out))
"""


def test_validation_is_the_same_as_with_every_model_built_inline() -> None:
    def run(mode: str) -> list[list[object]]:
        proc = subprocess.run(
            [sys.executable, "-c", VALIDATE_BAD, json.dumps(BAD), mode],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return json.loads(proc.stdout)

    held_first, inline = run("held-first"), run("inline")
    assert held_first == inline
    assert [status for status, _ in held_first] == ["error"] * len(BAD)
