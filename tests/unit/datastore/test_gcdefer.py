"""calico.datastore.gcdefer: collection is off inside a list's build and back as it was after."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from calico.datastore.gcdefer import deferred
from calico.datastore.local import LocalBackend


@pytest.fixture(autouse=True)
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_off_inside_on_after_also_on_error() -> None:
    with deferred():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), deferred():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_nested_only_the_outermost_turns_it_back_on() -> None:
    with deferred():
        with deferred():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_disabled_before_stays_disabled() -> None:
    gc.disable()
    with deferred():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_threads_the_last_to_leave_turns_it_back_on() -> None:
    """A enters, B enters, A leaves (still off: B is building), B leaves (on)."""
    a_in, b_in, a_out, b_may_leave = (threading.Event() for _ in range(4))
    seen: dict[str, bool] = {}

    def a() -> None:
        with deferred():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b() -> None:
        a_in.wait(10)
        with deferred():
            b_in.set()
            a_out.wait(10)
            seen["after_a_left"] = gc.isenabled()
            b_may_leave.wait(10)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    a_out.wait(10)
    b_may_leave.set()
    for t in threads:
        t.join(10)
    assert seen == {"after_a_left": False}
    assert gc.isenabled()


def test_list_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    """Through the local backend's list: on stays on, off stays off, and the pairs are right."""
    with LocalBackend(tmp_path / "calico.db") as backend:
        for i in range(50):
            backend.apply(f"/p/k{i:02d}", str(i))
        listed = backend.list("/p/")
        assert gc.isenabled()
        assert [(kv.key, kv.value) for kv in listed.kvs] == [
            (f"/p/k{i:02d}", str(i)) for i in range(50)
        ]
        gc.disable()
        backend.list("/p/")
        assert not gc.isenabled()


def test_a_fresh_process_with_the_collector_off_keeps_it_off() -> None:
    """The first deferral ever, with collection already off: nothing to turn back on (the
    module's initial state must say so; a test after others in one process cannot see it)."""
    code = (
        "import gc; gc.disable()\n"
        "from calico.datastore.gcdefer import deferred\n"
        "with deferred():\n"
        "    inside = gc.isenabled()\n"
        "print(inside, gc.isenabled())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "False False\n", "")
