"""Extensions to ``harness.py`` for the extra policy tests and the Felix benchmark: labelled
namespace profiles, IPv6 workload plumbing (host link-local gateway, as the CNI plugin does),
dual-stack echo servers and IPv6 probes, and kernel-log capture for ``log`` rules."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from harness import Datastore, Workload, in_ns, run
from netns_support import probe, py_server

NF_LOG_ALL_NETNS = Path("/proc/sys/net/netfilter/nf_log_all_netns")


def labelled_namespace_profile(ds: Datastore, namespace: str, labels: dict[str, str]) -> None:
    """The ``kns.<ns>`` profile as the namespace controller writes it: allow all, and the
    namespace's labels (plus its name) as ``pcns.``-prefixed labels its endpoints inherit."""
    to_apply = {"pcns.projectcalico.org/name": namespace}
    to_apply.update({f"pcns.{k}": v for k, v in labels.items()})
    ds.apply(
        {
            "kind": "Profile",
            "metadata": {"name": f"kns.{namespace}"},
            "spec": {
                "ingress": [{"action": "Allow"}],
                "egress": [{"action": "Allow"}],
                "labelsToApply": to_apply,
            },
        }
    )


def host_link_local(host: str, iface: str, timeout: float = 10.0) -> str:
    """The ``fe80::`` address of ``iface`` in ``host`` (appears once the veth has carrier)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = in_ns(host, "ip", "-j", "-6", "addr", "show", "dev", iface, check=False).stdout
        for link in json.loads(out or "[]"):
            for a in link.get("addr_info", []):
                if a.get("local", "").startswith("fe80:"):
                    return str(a["local"])
        time.sleep(0.05)
    raise AssertionError(f"{iface} got no IPv6 link-local address in {timeout}s")


def use_v6_gateway(host: str, w: Workload) -> None:
    """Point the workload's IPv6 default route at the host end's link-local address (the
    harness's on-link default would need proxy NDP entries for every destination)."""
    gw = host_link_local(host, w.iface)
    in_ns(w.ns, "ip", "-6", "route", "replace", "default", "via", gw, "dev", "eth0")


DUAL_SERVER = """
import socket, sys, threading
def serve(port):
    s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", port)); s.listen(256)
    while True:
        c, _ = s.accept()
        try: c.sendall(b"hi")
        except OSError: pass
        c.close()
for p in sys.argv[1:]:
    threading.Thread(target=serve, args=(int(p),), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""


@contextlib.contextmanager
def dual_stack_servers(ns: str, *ports: int) -> Iterator[subprocess.Popen[str]]:
    """TCP servers on ``ports`` answering "hi" over IPv4 and IPv6, in netns ``ns``."""
    with py_server(ns, DUAL_SERVER, *map(str, ports)) as proc:
        yield proc


ICMP6_PROBE = """
import socket, struct, sys, time
dst, timeout = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6); s.settimeout(timeout)
s.sendto(struct.pack("!BBHHH", 128, 0, 0, 0x4321, 1) + b"probe", (dst, 0))  # kernel checksums
end = time.time() + timeout
try:
    while time.time() < end:
        data, addr = s.recvfrom(2048)
        if addr[0] == dst and data[0] == 129:
            print("ok"); break
    else:
        print("timeout")
except socket.timeout:
    print("timeout")
"""


def icmp6(src: Workload, dst: str, timeout: float = 0.6) -> str:
    """ICMPv6 echo request from ``src`` to ``dst``: "ok" on an echo reply, else "timeout"."""
    return probe(src.ns, ICMP6_PROBE, dst, timeout)


@contextlib.contextmanager
def kernel_netns_logging() -> Iterator[bool]:
    """Let nft ``log`` statements in non-initial netns reach the kernel ring buffer for the
    duration; yields whether dmesg is readable here (the setting is restored afterwards)."""
    try:
        old = NF_LOG_ALL_NETNS.read_text().strip()
        NF_LOG_ALL_NETNS.write_text("1")
    except OSError:
        yield False
        return
    try:
        yield run("dmesg", check=False).returncode == 0
    finally:
        NF_LOG_ALL_NETNS.write_text(old)


def dmesg_lines() -> list[str]:
    """The kernel ring buffer, one string per line (timestamps make lines unique)."""
    return run("dmesg", check=False).stdout.splitlines()
