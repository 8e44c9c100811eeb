"""Launchers skip ``site`` (-S) and the caller's cwd (-P) when the interpreter says where its
packages live, and fall back to the plain launcher when it cannot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from calico.cni import install as inst


def test_package_paths_of_this_interpreter_find_calico() -> None:
    paths = inst.package_paths(sys.executable)
    assert paths is not None
    assert any((Path(p) / "calico" / "__init__.py").exists() for p in paths)
    assert any((Path(p) / "pydantic").exists() for p in paths)  # the typed fallback needs it
    assert len(paths) == len(set(paths))


def test_package_paths_of_a_broken_interpreter_is_none(tmp_path: Path) -> None:
    fake = tmp_path / "py"
    fake.write_text("#!/bin/sh\necho not json\n")
    fake.chmod(0o755)
    assert inst.package_paths(str(fake)) is None
    assert inst.package_paths(str(tmp_path / "missing")) is None
    plain = inst.launcher_scripts(str(fake), None, inst.package_paths(str(fake)))["calico"]
    assert " -S " not in plain and "sys.path" not in plain


def test_launcher_runs_site_free_and_ignores_a_shadowing_cwd(tmp_path: Path) -> None:
    opts = inst.InstallOptions(conf_dir=str(tmp_path / "net.d"), bin_dir=str(tmp_path / "bin"),
                               nodename="n1", python=sys.executable)  # fmt: skip
    inst.install(opts)
    script = (tmp_path / "bin" / "calico-ipam").read_text()
    assert f"exec {sys.executable} -S -P -c " in script
    shadow = tmp_path / "cwd" / "calico"  # a runtime's cwd with a package of the same name
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise SystemExit('shadow calico imported')\n")
    # VERSION answers only if the real calico loaded (the shadow exits before any output).
    res = subprocess.run(
        [str(tmp_path / "bin" / "calico-ipam")],
        input=b'{"cniVersion": "0.4.0"}',
        env={"PATH": "/usr/bin:/bin", "CNI_COMMAND": "VERSION", "CALICO_CNI_DAEMON_SOCKET": "off"},
        cwd=shadow.parent,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["cniVersion"] == "0.4.0"
    assert b"shadow" not in res.stderr
