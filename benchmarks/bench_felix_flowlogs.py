"""Felix throughput with flow collection on vs off (root, iperf3 needed).

Two workloads under a policy that allows the server's ports; a real ``calico component
goldmane`` in the host namespace. Felix is restarted between runs with ``FlowLogsGoldmaneServer``
set (on) or unset (off), in ABBA order so both see the same noise. Per run: iperf3 bulk
throughput (bits/s), and the rate of short TCP connections (each one's first packet is NFLOGged
and later counted from conntrack, so this is where collection costs most). Value = on,
baseline = off; target ratio >= 0.9 for both; each line also says in how many on-runs the
collector reported drops. Two last lines measure the collector itself: NFLOG packets/s and
conntrack DESTROY events/s it handles in-process vs the rates the on-runs' connection rate
produced (target >= 1: it keeps up).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_felix as bf
from harness import emit

fh = bf.fh
BENCH = "felix_flowlogs"
PAIRS = 3
CONNECTS = 1000
CPS_PORT = 7000
CPS_NEEDED: list[float] = []  # the on-runs' median connection rate, for the capacity line
# Accept and close at once: the server side must not be what limits the connection rate.
ACCEPTOR = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {CPS_PORT})); s.listen(1024)
while True:
    c, _ = s.accept(); c.close()
"""
CONNECTOR = """
import socket, struct, sys, time
dst, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ok, t0 = 0, time.perf_counter()
for _ in range(n):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # no TIME_WAIT
    c.settimeout(1.0)
    try:
        c.connect((dst, port)); ok += 1
    except OSError:
        pass
    c.close()
print(ok / (time.perf_counter() - t0))
"""
POLICY = {
    "kind": "NetworkPolicy",
    "metadata": {"name": "bench-allow", "namespace": bf.NAMESPACE},
    "spec": {
        "selector": "app == 'server'",
        "types": ["Ingress"],
        "ingress": [
            {"action": "Allow", "protocol": "TCP", "destination": {"ports": [5201, 8080, CPS_PORT]}}
        ],
    },
}


def goldmane(host: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            ["ip", "netns", "exec", host, fh.CALICO, "component", "goldmane"],
            env={"PORT": str(port), "HEALTH_ENABLED": "false", "PATH": "/usr/bin:/bin"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (``ip netns exec`` execs Felix in place)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def iperf(client: Any, server_ip: str) -> float:
    """One iperf3 run's received rate; retried when iperf3 reports an error (busy server)."""
    for _ in range(3):
        try:
            return bf.iperf(client, server_ip, seconds=3)
        except (KeyError, ValueError):
            time.sleep(1)
    raise RuntimeError("iperf3 failed three times")


def connect_rate(ns: str, dst: str) -> float:
    """Short TCP connections per second from ``ns`` (each one's SYN crosses policy)."""
    out = fh.in_ns(ns, fh.PY, "-c", CONNECTOR, dst, str(CPS_PORT), str(CONNECTS), timeout=120)
    return float(out.stdout)


def main() -> int:
    with (
        bf.host_env("flowlogs") as (host, ds, felix, workdir),
        fh.workload(host, ds, "server", "10.65.0.2", namespace=bf.NAMESPACE,
                    labels={"app": "server"}) as server,
        fh.workload(host, ds, "client", "10.65.0.3", namespace=bf.NAMESPACE,
                    labels={"role": "client"}) as client,
        fh.servers(server, f"tcp:{bf.PORT}"),
    ):  # fmt: skip
        ds.apply(POLICY)
        port = fh.free_port()
        gm = goldmane(host, port, workdir / "goldmane.log")
        srv = subprocess.Popen(
            ["ip", "netns", "exec", server.ns, "iperf3", "-s"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        acceptor = subprocess.Popen(["ip", "netns", "exec", server.ns, fh.PY, "-c", ACCEPTOR])
        drops: list[bool] = []
        results: dict[bool, dict[str, list[float]]] = {
            on: {"bps": [], "cps": [], "cpu": []} for on in (False, True)
        }

        def run(on: bool) -> None:
            felix.kill()
            felix.env.pop("FELIX_FLOWLOGSGOLDMANESERVER", None)
            if on:
                felix.env["FELIX_FLOWLOGSGOLDMANESERVER"] = f"127.0.0.1:{port}"
                felix.env["FELIX_FLOWLOGSFLUSHINTERVAL"] = "2"
            felix.start()
            felix.wait_ready()
            # Probe the plain server: a bare connect to iperf3's port would make it busy.
            fh.eventually(lambda: bf.try_connect_port(client.ns, server.ip, bf.PORT), True, 60)
            if on:  # the rules now carry NFLOG statements
                fh.eventually(
                    lambda: "log prefix" in fh.in_ns(host, "nft", "list", "ruleset").stdout, True
                )
            cpu0 = cpu_seconds(felix.proc.pid)
            results[on]["bps"].append(iperf(client, server.ip))
            results[on]["cpu"].append(cpu_seconds(felix.proc.pid) - cpu0)
            results[on]["cps"].append(connect_rate(client.ns, server.ip))
            if on:  # did the collector keep up? (it warns at a flush when anything dropped)
                time.sleep(3)  # one flush interval and a bit: let the last batch be accounted
                drops.append("Flow logs incomplete" in felix.log())

        try:
            for i in range(PAIRS):
                for on in (False, True) if i % 2 == 0 else (True, False):
                    run(on)
        finally:
            for p in (srv, acceptor):
                p.kill()
                p.wait(10)
            gm.terminate()
            gm.wait(15)
        for metric, unit in (("bps", "tput_bps"), ("cps", "connections_per_s")):
            on_runs: list[Any] = results[True][metric]
            if metric == "cps":
                CPS_NEEDED.append(statistics.median(on_runs))
            off_runs: list[Any] = results[False][metric]
            emit(
                BENCH,
                f"flowlogs_on_{unit}",
                statistics.median(on_runs),
                statistics.median(off_runs),
                target_ratio=0.9,
                runs_on=[round(x, 1) for x in on_runs],
                runs_off=[round(x, 1) for x in off_runs],
                collector_dropped_in_runs=sum(drops),
                felix_cpu_s_during_iperf_on=[round(x, 2) for x in results[True]["cpu"]],
                felix_cpu_s_during_iperf_off=[round(x, 2) for x in results[False]["cpu"]],
            )
    collector_capacity()
    return 0


def collector_capacity() -> None:
    """In-process: NFLOG packets/s the collector parses, traces and aggregates (one allow hit
    per packet, a new connection each), against the NFLOG rate the on-runs' connection rate
    produces (two per connection: the client's egress profile allow, the server's ingress
    policy allow)."""
    import socket
    import struct

    from calico.felix.collector.collector import Collector
    from calico.felix.collector.nflog import parse_messages
    from calico.felix.messages import ActivePolicyUpdate, Policy, PolicyID, Rule

    def msg(prefix: str, sport: int) -> bytes:
        ip = struct.pack(
            "!BBHHHBBH4s4sHH", 0x45, 0, 60, 0, 0, 64, 6, 0,
            socket.inet_aton("10.65.0.3"), socket.inet_aton("10.65.0.2"), sport, 8080,
        ) + b"\0" * 16  # fmt: skip
        attrs = b""
        for atype, value in ((10, prefix.encode() + b"\0"), (9, ip)):
            raw = struct.pack("=HH", 4 + len(value), atype) + value
            attrs += raw + b"\0" * (-len(raw) % 4)
        body = struct.pack("=BBH", socket.AF_INET, 0, socket.htons(1)) + attrs
        return struct.pack("=IHHII", 16 + len(body), 4 << 8, 0, 0, 0) + body

    class Sink:
        def push(self, flow: object) -> None:
            pass

    pol = PolicyID("bench-allow", "NetworkPolicy", namespace=bf.NAMESPACE, tier="default")
    c = Collector(Sink(), flush_interval=60, ct_dump=dict)
    c.on_messages([ActivePolicyUpdate(pol, Policy(inbound_rules=(Rule(action="allow"),)))])
    prefix = f"API0|np/{bf.NAMESPACE}/bench-allow"
    batches = [b"".join(msg(prefix, 1024 + (b * 32 + i) % 60000) for i in range(32))
               for b in range(500)]  # fmt: skip
    t0 = time.perf_counter()
    for data in batches:
        c.handle(parse_messages(data))
    rate = len(batches) * 32 / (time.perf_counter() - t0)
    needed = 2 * CPS_NEEDED[0] if CPS_NEEDED else rate
    emit(BENCH, "collector_nflog_packets_per_s", rate, needed, target_ratio=1.0)
    destroy_capacity(c)


def destroy_capacity(c: Any) -> None:
    """In-process: conntrack DESTROY events/s the collector parses and applies (each ends one
    of the connections registered above), against the on-runs' connection rate (one event
    per connection)."""
    import socket
    import struct

    from calico.felix.collector.conntrack import parse_events

    def nla(t: int, v: bytes, nested: bool = False) -> bytes:
        raw = struct.pack("=HH", 4 + len(v), t | (0x8000 if nested else 0)) + v
        return raw + b"\0" * (-len(raw) % 4)

    def tup(src: str, dst: str, sport: int, dport: int) -> bytes:
        ip = nla(1, socket.inet_aton(src)) + nla(2, socket.inet_aton(dst))
        l4 = nla(1, b"\x06") + nla(2, struct.pack("!H", sport)) + nla(3, struct.pack("!H", dport))
        return nla(1, ip, True) + nla(2, l4, True)

    def event(sport: int) -> bytes:
        body = struct.pack("=BBH", socket.AF_INET, 0, 0)
        body += nla(1, tup("10.65.0.3", "10.65.0.2", sport, 8080), True)
        body += nla(2, tup("10.65.0.2", "10.65.0.3", 8080, sport), True)
        for t in (9, 10):
            body += nla(t, nla(1, struct.pack("!Q", 5)) + nla(2, struct.pack("!Q", 400)), True)
        return struct.pack("=IHHII", 16 + len(body), (1 << 8) | 2, 0, 0, 0) + body

    sports = [1024 + i % 60000 for i in range(500 * 32)]
    batches = [b"".join(event(p) for p in sports[i : i + 32]) for i in range(0, len(sports), 32)]
    before = c.agg.tracked
    t0 = time.perf_counter()
    for data in batches:
        c.on_destroyed(parse_events(data))
    rate = len(sports) / (time.perf_counter() - t0)
    assert before - c.agg.tracked == len(sports), "every event must end a connection"
    needed = CPS_NEEDED[0] if CPS_NEEDED else rate
    emit(BENCH, "collector_destroy_events_per_s", rate, needed, target_ratio=1.0)


if __name__ == "__main__":
    sys.exit(main())
