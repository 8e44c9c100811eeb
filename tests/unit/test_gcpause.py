"""calico.gcpause: a pause is resumed only by its owner, resume freezes, errors resume too."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

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
