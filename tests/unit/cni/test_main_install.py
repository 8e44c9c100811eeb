"""The plugin's top level (errors never escape as tracebacks) and the installer's rendering."""

from __future__ import annotations

import io
import json
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from calico.cni import install as inst
from calico.cni import main


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """run_plugin configures the root logger as a plugin process does; undo it afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def run(stdin: bytes, env: dict[str, str], is_ipam: bool = False) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    code = main.run_plugin(is_ipam, stdin=io.BytesIO(stdin), stdout=out, stderr=err,
                           environ=env)  # fmt: skip
    assert "Traceback" not in err.getvalue()
    return code, json.loads(out.getvalue()) if out.getvalue() else {}


def test_version() -> None:
    code, doc = run(b'{"cniVersion":"0.3.1"}', {"CNI_COMMAND": "VERSION"})
    assert code == 0 and doc["cniVersion"] == "0.3.1"
    code, doc = run(b"", {"CNI_COMMAND": "VERSION"}, is_ipam=True)
    assert code == 0 and doc["cniVersion"] == "1.0.0"


def test_error_reply_uses_requested_version() -> None:
    code, doc = run(b'{"cniVersion":"0.4.0"}', {"CNI_COMMAND": "NOPE"})
    assert code == 1 and doc == {
        "cniVersion": "0.4.0",
        "code": 4,
        "msg": "unknown CNI_COMMAND 'NOPE'",
        "details": "expected ('ADD', 'DEL', 'CHECK', 'VERSION', 'GC', 'STATUS')",
    }


def test_unexpected_exception_becomes_code_100(monkeypatch: pytest.MonkeyPatch) -> None:
    from calico.cni import plugin

    def boom(*_a: object, **_k: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(plugin, "prepare", boom)
    env = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c", "CNI_NETNS": "/x", "CNI_IFNAME": "e",
           "CNI_PATH": "/p"}  # fmt: skip
    code, doc = run(b'{"cniVersion":"1.0.0"}', env)
    assert code == 1 and doc["code"] == 100 and doc["msg"] == "kaboom"
    assert doc["details"] == "RuntimeError"


def test_log_file(tmp_path: Path) -> None:
    log = tmp_path / "sub" / "cni.log"
    stdin = json.dumps({"cniVersion": "1.0.0", "log_file_path": str(log)}).encode()
    code, _ = run(stdin, {"CNI_COMMAND": "BAD"})
    assert code == 1 and "unknown CNI_COMMAND" in log.read_text()


def test_render_conflist_substitutes_and_escapes() -> None:
    opts = inst.InstallOptions(mtu=1410, datastore_type="etcdv3", nodename='we"ird',
                               datastore_path="/d/c.db")  # fmt: skip
    plugin = json.loads(inst.render_conflist(opts))["plugins"][0]
    assert plugin["mtu"] == 1410 and plugin["nodename"] == 'we"ird'
    assert plugin["datastore_type"] == "etcdv3" and plugin["datastore_path"] == "/d/c.db"


def test_bad_template() -> None:
    with pytest.raises(ValueError):
        inst.render_conflist(inst.InstallOptions(template="{"))


def test_launchers_quote_the_interpreter() -> None:
    scripts = inst.launcher_scripts("/opt/my venv/bin/python")
    assert set(scripts) == {"calico", "calico-ipam"}
    assert "'/opt/my venv/bin/python'" in scripts["calico-ipam"]
    assert 'main("calico-ipam")' in scripts["calico-ipam"]


def test_launchers_without_daemon_socket_leave_the_lookup_alone() -> None:
    for script in inst.launcher_scripts("/usr/bin/python3").values():
        assert "CALICO_CNI_DAEMON_SOCKET" not in script


@pytest.mark.parametrize(
    ("caller_env", "seen"),
    [
        ({}, "/run/my node/cni-daemon.sock"),  # the installed default
        ({"CALICO_CNI_DAEMON_SOCKET": "off"}, "off"),  # the caller's choice wins
        ({"CALICO_CNI_DAEMON_SOCKET": ""}, ""),  # even an empty one (= disabled)
    ],
)
def test_launchers_default_the_daemon_socket(
    tmp_path: Path, caller_env: dict[str, str], seen: str
) -> None:
    """The launcher exports the socket; a stand-in "python" prints what it got."""
    fake_py = tmp_path / "py"
    fake_py.write_text('#!/bin/sh\nprintf "%s|%s" "${CALICO_CNI_DAEMON_SOCKET-unset}" "$3"\n')
    fake_py.chmod(0o755)
    opts = inst.InstallOptions(
        conf_dir=str(tmp_path / "net.d"),
        bin_dir=str(tmp_path / "bin"),
        nodename="n1",
        python=str(fake_py),
        daemon_socket="/run/my node/cni-daemon.sock",
    )
    assert all(changed for _, changed in inst.install(opts))
    assert not any(changed for _, changed in inst.install(opts))  # idempotent
    res = subprocess.run(
        [str(tmp_path / "bin" / "calico-ipam"), "arg1"],
        env={"PATH": "/usr/bin:/bin", **caller_env},
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    assert res.stdout == f"{seen}|arg1"


def test_write_if_changed(tmp_path: Path) -> None:
    path = str(tmp_path / "a" / "f")
    assert inst.write_if_changed(path, "x", 0o644)
    assert not inst.write_if_changed(path, "x", 0o644)
    assert inst.write_if_changed(path, "x", 0o755)  # mode drift is repaired
    assert inst.write_if_changed(path, "y", 0o755)


def test_etcd_endpoints_follow_the_datastore_path() -> None:
    opts = inst.InstallOptions(datastore_type="etcdv3", etcd_endpoints='http://a:2379,"b"')
    plugin = json.loads(inst.render_conflist(opts))["plugins"][0]
    keys = list(plugin)
    assert keys[keys.index("datastore_path") + 1] == "etcd_endpoints"
    assert plugin["etcd_endpoints"] == 'http://a:2379,"b"'
    assert (
        "etcd_endpoints"
        not in json.loads(inst.render_conflist(inst.InstallOptions()))["plugins"][0]
    )
    own = inst.TEMPLATE.replace('"mtu":', '"etcd_endpoints": "mine", "mtu":')
    opts = inst.InstallOptions(template=own, etcd_endpoints="http://a:2379")
    assert json.loads(inst.render_conflist(opts))["plugins"][0]["etcd_endpoints"] == "mine"
