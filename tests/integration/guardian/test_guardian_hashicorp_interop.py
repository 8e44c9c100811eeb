"""Wire compatibility with hashicorp/yamux and Go's TLS + HTTP/2, as upstream's Voltron has.

The Go peer (``guardian_hashicorp_peer.go``) is built from Debian's golang-go and
golang-github-hashicorp-yamux-dev (installed by ``scripts/setup-system.sh``). One test drives
calico.guardian.yamux directly against hashicorp's server: both stream directions with more
than a window of data (window updates both ways), FIN, pings both ways (its keepalive every
100 ms) and Go Away on close. The other runs the real guardian against the Go peer playing
Voltron: mTLS, Go's HTTP/2 client over a yamux stream through guardian's reverse proxy to the
fake Kubernetes API, and guardian's listen port into a Go-accepted stream.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from guardian_peer import MANAGED_NAME

from calico.guardian.yamux import Session, SessionConfig

GOPATH = "/usr/share/gocode"
PEER_SRC = Path(__file__).with_name("guardian_hashicorp_peer.go")

pytestmark = pytest.mark.skipif(
    shutil.which("go") is None or not Path(GOPATH, "src/github.com/hashicorp/yamux").is_dir(),
    reason="needs golang-go and golang-github-hashicorp-yamux-dev (scripts/setup-system.sh)",
)


@pytest.fixture(scope="module")
def go_peer(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("gopeer") / "peer"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": GOPATH,
        "GOCACHE": str(out.parent / "cache"),
        "GOFLAGS": "",
    }
    subprocess.run(
        ["go", "build", "-o", str(out), str(PEER_SRC)],
        env=env,
        check=True,
        timeout=240,
        capture_output=True,
    )
    return str(out)


def test_python_client_interoperates_with_hashicorp_server(go_peer: str) -> None:
    proc = subprocess.Popen([go_peer], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        try:
            asyncio.run(_client(port))
        finally:
            out, err = proc.communicate(timeout=30)
            lines = out.splitlines()
            print(out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, (lines, err)
    assert "GO-OPEN-OK" in lines and "GO-PING-OK" in lines and "GO-DONE" in lines
    assert "GO-ECHO 1048576 <nil>" in lines
    complaints = [line for line in err.splitlines() if "yamux:" in line]
    assert [c for c in complaints if not _LATE_CREDIT.search(c)] == [], err


# The one warning the protocol itself allows: a window update (type 1, no flags) we sent while
# the peer's closing FIN was still in flight to us. hashicorp forgets a stream the moment both
# FINs have crossed, so the credit lands on a stream it no longer knows; hashicorp peers race
# the same way. We stop crediting as soon as we have seen the FIN (stream._credit_window).
_LATE_CREDIT = re.compile(
    r"\[WARN\] yamux: frame for missing stream: Vsn:0 Type:1 Flags:0 StreamID:[12] Length:\d+$"
)


async def _client(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    session = Session(reader, writer, client=True, config=SessionConfig(keepalive_interval=0.1))
    session.start()
    # Python -> Go: 1 MiB echoed back through hashicorp's flow control.
    payload = os.urandom(1 << 20)
    mine = session.open_stream()
    assert mine.stream_id == 1
    send = asyncio.create_task(_write_and_close(mine, payload))
    echoed = await _read_all(mine)
    await send
    assert echoed == payload
    # Go -> Python: hashicorp opens an even stream with 1 MiB, wants the count, closes.
    theirs = await asyncio.wait_for(session.accept(), 10)
    assert theirs.stream_id == 2
    data = bytearray()
    while len(data) < 1 << 20:
        data += await asyncio.wait_for(theirs.read(), 10)
    assert data == bytes(i % 251 for i in range(1 << 20))
    await theirs.write(str(len(data)).encode())
    assert await asyncio.wait_for(theirs.read(), 10) == b""  # hashicorp's FIN
    await theirs.close_write()
    assert await session.ping() < 5
    for _ in range(100):
        if session.pings_received >= 3:
            break
        await asyncio.sleep(0.05)
    assert session.pings_received >= 3  # hashicorp's keepalive, answered by us
    await asyncio.sleep(0.5)  # let Go print GO-PING-OK before the session ends
    await session.close()
    assert not session.close_reason.startswith("yamux")


async def _write_and_close(stream, data: bytes) -> None:
    await stream.write(data)
    await stream.close_write()


async def _read_all(stream) -> bytes:
    buf = bytearray()
    while chunk := await asyncio.wait_for(stream.read(), 10):
        buf += chunk
    return bytes(buf)


def test_guardian_serves_a_go_voltron(go_peer, certs, guardian_env, start_guardian, kube_api):
    crt, key = certs.management.write(certs.root, "go-voltron")
    ca = certs.files["tunnel_ca"]
    proc = subprocess.Popen(
        [go_peer, "voltron", crt, key, ca, ca, MANAGED_NAME, "/api/v1/namespaces"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(proc.stdout.readline())
        guardian_env["GUARDIAN_VOLTRON_URL"] = f"127.0.0.1:{port}"
        g = start_guardian(guardian_env)
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        assert lines[0] == "GO-CLIENT managed-cluster"
        hsts = 'hsts="max-age=31536000; includeSubDomains"'
        assert lines[1].startswith(f"GO-HTTP /api/v1/namespaces 200 HTTP/2.0 {hsts}"), lines
        assert "tok-123" in lines[1]  # the fake API echoes the bearer token it received
        assert lines[2] == f'GO-HTTP /nowhere 404 HTTP/2.0 {hsts} body="404 page not found\\n"'
        assert kube_api.requests[-1]["authorization"] == "Bearer tok-123"
        g.wait_log("Listening on")
        with socket.create_connection(
            ("127.0.0.1", int(guardian_env["GUARDIAN_LISTEN_PORT"])), timeout=10
        ) as s:
            s.sendall(b"hello")
            got = b""
            while len(got) < 10:
                chunk = s.recv(100)
                assert chunk, got
                got += chunk
            assert got == b"echo:hello"
        assert g.stop() == 0
        out, err = proc.communicate(timeout=30)
        assert "GO-DONE" in out, (out, err)
        assert "yamux:" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
