"""run_cli error handling and the component registry, in-process."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from calico.cli import components
from calico.cli.main import run_cli


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
