"""calico.dataclass_code: the cached compile gives the classes plain ``dataclasses`` gives, and
the cache file is reused, rewritten and ignored exactly when it should be."""

from __future__ import annotations

import dataclasses
import keyword
import marshal
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FunctionType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico import dataclass_code

METHODS = (
    "__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__",
    "__lt__", "__le__", "__gt__", "__ge__",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    saved = (dict(dataclass_code._codes), set(dataclass_code._used), dataclass_code._new,
             dataclass_code._path)  # fmt: skip
    was_installed = getattr(dataclasses, "exec", None) is dataclass_code.cached_exec
    dataclass_code.uninstall()
    dataclass_code._codes.clear()
    dataclass_code._used.clear()
    dataclass_code._new = 0
    yield
    dataclass_code.uninstall()
    codes, used, dataclass_code._new, dataclass_code._path = saved
    dataclass_code._codes.clear()
    dataclass_code._codes.update(codes)
    dataclass_code._used.clear()
    dataclass_code._used.update(used)
    if was_installed:
        dataclasses.exec = dataclass_code.cached_exec  # type: ignore[attr-defined]


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
    dataclass_code._codes.clear()
    dataclass_code._new = 0
    dataclasses.exec = dataclass_code.cached_exec  # type: ignore[attr-defined]
    try:
        first = make(spec, opts)  # compiled through the cache
        compiled = dataclass_code._new
        again = make(spec, opts)  # every text found in the cache
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
    assert dataclass_code._new == compiled  # the second class compiled nothing
    assert compiled == len(dataclass_code._codes) > 0
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
    exec(dataclass_code.compile_text(text), {}, ns2)
    g = ns2["__create_fn__"](int)
    assert f.__code__ == g.__code__
    assert g.__annotations__ == {"a": int}  # evaluated, not the string "x"
    ns3: dict[str, Any] = {}
    exec(text, {}, ns3)  # inherits this module's ``annotations``
    assert ns3["__create_fn__"](int).__annotations__ == {"a": "x"}


def test_non_text_goes_to_the_builtin() -> None:
    ns: dict[str, Any] = {}
    dataclass_code.cached_exec(compile("y = 2", "<t>", "exec"), {}, ns)
    assert ns == {"y": 2}
    assert not dataclass_code._codes


def test_flush_writes_and_a_new_install_reuses(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "pc" / "cache.bin"
    dataclass_code.install(str(path))

    @dataclasses.dataclass(frozen=True)
    class P:
        a: int
        b: str = ""

    assert dataclass_code._new > 0
    assert dataclass_code.flush() is True
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert dataclass_code.flush() is False  # nothing new since
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp left
    saved = dict(dataclass_code._codes)
    assert dataclass_code.load(str(path)) == saved
    dataclass_code.uninstall()
    dataclass_code._codes.clear()
    dataclass_code._new = 0
    dataclass_code.install(str(path))
    assert dataclass_code._codes == saved

    @dataclasses.dataclass(frozen=True)
    class Q:
        a: int
        b: str = ""

    assert dataclass_code._new == 0  # every text came from the file
    assert generated(Q)["__init__"][0] == generated(P)["__init__"][0]


def test_no_write_when_bytecode_writing_is_off(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    path = tmp_path / "cache.bin"
    dataclass_code.install(str(path))

    @dataclasses.dataclass
    class R:
        a: int

    assert dataclass_code._new > 0
    assert dataclass_code.flush() is False
    assert not path.exists()


def test_unwritable_directory_is_silent(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    blocker = tmp_path / "file"
    blocker.write_text("")
    dataclass_code.install(str(blocker / "sub" / "cache.bin"))  # its directory cannot exist

    @dataclasses.dataclass
    class S:
        a: int

    assert dataclass_code.flush() is False


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a cache",
        dataclass_code._HEADER + b"\x00garbage",
        dataclass_code._HEADER + marshal.dumps([1, 2]),
        b"\x00\x00\x00\x00dc1\x00" + marshal.dumps({}),  # another interpreter's magic
    ],
)
def test_bad_files_are_ignored(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cache.bin"
    path.write_bytes(content)
    assert dataclass_code.load(str(path)) == {}
    dataclass_code.install(str(path))

    @dataclasses.dataclass
    class T:
        a: int

    assert T(1).a == 1


def test_foreign_entries_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "cache.bin"
    good = dataclass_code.compile_text("x = 1")
    path.write_bytes(dataclass_code._HEADER + marshal.dumps({"x = 1": good, "y": 5, 3: good}))
    assert dataclass_code.load(str(path)) == {"x = 1": good}


def test_past_the_limit_only_used_texts_are_kept(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(dataclass_code, "MAX_ENTRIES", 3)
    path = tmp_path / "cache.bin"
    stale = {f"z{i} = {i}": dataclass_code.compile_text(f"z{i} = {i}") for i in range(5)}
    path.write_bytes(dataclass_code._HEADER + marshal.dumps(stale))
    dataclass_code.install(str(path))

    @dataclasses.dataclass
    class U:
        a: int

    dataclass_code.flush()
    kept = dataclass_code.load(str(path))
    assert kept and not set(kept) & set(stale)
    assert set(kept) == dataclass_code._used


def test_default_path_is_beside_calicos_bytecode() -> None:
    import calico

    path = Path(dataclass_code.default_path())
    assert path.parent == Path(calico.__file__).resolve().parent / "__pycache__"
    assert sys.implementation.cache_tag in path.name


DUMP = (
    f"METHODS = {METHODS!r}"
    + """
import marshal, sys, dataclasses
if sys.argv[1] != "-":
    from calico import dataclass_code
    dataclass_code.install(sys.argv[1])
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
    print(dataclass_code._new, file=sys.stderr)
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
