"""Network-namespace plumbing shared by the kernel tests (and the Felix benchmark).

Everything here drives iproute2 as a fixture would: uniquely named namespaces that are deleted
on exit even when the body fails, ``ip`` (optionally ``-n <ns>``), ``ip netns exec`` for commands
and Python snippets, veth pairs, snippet servers that print ``ready`` once listening, and a worker
thread that ``setns()``-es itself into a namespace so callables submitted from pytest run there
(network namespaces are per thread on Linux, so the rest of pytest stays in the host namespace).

``tests/conftest.py`` puts ``tests/`` on ``sys.path``; import this as ``import netns_support``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

PY = sys.executable
CLONE_NEWNET = 0x40000000
T = TypeVar("T")

_libc = ctypes.CDLL(None, use_errno=True)


def unique_name(prefix: str, length: int = 8) -> str:
    """``<prefix>-<length random hex chars>``: a namespace name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:length]}"


def run(
    *args: str,
    check: bool = True,
    timeout: float = 20,
    error: type[Exception] = RuntimeError,
    **kw: Any,
) -> subprocess.CompletedProcess[str]:
    """Run a command (text mode, output captured); raise ``error`` on failure when ``check``."""
    proc = subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, check=False, **kw
    )
    if check and proc.returncode != 0:
        raise error(f"{' '.join(args)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    return proc


def ip(*args: str, ns: str | None = None, check: bool = True, timeout: float = 10) -> str:
    """The iproute2 CLI (inside ``ns`` with ``-n`` when given); returns its stdout."""
    return run("ip", *(["-n", ns] if ns else []), *args, check=check, timeout=timeout).stdout


def in_ns(ns: str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run a command inside ``ns`` via ``ip netns exec`` (keywords as for :func:`run`)."""
    return run("ip", "netns", "exec", ns, *args, **kw)


def run_py(ns: str, code: str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run the Python snippet ``code`` (argv ``args``) with this interpreter inside ``ns``."""
    return in_ns(ns, PY, "-c", code, *args, **kw)


def probe(ns: str, code: str, *args: Any, **kw: Any) -> str:
    """A probe snippet's one-line verdict ("ok", "timeout", "error ...") from inside ``ns``."""
    return run_py(ns, code, *map(str, args), **kw).stdout.strip()


def add_netns(name: str) -> None:
    run("ip", "netns", "add", name)


def delete_netns(name: str) -> None:
    """Delete ``name`` (also every veth end inside it); never raises on failure."""
    run("ip", "netns", "del", name, check=False)


@contextlib.contextmanager
def netns(prefix: str = "calns", *, length: int = 8, lo_up: bool = True) -> Iterator[str]:
    """A new namespace (``lo`` up unless ``lo_up=False``), deleted on exit whatever happens."""
    name = unique_name(prefix, length)
    add_netns(name)
    try:
        if lo_up:
            ip("link", "set", "lo", "up", ns=name)
        yield name
    finally:
        delete_netns(name)


def add_veth(name: str, peer: str, *, ns: str, peer_ns: str | None = None) -> None:
    """A veth pair: ``name`` in ``ns`` and ``peer`` in ``peer_ns`` (or also in ``ns``)."""
    if peer_ns is None:
        ip("link", "add", name, "type", "veth", "peer", "name", peer, ns=ns)
    else:
        run("ip", "link", "add", name, "netns", ns, "type", "veth", "peer", peer, "netns", peer_ns)


def link_mac(ns: str, ifname: str) -> str:
    """The MAC address of ``ifname`` inside ``ns``."""
    return str(json.loads(ip("-j", "link", "show", ifname, ns=ns))[0]["address"])


@contextlib.contextmanager
def py_server(ns: str, code: str, *args: str, **popen_kw: Any) -> Iterator[subprocess.Popen[str]]:
    """Run the server snippet ``code`` inside ``ns`` until exit; it must print ``ready`` first."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, PY, "-c", code, *args],
        stdout=subprocess.PIPE,
        text=True,
        **popen_kw,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


# --- probes (one line on stdout: "ok", "bad", "timeout" or "error <errno>") ---------------------

TCP_PROBE = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    print("ok" if c.recv(2) == b"hi" else "bad")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error", e.errno)
"""


def tcp_probe(ns: str, dst: str, port: int, timeout: float) -> str:
    """Connect from ``ns`` to ``dst:port``; "ok" when the server greets with ``hi``."""
    return probe(ns, TCP_PROBE, dst, port, timeout)


# --- running callables inside a namespace --------------------------------------------------------


def enter_netns(name: str) -> None:
    """Move the calling thread into the named namespace (``/run/netns/<name>``)."""
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({name}): {os.strerror(err)}")
    finally:
        os.close(fd)


class NetnsWorker:
    """A worker thread living in namespace ``name``: ``call(fn, ...)`` runs ``fn`` there.

    Closures and exceptions cross back natively, so assertions keep pytest's introspection;
    sockets and netlink handles created on the worker bind inside the namespace, and
    subprocesses forked from it inherit it.
    """

    def __init__(self, name: str, timeout: float = 30.0) -> None:
        self.name = name
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix=f"netns-{name}",
            initializer=enter_netns,
            initargs=(name,),
        )

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the namespace's worker thread and return (or raise) its outcome."""
        return self._pool.submit(fn, *args, **kwargs).result(timeout=self.timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


W = TypeVar("W", bound=NetnsWorker)


@contextlib.contextmanager
def worker_netns(
    factory: Callable[[str], W], prefix: str, *, length: int = 8, lo_up: bool = True
) -> Iterator[W]:
    """A fresh namespace plus ``factory(name)`` (a :class:`NetnsWorker`), both torn down on exit."""
    with netns(prefix, length=length, lo_up=lo_up) as name:
        worker = factory(name)
        try:
            yield worker
        finally:
            worker.close()


@contextlib.contextmanager
def trace_buffer() -> Iterator[Callable[[], str]]:
    """A reader of the kernel trace buffer (``bpf_printk`` records) that does not consume it:
    tracefs mounted on a private temp dir (the one tracefs instance, so others' records are in
    it too: match on something unique), unmounted after. Poll it; never read once and assert."""
    mnt = tempfile.mkdtemp(prefix="caltrace")
    run("mount", "-t", "tracefs", "nodev", mnt)
    try:

        def read() -> str:
            with open(os.path.join(mnt, "trace"), errors="replace") as f:
                return f.read()

        yield read
    finally:
        subprocess.run(["umount", mnt], check=False, capture_output=True)
        os.rmdir(mnt)
