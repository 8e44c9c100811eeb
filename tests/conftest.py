"""Shared fixtures for every tier."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests check behaviour, never speed: on a loaded CI machine the first example of a
# test can pay a lazy import or a schema build and overrun hypothesis' 200 ms default
# deadline, which would fail the run for a timing reason. (Benchmarks measure speed.)
settings.register_profile("calico", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("calico")

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent

# Shared test-support modules that live directly in tests/ (``import netns_support``) must be
# importable from every test folder; the folders are not packages, so put tests/ on the path.
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


@pytest.fixture(scope="session")
def calico_bin() -> str:
    """Path of the installed ``calico`` console script (the real entry point users run)."""
    path = VENV_BIN / "calico"
    if not path.exists():
        found = shutil.which("calico")
        assert found, "the calico console script is not installed; run `make setup`"
        return found
    return str(path)


@pytest.fixture
def clean_env() -> dict[str, str]:
    """The current environment minus variables that change what the CLI does."""
    env = dict(os.environ)
    env.pop("CNI_COMMAND", None)
    return env


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    """Put the root logger's level and handlers back after every test.

    In-process CLI runs (``calicoctl --log-level``, daemons' ``main``) set the root level as the
    real processes do; without this a later test's ``caplog`` sees nothing below that level.
    """
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


# ``make test`` runs two xdist workers; see xdist_scheduling for why the kernel tiers stay serial.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    from xdist_scheduling import make_scheduler

    return make_scheduler(config, log)
