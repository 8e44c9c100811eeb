"""calico.codecache: the cached compile gives the classes plain ``dataclasses`` gives, the
namedtuples and forward references plain ``collections`` and ``typing`` give, and the cache
file is reused, rewritten and ignored exactly when it should be."""

from __future__ import annotations

import dataclasses
import keyword
import marshal
import os
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from types import FunctionType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico import codecache

METHODS = (
    "__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__",
    "__lt__", "__le__", "__gt__", "__ge__",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    saved = (dict(codecache._codes), set(codecache._used), codecache._new,
             codecache._path)  # fmt: skip
    was_installed = codecache.installed()
    codecache.uninstall()
    codecache._codes.clear()
    codecache._used.clear()
    codecache._new = 0
    yield
    codecache.uninstall()
    codes, used, codecache._new, codecache._path = saved
    codecache._codes.clear()
    codecache._codes.update(codes)
    codecache._used.clear()
    codecache._used.update(used)
    if was_installed:
        for name, mod in codecache._HOOKS:
            setattr(mod, name, codecache._STAND_INS[name])


def generated(cls: type) -> dict[str, Any]:
    """Everything dataclasses generated for ``cls`` that a compile could change."""
    out: dict[str, Any] = {}
    for name in METHODS:
        fn = cls.__dict__.get(name)
        fn = getattr(fn, "__wrapped__", fn)  # __repr__ is wrapped by recursive_repr
        if isinstance(fn, FunctionType):
            out[name] = (fn.__code__, fn.__qualname__, fn.__defaults__, fn.__kwdefaults__,
                         fn.__annotations__, sorted(fn.__globals__) == sorted(vars(sys.modules[
                             cls.__module__])))  # fmt: skip
        elif fn is not None:
            out[name] = fn
    return out


names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n)
)
field_specs = st.lists(
    st.tuples(names, st.sampled_from(["none", "default", "factory", "no-init", "no-repr"])),
    max_size=6,
    unique_by=lambda t: t[0],
)
options = st.fixed_dictionaries(
    {
        "frozen": st.booleans(),
        "eq": st.booleans(),
        "order": st.booleans(),
        "unsafe_hash": st.booleans(),
        "repr": st.booleans(),
        "kw_only": st.booleans(),
        "slots": st.booleans(),
    }
)


def make(spec: list[tuple[str, str]], opts: dict[str, bool]) -> type:
    if opts["order"] and not opts["eq"]:
        opts = {**opts, "order": False}
    fields: list[Any] = []
    seen_default = False
    for name, kind in spec:
        if kind == "default":
            fields.append((name, int, dataclasses.field(default=len(name))))
            seen_default = True
        elif kind == "factory":
            fields.append((name, list, dataclasses.field(default_factory=list)))
            seen_default = True
        elif kind == "no-init":
            fields.append((name, int, dataclasses.field(default=1, init=False)))
            seen_default = True
        elif kind == "no-repr":
            fields.append((name, "str", dataclasses.field(default="x", repr=False)))
            seen_default = True
        elif seen_default and not opts["kw_only"]:
            fields.append((name, int, dataclasses.field(default=0)))
        else:
            fields.append((name, int))
    return dataclasses.make_dataclass("C", fields, **opts)


@settings(max_examples=150, deadline=None)
@given(field_specs, options)
def test_cached_compile_generates_what_dataclasses_generates(
    spec: list[tuple[str, str]], opts: dict[str, bool]
) -> None:
    plain = make(spec, opts)
    codecache._codes.clear()
    codecache._new = 0
    dataclasses.exec = codecache.cached_exec  # type: ignore[attr-defined]
    try:
        first = make(spec, opts)  # compiled through the cache
        compiled = codecache._new
        again = make(spec, opts)  # every text found in the cache
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
    assert codecache._new == compiled  # the second class compiled nothing
    assert compiled == len(codecache._codes) > 0
    assert generated(plain) == generated(first) == generated(again)
    args = {f.name: 3 for f in dataclasses.fields(plain) if f.init and f.type is int}
    a, b, c = plain(**args), first(**args), again(**args)
    if opts["repr"]:
        assert repr(a) == repr(b) == repr(c)
    if opts["eq"]:
        assert b == first(**args) and c == again(**args)
    if opts["frozen"] and dataclasses.fields(plain):
        name = dataclasses.fields(plain)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(b, name, 9)


@settings(max_examples=100, deadline=None)
@given(st.lists(names, min_size=0, max_size=6, unique=True), st.booleans())
def test_namedtuple_through_the_cache_is_plain_namedtuple(
    fields: list[str], defaults: bool
) -> None:
    import collections

    kwargs: dict[str, Any] = {"defaults": range(len(fields))} if defaults else {}
    plain = collections.namedtuple("N", fields, **kwargs)
    collections.eval = codecache.cached_eval  # type: ignore[attr-defined]
    try:
        cached = collections.namedtuple("N", fields, **kwargs)
        compiled = codecache._new
        again = collections.namedtuple("N", fields, **kwargs)
    finally:
        del collections.eval  # type: ignore[attr-defined]
    assert plain.__new__.__code__ == cached.__new__.__code__ == again.__new__.__code__
    assert plain.__new__.__defaults__ == cached.__new__.__defaults__
    assert codecache._new == compiled  # the second class found its text
    assert any(k.startswith("eval\0lambda _cls") for k in codecache._codes)
    values = list(range(len(fields)))
    assert plain(*values) == cached(*values) == tuple(values)
    assert repr(plain(*values)) == repr(cached(*values))


def test_forward_references_through_the_cache_are_plain_ones() -> None:
    texts = ["int", "list[str]", "Optional[int]", "'quoted'", "dict[str, 'X']", "a.b.C"]
    plain = [typing.ForwardRef(t) for t in texts]
    typing.compile = codecache.cached_compile  # type: ignore[attr-defined]
    try:
        cached = [typing.ForwardRef(t) for t in texts]
        again = [typing.ForwardRef(t) for t in texts]
        with pytest.raises(SyntaxError, match="Forward reference must be an expression"):
            typing.ForwardRef("not an expression!")
        with pytest.raises(SyntaxError):
            typing.ForwardRef("def f(): pass")
        ns: dict[str, Any] = {}
        typing.compile("y = 1", "<other>", "exec")  # another file name: not cached
        assert codecache._new == len(texts)  # the repeats and the failures added nothing
        exec(typing.compile("x: int = 1", "<string>", "exec"), ns)  # type: ignore[attr-defined]
        assert ns["__annotations__"] == {"x": int}  # evaluated: no ``annotations`` inherited
    finally:
        del typing.compile  # type: ignore[attr-defined]
    for p, c, a in zip(plain, cached, again, strict=True):
        assert p.__forward_code__ == c.__forward_code__ == a.__forward_code__
        assert p == c and hash(p) == hash(c)
    assert typing.ForwardRef("list[int]")._evaluate(globals(), None, frozenset()) == list[int]


def test_install_shadows_three_builtins_and_uninstall_restores(tmp_path: Path) -> None:
    import collections

    codecache.install(str(tmp_path / "c.bin"))
    assert codecache.installed()
    assert dataclasses.exec is codecache.cached_exec  # type: ignore[attr-defined]
    assert collections.eval is codecache.cached_eval  # type: ignore[attr-defined]
    assert typing.compile is codecache.cached_compile  # type: ignore[attr-defined]
    codecache.install(str(tmp_path / "other.bin"))  # idempotent: the first path stays
    assert codecache._path == str(tmp_path / "c.bin")
    codecache.uninstall()
    assert not codecache.installed()
    assert "exec" not in vars(dataclasses) and "eval" not in vars(collections)
    assert "compile" not in vars(typing)


def test_compile_text_matches_exec_of_the_text() -> None:
    """The code the cache runs is the code ``exec(text)`` runs when called from a module
    without ``__future__`` imports (as dataclasses is); this test module has ``annotations``,
    so an ``exec`` here would compile the text differently."""
    text = "def __create_fn__(x):\n def f(self, a:x):\n  return a\n return f"
    runner: dict[str, Any] = {}
    exec(compile("def run(t, ns): exec(t, {}, ns)", "<r>", "exec", dont_inherit=True), runner)
    ns: dict[str, Any] = {}
    runner["run"](text, ns)
    f = ns["__create_fn__"](int)
    ns2: dict[str, Any] = {}
    exec(codecache.compile_text(text), {}, ns2)
    g = ns2["__create_fn__"](int)
    assert f.__code__ == g.__code__
    assert g.__annotations__ == {"a": int}  # evaluated, not the string "x"
    ns3: dict[str, Any] = {}
    exec(text, {}, ns3)  # inherits this module's ``annotations``
    assert ns3["__create_fn__"](int).__annotations__ == {"a": "x"}


def test_non_text_goes_to_the_builtin() -> None:
    ns: dict[str, Any] = {}
    codecache.cached_exec(compile("y = 2", "<t>", "exec"), {}, ns)
    assert ns == {"y": 2}
    assert not codecache._codes


def test_flush_writes_and_a_new_install_reuses(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "pc" / "cache.bin"
    codecache.install(str(path))

    @dataclasses.dataclass(frozen=True)
    class P:
        a: int
        b: str = ""

    assert codecache._new > 0
    assert codecache.flush() is True
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert codecache.flush() is False  # nothing new since
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp left
    saved = dict(codecache._codes)
    assert {k: marshal.loads(v) for k, v in codecache.load(str(path)).items()} == saved
    codecache.uninstall()
    codecache._codes.clear()
    codecache._new = 0
    codecache.install(str(path))
    assert all(type(v) is bytes for v in codecache._codes.values())  # unmarshalled when asked
    assert set(codecache._codes) == set(saved)

    @dataclasses.dataclass(frozen=True)
    class Q:
        a: int
        b: str = ""

    assert codecache._new == 0  # every text came from the file
    assert generated(Q)["__init__"][0] == generated(P)["__init__"][0]
    assert codecache._codes == saved  # the texts Q used are code objects now, equal to P's


def test_no_write_when_bytecode_writing_is_off(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    path = tmp_path / "cache.bin"
    codecache.install(str(path))

    @dataclasses.dataclass
    class R:
        a: int

    assert codecache._new > 0
    assert codecache.flush() is False
    assert not path.exists()


def test_unwritable_directory_is_silent(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    blocker = tmp_path / "file"
    blocker.write_text("")
    codecache.install(str(blocker / "sub" / "cache.bin"))  # its directory cannot exist

    @dataclasses.dataclass
    class S:
        a: int

    assert codecache.flush() is False


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a cache",
        codecache._HEADER + b"\x00garbage",
        codecache._HEADER + marshal.dumps([1, 2]),
        b"\x00\x00\x00\x00cc2\x00" + marshal.dumps({}),  # another interpreter's magic
    ],
)
def test_bad_files_are_ignored(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cache.bin"
    path.write_bytes(content)
    assert codecache.load(str(path)) == {}
    codecache.install(str(path))

    @dataclasses.dataclass
    class T:
        a: int

    assert T(1).a == 1


def test_foreign_entries_are_dropped_and_bad_ones_recompiled(tmp_path: Path) -> None:
    path = tmp_path / "cache.bin"
    good = marshal.dumps(codecache.compile_text("x = 1"))
    entries = {"exec\0x = 1": good, "y": 5, 3: good, "exec\0y = 2": b"junk", "exec\0z = 3": b"\xe9"}
    path.write_bytes(codecache._HEADER + marshal.dumps(entries))
    assert codecache.load(str(path)) == {
        "exec\0x = 1": good, "exec\0y = 2": b"junk", "exec\0z = 3": b"\xe9"
    }  # fmt: skip
    codecache.install(str(path))
    for text, name in (("x = 1", "x"), ("y = 2", "y"), ("z = 3", "z")):
        ns: dict[str, Any] = {}
        codecache.cached_exec(text, ns)
        assert name in ns
    assert codecache._new == 2  # the two that did not unmarshal to code were compiled


def test_past_the_limit_only_used_texts_are_kept(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(codecache, "MAX_ENTRIES", 3)
    path = tmp_path / "cache.bin"
    stale = {
        f"exec\0z{i} = {i}": marshal.dumps(codecache.compile_text(f"z{i}={i}")) for i in range(5)
    }
    path.write_bytes(codecache._HEADER + marshal.dumps(stale))
    codecache.install(str(path))

    @dataclasses.dataclass
    class U:
        a: int

    codecache.flush()
    kept = codecache.load(str(path))
    assert kept and not set(kept) & set(stale)
    assert set(kept) == codecache._used


def test_default_path_is_beside_calicos_bytecode() -> None:
    import calico

    path = Path(codecache.default_path())
    assert path.parent == Path(calico.__file__).resolve().parent / "__pycache__"
    assert sys.implementation.cache_tag in path.name


DUMP = (
    f"METHODS = {METHODS!r}"
    + """
import marshal, sys, dataclasses
if sys.argv[1] != "-":
    from calico import codecache
    codecache.install(sys.argv[1])
import calico.felix.messages as m1, calico.felix.nftables.transaction as m2, calico.model.keys as m3
out = {}
for m in (m1, m2, m3):
    for name, cls in sorted(vars(m).items()):
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == m.__name__:
            for meth in METHODS:
                fn = cls.__dict__.get(meth)
                fn = getattr(fn, "__wrapped__", fn)
                if hasattr(fn, "__code__"):
                    out[f"{m.__name__}.{name}.{meth}"] = fn.__code__
if sys.argv[1] != "-":
    print(codecache._new, file=sys.stderr)
sys.stdout.buffer.write(marshal.dumps(out))
"""
)


def dump(arg: str) -> tuple[dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", DUMP, arg], capture_output=True, env=env,
                          check=True, timeout=120)  # fmt: skip
    return marshal.loads(done.stdout), done.stderr.decode().strip()


def test_felix_classes_identical_cold_and_warm(tmp_path: Path) -> None:
    """Real modules: the methods of every dataclass in them are the same code without the
    cache, with an empty cache (which the exit writes) and with that cache file."""
    path = str(tmp_path / "cache.bin")
    plain, _ = dump("-")
    cold, compiled = dump(path)
    warm, compiled_again = dump(path)
    assert len(plain) > 100
    assert plain == cold == warm
    assert int(compiled) > 100 and compiled_again == "0"
