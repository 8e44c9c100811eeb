"""Two real BIRD 1.6 instances in two network namespaces, configured only by confd from one
datastore: the mesh session reaches Established, each node's block route lands in the other's
kernel (proto bird), a new BGPPeer reaches the running BIRD through ``birdc configure``, a
config BIRD rejects leaves the running one alone, and ``calicoctl node status`` shows it all.
BGP passwords (TCP-MD5 in the namespaces' kernel) come from Secrets on the fake Kubernetes API
server: matching ones establish, a mismatch keeps the session down and ``calicoctl node status``
shows BIRD's reason, fixing the Secret brings it back."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import netns_support as nss
import pytest
from confd_render_support import CONFD_FS
from k8s_fake_apiserver import FakeAPIServer

from calico import birdctl
from calico.api.io import load_documents
from calico.confd.daemon import Confd
from calico.confd.passwords import SecretPasswords
from calico.confd.renderer import Renderer
from calico.datastore.client import Client
from calico.datastore.daemon_config import daemon_datastore_config
from calico.datastore.factory import open_backend
from calico.datastore.kubernetes.rest import Rest
from calico.datastore.kubernetes.secrets import SecretWatcher, api_configuration

pytestmark = pytest.mark.skipif(
    shutil.which("bird") is None or os.geteuid() != 0, reason="needs BIRD and root"
)

CLUSTER = """
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node-a}
spec: {bgp: {ipv4Address: 10.77.0.1/24}}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node-b}
spec: {bgp: {ipv4Address: 10.77.0.2/24}}
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: pool}
spec: {cidr: 10.78.0.0/16, ipipMode: Never, vxlanMode: Never}
---
apiVersion: projectcalico.org/v3
kind: BlockAffinity
metadata: {name: node-a-10-78-1-0-26}
spec: {node: node-a, cidr: 10.78.1.0/26, state: confirmed, deleted: "false"}
---
apiVersion: projectcalico.org/v3
kind: BlockAffinity
metadata: {name: node-b-10-78-2-0-26}
spec: {node: node-b, cidr: 10.78.2.0/26, state: confirmed, deleted: "false"}
"""


def _apply(client: Client, text: str) -> None:
    for res in load_documents(text):
        client.apply(res)


def _wait(cond, timeout: float = 30.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except birdctl.BirdError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} not met in {timeout}s")


@dataclasses.dataclass
class Node:
    name: str
    ns: str
    confdir: Path
    sock: Path
    sock6: Path
    confd: Confd
    thread: threading.Thread


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    """Where the confds read BGP password Secrets (namespace kube-system)."""
    server = FakeAPIServer(bookmark_interval=60.0).start()
    yield server
    server.stop()


def _secret_passwords(api: FakeAPIServer, confd: Confd) -> SecretPasswords:
    cfg = api_configuration(
        daemon_datastore_config(env={"DATASTORE_TYPE": "kubernetes", "K8S_API_ENDPOINT": api.url}),
        {},
    )
    return SecretPasswords(
        SecretWatcher(Rest(cfg, timeout=5.0), "kube-system", confd.secret_changed)
    )


@pytest.fixture
def two_nodes(
    tmp_path: Path, api: FakeAPIServer
) -> Iterator[tuple[Client, list[Node], dict[str, str]]]:
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "calico.db")}
    backend = open_backend(daemon_datastore_config(env=env))
    client = Client(backend)
    _apply(client, CLUSTER)
    procs: list[subprocess.Popen[bytes]] = []
    nodes: list[Node] = []
    with nss.netns("cfda") as ns_a, nss.netns("cfdb") as ns_b:
        nss.add_veth("eth0", "eth0", ns=ns_a, peer_ns=ns_b)
        for ns, addr in ((ns_a, "10.77.0.1/24"), (ns_b, "10.77.0.2/24")):
            nss.ip("addr", "add", addr, "dev", "eth0", ns=ns)
            nss.ip("link", "set", "eth0", "up", ns=ns)
        try:
            for name, ns in (("node-a", ns_a), ("node-b", ns_b)):
                confdir = tmp_path / name
                shutil.copytree(CONFD_FS, confdir)
                sock, sock6 = tmp_path / f"{name}.ctl", tmp_path / f"{name}6.ctl"
                renderer = Renderer(confdir, name, {"NODENAME": name}, krt_tunnel=False)
                reload = {
                    "bird": f"birdc -s {sock} configure",
                    "bird6": f"birdc6 -s {sock6} configure",
                }
                renderer.resources = [
                    dataclasses.replace(r, reload_cmd=reload[r.daemon]) for r in renderer.resources
                ]
                renderer.dirty = set(renderer.resources)
                be = open_backend(daemon_datastore_config(env=env))
                confd = Confd(
                    be,
                    renderer,
                    name,
                    {"NODENAME": name},
                    status_path=tmp_path / f"{name}-status.json",
                )
                confd.passwords = _secret_passwords(api, confd)
                thread = threading.Thread(target=confd.run, kwargs={"poll": 0.05}, daemon=True)
                thread.start()
                nodes.append(Node(name, ns, confdir, sock, sock6, confd, thread))
            for node in nodes:
                cfg = node.confdir / "config"
                _wait(
                    lambda cfg=cfg: (
                        (cfg / "bird6_ipam.cfg").exists() and (cfg / "bird_ipam.cfg").exists()
                    ),
                    what="first render",
                )
                for daemon, sock, main in (
                    ("bird", node.sock, "bird.cfg"),
                    ("bird6", node.sock6, "bird6.cfg"),
                ):
                    procs.append(
                        subprocess.Popen(
                            [
                                "ip",
                                "netns",
                                "exec",
                                node.ns,
                                daemon,
                                "-f",
                                "-s",
                                str(sock),
                                "-c",
                                str(cfg / main),
                            ],
                            start_new_session=True,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
            yield client, nodes, env
        finally:
            for node in nodes:
                node.confd.stop_event.set()
                node.thread.join(10)
            for proc in procs:
                with __import__("contextlib").suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
            backend.close()


def _protocols(sock: Path) -> dict[str, birdctl.Protocol]:
    return {p.name: p for p in birdctl.show_protocols(str(sock))}


def test_mesh_established_routes_reload_and_status(two_nodes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client, (a, b), _ = two_nodes
    _wait(lambda: _protocols(a.sock)["Mesh_10_77_0_2"].info == "Established", what="Established")
    assert _protocols(b.sock)["Mesh_10_77_0_1"].info == "Established"

    def route(ns: str, cidr: str) -> str:
        return nss.ip("route", "show", cidr, ns=ns).strip()

    _wait(lambda: "proto bird" in route(b.ns, "10.78.1.0/26"), what="A's block on B")
    assert "via 10.77.0.1" in route(b.ns, "10.78.1.0/26")
    _wait(lambda: "via 10.77.0.2" in route(a.ns, "10.78.2.0/26"), what="B's block on A")

    # calicoctl node status against B's real BIRD (v4 and v6 sockets).
    env = {
        **os.environ,
        "CALICO_BIRD_SOCKET": str(b.sock),
        "CALICO_BIRD6_SOCKET": str(b.sock6),
        "CALICO_CONFD_STATUS_FILE": str(tmp_path / "node-b-status.json"),
    }
    res = subprocess.run(
        [sys.executable, "-m", "calico.cli.main", "ctl", "node", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "Calico process is running."
    assert "IPv4 BGP status" in lines
    assert "| PEER ADDRESS |     PEER TYPE     | STATE |  SINCE   |    INFO     |" in lines
    row = next(line for line in lines if line.startswith("| 10.77.0.1 "))
    assert "| node-to-node mesh | up    |" in row and row.endswith("| Established |")
    assert "No IPv6 peers found." in lines

    # A new global peer reaches both running BIRDs through confd's reload (birdc configure).
    _apply(
        client,
        """
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: tor}
spec: {peerIP: 10.77.0.99, asNumber: 65099}
""",
    )
    _wait(lambda: "Global_10_77_0_99" in _protocols(a.sock), what="reloaded peer")
    _wait(lambda: "Global_10_77_0_99" in _protocols(b.sock), what="reloaded peer on B")

    # BIRD rejects this one: not installed, BIRD keeps running the previous config.
    before = (b.confdir / "config" / "bird.cfg").read_text()
    _apply(
        client,
        """
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {ignoredInterfaces: ['bad"name']}
""",
    )
    _wait(lambda: "bird" in birdctl.read_status(tmp_path / "node-b-status.json"), what="error")
    assert (b.confdir / "config" / "bird.cfg").read_text() == before
    assert _protocols(b.sock)["Mesh_10_77_0_1"].info == "Established"
    res = subprocess.run(
        [sys.executable, "-m", "calico.cli.main", "ctl", "node", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (
        "confd: bird configuration rejected, still running the previous one: bird.cfg:"
        in res.stdout
    )


def _secret(name: str, pw: str) -> dict:
    return {"metadata": {"name": name, "namespace": "kube-system"}, "stringData": {"pw": pw}}


def _md5_failures(ns: str) -> int:
    """The namespace's TcpExt TCPMD5Failure counter (segments with a wrong signature)."""
    head, values = (
        line.split()
        for line in nss.in_ns(ns, "cat", "/proc/net/netstat").stdout.splitlines()
        if line.startswith("TcpExt:")
    )
    return int(values[head.index("TCPMD5Failure")])


def _info(node: Node, name: str) -> str:
    """BIRD's info column for protocol ``name`` ("" while BIRD does not have it yet)."""
    p = _protocols(node.sock).get(name)
    return p.info if p else ""


PEERINGS = """
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {nodeToNodeMeshEnabled: false}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: a-to-b}
spec:
  node: node-a
  peerIP: 10.77.0.2
  asNumber: 64512
  reversePeering: Manual
  password: {secretKeyRef: {name: pw-a, key: pw}}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: b-to-a}
spec:
  node: node-b
  peerIP: 10.77.0.1
  asNumber: 64512
  reversePeering: Manual
  password: {secretKeyRef: {name: pw-b, key: pw}}
"""


def _node_status(b: Node, tmp_path: Path) -> str:
    env = {
        **os.environ,
        "CALICO_BIRD_SOCKET": str(b.sock),
        "CALICO_BIRD6_SOCKET": str(b.sock6),
        "CALICO_CONFD_STATUS_FILE": str(tmp_path / f"{b.name}-status.json"),
    }
    res = subprocess.run(
        [sys.executable, "-m", "calico.cli.main", "ctl", "node", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_bgp_passwords_from_secrets_mismatch_keeps_the_session_down(  # type: ignore[no-untyped-def]
    two_nodes, api: FakeAPIServer, tmp_path: Path
) -> None:
    client, (a, b), _ = two_nodes
    api.put_object(
        "v1", "secrets", {"apiVersion": "v1", "kind": "Secret", **_secret("pw-a", "alpha")}
    )
    api.put_object(
        "v1", "secrets", {"apiVersion": "v1", "kind": "Secret", **_secret("pw-b", "alpha")}
    )
    _apply(client, PEERINGS)
    # Same password on both sides: TCP-MD5 signed session, Established.
    _wait(lambda: _info(a, "Node_10_77_0_2") == "Established", what="MD5 up")
    _wait(lambda: _info(b, "Node_10_77_0_1") == "Established", what="MD5 up on B")
    assert 'password "alpha";' in (a.confdir / "config" / "bird.cfg").read_text()
    assert 'password "alpha";' in (b.confdir / "config" / "bird.cfg").read_text()
    # B's Secret changes: confd re-renders B, BIRD restarts the session with the new key and
    # the two kernels drop each other's segments (bad MD5 signature): the session stays down.
    api.update_object(
        "v1", "secrets", {"apiVersion": "v1", "kind": "Secret", **_secret("pw-b", "beta")}
    )
    _wait(lambda: 'password "beta";' in (b.confdir / "config" / "bird.cfg").read_text())
    _wait(lambda: _info(b, "Node_10_77_0_1") not in ("Established", ""), what="down")
    _wait(lambda: _info(a, "Node_10_77_0_2") not in ("Established", ""), what="down on A")
    deadline = time.monotonic() + 15  # BIRD retries every 5 s (connect retry time): 3 tries
    failures = _md5_failures(b.ns)
    while time.monotonic() < deadline:
        assert _info(a, "Node_10_77_0_2") != "Established"
        assert _info(b, "Node_10_77_0_1") != "Established"
        time.sleep(0.5)
    status = _node_status(b, tmp_path)
    row = next(line for line in status.splitlines() if line.startswith("| 10.77.0.1 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # BIRD's view: the BGP FSM never gets past TCP (Connect/Active), not an OPEN-level error.
    assert cells[1:3] == ["node specific", "start"], row
    assert cells[4].split()[0] in ("Connect", "Active"), row
    # The kernel's: B's namespace keeps rejecting A's segments for their bad MD5 signature.
    assert _md5_failures(b.ns) > failures
    # The fix reaches BIRD the same way: back to Established.
    api.update_object(
        "v1", "secrets", {"apiVersion": "v1", "kind": "Secret", **_secret("pw-b", "alpha")}
    )
    _wait(lambda: _info(b, "Node_10_77_0_1") == "Established", timeout=60, what="fixed")
    _wait(lambda: _info(a, "Node_10_77_0_2") == "Established", what="fixed on A")
