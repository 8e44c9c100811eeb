"""The node image's shell scripts, run for real against stand-in programs."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).resolve().parent / "programs"
NODE_FS = Path(__file__).resolve().parents[2] / "node" / "filesystem"
SERVICES = NODE_FS / "etc" / "service" / "available"
FELIX_WRAPPER = NODE_FS / "usr" / "bin" / "calico-felix-wrapper"
BASE_PATH = os.environ.get("PATH", "/usr/bin:/bin")

Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Popen in a new session; the whole session is killed at teardown."""
    procs: list[subprocess.Popen[str]] = []

    def start(cmd: list[str], **kwargs: object) -> subprocess.Popen[str]:
        proc = subprocess.Popen(cmd, text=True, start_new_session=True, **kwargs)  # type: ignore[call-overload]
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


@pytest.fixture
def fakebin(tmp_path: Path) -> Path:
    """A PATH directory where calico, bird and bird6 are the argv/env dumper."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("calico", "bird", "bird6"):
        (d / name).symlink_to(PROGRAMS / "fake_calico.sh")
    return d


def run_service(
    spawn: Spawn,
    tmp_path: Path,
    fakebin: Path,
    svc: str,
    env: dict[str, str],
    args: tuple[str, ...] = (),
) -> tuple[list[str], dict[str, str], str]:
    """Run a service's run script with a minimal env; return (argv, env, stdout)."""
    dump = tmp_path / "dump"
    proc = spawn(
        [str(SERVICES / svc / "run"), *args],
        env={"PATH": f"{fakebin}{os.pathsep}{BASE_PATH}", "FAKE_CALICO_DUMP": str(dump), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, out + err
    assert err == "", "run scripts merge stderr into stdout"
    lines = dump.read_text().splitlines()
    argv = lines[0].removeprefix("argv: ").split()
    dumped_env = dict(ln.split("=", 1) for ln in lines[1:] if "=" in ln)
    return argv, dumped_env, out


@pytest.mark.parametrize(
    ("svc", "argv"),
    [
        ("felix", ["component", "felix"]),
        ("confd", ["component", "confd", "--confdir", "/etc/calico/confd"]),
        ("node-services", ["component", "node", "node-services"]),
        (
            "cni-daemon",
            ["component", "cni", "daemon", "--socket", "/var/run/calico/cni-daemon.sock"],
        ),
        (
            "bird",
            [
                "-R",
                "-s",
                "/var/run/calico/bird.ctl",
                "-d",
                "-c",
                "/etc/calico/confd/config/bird.cfg",
            ],
        ),
        (
            "bird6",
            [
                "-R",
                "-s",
                "/var/run/calico/bird6.ctl",
                "-d",
                "-c",
                "/etc/calico/confd/config/bird6.cfg",
            ],
        ),
    ],
)
def test_service_run_scripts_exec_the_component(
    spawn: Spawn, tmp_path: Path, fakebin: Path, svc: str, argv: list[str]
) -> None:
    got_argv, _, out = run_service(spawn, tmp_path, fakebin, svc, {})
    assert got_argv == argv
    assert "fake calico stderr" in out
    assert os.access(SERVICES / svc / "log" / "run", os.X_OK)


def test_cni_daemon_run_takes_the_socket_from_env(
    spawn: Spawn, tmp_path: Path, fakebin: Path
) -> None:
    env = {"CALICO_CNI_DAEMON_SOCKET": "/run/node-a/cni-daemon.sock"}
    argv, _, _ = run_service(spawn, tmp_path, fakebin, "cni-daemon", env)
    assert argv[-2:] == ["--socket", "/run/node-a/cni-daemon.sock"]


def test_cni_daemon_run_argument_wins_over_env(spawn: Spawn, tmp_path: Path, fakebin: Path) -> None:
    """``calico node run`` hands its socket as the argument (see node/run/service_dir.py)."""
    env = {"CALICO_CNI_DAEMON_SOCKET": "/run/other/cni-daemon.sock"}
    argv, _, _ = run_service(
        spawn, tmp_path, fakebin, "cni-daemon", env, ("/run/node-a/cni-daemon.sock",)
    )
    assert argv[-2:] == ["--socket", "/run/node-a/cni-daemon.sock"]


@pytest.mark.parametrize("value", ["off", ""])
def test_cni_daemon_run_disabled_marks_the_service_down(
    spawn: Spawn, tmp_path: Path, fakebin: Path, value: str
) -> None:
    (fakebin / "sv").symlink_to(PROGRAMS / "fake_calico.sh")  # records "sv down ."
    argv, _, out = run_service(
        spawn, tmp_path, fakebin, "cni-daemon", {"CALICO_CNI_DAEMON_SOCKET": value}
    )
    assert argv == ["down", "."]
    assert "cni-daemon: disabled" in out


def test_felix_run_maps_node_env_to_felix_env(spawn: Spawn, tmp_path: Path, fakebin: Path) -> None:
    _, env, _ = run_service(
        spawn,
        tmp_path,
        fakebin,
        "felix",
        {
            "NODENAME": "node-1",
            "ETCD_AUTHORITY": "127.0.0.1:2379",
            "ETCD_ENDPOINTS": "https://10.0.0.1:2379,https://10.0.0.2:2379",
            "ETCD_SCHEME": "https",
            "ETCD_CA_CERT_FILE": "/certs/ca.pem",
            "ETCD_KEY_FILE": "/certs/key.pem",
            "ETCD_CERT_FILE": "/certs/cert.pem",
            "DATASTORE_TYPE": "etcdv3",
        },
    )
    assert env["FELIX_FELIXHOSTNAME"] == "node-1"
    assert env["FELIX_ETCDADDR"] == "127.0.0.1:2379"
    assert env["FELIX_ETCDENDPOINTS"] == "https://10.0.0.1:2379,https://10.0.0.2:2379"
    assert env["FELIX_ETCDSCHEME"] == "https"
    assert env["FELIX_ETCDCAFILE"] == "/certs/ca.pem"
    assert env["FELIX_ETCDKEYFILE"] == "/certs/key.pem"
    assert env["FELIX_ETCDCERTFILE"] == "/certs/cert.pem"
    assert env["FELIX_DATASTORETYPE"] == "etcdv3"


def test_felix_run_leaves_unset_values_alone(spawn: Spawn, tmp_path: Path, fakebin: Path) -> None:
    _, env, _ = run_service(
        spawn,
        tmp_path,
        fakebin,
        "felix",
        {
            "DATASTORE_TYPE": "",
            "FELIX_DATASTORETYPE": "kubernetes",
            "FELIX_ETCDENDPOINTS": "http://direct:2379",
        },
    )
    assert "FELIX_FELIXHOSTNAME" not in env
    assert env["FELIX_DATASTORETYPE"] == "kubernetes"
    assert env["FELIX_ETCDENDPOINTS"] == "http://direct:2379"
    for name in ("FELIX_ETCDADDR", "FELIX_ETCDSCHEME", "FELIX_ETCDCAFILE", "FELIX_ETCDKEYFILE"):
        assert name not in env


def test_felix_run_without_datastore_type(spawn: Spawn, tmp_path: Path, fakebin: Path) -> None:
    _, env, _ = run_service(spawn, tmp_path, fakebin, "felix", {})
    assert "FELIX_DATASTORETYPE" not in env


def test_felix_cfg_disables_file_and_syslog_logging() -> None:
    import configparser

    cfg = configparser.ConfigParser()
    cfg.optionxform = str  # type: ignore[assignment,method-assign]
    cfg.read(NODE_FS / "etc" / "calico" / "felix.cfg")
    assert dict(cfg["global"]) == {
        "MetadataAddr": "None",
        "LogFilePath": "None",
        "LogSeverityFile": "None",
        "LogSeveritySys": "None",
    }


# -- log/run with a real svlogd ------------------------------------------------


@pytest.mark.skipif(shutil.which("svlogd") is None, reason="svlogd (runit) is not installed")
def test_log_run_tees_into_rotating_svlogd_dir(spawn: Spawn, tmp_path: Path) -> None:
    logbase = tmp_path / "logs"
    current = logbase / "felix" / "current"
    for n in (1, 2):  # the second start must not duplicate the config
        proc = spawn(
            [str(SERVICES / "felix" / "log" / "run")],
            env={"PATH": BASE_PATH, "CALICO_LOG_DIR": str(logbase)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = proc.communicate(f"hello log {n}\n", timeout=10)
        assert proc.returncode == 0, err
        assert out == f"hello log {n}\n"  # tee'd to stdout unchanged
        deadline = time.monotonic() + 5
        while not (current.exists() and f"hello log {n}" in current.read_text()):
            assert time.monotonic() < deadline, "line never reached svlogd's current"
            time.sleep(0.02)

    assert (logbase / "felix" / "config").read_text() == "s10000000\nn5\n"
    lines = current.read_text().splitlines()
    assert [ln.split(" ", 1)[1] for ln in lines] == ["hello log 1", "hello log 2"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+ hello log \d", ln) for ln in lines)


# -- calico-felix-wrapper --------------------------------------------------------


def start_wrapper(spawn: Spawn, tmp_path: Path, codes: str, **env: str) -> subprocess.Popen[str]:
    return spawn(
        [str(FELIX_WRAPPER)],
        env={
            "PATH": BASE_PATH,
            "CALICO_FELIX_CMD": f"{PROGRAMS / 'fake_felix.sh'} component felix",
            "CALICO_FELIX_EXTRA_ENV": str(tmp_path / "extra-env.sh"),
            "CALICO_FELIX_START_TRIGGER": str(tmp_path / "start-trigger"),
            "CALICO_FELIX_DELAY_RESTART_FILE": str(tmp_path / "delay-restart"),
            "FAKE_FELIX_STATE": str(tmp_path / "felix-state"),
            "FAKE_FELIX_CODES": codes,
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def felix_state(tmp_path: Path) -> list[str]:
    path = tmp_path / "felix-state"
    return path.read_text().splitlines() if path.exists() else []


def wait_for_state(tmp_path: Path, line: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while line not in felix_state(tmp_path):
        assert time.monotonic() < deadline, f"timed out waiting for {line!r}"
        time.sleep(0.02)


def test_felix_wrapper_restarts_on_129(spawn: Spawn, tmp_path: Path) -> None:
    proc = start_wrapper(spawn, tmp_path, "129 0")
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, out
    assert out.splitlines() == [
        "Process stopped, RC=129",
        "Restarting calico-felix for config reload",
        "Process stopped, RC=0",
        "Exiting due to non-config shutdown RC=0",
    ]
    assert felix_state(tmp_path) == ["run component felix"] * 2


def test_felix_wrapper_propagates_exit_code(spawn: Spawn, tmp_path: Path) -> None:
    proc = start_wrapper(spawn, tmp_path, "5")
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 5, out
    assert out.splitlines() == ["Process stopped, RC=5", "Exiting due to non-config shutdown RC=5"]


def test_felix_wrapper_passes_sigterm_on(spawn: Spawn, tmp_path: Path) -> None:
    proc = start_wrapper(spawn, tmp_path, "7", FAKE_FELIX_MODE="term")
    wait_for_state(tmp_path, "ready")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 7, out
    assert out.splitlines() == [
        "calico-felix-wrapper: SIGTERM received, passing on to calico-felix",
        "Process stopped, RC=7",
        "Exiting due to non-config shutdown RC=7",
    ]
    assert "got TERM" in felix_state(tmp_path)


def test_felix_wrapper_does_not_restart_after_sigterm(spawn: Spawn, tmp_path: Path) -> None:
    # Felix answering SIGTERM with 129 must not be restarted.
    proc = start_wrapper(spawn, tmp_path, "129", FAKE_FELIX_MODE="term")
    wait_for_state(tmp_path, "ready")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 143, out
    assert out.splitlines()[-1] == "Exiting due to non-config shutdown RC=143"
    assert felix_state(tmp_path).count("run component felix") == 1


def test_felix_wrapper_sighup_does_not_fake_a_restart(spawn: Spawn, tmp_path: Path) -> None:
    # bash's `wait` returns 128+1=129 when a trapped SIGHUP interrupts it; the
    # wrapper must keep waiting for Felix's real status instead of restarting
    # (and starting a second Felix next to the one still running).
    proc = start_wrapper(spawn, tmp_path, "7", FAKE_FELIX_MODE="term")
    wait_for_state(tmp_path, "ready")
    proc.send_signal(signal.SIGHUP)
    wait_for_state(tmp_path, "got HUP")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 7, out
    assert out.splitlines() == [
        "calico-felix-wrapper: SIGHUP received, passing on to calico-felix",
        "calico-felix-wrapper: SIGTERM received, passing on to calico-felix",
        "Process stopped, RC=7",
        "Exiting due to non-config shutdown RC=7",
    ]
    assert felix_state(tmp_path).count("run component felix") == 1


def test_felix_wrapper_waits_for_start_trigger(spawn: Spawn, tmp_path: Path) -> None:
    (tmp_path / "extra-env.sh").write_text("export FAKE_FELIX_CODES=4\n")
    proc = start_wrapper(spawn, tmp_path, "0", DELAY_FELIX_START="true")
    time.sleep(0.3)
    assert proc.poll() is None and felix_state(tmp_path) == []
    (tmp_path / "start-trigger").touch()
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 4, out  # /extra-env.sh was sourced before the start
    assert felix_state(tmp_path) == ["run component felix"]
