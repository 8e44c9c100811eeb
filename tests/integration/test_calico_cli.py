"""The `calico` command as users run it: help, version, errors without tracebacks."""

from __future__ import annotations

import json
import re
import subprocess

from calico.cli.components import COMPONENTS


def run(calico_bin: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([calico_bin, *args], capture_output=True, text=True, env=env, timeout=30)


def test_help(calico_bin: str, clean_env: dict[str, str]) -> None:
    res = run(calico_bin, clean_env, "--help")
    assert res.returncode == 0
    for word in ("component", "health", "version"):
        assert re.search(rf"^\s+{word}\s", res.stdout, re.M), res.stdout


def test_health_help(calico_bin: str, clean_env: dict[str, str]) -> None:
    res = run(calico_bin, clean_env, "health", "--help")
    assert res.returncode == 0
    for flag in ("--host", "--port", "--type", "--timeout"):
        assert flag in res.stdout


def test_version(calico_bin: str, clean_env: dict[str, str]) -> None:
    res = run(calico_bin, clean_env, "version")
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["Version", "Build date", "Git commit"]
    import calico

    assert lines[0].split()[-1] == calico.__version__


def test_unknown_component(calico_bin: str, clean_env: dict[str, str]) -> None:
    res = run(calico_bin, clean_env, "component", "bogus")
    assert res.returncode == 1
    names = ", ".join(sorted(COMPONENTS)) or "none yet"
    assert res.stderr.strip() == f'Error: unknown component "bogus"; available: {names}'
    assert "Traceback" not in res.stderr


def test_unknown_command_exit_1(calico_bin: str, clean_env: dict[str, str]) -> None:
    res = run(calico_bin, clean_env, "frobnicate")
    assert res.returncode == 1
    assert res.stderr.startswith("Error: ")


def test_cni_mode_runs_the_plugin(calico_bin: str, clean_env: dict[str, str]) -> None:
    env = dict(clean_env, CNI_COMMAND="VERSION")
    res = subprocess.run(
        [calico_bin], input='{"cniVersion": "0.3.1"}', capture_output=True, text=True, env=env,
        timeout=30,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert result["cniVersion"] == "0.3.1" and "1.0.0" in result["supportedVersions"]
    # A CNI failure is a CNI error document, never a traceback.
    bad = subprocess.run(
        [calico_bin], input="{", capture_output=True, text=True, env=dict(env, CNI_COMMAND="ADD"),
        timeout=30,
    )  # fmt: skip
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert json.loads(bad.stdout)["code"] == 4  # CNI_CONTAINERID etc. missing
    # A CLI verb still wins over a leaked CNI_COMMAND.
    assert run(calico_bin, env, "version").returncode == 0


def test_out_of_range_port_is_a_usage_error(calico_bin: str, clean_env: dict[str, str]) -> None:
    res = run(calico_bin, clean_env, "health", "--port", "99999999")
    assert res.returncode == 1
    assert res.stderr.startswith("Error: ")
    assert "Traceback" not in res.stderr
