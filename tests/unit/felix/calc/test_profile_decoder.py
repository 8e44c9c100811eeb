"""ProfileDecoder scenarios, fed through the real Profile processor and a Dispatcher."""

from __future__ import annotations

import pytest
from recording_callbacks import RecordingCallbacks, feed

from calico.felix.calc.dispatcher import Dispatcher
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
def setup() -> tuple[Dispatcher, RecordingCallbacks]:
    rec = RecordingCallbacks()
    dispatcher = Dispatcher()
    ProfileDecoder(rec).register(dispatcher)
    return dispatcher, rec


def test_namespace_profile_update_and_remove(setup: tuple[Dispatcher, RecordingCallbacks]) -> None:
    dispatcher, rec = setup
    feed(dispatcher, NS)
    assert rec.take() == [
        (
            "on_namespace_update",
            NamespaceID("prod"),
            {"team": "web", "projectcalico.org/name": "prod"},
        )
    ]
    feed(dispatcher, NS, delete=True)
    assert rec.take() == [("on_namespace_remove", NamespaceID("prod"))]


def test_service_account_name_may_contain_dots(
    setup: tuple[Dispatcher, RecordingCallbacks],
) -> None:
    dispatcher, rec = setup
    feed(dispatcher, SA)
    sa = ServiceAccountID(name="build.bot", namespace="prod")
    assert rec.take() == [("on_service_account_update", sa, {"role": "ci", "plain": "kept"})]
    feed(dispatcher, SA, delete=True)
    assert rec.take() == [("on_service_account_remove", sa)]


def test_other_profiles_ignored(setup: tuple[Dispatcher, RecordingCallbacks]) -> None:
    dispatcher, rec = setup
    feed(dispatcher, OTHER)
    feed(dispatcher, OTHER, delete=True)
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
