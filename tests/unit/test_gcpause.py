"""calico.gcpause: a pause is resumed only by its owner, resume freezes, errors resume too."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from calico import gcpause


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gcpause._paused = False
    gc.unfreeze()  # give the test process its objects back to the collector
    if was:
        gc.enable()
    else:
        gc.disable()


def test_pause_then_resume_freezes_and_reenables() -> None:
    gc.enable()
    gc.unfreeze()
    gcpause.pause()
    assert not gc.isenabled()
    gcpause.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


def test_resume_without_pause_does_nothing() -> None:
    gc.enable()
    gc.unfreeze()
    gcpause.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_collector_disabled_by_someone_else_stays_disabled() -> None:
    gc.disable()
    gcpause.pause()
    gcpause.resume()
    assert not gc.isenabled()
    with gcpause.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_paused_block_resumes_on_error() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), gcpause.paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_nested_block_leaves_the_outer_pause_on() -> None:
    gc.enable()
    gcpause.pause()
    with gcpause.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # still the outer pause
    gcpause.resume()
    assert gc.isenabled()


@pytest.mark.parametrize(
    ("group", "argv0"), [("root.cli", "calico"), ("root.ctl", "calicoctl")], ids=["calico", "ctl"]
)
def test_cli_process_collects_again_once_the_command_runs(group: str, argv0: str) -> None:
    """The console entry pauses; the root group's (or calicoctl's) callback resumes before the
    command body runs."""
    probe = (
        "import gc, sys\n"
        "import click\n"
        "from calico.cli import root\n"
        f"@{group}.command('gc-probe')\n"
        "def _probe():\n"
        "    click.echo(f'{gc.isenabled()} {gc.get_freeze_count() > 0}')\n"
        "from calico.cli.main import main\n"
        f"sys.argv = [{argv0!r}, 'gc-probe']\n"
        "main()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["True", "True"], out.stderr


def test_calicoctl_subcommand_modules_are_imported_under_the_start_up_pause() -> None:
    """``calicoctl explain`` runs the ctl group directly (not the ``calico`` root, whose
    callback resumes before a subcommand is resolved): the pause must still cover explain's
    module tree, which is most of what the pause saves (design/performance.md "Schema
    builds"). At the first resume those modules are already imported."""
    probe = (
        "import json, sys\n"
        "from calico import gcpause\n"
        "seen = []\n"
        "orig = gcpause.resume\n"
        "def resume():\n"
        "    if gcpause._paused:\n"
        "        seen.append([m in sys.modules for m in\n"
        "                     ('calico.calicoctl.explain', 'calico.policyeval.dataset')])\n"
        "    orig()\n"
        "gcpause.resume = resume\n"
        "from calico.cli.main import main\n"
        "sys.argv = ['calicoctl', 'explain', '--help']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(json.dumps(seen), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stderr.strip().splitlines()[-1] == "[[true, true]]", out.stderr
    assert "Usage: calicoctl explain" in out.stdout


def _run_component_probe(name: str) -> list[str]:
    """``calico component <name>`` through the real entry point, with <name> pointed at a probe
    command that prints whether the collector runs in the command body, then runs Felix's
    in-sync callback and prints it again, with whether the idle collector then took the
    schedule over (calico.felix.idle_gc: the gen-0 threshold raised to the backstop)."""
    probe = (
        "import gc, sys\n"
        "import click\n"
        "from calico.cli import components\n"
        "@click.command()\n"
        "def probe():\n"
        "    print(gc.isenabled())\n"
        "    from calico.felix.daemon import FelixDaemon\n"
        "    from calico.felix.idle_gc import BACKSTOP\n"
        "    daemon = FelixDaemon()\n"
        "    daemon._on_dataplane_in_sync()\n"
        "    print(gc.isenabled(), gc.get_freeze_count() > 0)\n"
        "    print(daemon.idle_gc.active, gc.get_threshold()[0] == BACKSTOP)\n"
        f"components.COMPONENTS[{name!r}] = '__main__:probe'\n"
        "from calico.cli.main import main\n"
        f"sys.argv = ['calico', 'component', {name!r}]\n"
        "main()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.split()


def test_felix_start_up_stays_paused_until_the_first_in_sync_apply() -> None:
    """``calico component felix``: the pause covers Felix's imports and start-up; the dataplane's
    first in-sync apply freezes and resumes, so the daemon then collects normally."""
    assert _run_component_probe("felix") == ["False", "True", "True", "True", "True"]


def test_other_components_collect_from_their_command_body() -> None:
    """Any other component resumes in the ``component`` group's callback, after its import."""
    assert _run_component_probe("typha") == ["True", "True", "True", "True", "True"]


def _wait_until(cond: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_felix_never_in_sync_resumes_after_the_pause_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from calico.felix import daemon as felix_daemon

    monkeypatch.setattr(felix_daemon, "GC_PAUSE_LIMIT", 0.0)
    gc.enable()
    gcpause.pause()
    d = felix_daemon.FelixDaemon()
    t = threading.Thread(target=d._supervise, daemon=True)
    t.start()
    try:
        assert _wait_until(gc.isenabled), "supervisor never resumed the collector"
        assert gc.get_freeze_count() > 0
    finally:
        d._stop.set()
        t.join(5)


def test_felix_supervisor_keeps_the_pause_within_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before the limit (and before the first apply) the supervisor leaves the pause on."""
    from calico.felix import daemon as felix_daemon

    monkeypatch.setattr(felix_daemon, "GC_PAUSE_LIMIT", 3600.0)
    gc.enable()
    gcpause.pause()
    d = felix_daemon.FelixDaemon()
    waits: list[int] = []
    real_wait = d._stop.wait

    def counted_wait(timeout: float | None = None) -> bool:
        waits.append(1)
        return len(waits) > 3 or real_wait(0)

    monkeypatch.setattr(d._stop, "wait", counted_wait)
    d._supervise()  # three supervision rounds, then stopped
    assert len(waits) == 4
    assert not gc.isenabled()


def test_felix_waiting_for_the_datastore_collects(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Felix that cannot reach its datastore resumes before its first retry wait."""
    from calico.datastore import factory
    from calico.felix import daemon as felix_daemon
    from calico.felix.config import local_sources, resolve

    def unreachable(_cfg: object) -> object:
        raise ConnectionError("no datastore here")

    monkeypatch.setattr(factory, "open_backend", unreachable)
    gc.enable()
    gcpause.pause()
    d = felix_daemon.FelixDaemon("/nonexistent/felix.cfg")
    seen: list[bool] = []

    def stop_on_wait(timeout: float | None = None) -> bool:
        seen.append(gc.isenabled())
        d._stop.set()
        return True

    monkeypatch.setattr(d._stop, "wait", stop_on_wait)
    config = resolve(local_sources(config_file="/nonexistent/felix.cfg"))
    assert d.connect(config, felix_daemon.felix_datastore_config(config)) is None
    assert seen == [True]
