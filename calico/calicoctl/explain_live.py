"""``calicoctl explain --live``: send the explained connection's first packet through the real
dataplane of this node with nftables tracing, and report what the kernel did.

Run on the node hosting the source endpoint (as root). A short-lived table of our own
(``inet calico-explain-<pid>``, prerouting and output chains ahead of everything else) sets
``nftrace`` on exactly the probe's 5-tuple; the probe is sent from inside the workload's network
namespace (the peer of its ``cali*`` interface), or for a host endpoint from the host itself,
bound to the source address; ``nft monitor trace`` shows every rule the packet hit. The
kernel verdict is compared with the computed one: overall when the destination workload is on
this node too, else the source's egress. Felix's table is never touched; its per-rule counters
for the endpoints' chains are read before and after the probe (``explain_counters``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from typing import Any

from calico.calicoctl import explain_counters as counters
from calico.calicoctl.errors import CtlError
from calico.policyeval.dataset import Endpoint
from calico.policyeval.evaluate import Packet

FELIX_TABLE = "calico"
_NSID = re.compile(r"nsid (\d+) \(iproute2 netns name: ([^)]+)\)")
_TRACE = re.compile(r"^trace id (\w+) inet (\S+) (\S+) (.*)$")

PROBE = """
import socket, struct, sys, os
kind, dst = sys.argv[1], sys.argv[2]
port, sport, family = (int(a) for a in sys.argv[3:6])
src = sys.argv[6]
af = socket.AF_INET6 if family == 6 else socket.AF_INET
if kind in ("tcp", "udp"):
    s = socket.socket(af, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((src, sport)); s.settimeout(1.0)
    try:
        s.connect((dst, port)) if kind == "tcp" else s.sendto(b"calico-explain", (dst, port))
    except OSError:
        pass
else:
    icmp_type, icmp_code = port, sport
    proto = socket.IPPROTO_ICMPV6 if family == 6 else socket.IPPROTO_ICMP
    s = socket.socket(af, socket.SOCK_RAW, proto)
    s.bind((src, 0))
    body = struct.pack("!BBHHH", icmp_type, icmp_code, 0, os.getpid() & 0xffff, 1) + b"explain"
    if family == 4:
        c = sum(struct.unpack("!%dH" % (len(body) // 2), body)); c = (c >> 16) + (c & 0xffff)
        c += c >> 16; body = body[:2] + struct.pack("!H", ~c & 0xffff) + body[4:]
    s.sendto(body, (dst, 0))
"""


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, input=stdin, capture_output=True, text=True, check=False)


def workload_netns(iface: str) -> str:
    """The named network namespace holding the peer of host interface ``iface``."""
    import json

    link = _run("ip", "-j", "link", "show", "dev", iface)
    if link.returncode != 0:
        raise CtlError(
            f"--live must run on the node hosting the source: interface {iface} not found here"
        )
    nsid = (json.loads(link.stdout) or [{}])[0].get("link_netnsid")
    for found, name in _NSID.findall(_run("ip", "netns", "list-id").stdout):
        if nsid is not None and int(found) == nsid:
            return name.strip()
    raise CtlError(f"--live: cannot find the network namespace of {iface}'s peer")


def _local_address(addr: str) -> bool:
    """Is ``addr`` one of this network namespace's own addresses (the host endpoint's node)?"""
    import json

    out = _run("ip", "-j", "addr", "show")
    try:
        links = json.loads(out.stdout or "[]")
    except ValueError:
        return False
    return any(a.get("local") == addr for link in links for a in link.get("addr_info", []))


def _trace_rule(pkt: Packet) -> str:
    fam = "ip6" if pkt.version == 6 else "ip"
    parts = [f"{fam} saddr {pkt.src}", f"{fam} daddr {pkt.dst}", f"meta l4proto {pkt.protocol}"]
    if pkt.src_port is not None and pkt.dst_port is not None:
        parts += [f"th sport {pkt.src_port}", f"th dport {pkt.dst_port}"]
    return " ".join(parts) + " meta nftrace set 1"


def parse_trace(text: str) -> dict[str, Any]:
    """The first traced packet's path: chains of Felix's table in order, the deciding rule and
    the verdict (Deny if any table dropped or rejected it)."""
    first: str | None = None
    chains: list[str] = []
    verdict, rule = "Allow", None
    for line in text.splitlines():
        m = _TRACE.match(line.strip())
        if m is None:
            continue
        trace_id, table, chain, rest = m.groups()
        first = first or trace_id
        if trace_id != first:
            continue
        if table == FELIX_TABLE and (not chains or chains[-1] != chain):
            chains.append(chain)
        if "(verdict drop)" in rest or "(verdict reject)" in rest or rest.startswith("policy drop"):
            verdict, rule = "Deny", f"{table} {chain}: {rest}"
            break
        if table == FELIX_TABLE and "(verdict accept)" in rest:
            rule = f"{table} {chain}: {rest}"
    if first is None:
        raise CtlError("--live: the probe was not seen by the kernel (no trace events)")
    return {"verdict": verdict, "rule": rule, "chains": chains}


def live(
    src: Endpoint | None, dst: Endpoint | None, pkt: Packet, computed: dict[str, Any]
) -> dict[str, Any]:
    """Trace the probe on this node; ``computed`` is the offline report."""
    if os.geteuid() != 0:
        raise CtlError("--live needs root (nftables tracing)")
    if src is None:
        raise CtlError("--live needs a workload or host endpoint as the source (--from)")
    netns: str | None = None
    sides: dict[str, str | None] = {"egress": None}
    if src.kind == "WorkloadEndpoint":
        iface = getattr(src.value, "name", "")
        netns = workload_netns(iface)
        sides["egress"] = counters.endpoint_chain(iface, ingress=False)
    elif not _local_address(str(pkt.src)):  # a host endpoint's probe leaves from its host
        raise CtlError(
            f"--live must run on the node hosting the source: address {pkt.src} not found here"
        )
    dst_iface = getattr(dst.value, "name", "") if dst is not None else ""
    dst_here = (
        dst is not None
        and dst.kind == "WorkloadEndpoint"
        and bool(dst_iface)
        and _run("ip", "link", "show", "dev", dst_iface).returncode == 0
    )
    # The host endpoint chains the computed sides crossed on this node (the source's side
    # always is; the destination's when its workload is here too, and the packet is
    # forwarded to it: from the host itself it is not policed).
    host_roots = {"egress": counters.host_endpoint_roots(computed["egress"])}
    if dst_here and netns is not None:
        sides["ingress"] = counters.endpoint_chain(dst_iface, ingress=True)
        host_roots["ingress"] = counters.host_endpoint_roots(computed["ingress"])
    roots = [r for side, root in sides.items() for r in (root, *host_roots[side]) if r]
    table = f"calico-explain-{os.getpid()}"
    ruleset = (
        f"table inet {table} {{\n chain trace {{\n  type filter hook prerouting priority -400;\n"
        f"  {_trace_rule(pkt)}\n }}\n chain trace_out {{\n"
        f"  type filter hook output priority -400;\n  {_trace_rule(pkt)}\n }}\n}}\n"
    )
    made = _run("nft", "-f", "-", stdin=ruleset)
    if made.returncode != 0:
        raise CtlError(f"--live: cannot create the trace table: {made.stderr.strip()}")
    monitor = subprocess.Popen(
        ["nft", "monitor", "trace"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        before = counters.snapshot(roots)
        time.sleep(0.3)  # nft monitor subscribes asynchronously
        kind = {6: "tcp", 17: "udp", 132: "sctp"}.get(pkt.protocol, "icmp")
        if kind == "sctp":
            raise CtlError("--live does not probe SCTP")
        if kind == "icmp":
            a, b = pkt.icmp_type or 0, pkt.icmp_code or 0
        else:
            a, b = pkt.dst_port or 0, pkt.src_port or 0
        enter = ["ip", "netns", "exec", netns] if netns is not None else []
        _run(*enter, sys.executable, "-c", PROBE, kind, str(pkt.dst), str(a), str(b),
             str(pkt.version), str(pkt.src))  # fmt: skip
        time.sleep(0.5)
        after = counters.snapshot(roots)
    finally:
        monitor.terminate()
        out, _ = monitor.communicate(timeout=5)
        _run("nft", "delete", "table", "inet", table)
    trace = parse_trace(out)
    trace["counters"] = counters.report(sides, before, after, computed, host_roots)
    if dst_here:
        trace["compared"], expected = "overall", computed["result"]["verdict"]
    else:
        trace["compared"], expected = "egress", computed["egress"]["verdict"]
    trace["agrees"] = trace["verdict"] == expected
    return trace
