"""Helpers for the rule-renderer kernel tests: namespaces, a direct libnftables loader, probes.

The renderer's output is programmed with one ``json_cmd`` built here (independently of the table
layer), run inside the namespace through ``ip netns exec <ns> <venv python>``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import netns_support
from netns_support import PY, add_veth, in_ns, link_mac, py_server, run, run_py, tcp_probe

from calico.felix.nftables.model import TABLE_FAMILY, TABLE_NAME, Chain, NftSet, VerdictMap

# re-exported for the tests and fixtures of this folder
__all__ = ["PY", "add_veth", "in_ns", "link_mac", "run", "servers"]


@contextmanager
def netns(prefix: str = "calrules") -> Iterator[str]:
    with netns_support.netns(prefix) as name:
        yield name


@dataclass
class Topology:
    """``host`` routes between workload namespaces ``w[i]`` over veths ``calit<i>`` (host side)."""

    host: str
    workloads: list[str] = field(default_factory=list)
    ips: list[str] = field(default_factory=list)
    ifaces: list[str] = field(default_factory=list)


def _t() -> dict[str, str]:
    return {"family": TABLE_FAMILY, "table": TABLE_NAME}


def _element(value: Any) -> Any:
    """Table-layer element spelling ("10.0.0.0/24", ("10.0.0.1", 6, 80)) -> libnftables JSON."""
    if isinstance(value, tuple):
        return {"concat": [_element(v) for v in value]}
    if isinstance(value, str) and "/" in value:
        addr, length = value.split("/")
        return {"prefix": {"addr": addr, "len": int(length)}}
    return value


def ruleset_commands(
    chains: Iterable[Chain],
    sets: Iterable[NftSet] = (),
    maps: Iterable[VerdictMap] = (),
) -> dict[str, Any]:
    """One transaction that replaces table ``inet calico`` with the given objects."""
    table = {"family": TABLE_FAMILY, "name": TABLE_NAME}
    cmds: list[dict[str, Any]] = [
        {"add": {"table": table}},
        {"delete": {"table": table}},
        {"add": {"table": table}},
    ]
    for s in sets:
        obj: dict[str, Any] = {**_t(), "name": s.name, "type": s.type}
        if isinstance(s.type, tuple):
            obj["type"] = list(s.type)
        if s.interval:
            obj["flags"] = ["interval"]
        if s.elements:
            obj["elem"] = [_element(e) for e in sorted(s.elements, key=json.dumps)]
        cmds.append({"add": {"set": obj}})
    chains = list(chains)
    for c in chains:
        obj = {**_t(), "name": c.name}
        if c.base:
            obj |= {
                "type": c.base.type,
                "hook": c.base.hook,
                "prio": c.base.priority,
                "policy": c.base.policy,
            }
        cmds.append({"add": {"chain": obj}})
    for m in maps:
        obj = {**_t(), "name": m.name, "type": m.key_type, "map": "verdict"}
        if m.elements:
            obj["elem"] = [[k, {v[0]: {"target": v[1]}}] for k, v in sorted(m.elements.items())]
        cmds.append({"add": {"map": obj}})
    for c in chains:
        for r in c.rules:
            rule = {**_t(), "chain": c.name, "expr": list(r.exprs)}
            if r.comment:
                rule["comment"] = r.comment[:128]
            cmds.append({"add": {"rule": rule}})
    return {"nftables": cmds}


_LOADER = """
import json, sys, nftables
n = nftables.Nftables()
rc, out, err = n.json_cmd(json.load(sys.stdin))
sys.stderr.write(err)
sys.exit(rc)
"""


def program(ns: str, payload: dict[str, Any]) -> None:
    """Apply ``payload`` with a single ``json_cmd`` inside ``ns``; raise with nft's error."""
    proc = run_py(ns, _LOADER, input=json.dumps(payload), timeout=30, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"nft rejected the ruleset: {proc.stderr.strip()}")


def listing(ns: str) -> list[dict[str, Any]]:
    out = in_ns(ns, "nft", "-j", "list", "table", TABLE_FAMILY, TABLE_NAME).stdout
    return [o for o in json.loads(out)["nftables"] if "metainfo" not in o]


# --- traffic probes (run inside workload namespaces) ---------------------------------------------

SERVER = """
import socket, sys, threading
def serve(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(b"hi"); c.close()
for p in sys.argv[1:]:
    threading.Thread(target=serve, args=(int(p),), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

ICMP_PROBE = """
import os, socket, struct, sys, time
dst, icmp_type, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def csum(b):
    if len(b) % 2: b += b"\\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
ident = os.getpid() & 0xffff
body = struct.pack("!HH", ident, 1) + (b"x" * 16 if icmp_type == 8 else b"\\0" * 12)
pkt = struct.pack("!BBH", icmp_type, 0, 0) + body
pkt = pkt[:2] + struct.pack("!H", csum(pkt)) + pkt[4:]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(timeout); s.sendto(pkt, (dst, 0))
want = {8: 0, 13: 14}[icmp_type]
end = time.time() + timeout
try:
    while time.time() < end:
        data, addr = s.recvfrom(2048)
        ihl = (data[0] & 0xf) * 4
        t, = struct.unpack("!B", data[ihl:ihl+1])
        if addr[0] == dst and t == want:
            print("ok"); break
    else:
        print("timeout")
except socket.timeout:
    print("timeout")
"""


def servers(ns: str, *ports: str) -> AbstractContextManager[subprocess.Popen[str]]:
    """:data:`SERVER` in ``ns`` on TCP ``ports``, killed on exit."""
    return py_server(ns, SERVER, *ports)


def tcp_connect(ns: str, dst: str, port: int, timeout: float = 0.7) -> str:
    return tcp_probe(ns, dst, port, timeout)


def icmp_probe(ns: str, dst: str, icmp_type: int, timeout: float = 0.7) -> str:
    return netns_support.probe(ns, ICMP_PROBE, dst, icmp_type, timeout)
