"""The conversion cache: a hit gives exactly the processors' v1 output, anything else misses."""

from __future__ import annotations

import atexit
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from calico.model import processors
from calico.model.resources import ResourceKey
from calico.policyeval import convcache
from calico.policyeval.convcache import ConversionCache, fingerprint

CODE = b"code-1"


def gnp(name: str = "t1.p", **spec: Any) -> tuple[ResourceKey, str, dict[str, Any]]:
    doc = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": name},
        "spec": {"tier": "t1", "selector": "app == 'a'", **spec},
    }
    text = json.dumps(doc)
    return ResourceKey("GlobalNetworkPolicy", name), text, json.loads(text)


def v1_part(key: ResourceKey, raw: dict[str, Any]) -> dict[Any, Any]:
    return {k: v for k, v in processors.process(key, raw).items() if type(k) is not ResourceKey}


def test_miss_then_hit_in_process_and_across_processes(tmp_path: Path) -> None:
    key, text, raw = gnp(ingress=[{"action": "Allow"}])
    path = str(tmp_path / "c.bin")
    cache = ConversionCache(path, code=CODE)
    first = cache.process(key, text, raw)
    assert (cache.hits, cache.misses) == (0, 1)
    assert first == v1_part(key, raw) and first
    assert cache.process(key, text, raw) == first
    assert (cache.hits, cache.misses) == (1, 1)
    assert not os.path.exists(path)
    assert cache.flush() is True
    assert cache.flush() is False  # nothing new since
    later = ConversionCache(path, code=CODE)
    assert later.process(key, text, {}) == first  # served from the file: raw is not read
    assert (later.hits, later.misses) == (1, 0)


def test_profile_passthrough_is_not_kept(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "projectcalico.org/v3",
        "kind": "Profile",
        "metadata": {"name": "kns.a"},
        "spec": {"ingress": [{"action": "Allow"}], "labelsToApply": {"x": "y"}},
    }
    text, key = json.dumps(doc), ResourceKey("Profile", "kns.a")
    out = ConversionCache(str(tmp_path / "c.bin"), code=CODE).process(key, text, doc)
    assert ResourceKey("Profile", "kns.a") in processors.process(key, doc)
    assert out == v1_part(key, doc) and len(out) == 2


@pytest.mark.parametrize("change", ["text", "name", "kind", "code"])
def test_any_change_of_input_or_code_is_a_miss(tmp_path: Path, change: str) -> None:
    key, text, raw = gnp()
    path = str(tmp_path / "c.bin")
    cache = ConversionCache(path, code=CODE)
    cache.process(key, text, raw)
    cache.flush()
    again = ConversionCache(path, code=b"code-2" if change == "code" else CODE)
    if change == "text":
        text = text.replace('"t1.p"}', '"t1.p" }')
    elif change == "name":
        key, _, raw = gnp("t1.q")
    elif change == "kind":
        key = ResourceKey("StagedGlobalNetworkPolicy", "t1.p")
    assert again.get(key, text) is None


def test_fingerprint_changes_with_any_converting_source(tmp_path: Path) -> None:
    root = Path(convcache.__file__).resolve().parents[1]
    copy = tmp_path / "calico"
    for part in convcache._CODE_DIRS:
        shutil.copytree(root / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("__init__.py", "durations.py"):
        shutil.copy(root / name, copy / name)
    base = fingerprint(str(copy))
    assert fingerprint(str(copy)) == base
    assert fingerprint(str(root)) == base  # location-independent: only contents count
    target = copy / "model" / "processors" / "policy.py"
    original = target.read_bytes()
    target.write_bytes(original + b"\n# edited\n")
    assert fingerprint(str(copy)) != base
    target.write_bytes(original)
    assert fingerprint(str(copy)) == base
    (copy / "selector" / "extra.py").write_text("X = 1\n")
    assert fingerprint(str(copy)) != base
    (copy / "selector" / "extra.py").unlink()
    (copy / "durations.py").write_text("")
    assert fingerprint(str(copy)) != base


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage", convcache._HEADER + b"\x00\x01", convcache._HEADER + b"\xe9" * 40],
)
def test_corrupt_file_is_a_silent_miss(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.bin"
    path.write_bytes(content)
    key, text, raw = gnp()
    cache = ConversionCache(str(path), code=CODE)
    assert cache.process(key, text, raw) == v1_part(key, raw)
    assert cache.misses == 1
    assert cache.flush() is True  # replaced by a good file
    assert ConversionCache(str(path), code=CODE).get(key, text) == v1_part(key, raw)


def test_entry_that_does_not_unpickle_is_a_miss(tmp_path: Path) -> None:
    key, text, raw = gnp()
    cache = ConversionCache(str(tmp_path / "c.bin"), code=CODE)
    cache.process(key, text, raw)
    assert cache._entries is not None
    digest = next(iter(cache._entries))
    cache._entries[digest] = b"\x80\x05not a pickle"
    assert cache.get(key, text) is None
    assert cache.process(key, text, raw) == v1_part(key, raw)
    assert cache.misses == 2


def test_unwritable_location_disables_writes_only(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    path = str(blocker / "sub" / "c.bin")  # its directory can never be created
    key, text, raw = gnp()
    cache = ConversionCache(path, code=CODE)
    assert cache.process(key, text, raw) == v1_part(key, raw)
    assert cache.flush() is False
    assert cache.process(key, text, raw) == v1_part(key, raw)  # still served in-process
    ro = ConversionCache(str(tmp_path / "ro.bin"), writable=False, code=CODE)
    ro.process(key, text, raw)
    assert ro.flush() is False and not (tmp_path / "ro.bin").exists()


def test_rejected_resource_raises_the_processor_error_and_is_never_kept(tmp_path: Path) -> None:
    key, text, raw = gnp(ingress=[{"action": "Bogus"}])
    with pytest.raises(ValueError) as direct:
        processors.process(key, raw)
    cache = ConversionCache(str(tmp_path / "c.bin"), code=CODE)
    for _ in range(2):
        with pytest.raises(ValueError) as cached:
            cache.process(key, text, raw)
        assert str(cached.value) == str(direct.value)
        assert type(cached.value) is type(direct.value)
    assert cache.misses == 2 and not cache._entries
    assert cache.flush() is False


def test_flush_merges_entries_other_processes_wrote(tmp_path: Path) -> None:
    path = str(tmp_path / "c.bin")
    a, b = ConversionCache(path, code=CODE), ConversionCache(path, code=CODE)
    ka, ta, ra = gnp("t1.a")
    kb, tb, rb = gnp("t1.b")
    a.process(ka, ta, ra)
    b.process(kb, tb, rb)  # b read the (missing) file before a wrote
    assert a.flush() and b.flush()
    both = ConversionCache(path, code=CODE)
    assert both.get(ka, ta) is not None and both.get(kb, tb) is not None


def test_default_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convcache, "_default", None)
    monkeypatch.setenv(convcache.ENV, str(tmp_path / "env.bin"))
    cache = convcache.default()
    assert cache.path == str(tmp_path / "env.bin") and cache.writable
    assert convcache.default() is cache
    monkeypatch.setattr(convcache, "_default", None)
    monkeypatch.delenv(convcache.ENV)
    assert convcache.default().path == convcache.default_path()
    assert convcache.default_path().endswith(".bin")
    monkeypatch.setattr(convcache, "_default", None)


# -- cached path == uncached path, over generated policy documents ---------------------------

_SELECTORS = st.sampled_from(
    ["", "all()", "app == 'a'", "app in {'a', 'b'}", "has(x) && !has(y)", "app ==", "!!", 7]
)
_PORTS = st.lists(
    st.one_of(st.integers(-2, 70000), st.sampled_from(["http", "80:90", "9:1", "x y", ""])),
    max_size=3,
)
_ENTITY = st.fixed_dictionaries(
    {},
    optional={
        "selector": _SELECTORS,
        "nets": st.lists(st.sampled_from(["10.0.0.0/8", "fd00::/64", "10.0.0.300/32"]), max_size=2),
        "ports": _PORTS,
        "namespaceSelector": _SELECTORS,
    },
)
_RULE = st.fixed_dictionaries(
    {"action": st.sampled_from(["Allow", "Deny", "Pass", "Log", "Bogus"])},
    optional={
        "protocol": st.sampled_from(["TCP", "UDP", "ICMP", "SCTP", 6, "GRE", "bad"]),
        "source": _ENTITY,
        "destination": _ENTITY,
        "ipVersion": st.sampled_from([4, 6, 5]),
    },
)
_SPEC = st.fixed_dictionaries(
    {},
    optional={
        "tier": st.sampled_from(["default", "t1", "T!"]),
        "order": st.one_of(st.floats(allow_nan=False, width=32), st.just("x")),
        "selector": _SELECTORS,
        "types": st.lists(st.sampled_from(["Ingress", "Egress", "Sideways"]), max_size=2),
        "ingress": st.lists(_RULE, max_size=3),
        "egress": st.lists(_RULE, max_size=2),
        "doNotTrack": st.booleans(),
        "applyOnForward": st.booleans(),
    },
)
_KINDS = st.sampled_from(
    ["GlobalNetworkPolicy", "NetworkPolicy", "StagedGlobalNetworkPolicy", "StagedNetworkPolicy"]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=_KINDS, name=st.sampled_from(["p", "t1.p", "default.p", "BAD_"]), spec=_SPEC)
def test_cached_path_equals_uncached_path(
    tmp_path: Path, kind: str, name: str, spec: dict[str, Any]
) -> None:
    namespaced = kind in ("NetworkPolicy", "StagedNetworkPolicy")
    meta = {"name": name, **({"namespace": "ns1"} if namespaced else {})}
    doc = {"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": meta, "spec": spec}
    text = json.dumps(doc)
    key = ResourceKey(kind, name, "ns1" if namespaced else "")
    try:
        want: Any = v1_part(key, json.loads(text))
    except Exception as exc:
        want = (type(exc), str(exc))
    event("rejected" if isinstance(want, tuple) else "converted")
    path = tmp_path / f"{abs(hash(text))}.bin"
    for cache in (ConversionCache(str(path), code=CODE),) * 2 + (None,):
        cache = cache or ConversionCache(str(path), code=CODE)  # a later process, same file
        try:
            got: Any = cache.process(key, text, json.loads(text))
        except Exception as exc:
            got = (type(exc), str(exc))
        assert got == want
        cache.flush()
    stored = ConversionCache(str(path), code=CODE).get(key, text)
    assert stored == (None if isinstance(want, tuple) else want)


def test_bulk_conversion_is_served_but_not_kept(tmp_path: Path) -> None:
    ka, ta, ra = gnp("t1.a")
    kb, tb, rb = gnp("t1.b")
    cache = ConversionCache(str(tmp_path / "c.bin"), code=CODE)
    cache.process(ka, ta, ra)
    assert cache.process(ka, ta, ra, keep=False) == v1_part(ka, ra)  # a hit stays a hit
    assert cache.hits == 1
    assert cache.process(kb, tb, rb, keep=False) == v1_part(kb, rb)
    assert cache.get(kb, tb) is None
    assert cache.flush() is True
    assert ConversionCache(str(tmp_path / "c.bin"), code=CODE).get(kb, tb) is None


def test_dataset_keeps_single_endpoints_not_every_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from calico.policyeval.dataset import Dataset

    cache = ConversionCache(str(tmp_path / "c.bin"), code=CODE)
    monkeypatch.setattr(convcache, "_default", cache)

    def wep(i: int) -> str:
        return json.dumps(
            {
                "apiVersion": "projectcalico.org/v3",
                "kind": "WorkloadEndpoint",
                "metadata": {"name": f"n-k8s-p{i}-eth0", "namespace": "ns"},
                "spec": {
                    "node": "n",
                    "orchestrator": "k8s",
                    "pod": f"p{i}",
                    "endpoint": "eth0",
                    "interfaceName": f"cali{i}",
                    "ipNetworks": [f"10.0.0.{i}/32"],
                },
            }
        )

    data = Dataset()
    for i in range(3):
        data.add_endpoint_text("WorkloadEndpoint", "ns", f"n-k8s-p{i}-eth0", wep(i))
    one = data.endpoint("WorkloadEndpoint", "n-k8s-p0-eth0", "ns")
    assert one is not None and cache.misses == 1 and len(cache._entries or {}) == 1
    assert len(data.endpoints()) == 3
    assert cache.misses == 3 and len(cache._entries or {}) == 1
    again = Dataset()
    again.add_endpoint_text("WorkloadEndpoint", "ns", "n-k8s-p0-eth0", wep(0))
    assert again.endpoint("WorkloadEndpoint", "n-k8s-p0-eth0", "ns") == one
    assert cache.hits == 1
    atexit.unregister(cache.flush)  # registered because it stood in for the default


def test_an_output_that_cannot_be_pickled_is_dropped_not_raised(tmp_path: Path) -> None:
    key, text, _ = gnp()
    cache = ConversionCache(str(tmp_path / "c.bin"), code=CODE)
    cache.put(key, text, {"bad": lambda: None})
    k2, t2, r2 = gnp("t1.other")
    cache.process(k2, t2, r2)
    assert cache.flush() is True
    later = ConversionCache(str(tmp_path / "c.bin"), code=CODE)
    assert later.get(key, text) is None and later.get(k2, t2) == v1_part(k2, r2)


def test_convert_is_kept_per_tag_and_errors_are_not(tmp_path: Path) -> None:
    key, text, _ = gnp()
    cache = ConversionCache(str(tmp_path / "c.bin"), code=CODE)
    calls: list[str] = []

    def fn(tag: str) -> dict[str, Any]:
        calls.append(tag)
        return {"v": tag}

    assert cache.convert("a", key, text, lambda: fn("a")) == {"v": "a"}
    assert cache.convert("a", key, text, lambda: fn("again")) == {"v": "a"}
    assert cache.convert("b", key, text, lambda: fn("b")) == {"v": "b"}  # another function
    assert cache.get(key, text) is None  # nor is it the processors' entry
    assert calls == ["a", "b"]

    def boom() -> dict[str, Any]:
        raise ValueError("no")

    for _ in range(2):
        with pytest.raises(ValueError, match="no"):
            cache.convert("c", key, text, boom)
    assert cache.get(key, text, "c") is None
    cache.flush()
    assert ConversionCache(str(tmp_path / "c.bin"), code=CODE).get(key, text, "b") == {"v": "b"}
