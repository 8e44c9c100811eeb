"""The plugin side of the resident CNI helper (:mod:`calico.cni.daemon`): hand one call over.

Imports only the standard library's socket/json/os, so a call the daemon serves costs an
interpreter start plus a round trip. Fail-open: ``None`` means "do the work in-process", and is
returned whenever the daemon is absent, refuses the call (it runs in another network namespace
or under another root directory, or is another user's) or dies before replying. The handshake
makes that safe: the worker does nothing until it has received "go", and the plugin only falls
back without a reply when it never sent "go" or when the worker's end of the connection is
closed, i.e. the worker is gone. So the daemon and the in-process path never run one call at
the same time.

Wire format (one connection per call): the request is a JSON header line then ``stdin_len``
raw stdin bytes; the worker answers ``ACK``; the plugin sends ``GO``; the worker's reply is one
JSON document ``{"status": "ok", "code", "stdout", "stderr"}`` or ``{"status": "refused",
"reason"}``, then EOF.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping

SOCKET_ENV = "CALICO_CNI_DAEMON_SOCKET"  # path; empty or "off" disables the daemon
DEFAULT_SOCKET = "/var/run/calico/cni-daemon.sock"
ACK = b"A"
GO = b"G"
ACK_TIMEOUT = 5.0  # seconds for the daemon to fork a worker; after that, work in-process
PROTOCOL = 1
# The header's "mode": which plugin the call is for.
MODE_PLUGIN = "CNI_PLUGIN"
MODE_IPAM = "CNI_IPAM"


def wire_mode(is_ipam: bool) -> str:
    return MODE_IPAM if is_ipam else MODE_PLUGIN


def socket_path(environ: Mapping[str, str]) -> str | None:
    path = environ.get(SOCKET_ENV)
    if path is None:
        path = DEFAULT_SOCKET
    if not path or path.lower() == "off":
        return None
    return path


def namespace_ids() -> dict[str, list[int]]:
    """(dev, inode) of this process's network namespace and of its root directory.

    The root directory rather than the mount namespace: ``ip netns exec`` gives every command
    a mount namespace of its own, yet the same files; a container with another root does not
    see the same datastore file or ``/run/netns``.
    """
    net = os.stat("/proc/self/ns/net")
    root = os.stat("/")
    return {"net": [net.st_dev, net.st_ino], "root": [root.st_dev, root.st_ino]}


def _recv_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def call(
    mode: str,
    argv: list[str] | tuple[str, ...],
    stdin: bytes,
    environ: Mapping[str, str],
    path: str | None = None,
) -> tuple[int, str, str] | None:
    """(exit code, stdout, stderr) from the daemon, or None to run in-process."""
    path = path if path is not None else socket_path(environ)
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_uid != os.geteuid():  # only a daemon of our own user may see our env and stdin
        return None
    header = {
        "v": PROTOCOL,
        "mode": mode,
        "argv": list(argv),
        "env": dict(environ),
        "cwd": os.getcwd(),
        "ns": namespace_ids(),
        "stdin_len": len(stdin),
    }
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(ACK_TIMEOUT)
        try:
            sock.connect(path)
            sock.sendall(json.dumps(header).encode() + b"\n" + stdin)
            if sock.recv(1) != ACK:
                return None  # no worker: nothing ran
            sock.settimeout(None)  # the call itself may legitimately take long
            sock.sendall(GO)
            data = _recv_all(sock)
        except OSError:
            return None  # before GO: nothing ran; after: the worker is gone (its fd closed)
        try:
            reply = json.loads(data)
        except ValueError:
            return None  # the worker died mid-call: redo the (idempotent) call in-process
        if not isinstance(reply, dict) or reply.get("status") != "ok":
            return None
        return int(reply["code"]), str(reply.get("stdout", "")), str(reply.get("stderr", ""))
    finally:
        sock.close()
