"""BGP passwords from Secrets: the Secret watcher against the fake Kubernetes API server, and
confd rendering ``password "..."`` from a Secret — through the Kubernetes datastore, and with
a non-Kubernetes datastore plus ``KUBECONFIG`` (upstream reads Secrets apart from the
datastore) — following creates, updates and deletes; without any Kubernetes API the password
is left out with a warning (design/confd.md "Passwords")."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confd_render_support import NODE, make_renderer
from k8s_fake_apiserver import FakeAPIServer

from calico.api.io import load_documents
from calico.confd.daemon import Confd
from calico.confd.passwords import SecretPasswords
from calico.datastore.client import Client
from calico.datastore.daemon_config import daemon_datastore_config
from calico.datastore.factory import open_backend
from calico.datastore.kubernetes.rest import Rest
from calico.datastore.kubernetes.secrets import SecretWatcher, api_configuration, secret_data

NS = "calico-system"
CONFD = (sys.executable, "-m", "calico.cli.main", "component", "confd")

CLUSTER = """
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {nodeToNodeMeshEnabled: false}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: kube-master}
spec: {bgp: {ipv4Address: 10.192.0.2/16}}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: tor}
spec: {peerIP: 10.200.0.1, asNumber: 65010, password: {secretKeyRef: {name: bgp, key: pw}}}
"""


def _wait(cond: Callable[[], object], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _secret(name: str, ns: str = NS, **data: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    server = FakeAPIServer(bookmark_interval=60.0).start()
    yield server
    server.stop()


def _rest(api: FakeAPIServer) -> Rest:
    cfg = api_configuration(
        daemon_datastore_config(env={"DATASTORE_TYPE": "kubernetes", "K8S_API_ENDPOINT": api.url}),
        {},
    )
    return Rest(cfg, timeout=5.0)


class _Changes:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, name: str) -> None:
        with self.lock:
            self.names.append(name)

    def count(self, name: str) -> int:
        with self.lock:
            return self.names.count(name)


def test_secret_data_decodes_data_and_string_data() -> None:
    obj = _secret("x", a="1") | {"stringData": {"b": "two"}}
    assert secret_data(obj) == {"a": "1", "b": "two"}
    assert secret_data({"metadata": {"name": "y"}, "data": {"bad": "!!notb64"}}) == {}


def test_watcher_follows_one_secret(api: FakeAPIServer) -> None:
    changes = _Changes()
    w = SecretWatcher(_rest(api), NS, changes, backoff=(0.05, 0.2))
    try:
        assert w.get("bgp") == (False, None)  # not watched yet
        w.ensure("bgp")
        _wait(lambda: w.get("bgp")[0])
        assert w.get("bgp") == (True, None)  # listed: does not exist
        assert changes.count("bgp") == 1
        api.put_object("v1", "secrets", _secret("bgp", ns="default", pw="other-ns"))
        api.put_object("v1", "secrets", _secret("unrelated", pw="x"))
        api.put_object("v1", "secrets", _secret("bgp", pw="one"))
        _wait(lambda: w.get("bgp") == (True, {"pw": "one"}))
        assert changes.count("bgp") == 2
        assert changes.count("unrelated") == 0
        api.update_object("v1", "secrets", _secret("bgp", pw="two"))
        _wait(lambda: w.get("bgp") == (True, {"pw": "two"}))
        # A lost connection: the watch resumes from its revision and sees later changes.
        watches = api.watches
        api.drop_watches()
        _wait(lambda: api.watches > watches)
        api.update_object("v1", "secrets", _secret("bgp", pw="three"))
        _wait(lambda: w.get("bgp") == (True, {"pw": "three"}))
        # An expired watch (410): relist, state still right.
        api.expire_next_watches(1)
        api.drop_watches()
        api.delete_object("v1", "secrets", "bgp", NS)
        _wait(lambda: w.get("bgp") == (True, None))
        # Dropped from the set: no more watching, no more callbacks.
        w.retain(set())
        assert w.watched() == set()
        seen = changes.count("bgp")
        api.put_object("v1", "secrets", _secret("bgp", pw="four"))
        time.sleep(0.5)
        assert changes.count("bgp") == seen
        assert w.get("bgp") == (False, None)
    finally:
        w.stop()


def test_watcher_waits_out_an_unreachable_api(api: FakeAPIServer) -> None:
    api.put_object("v1", "secrets", _secret("bgp", pw="pw"))
    changes = _Changes()
    w = SecretWatcher(_rest(api), NS, changes, backoff=(0.05, 0.2))
    outage = threading.Thread(target=api.outage, args=(2.0,))
    port = int(api.url.rsplit(":", 1)[1])

    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return True
        return False

    try:
        outage.start()
        _wait(refused)
        w.ensure("bgp")
        assert w.get("bgp") == (False, None)  # cannot list yet: not synced (render held)
        _wait(lambda: w.get("bgp") == (True, {"pw": "pw"}), timeout=20)
    finally:
        outage.join()
        w.stop()


class _FakeWatcher:
    namespace = NS

    def __init__(self) -> None:
        self.state: dict[str, tuple[bool, dict[str, str] | None]] = {}
        self.ensured: list[str] = []
        self.retained: set[str] | None = None

    def ensure(self, name: str) -> None:
        self.ensured.append(name)

    def get(self, name: str) -> tuple[bool, dict[str, str] | None]:
        return self.state.get(name, (False, None))

    def retain(self, names: set[str]) -> None:
        self.retained = set(names)

    def stop(self) -> None:
        pass


def test_passwords_hold_render_until_listed_then_give_up_at_the_deadline() -> None:
    now = [100.0]
    fake = _FakeWatcher()
    pw = SecretPasswords(fake, wait=3.0, clock=lambda: now[0])
    pw.begin()
    assert pw.lookup("bgp", "pw") is None
    assert pw.end() == 103.0  # hold until first sight + wait
    now[0] = 102.9
    pw.begin()
    assert pw.lookup("bgp", "pw") is None
    assert pw.end() == 103.0  # the deadline is from the first sight, not this build
    now[0] = 103.0
    pw.begin()
    assert pw.lookup("bgp", "pw") is None
    assert pw.end() is None  # deadline reached: render without it
    fake.state["bgp"] = (True, {"pw": "s"})
    pw.begin()
    assert pw.lookup("bgp", "pw") == "s"
    assert pw.lookup("bgp", "other") is None
    assert pw.end() is None
    assert fake.retained == {"bgp"}
    pw.begin()  # no peering uses it any more: its watch is dropped
    assert pw.end() is None
    assert fake.retained == set()


def _run_confd(confd: Confd) -> threading.Thread:
    thread = threading.Thread(target=confd.run, kwargs={"poll": 0.05}, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(shutil.which("bird") is None, reason="BIRD not installed")
def test_confd_on_the_kubernetes_datastore_follows_the_secret(
    api: FakeAPIServer, tmp_path: Path
) -> None:
    env = {"DATASTORE_TYPE": "kubernetes", "K8S_API_ENDPOINT": api.url}
    backend = open_backend(daemon_datastore_config(env=env))
    # A Calico Node is a Kubernetes Node (its BGP address an annotation) in this datastore.
    api.put_object(
        "v1",
        "nodes",
        {
            "metadata": {
                "name": NODE,
                "annotations": {"projectcalico.org/IPv4Address": "10.192.0.2/16"},
            }
        },
    )
    for res in load_documents(CLUSTER):
        if res.kind != "Node":
            Client(backend).apply(res)
    api.put_object("v1", "secrets", _secret("bgp", pw="first"))
    confdir = tmp_path / "confd"
    renderer = make_renderer(confdir, {"NODENAME": NODE})
    confd = Confd(backend, renderer, NODE, {"NODENAME": NODE})
    watcher = SecretWatcher(_rest(api), NS, confd.secret_changed, backoff=(0.05, 0.2))
    confd.passwords = SecretPasswords(watcher, wait=30.0)
    bird_cfg = confdir / "config" / "bird.cfg"
    thread = _run_confd(confd)
    try:
        # The first render already has the password (held until the Secret was listed).
        _wait(bird_cfg.exists)
        assert 'password "first";' in bird_cfg.read_text()
        api.update_object("v1", "secrets", _secret("bgp", pw="second"))
        _wait(lambda: 'password "second";' in bird_cfg.read_text())
        assert "first" not in bird_cfg.read_text()
        api.delete_object("v1", "secrets", "bgp", NS)
        _wait(lambda: "password" not in bird_cfg.read_text())
        assert "protocol bgp Global_10_200_0_1" in bird_cfg.read_text()
        api.put_object("v1", "secrets", _secret("bgp", pw="third"))
        _wait(lambda: 'password "third";' in bird_cfg.read_text())
        # The peering stops using a password: the Secret is no longer watched.
        Client(backend).apply(
            load_documents(CLUSTER.replace(", password: {secretKeyRef: {name: bgp, key: pw}}", ""))[
                -1
            ]
        )
        _wait(lambda: "password" not in bird_cfg.read_text())
        _wait(lambda: watcher.watched() == set())
    finally:
        confd.stop_event.set()
        thread.join(10)
        backend.close()


def _run_once(env: dict[str, str], confdir: Path) -> subprocess.CompletedProcess[str]:
    make_renderer(confdir, {})
    for toml in (confdir / "conf.d").glob("*.toml"):  # no BIRD to reload here
        lines = toml.read_text().splitlines()
        toml.write_text("\n".join(ln for ln in lines if not ln.startswith("reload_cmd")))
    return subprocess.run(
        [*CONFD, "--run-once", "--confdir", str(confdir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(shutil.which("bird") is None, reason="BIRD not installed")
def test_non_kubernetes_datastore_reads_secrets_through_kubeconfig(
    api: FakeAPIServer, tmp_path: Path
) -> None:
    db = str(tmp_path / "calico.db")
    ds_env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": db}
    backend = open_backend(daemon_datastore_config(env=ds_env))
    for res in load_documents(CLUSTER):
        Client(backend).apply(res)
    backend.close()
    api.put_object("v1", "secrets", _secret("bgp", ns="kube-system", pw="from-kubeconfig"))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{api.url}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "NAMESPACE", "KUBERNETES_SERVICE_HOST")
    }
    base |= {**ds_env, "NODENAME": NODE, "CALICO_CONFD_STATUS_FILE": str(tmp_path / "st")}
    # KUBECONFIG set, NAMESPACE unset -> kube-system.
    res = _run_once(base | {"KUBECONFIG": str(kubeconfig)}, tmp_path / "a")
    assert res.returncode == 0, res.stderr
    assert 'password "from-kubeconfig";' in (tmp_path / "a/config/bird.cfg").read_text()
    # No Kubernetes API at all: rendered without the password, and the log says why.
    res = _run_once(base, tmp_path / "b")
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "b/config/bird.cfg").read_text()
    assert "protocol bgp Global_10_200_0_1" in text and "password" not in text
    assert "No Kubernetes API for BGP password Secrets" in res.stderr
    assert "Traceback" not in res.stderr
