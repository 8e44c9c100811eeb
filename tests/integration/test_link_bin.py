"""scripts/link-bin.sh (``make setup`` / ``make uninstall``): ``calico`` and ``calicoctl`` on
PATH as links into this checkout's venv, in a temporary BINDIR. Idempotent install, uninstall of
exactly our links, and never clobbering another file or another installation's link."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "link-bin.sh"
NAMES = ("calico", "calicoctl")


def venv_script(name: str) -> str:
    return str(ROOT.resolve() / ".venv" / "bin" / name)


@pytest.fixture(autouse=True)
def _need_venv() -> None:
    if not all(os.access(venv_script(n), os.X_OK) for n in NAMES):
        pytest.skip("needs the checkout's .venv (make setup)")


def run(
    action: str, bindir: Path | None = None, script: Path = SCRIPT, **env: str
) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if k not in ("PREFIX", "BINDIR")}
    full = {**inherited, **env}
    if bindir is not None:
        full["BINDIR"] = str(bindir)
    return subprocess.run(
        ["bash", str(script), action], capture_output=True, text=True, env=full, timeout=60
    )


def links(bindir: Path) -> dict[str, str]:
    return {p.name: os.readlink(p) for p in sorted(bindir.iterdir()) if p.is_symlink()}


def test_install_links_both_scripts_and_they_work_from_a_new_shell(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"  # created by the script
    proc = run("install", bindir, PATH=f"{bindir}:/usr/bin:/bin")
    assert proc.returncode == 0, proc.stderr
    assert links(bindir) == {n: venv_script(n) for n in NAMES}
    for name in NAMES:
        assert f"linked {bindir / name} -> {venv_script(name)}" in proc.stdout
    assert proc.stderr == ""
    # A fresh login-less shell, elsewhere, with only BINDIR and the system dirs on PATH.
    shell = subprocess.run(
        ["bash", "-c", "calico version && calicoctl version --client"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=60,
    )
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.startswith("Version:")
    assert "Client Version:" in shell.stdout


def test_install_is_idempotent_and_quiet(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    assert run("install", bindir).returncode == 0
    inodes = {n: (bindir / n).lstat().st_ino for n in NAMES}
    again = run("install", bindir, PATH=f"{bindir}:/usr/bin:/bin")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert {n: (bindir / n).lstat().st_ino for n in NAMES} == inodes


def test_uninstall_removes_exactly_our_links(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "other").symlink_to("/bin/true")
    assert run("install", bindir).returncode == 0
    proc = run("uninstall", bindir)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in bindir.iterdir()) == ["other"]
    assert f"removed {bindir / 'calico'}" in proc.stdout
    again = run("uninstall", bindir)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_refuses_to_clobber_a_file_and_says_so(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    mine = bindir / "calicoctl"
    mine.write_text("#!/bin/sh\necho the user's own calicoctl\n")
    proc = run("install", bindir)
    assert proc.returncode == 0  # make setup goes on; the venv scripts stay usable
    assert f"left {mine} alone: it is not a link" in proc.stderr
    assert mine.read_text() == "#!/bin/sh\necho the user's own calicoctl\n"
    assert not mine.is_symlink()
    assert links(bindir) == {"calico": venv_script("calico")}
    # uninstall takes our link away and still leaves the user's file.
    proc = run("uninstall", bindir)
    assert f"left {mine} alone: it does not link into" in proc.stderr
    assert mine.exists() and not (bindir / "calico").exists()


def test_leaves_another_installations_link_alone(tmp_path: Path) -> None:
    other = tmp_path / "other-checkout" / ".venv" / "bin" / "calico"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "calico").symlink_to(other)
    proc = run("install", bindir)
    assert proc.returncode == 0
    assert f"it links to {other}, another installation" in proc.stderr
    assert os.readlink(bindir / "calico") == str(other)
    run("uninstall", bindir)
    assert os.readlink(bindir / "calico") == str(other)


def test_replaces_a_dangling_link(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    gone = tmp_path / "deleted-checkout" / ".venv" / "bin" / "calicoctl"
    (bindir / "calicoctl").symlink_to(gone)
    proc = run("install", bindir)
    assert proc.returncode == 0, proc.stderr
    assert f"replaced dangling link {bindir / 'calicoctl'} (was -> {gone})" in proc.stdout
    assert os.readlink(bindir / "calicoctl") == venv_script("calicoctl")


def test_prefix_selects_prefix_bin(tmp_path: Path) -> None:
    proc = run("install", PREFIX=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert links(tmp_path / "bin") == {n: venv_script(n) for n in NAMES}
    assert f"note: {tmp_path / 'bin'} is not on PATH" in proc.stderr


def test_unwritable_bindir_warns_and_leaves_setup_working(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("")
    proc = run("install", target / "bin")  # cannot be created under a regular file
    assert proc.returncode == 0
    assert f"cannot write to {target / 'bin'}" in proc.stderr


def test_without_a_venv_it_fails_clearly(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "scripts" / "link-bin.sh")
    proc = run("install", tmp_path / "bin", script=checkout / "scripts" / "link-bin.sh")
    assert proc.returncode == 1
    assert "does not exist: build the venv first (make setup)" in proc.stderr
    assert not (tmp_path / "bin").exists()


def test_bad_action_prints_usage(tmp_path: Path) -> None:
    proc = run("frobnicate", tmp_path)
    assert proc.returncode == 2
    assert "usage:" in proc.stderr


def test_make_setup_and_uninstall_use_bindir(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("no make")
    bindir = tmp_path / "bin"
    make = ["make", "-s", "-C", str(ROOT)]
    proc = subprocess.run(
        [*make, "setup", f"BINDIR={bindir}"], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert links(bindir) == {n: venv_script(n) for n in NAMES}
    proc = subprocess.run(
        [*make, "uninstall", f"BINDIR={bindir}"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert list(bindir.iterdir()) == []
