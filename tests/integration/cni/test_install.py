"""``calico component cni install`` into temporary directories, and the launchers it writes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def install(calico_bin: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CNI_COMMAND"}
    return subprocess.run(
        [
            calico_bin, "component", "cni", "install",
            "--cni-conf-dir", str(tmp / "net.d"),
            "--cni-bin-dir", str(tmp / "bin"),
            *extra,
        ],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


def test_install_is_idempotent(calico_bin: str, tmp_path: Path) -> None:
    args = ("--mtu", "1410", "--datastore-type", "etcdv3", "--nodename", "worker-7")
    first = install(calico_bin, tmp_path, *args)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("Wrote ") == 3
    conflist = tmp_path / "net.d" / "10-calico.conflist"
    doc = json.loads(conflist.read_text())
    plugin = doc["plugins"][0]
    assert doc["cniVersion"] == "1.0.0" and doc["name"] == "k8s-pod-network"
    assert (plugin["type"], plugin["mtu"], plugin["datastore_type"], plugin["nodename"]) == (
        "calico", 1410, "etcdv3", "worker-7",
    )  # fmt: skip
    assert plugin["ipam"] == {"type": "calico-ipam"}
    for name in ("calico", "calico-ipam"):
        launcher = tmp_path / "bin" / name
        assert launcher.stat().st_mode & 0o777 == 0o755
    mtime = conflist.stat().st_mtime_ns
    second = install(calico_bin, tmp_path, *args)
    assert second.returncode == 0
    assert second.stdout.count("Unchanged ") == 3
    assert conflist.stat().st_mtime_ns == mtime
    third = install(calico_bin, tmp_path, "--mtu", "9000", "--nodename", "worker-7")
    assert "Wrote " + str(conflist) in third.stdout
    assert json.loads(conflist.read_text())["plugins"][0]["mtu"] == 9000


def test_launchers_speak_cni(calico_bin: str, tmp_path: Path) -> None:
    assert install(calico_bin, tmp_path).returncode == 0
    for name in ("calico", "calico-ipam"):
        res = subprocess.run(
            [str(tmp_path / "bin" / name)],
            input='{"cniVersion": "0.4.0"}',
            capture_output=True,
            text=True,
            env={"CNI_COMMAND": "VERSION", "PATH": os.environ["PATH"]},
            timeout=30,
        )
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout) == {
            "cniVersion": "0.4.0",
            "supportedVersions": ["0.3.0", "0.3.1", "0.4.0", "1.0.0"],
        }
    # calico-ipam dispatches on its basename, so CHECK reaches the IPAM verb table.
    res = subprocess.run(
        [str(tmp_path / "bin" / "calico-ipam")],
        input=json.dumps({"cniVersion": "1.0.0", "name": "n", "nodename": "x"}),
        capture_output=True,
        text=True,
        env={
            "CNI_COMMAND": "CHECK",
            "CNI_CONTAINERID": "c1",
            "CNI_NETNS": "/proc/self/ns/net",
            "CNI_IFNAME": "eth0",
            "CNI_PATH": str(tmp_path / "bin"),
            "CALICO_DATASTORE_PATH": str(tmp_path / "ds.db"),
            "PATH": os.environ["PATH"],
        },
        timeout=30,
    )
    assert res.returncode == 1
    assert "calico-ipam does not implement CHECK" in json.loads(res.stdout)["msg"]
    # The CLI still works through a launcher.
    res = subprocess.run(
        [str(tmp_path / "bin" / "calico"), "version"], capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 0 and res.stdout.startswith("Version:")


def test_daemon_socket_option_goes_into_the_launchers(calico_bin: str, tmp_path: Path) -> None:
    sock = str(tmp_path / "state dir" / "cni-daemon.sock")
    first = install(calico_bin, tmp_path, "--daemon-socket", sock)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("Wrote ") == 3
    for name in ("calico", "calico-ipam"):
        assert f"CALICO_CNI_DAEMON_SOCKET='{sock}'" in (tmp_path / "bin" / name).read_text()
    again = install(calico_bin, tmp_path, "--daemon-socket", sock)
    assert again.stdout.count("Unchanged ") == 3
    # Without the option the launchers go back to the plugin's own lookup; the conflist stays.
    plain = install(calico_bin, tmp_path)
    assert plain.stdout.count("Wrote ") == 2 and plain.stdout.count("Unchanged ") == 1
    assert "CALICO_CNI_DAEMON_SOCKET" not in (tmp_path / "bin" / "calico").read_text()
    # The launchers still speak CNI with the option (no daemon there: in-process).
    install(calico_bin, tmp_path, "--daemon-socket", sock)
    res = subprocess.run(
        [str(tmp_path / "bin" / "calico")],
        input='{"cniVersion": "1.0.0"}',
        capture_output=True,
        text=True,
        env={"CNI_COMMAND": "VERSION", "PATH": os.environ["PATH"]},
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["cniVersion"] == "1.0.0"


def test_bad_template_is_reported(calico_bin: str, tmp_path: Path) -> None:
    template = tmp_path / "tpl.json"
    template.write_text('{"name": "x", "mtu": __CNI_MTU__, ')
    res = install(calico_bin, tmp_path, "--template", str(template))
    assert res.returncode == 1
    assert "not valid JSON" in res.stderr and "Traceback" not in res.stderr
