"""WorkloadEndpointKey's construction check against the reference (rendering the path, as
every other key does): the same keys are accepted, the same ones refused with the same
error, and an accepted key's path parses back to it."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from calico.model import InvalidKeyError, WorkloadEndpointKey, key_from_default_path
from calico.model.base import Key

field = st.one_of(st.text("a/%-.", max_size=4), st.sampled_from([None, 5, b"x"]))


def outcome(build: Any) -> tuple[str, str]:
    try:
        key = build()
    except Exception as exc:  # the reference raises InvalidKeyError, or a type's own error
        return type(exc).__name__, str(exc)
    return "ok", key.default_path()


def reference(*fields: Any) -> WorkloadEndpointKey:
    key = object.__new__(WorkloadEndpointKey)
    for name, value in zip(
        ("hostname", "orchestrator_id", "workload_id", "endpoint_id"), fields, strict=True
    ):
        object.__setattr__(key, name, value)
    Key.__post_init__(key)
    return key


@given(field, field, field, field)
@example("h", "k8s", "ns/pod", "eth0")
@example("h/x", "k8s", "ns/pod", "eth0")
@example("h", "", "ns/pod", "eth0")
def test_key_check_matches_rendering_the_path(host, orch, workload, endpoint) -> None:
    fields = (host, orch, workload, endpoint)
    got = outcome(lambda: WorkloadEndpointKey(*fields))
    assert got == outcome(lambda: reference(*fields))
    if got[0] == "ok":
        assert key_from_default_path(got[1]) == WorkloadEndpointKey(*fields)


def test_refusal_names_the_field() -> None:
    try:
        WorkloadEndpointKey("host/1", "k8s", "ns/pod", "eth0")
    except InvalidKeyError as exc:
        assert "hostname 'host/1' must not contain '/'" in str(exc)
    else:
        raise AssertionError("a hostname with '/' was accepted")
