"""Under runit the shipped reload command is ``sv hup bird``: a real runsv supervises the node
image's bird service (inside a netns), and a datastore change reaches the running BIRD. The
control-socket fallback is pointed at a wrong path, so only runit can have delivered it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import netns_support as nss
import pytest
from confd_render_support import CONFD_FS

from calico import birdctl
from calico.api.io import load_documents
from calico.confd.daemon import Confd
from calico.confd.renderer import Renderer
from calico.datastore.client import Client
from calico.datastore.daemon_config import daemon_datastore_config
from calico.datastore.factory import open_backend

pytestmark = pytest.mark.skipif(
    shutil.which("bird") is None or shutil.which("runsv") is None or os.geteuid() != 0,
    reason="needs BIRD, runit and root",
)
SERVICE = Path(__file__).resolve().parents[3] / "node/filesystem/etc/service/available/bird/run"


def test_sv_hup_reloads_bird(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"DATASTORE_TYPE": "local", "CALICO_DATASTORE_PATH": str(tmp_path / "c.db")}
    backend = open_backend(daemon_datastore_config(env=env))
    client = Client(backend)
    for res in load_documents("""
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: solo}
spec: {bgp: {ipv4Address: 10.79.0.1/24}}
"""):
        client.apply(res)
    confdir, svdir, sock = tmp_path / "confd", tmp_path / "service", tmp_path / "bird.ctl"
    shutil.copytree(CONFD_FS, confdir)
    (svdir / "bird").mkdir(parents=True)
    shutil.copy(SERVICE, svdir / "bird" / "run")
    monkeypatch.setenv("SVDIR", str(svdir))
    monkeypatch.setenv("CALICO_BIRD_SOCKET", str(tmp_path / "wrong.ctl"))  # fallback must fail
    renderer = Renderer(confdir, "solo", {"NODENAME": "solo"}, krt_tunnel=False)
    be = open_backend(daemon_datastore_config(env=env))
    confd = Confd(be, renderer, "solo", {"NODENAME": "solo"}, status_path=tmp_path / "st.json")
    thread = threading.Thread(target=confd.run, kwargs={"poll": 0.05}, daemon=True)
    thread.start()
    runsv: subprocess.Popen[bytes] | None = None
    with nss.netns("cfdr") as ns:
        nss.add_veth("v0", "v1", ns=ns)  # no dummy module on this kernel
        nss.ip("addr", "add", "10.79.0.1/24", "dev", "v0", ns=ns)
        for dev in ("v0", "v1"):
            nss.ip("link", "set", dev, "up", ns=ns)
        try:
            deadline = time.monotonic() + 15
            while not (confdir / "config" / "bird_ipam.cfg").exists():
                assert time.monotonic() < deadline, "confd did not render"
                time.sleep(0.1)
            runsv = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "env",
                    f"CALICO_BIRD_SOCKET={sock}",
                    f"CALICO_CONFD_DIR={confdir}",
                    "runsv",
                    str(svdir / "bird"),
                ],
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

            def names() -> set[str]:
                try:
                    return {p.name for p in birdctl.show_protocols(str(sock))}
                except birdctl.BirdError:
                    return set()

            deadline = time.monotonic() + 20
            while "kernel1" not in names():
                assert time.monotonic() < deadline, "BIRD did not start under runsv"
                time.sleep(0.2)
            for res in load_documents("""
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: tor}
spec: {peerIP: 10.79.0.9, asNumber: 65009}
"""):
                client.apply(res)
            deadline = time.monotonic() + 20
            while "Global_10_79_0_9" not in names():
                assert time.monotonic() < deadline, "sv hup did not reload BIRD"
                time.sleep(0.2)
        finally:
            confd.stop_event.set()
            thread.join(10)
            if runsv is not None:
                subprocess.run(["sv", "exit", str(svdir / "bird")], capture_output=True, timeout=10)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(runsv.pid, signal.SIGTERM)
                runsv.wait(10)
            be.close()
            backend.close()
