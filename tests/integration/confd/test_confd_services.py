"""The node image's confd/bird/bird6 run scripts with ``calico.bird_services``' environment:
each execs its daemon with the overridden confdir and sockets (stand-ins on PATH print argv)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from calico import bird_services as services

AVAILABLE = Path(__file__).resolve().parents[3] / "node/filesystem/etc/service/available"


@pytest.fixture
def fake_path(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("calico", "bird", "bird6"):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho {name} "$@"\n')
        script.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


@pytest.mark.parametrize(
    ("service", "argv"),
    [
        ("confd", "calico component confd --confdir {c}"),
        ("bird", "bird -R -s {r}/bird.ctl -d -c {c}/config/bird.cfg"),
        ("bird6", "bird6 -R -s {r}/bird6.ctl -d -c {c}/config/bird6.cfg"),
    ],
)
def test_run_scripts_take_the_node_run_environment(
    service: str, argv: str, fake_path: str, tmp_path: Path
) -> None:
    confdir, run_dir = tmp_path / "confd", tmp_path / "run"
    env = {"PATH": fake_path, **services.service_env(confdir, run_dir, tmp_path / "svc")}
    out = subprocess.run(
        ["/bin/sh", str(AVAILABLE / service / "run")], env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == argv.format(c=confdir, r=run_dir)


def test_prepare_confdir_refreshes_templates_and_keeps_config(tmp_path: Path) -> None:
    confdir = tmp_path / "confd"
    services.prepare_confdir(confdir)
    (confdir / "config" / "bird.cfg").write_text("last good\n")
    (confdir / "templates" / "stale.template").write_text("x")
    services.prepare_confdir(confdir)
    assert (confdir / "config" / "bird.cfg").read_text() == "last good\n"
    assert not (confdir / "templates" / "stale.template").exists()
    assert sorted(p.name for p in (confdir / "conf.d").iterdir()) == [
        "bird.toml",
        "bird6.toml",
        "bird6_aggr.toml",
        "bird6_ipam.toml",
        "bird_aggr.toml",
        "bird_ipam.toml",
    ]
    assert services.BIRD_SERVICES == ("confd", "bird", "bird6")
