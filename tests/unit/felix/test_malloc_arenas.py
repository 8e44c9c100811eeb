"""calico.felix.malloc_arenas: glibc takes the cap; an explicit MALLOC_ARENA_MAX wins."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = "from calico.felix.malloc_arenas import cap_arenas; print(cap_arenas())"


def run(env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env_extra
    return subprocess.run(
        [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_glibc_accepts_the_cap() -> None:
    assert run({}) == "True"


def test_an_explicit_environment_setting_wins() -> None:
    assert run({"MALLOC_ARENA_MAX": "4"}) == "False"


def test_a_libc_without_mallopt_is_left_alone(monkeypatch) -> None:
    from calico.felix import malloc_arenas

    class NoMallopt:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(malloc_arenas.ctypes, "CDLL", NoMallopt)  # musl-like: no mallopt
    assert malloc_arenas.cap_arenas() is False
