"""``calico component cni daemon``: a resident helper that serves CNI calls from warm code.

A pod start in its own process pays for the interpreter and the modules a call loads before
doing any work. The daemon pays that once: it imports the plugin modules and builds the
validators of the kinds an ADD/DEL touches, then listens on a root-only unix socket. Each call
is served by a forked worker, so the worker starts warm and every per-call side effect
(environment, cwd, the netns helper thread, logging set-up, datastore connections, netlink
sockets) stays in a process that exits when the call is done. The worker runs exactly the
in-process code path (:func:`calico.cni.main.run_plugin`) and returns stdout, stderr and the
exit code.

Off unless started. The plugin side is :mod:`calico.cni.daemon_client`; it falls back to
in-process work whenever the daemon is absent or fails, so the daemon is purely an
optimisation. A worker refuses (and the plugin falls back) when the caller is another user or
runs in another network namespace or under another root directory than the daemon, since the
daemon's view of ``/proc/sys``, ``/run/netns`` and the datastore file would not be the caller's.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import signal
import socket
import struct
import sys
from typing import Any

from calico.cni import daemon_client as dc
from calico.reaper import reap_children

log = logging.getLogger(__name__)

GO_TIMEOUT = 10.0  # a worker waits this long for the plugin's GO, then gives up unstarted
MAX_HEADER = 1 << 20
MAX_STDIN = 16 << 20
_ACCEPT_POLL = 1.0

# Kinds an ADD/DEL reads or writes: their modules are imported before the first fork.
WARM_KINDS = (
    "IPPool",
    "IPReservation",
    "IPAMConfiguration",
    "IPAMBlock",
    "IPAMHandle",
    "BlockAffinity",
    "Node",
    "Profile",
    "WorkloadEndpoint",
    "ClusterInformation",
)


def warm_up() -> None:
    """Import everything a call needs and build its validators (once, before forking)."""
    import calico.api.validators
    import calico.cni.ipam_exec
    import calico.cni.ipam_plugin
    import calico.cni.k8s_annotations
    import calico.cni.lean
    import calico.cni.main
    import calico.cni.netsetup
    import calico.cni.plugin
    import calico.cni.rtnl
    import calico.cni.status_wait
    import calico.cni.store
    import calico.cni.wep
    import calico.datastore.client
    import calico.datastore.factory
    import calico.datastore.local
    import calico.ipam.allocator  # calico.ipam itself resolves its names lazily
    import calico.ipam.blocks
    import calico.logutils
    import calico.model.names  # noqa: F401
    from calico.api import CalicoModel, kind_class

    for kind in WARM_KINDS:
        kind_class(kind)
    # Every model of the loaded modules, nested specs included (code builds those directly).
    todo = list(CalicoModel.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not cls.__pydantic_complete__:
            cls.model_rebuild()
    # Forked workers share these pages with the daemon; keep the GC from touching them.
    gc.collect()
    gc.freeze()


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], bytes]:
    buf = b""
    while b"\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk or len(buf) > MAX_HEADER:
            raise ValueError("truncated request header")
        buf += chunk
    line, rest = buf.split(b"\n", 1)
    header = json.loads(line)
    if not isinstance(header, dict) or header.get("v") != dc.PROTOCOL:
        raise ValueError("unsupported request")
    want = int(header["stdin_len"])
    if not 0 <= want <= MAX_STDIN:
        raise ValueError("bad stdin length")
    while len(rest) < want:
        chunk = conn.recv(min(65536, want - len(rest)))
        if not chunk:
            raise ValueError("truncated stdin")
        rest += chunk
    return header, rest[:want]


def refusal(header: dict[str, Any], peer_uid: int) -> str | None:
    """Why this worker must not serve the call (None: it may)."""
    if peer_uid != os.geteuid():
        return f"caller uid {peer_uid} is not the daemon's"
    if header.get("mode") not in (dc.MODE_PLUGIN, dc.MODE_IPAM):
        return "unknown mode"
    if header.get("ns") != dc.namespace_ids():
        return "the caller runs in another network namespace or root directory"
    return None


def serve_one(conn: socket.socket) -> None:
    """A worker's whole life: check, ACK, wait for GO, run the call, reply."""
    from calico.cni.main import run_plugin

    conn.settimeout(GO_TIMEOUT)
    header, stdin = _read_request(conn)
    reason = refusal(header, _peer_uid(conn))
    if reason is not None:
        log.debug("Refusing CNI call: %s", reason)
        conn.sendall(json.dumps({"status": "refused", "reason": reason}).encode())
        return
    conn.sendall(dc.ACK)
    if conn.recv(1) != dc.GO:
        return  # the plugin gave up waiting and works in-process
    conn.settimeout(None)
    env = {str(k): str(v) for k, v in header["env"].items()}
    os.environ.clear()
    os.environ.update(env)
    with contextlib.suppress(OSError):
        os.chdir(header.get("cwd") or "/")
    out, err = io.StringIO(), io.StringIO()
    code = run_plugin(
        header["mode"] == dc.MODE_IPAM,
        stdin=io.BytesIO(stdin),
        stdout=out,
        stderr=err,
        environ=env,
    )
    logging.shutdown()
    reply = {"status": "ok", "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
    conn.sendall(json.dumps(reply).encode())


def _worker(listener: socket.socket, conn: socket.socket) -> None:
    code = 1
    try:
        listener.close()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        serve_one(conn)
        code = 0
    except BaseException:  # never let a worker return into the accept loop
        with contextlib.suppress(BaseException):
            log.exception("CNI daemon worker failed")
    finally:
        with contextlib.suppress(BaseException):
            conn.close()
        os._exit(code)


def bind(path: str) -> socket.socket:
    """A listening socket at ``path``, mode 0600, replacing a stale one (never another file)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if not _is_socket(path):
            raise OSError(f"{path} exists and is not a socket")
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(128)
    return sock


def _is_socket(path: str) -> bool:
    import stat

    return stat.S_ISSOCK(os.lstat(path).st_mode)


def serve(path: str, *, ready: Any = None, stop: Any = None) -> None:
    """Warm up, listen on ``path`` and fork one worker per connection until SIGTERM/SIGINT.

    ``ready()`` is called once listening; ``stop()`` returning True ends the loop (tests).
    """
    warm_up()
    listener = bind(path)
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    listener.settimeout(_ACCEPT_POLL)
    log.info("CNI daemon listening on %s", path)
    if ready is not None:
        ready()
    try:
        while not stopping and not (stop is not None and stop()):
            reap_children()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except InterruptedError:
                continue
            try:
                pid = os.fork()
            except OSError as exc:
                log.error("Cannot fork a CNI worker: %s", exc)
                conn.close()  # the plugin sees no ACK and works in-process
                continue
            if pid == 0:
                _worker(listener, conn)
            conn.close()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        listener.close()
        with contextlib.suppress(OSError):
            if _is_socket(path):
                os.unlink(path)
        reap_children()
        sys.stdout.flush()
