"""The entry: its imports stay light; run_cli error handling and the component registry."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import click
import pytest

from calico.cli import components
from calico.cli.root import run_cli


@click.command("explode")
@click.option("--code", type=int, default=None)
def explode(code: int | None) -> None:
    """A test component: exits with --code, or crashes with an unexpected exception."""
    if code is not None:
        raise SystemExit(code)
    raise RuntimeError("kaboom")


@pytest.fixture
def registered() -> Iterator[None]:
    components.COMPONENTS["explode"] = f"{__name__}:explode"
    yield
    del components.COMPONENTS["explode"]


def test_registered_component_runs(registered: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["calico", "component", "explode", "--code", "7"]) == 7
    assert run_cli(["calico", "component", "--help"]) == 0
    assert "explode" in capsys.readouterr().out


def test_crash_without_traceback(registered: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["calico", "component", "explode"]) == 1
    err = capsys.readouterr().err
    assert err == "Error: kaboom\n"


def test_crash_with_traceback_in_debug(
    registered: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["calico", "--log-level", "debug", "component", "explode"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("Error: kaboom\n")


def test_unknown_component_lists_available(
    registered: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["calico", "component", "nope"]) == 1
    names = ", ".join(sorted(components.COMPONENTS))
    assert "explode" in names
    assert capsys.readouterr().err == f'Error: unknown component "nope"; available: {names}\n'


def test_usage_error_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["calico", "--log-level", "loud", "version"]) == 1
    assert capsys.readouterr().err.startswith("Error: Invalid value for '--log-level'")


def test_help_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["calico", "--help"]) == 0
    assert "Usage: calico" in capsys.readouterr().out


def test_entry_imports_only_the_process_mode() -> None:
    """Every CNI call imports calico.cli.main: no click, no component, nothing but the mode."""
    code = (
        "import sys; import calico.cli.main; "
        "print(sorted(m for m in sys.modules if m.startswith(('calico', 'click'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert out.strip() == str(["calico", "calico.cli", "calico.cli.main", "calico.process_mode"])


def test_entry_names_itself_and_serves_cni() -> None:
    """A launcher's ``main("calico-ipam")``: the name decides the mode, as argv[0] would."""
    res = subprocess.run(
        [sys.executable, "-c", 'from calico.cli.main import main; main("calico-ipam")'],
        input=b'{"cniVersion": "0.4.0"}',
        env={"CNI_COMMAND": "VERSION", "CALICO_CNI_DAEMON_SOCKET": "off"},
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["cniVersion"] == "0.4.0"


def test_ctl_serves_the_node_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """calicoctl does not import node; the entry attaches ``node`` to ``ctl``, listed last."""
    assert run_cli(["calicoctl", "ctl", "--help"]) == 0
    rows = capsys.readouterr().out.split("Commands:")[1].strip().splitlines()
    assert " ".join(rows[-1].split()) == "node Run, stop or inspect a Calico node on this machine."
    assert run_cli(["calicoctl", "ctl", "node", "stop", "--help"]) == 0
    assert "Usage: calicoctl node stop" in capsys.readouterr().out
