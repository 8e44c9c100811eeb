"""ProfileDecoder scenarios, fed through the real Profile processor and a TypeFanout."""

from __future__ import annotations

import pytest
from recording_callbacks import RecordingCallbacks, feed

from calico.felix.calc.fanout import TypeFanout
from calico.felix.calc.profile_decoder import ProfileDecoder, classify
from calico.felix.messages import NamespaceID, ServiceAccountID

NS = """
apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: kns.prod}
spec:
  labelsToApply: {pcns.team: web, pcns.projectcalico.org/name: prod}
"""
SA = """
apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: ksa.prod.build.bot}
spec:
  labelsToApply: {pcsa.role: ci, plain: kept}
"""
OTHER = """
apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: my-profile}
spec:
  labelsToApply: {pcns.x: y}
"""


@pytest.fixture
def setup() -> tuple[TypeFanout, RecordingCallbacks]:
    rec = RecordingCallbacks()
    fanout = TypeFanout()
    ProfileDecoder(rec).register(fanout)
    return fanout, rec


def test_namespace_profile_update_and_remove(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, NS)
    assert rec.take() == [
        (
            "on_namespace_update",
            NamespaceID("prod"),
            {"team": "web", "projectcalico.org/name": "prod"},
        )
    ]
    feed(fanout, NS, delete=True)
    assert rec.take() == [("on_namespace_remove", NamespaceID("prod"))]


def test_service_account_name_may_contain_dots(
    setup: tuple[TypeFanout, RecordingCallbacks],
) -> None:
    fanout, rec = setup
    feed(fanout, SA)
    sa = ServiceAccountID(name="build.bot", namespace="prod")
    assert rec.take() == [("on_service_account_update", sa, {"role": "ci", "plain": "kept"})]
    feed(fanout, SA, delete=True)
    assert rec.take() == [("on_service_account_remove", sa)]


def test_other_profiles_ignored(setup: tuple[TypeFanout, RecordingCallbacks]) -> None:
    fanout, rec = setup
    feed(fanout, OTHER)
    feed(fanout, OTHER, delete=True)
    assert rec.take() == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kns.a", NamespaceID("a")),
        ("kns.", None),
        ("ksa.ns.sa", ServiceAccountID("sa", "ns")),
        ("ksa.ns", None),
        ("ksa..sa", None),
        ("ksa.ns.", None),
        ("kns", None),
        ("default", None),
    ],
)
def test_classify(name: str, expected: object) -> None:
    assert classify(name) == expected
