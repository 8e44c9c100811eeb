"""Guardian tunnel benchmark: bulk throughput and small-request latency on loopback.

Run as ``python benchmarks/bench_guardian.py [--streams N] [--mb M]``. A real
``calico component guardian`` process dials a test management peer (TLS + yamux server, in
this process); client processes connect to guardian's listen port, so every byte goes
client -> guardian (plain TCP) -> yamux over mTLS -> the peer, which consumes it. The baseline,
measured in the same run, is the same clients talking mTLS straight to a TLS server in the
peer's event loop.

* ``tunnel_throughput_MBps``: N concurrent streams (default 100) of M MB (default 10) each;
  ratio = tunnel / direct. Target ratio >= 0.5.
* ``small_request_p50_ms``: one 64-byte request/response on an established connection,
  2000 times; ``added_p50_ms`` = tunnel p50 - direct p50. Target <= 2 ms.
* ``proxied_request_p50_ms``: the other direction: a small HTTP/2 GET the management side
  sends through the tunnel to a fake Kubernetes API (guardian's reverse proxy), 500 times on
  one connection, against the same GET sent straight to the API. Target added p50 <= 2 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent))
sys.path.insert(0, str(_ROOT.parent / "tests"))

import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
from guardian_peer import (  # noqa: E402
    MANAGED_NAME,
    MANAGEMENT_NAME,
    CertSet,
    FakeKubeAPI,
    ManagementPeer,
    free_port,
    make_cert,
)
from harness import emit  # noqa: E402

from calico.guardian.streams import CHUNK, SocketStream  # noqa: E402

SMALL = 64
LATENCY_ROUNDS = 2000
PROXY_ROUNDS = 500


class H2Client:
    """A persistent HTTP/2 connection for sequential GETs (the management side's view)."""

    def __init__(self, port: int, ctx: ssl.SSLContext, server_name: str) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = ctx.wrap_socket(raw, server_hostname=server_name)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.name = server_name

    def get(self, path: str) -> int:
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(
            sid,
            [(":method", "GET"), (":scheme", "https"), (":authority", self.name), (":path", path)],
            end_stream=True,
        )
        self.sock.sendall(self.conn.data_to_send())
        status = 0
        while True:
            for ev in self.conn.receive_data(self.sock.recv(65536)):
                if isinstance(ev, h2.events.ResponseReceived):
                    status = int(dict(ev.headers)[b":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    self.sock.sendall(self.conn.data_to_send())
                    return status
            self.sock.sendall(self.conn.data_to_send())


def _time_gets(client: H2Client, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        assert client.get("/api/v1/namespaces/default") == 200
        samples.append(time.perf_counter() - t0)
    return samples


async def management_handler(stream) -> None:
    """'T' + size(8 bytes) + data -> b"ok"; 'L' -> echo fixed-size messages until EOF."""
    try:
        head = b""
        while len(head) < 9:
            chunk = await stream.read(9 - len(head))
            if not chunk:
                return
            head += chunk
        mode, size = head[:1], int.from_bytes(head[1:9], "big")
        if mode == b"T":
            left = size
            while left > 0:
                data = await stream.read(CHUNK)
                if not data:
                    return
                left -= len(data)
            await stream.write(b"ok")
        else:
            while True:
                data = await stream.read(SMALL)
                if not data:
                    return
                await stream.write(data)
    except (ConnectionError, OSError):
        return
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            await stream.close()


# -- client side (a child process) ------------------------------------------------------------


async def _open(host: str, port: int, tls: dict | None):
    if tls is None:
        return await asyncio.open_connection(host, port, limit=1 << 20)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(tls["ca"])
    ctx.load_cert_chain(tls["cert"], tls["key"])
    return await asyncio.open_connection(
        host, port, ssl=ctx, server_hostname=MANAGEMENT_NAME, limit=1 << 20
    )


async def _throughput(host: str, port: int, tls: dict | None, streams: int, size: int) -> float:
    block = os.urandom(CHUNK)

    async def one() -> None:
        r, w = await _open(host, port, tls)
        w.write(b"T" + size.to_bytes(8, "big"))
        left = size
        while left > 0:
            n = min(left, CHUNK)
            w.write(block[:n])
            await w.drain()
            left -= n
        assert await r.readexactly(2) == b"ok"
        w.close()

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(streams)))
    return time.perf_counter() - start


async def _latency(host: str, port: int, tls: dict | None) -> list[float]:
    r, w = await _open(host, port, tls)
    w.write(b"L" + bytes(8))
    msg = b"x" * SMALL
    samples = []
    for _ in range(LATENCY_ROUNDS):
        t0 = time.perf_counter()
        w.write(msg)
        await w.drain()
        await r.readexactly(SMALL)
        samples.append(time.perf_counter() - t0)
    w.close()
    return samples


def client_main(args: argparse.Namespace) -> None:
    tls = json.loads(args.tls) if args.tls else None
    if args.client == "throughput":
        secs = asyncio.run(_throughput(args.host, args.port, tls, args.streams, args.mb << 20))
        print(json.dumps({"seconds": secs}))
    else:
        samples = asyncio.run(_latency(args.host, args.port, tls))
        print(json.dumps({"samples": samples}))


def run_client(kind: str, port: int, tls: dict | None, args: argparse.Namespace) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--client",
        kind,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--streams",
        str(args.streams),
        "--mb",
        str(args.mb),
    ]
    if tls:
        cmd += ["--tls", json.dumps(tls)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- orchestration ----------------------------------------------------------------------------


def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-guardian-"))
    certs = CertSet(tmp)
    peer = ManagementPeer(certs.server_context(), stream_handler=management_handler).start()

    async def direct_server() -> int:
        async def on_conn(r, w):
            await management_handler(SocketStream(r, w))

        srv = await asyncio.start_server(
            on_conn, "127.0.0.1", 0, ssl=certs.server_context(), limit=1 << 20
        )
        return srv.sockets[0].getsockname()[1]

    direct_port = peer.lt.call(direct_server())
    kube_ca = make_cert("kube-ca", ca=True)
    kube_api = FakeKubeAPI(make_cert("kube", dns=("localhost",), issuer=kube_ca), tmp)
    (tmp / "kube-ca.crt").write_bytes(kube_ca.cert)
    (tmp / "token").write_text("bench-token")
    listen_port = free_port()
    env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
    env.update(
        GUARDIAN_VOLTRON_URL=f"127.0.0.1:{peer.port}",
        GUARDIAN_CERT_PATH=certs.files["cert_path"],
        GUARDIAN_K8S_CA_FILE=str(tmp / "kube-ca.crt"),
        GUARDIAN_K8S_TOKEN_FILE=str(tmp / "token"),
        GUARDIAN_K8S_ENDPOINT=f"https://localhost:{kube_api.port}",
        GUARDIAN_CA_FILE=certs.files["tunnel_ca"],
        GUARDIAN_LISTEN_HOST="127.0.0.1",
        GUARDIAN_LISTEN_PORT=str(listen_port),
        GUARDIAN_LOGLEVEL="warning",
        HEALTH_ENABLED="false",
    )
    calico = shutil.which("calico", path=str(Path(sys.executable).parent)) or "calico"
    guardian = subprocess.Popen(
        [calico, "component", "guardian"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    managed_crt = str(Path(certs.files["cert_path"]) / "managed-cluster.crt")
    tls = {
        "ca": str(Path(certs.files["cert_path"]) / "management-cluster.crt"),
        "cert": managed_crt,
        "key": managed_crt[:-4] + ".key",
    }
    try:
        peer.wait_sessions(1, timeout=30)
        run_client("latency", listen_port, None, args)  # warm-up
        direct_s = tunnel_s = float("inf")
        for _ in range(args.rounds):
            direct_s = min(direct_s, run_client("throughput", direct_port, tls, args)["seconds"])
            tunnel_s = min(tunnel_s, run_client("throughput", listen_port, None, args)["seconds"])
        total_mb = args.streams * args.mb
        emit(
            "guardian",
            "tunnel_throughput_MBps",
            total_mb / tunnel_s,
            total_mb / direct_s,
            streams=args.streams,
            mb_per_stream=args.mb,
            target_ratio=0.5,
        )
        direct = run_client("latency", direct_port, tls, args)["samples"]
        tunnel = run_client("latency", listen_port, None, args)["samples"]
        d50 = statistics.median(direct) * 1000
        t50 = statistics.median(tunnel) * 1000
        q = statistics.quantiles
        emit(
            "guardian",
            "small_request_p50_ms",
            t50,
            d50,
            added_p50_ms=round(t50 - d50, 4),
            tunnel_p99_ms=round(q(tunnel, n=100)[98] * 1000, 4),
            direct_p99_ms=round(q(direct, n=100)[98] * 1000, 4),
            target_added_ms=2.0,
        )
        kctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        kctx.load_verify_locations(cadata=kube_ca.cert.decode())
        kctx.set_alpn_protocols(["h2"])
        direct_gets = _time_gets(H2Client(kube_api.port, kctx, "localhost"), PROXY_ROUNDS)
        via = H2Client(peer.bridge_port(), certs.stream_client_context(), MANAGED_NAME)
        _time_gets(via, 20)  # warm the upstream connection
        tunnel_gets = _time_gets(via, PROXY_ROUNDS)
        d50 = statistics.median(direct_gets) * 1000
        t50 = statistics.median(tunnel_gets) * 1000
        emit(
            "guardian",
            "proxied_request_p50_ms",
            t50,
            d50,
            added_p50_ms=round(t50 - d50, 4),
            tunnel_p99_ms=round(q(tunnel_gets, n=100)[98] * 1000, 4),
            target_added_ms=2.0,
        )
    finally:
        kube_api.close()
        guardian.terminate()
        guardian.wait(20)
        peer.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--client", choices=["throughput", "latency"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--tls", default="")
    ns = parser.parse_args()
    if ns.client:
        client_main(ns)
    else:
        main(ns)
