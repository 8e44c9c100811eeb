"""The cached key hash (``calico.model.base.cached_hash``): over generated keys of every key
class, ``hash`` is the generated dataclass hash (of the tuple of fields), equality is the
generated one, and pickling, copying and ``dataclasses.replace`` give equal keys whose hash is
recomputed, never carried over (a string's hash differs between processes)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import pickle
import subprocess
import sys

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from calico.model import bgp_keys, ipam_keys, keys, resources, status_keys
from calico.model.base import Key
from calico.model.escaping import InvalidKeyError
from calico.model.names import wep_key_fast
from calico.model.resources import resource_key_checked

_MODULES = (keys, bgp_keys, ipam_keys, status_keys, resources)
CLASSES = sorted(
    {
        cls
        for module in _MODULES
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, Key) and cls is not Key
    },
    key=lambda c: c.__name__,
)
_TEXT = st.one_of(
    st.sampled_from(["a", "host1", "ns1/pod", "WorkloadEndpoint", "Node", "x-y", "10.0.0.0-24"]),
    st.text(min_size=1, max_size=8),
)


def _fields(key: Key) -> tuple[object, ...]:
    return tuple(getattr(key, f.name) for f in dataclasses.fields(key))  # type: ignore[arg-type]


def _value(field: dataclasses.Field[object]) -> st.SearchStrategy[object]:
    kind = str(field.type)
    if "int" in kind:
        return st.integers(0, 70000)
    if "bool" in kind:
        return st.booleans()
    return _TEXT


@st.composite
def any_key(draw: st.DrawFn) -> Key:
    cls = draw(st.sampled_from(CLASSES))
    args = [draw(_value(f)) for f in dataclasses.fields(cls) if f.init]
    try:
        return cls(*args)
    except (InvalidKeyError, ValueError, TypeError):  # no valid path: not a key
        assume(False)
        raise


def test_every_key_class_caches_its_hash() -> None:
    assert len(CLASSES) == 25
    for cls in CLASSES:
        assert cls.__hash__.__qualname__ == f"{cls.__qualname__}.__hash__", cls
        assert "_hash" not in {f.name for f in dataclasses.fields(cls)}


@settings(max_examples=600)
@given(key=any_key())
def test_hash_and_eq_are_the_generated_ones(key: Key) -> None:
    assert hash(key) == hash(_fields(key))
    assert hash(key) == hash(key)  # cached answer
    twin = type(key)(*_fields(key))
    assert twin == key and hash(twin) == hash(key)
    for other in CLASSES:
        if other is not type(key) and len(dataclasses.fields(other)) == len(_fields(key)):
            with contextlib.suppress(InvalidKeyError, ValueError, TypeError):
                assert other(*_fields(key)) != key


@settings(max_examples=300)
@given(key=any_key(), protocol=st.integers(0, pickle.HIGHEST_PROTOCOL))
def test_pickle_copy_and_replace(key: Key, protocol: int) -> None:
    hash(key)
    for got in (
        pickle.loads(pickle.dumps(key, protocol)),
        copy.copy(key),
        copy.deepcopy(key),
        dataclasses.replace(key),  # type: ignore[type-var]
    ):
        assert got == key and hash(got) == hash(_fields(got)) and type(got) is type(key)
    assert len(key.__getstate__()) == len(_fields(key))  # type: ignore[attr-defined]


def test_replace_changes_the_hash() -> None:
    key = keys.WorkloadEndpointKey("h", "k8s", "ns/p", "eth0")
    hash(key)
    other = dataclasses.replace(key, endpoint_id="eth1")
    assert hash(other) == hash(("h", "k8s", "ns/p", "eth1")) != hash(key)


def test_hot_constructors_set_the_generated_hash() -> None:
    wep = wep_key_fast("ns1", "host1-k8s-pod1-eth0")
    assert wep._hash == hash(("host1", "k8s", "ns1/pod1", "eth0"))
    res = resource_key_checked("WorkloadEndpoint", "a", "ns1")
    assert res._hash == hash(("WorkloadEndpoint", "a", "ns1"))
    assert res == resources.ResourceKey("WorkloadEndpoint", "a", "ns1")


def test_frozen() -> None:
    key = keys.WorkloadEndpointKey("h", "k8s", "ns/p", "eth0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.hostname = "q"  # type: ignore[misc]


@pytest.mark.parametrize("seed", ["1", "2"])
def test_a_pickled_hash_is_not_carried_to_another_process(seed: str) -> None:
    key = keys.WorkloadEndpointKey("host1", "k8s", "ns1/pod1", "eth0")
    hash(key)
    script = (
        "import pickle, sys; k = pickle.loads(sys.stdin.buffer.read()); "
        "print(hash(k) == hash((k.hostname, k.orchestrator_id, k.workload_id, k.endpoint_id)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps(key),
        capture_output=True,
        env={"PYTHONHASHSEED": seed, "PYTHONPATH": ":".join(sys.path)},
        check=True,
    )
    assert out.stdout.strip() == b"True"
