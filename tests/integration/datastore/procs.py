"""Worker processes for the conformance suite: every other process opens its own backend.

Run as ``python procs.py '<spec json>' <command> [args...]``; a spec is a JSON object built by
conftest.py (``{"kind": "local", "path": ...}`` or ``{"kind": "etcdv3", "endpoints": ...,
"prefix": ...}`` or ``{"kind": "kubernetes", "url": ...}``), so nothing but plain data crosses
the process boundary. Each command prints one JSON result line; ``counter`` first prints
``ready`` and waits for a line on stdin, so the parent can release all workers at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from calico.datastore import Backend, UpdateConflictError

HERE = Path(__file__).resolve().parent


def open_backend(spec: dict[str, Any]) -> Backend:
    """Open the keyspace ``spec`` describes (in this process)."""
    if spec["kind"] == "local":
        from calico.datastore.local import LocalBackend

        return LocalBackend(spec["path"], **spec.get("options", {}))
    if spec["kind"] == "etcdv3":
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        from etcd_fixture import make_etcd_backend

        return make_etcd_backend(spec["endpoints"], spec["prefix"])
    if spec["kind"] == "kubernetes":
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        from kdd_payload import PayloadBackend

        from calico.datastore.config import DatastoreConfig
        from calico.datastore.kubernetes import KubernetesBackend

        config = DatastoreConfig("kubernetes", extra={"k8sAPIEndpoint": spec["url"]})
        return PayloadBackend(KubernetesBackend(config))  # type: ignore[return-value]
    raise ValueError(f"unknown backend kind {spec['kind']!r}")


def spawn(spec: dict[str, Any], *args: str) -> subprocess.Popen[str]:
    """Start a worker; the caller owns it (reads its output, waits for it)."""
    return subprocess.Popen(
        [sys.executable, str(HERE / "procs.py"), json.dumps(spec), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_ready(proc: subprocess.Popen[str]) -> None:
    """Wait for a worker's ``ready`` line; on anything else fail with its stderr."""
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise AssertionError(f"worker not ready ({line!r}): {proc.stderr.read()}")


def run(spec: dict[str, Any], *args: str, timeout: float = 30) -> dict[str, Any]:
    """Run a worker to completion and return its JSON result."""
    proc = spawn(spec, *args)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"worker {args} failed ({proc.returncode}): {err}"
    return json.loads(out.strip().splitlines()[-1])


def _counter(backend: Backend, key: str, increments: int) -> dict[str, Any]:
    print("ready", flush=True)
    sys.stdin.readline()
    conflicts = 0
    for _ in range(increments):
        while True:
            kv = backend.get(key)
            try:
                backend.update(key, json.dumps(json.loads(kv.value) + 1), kv.revision)
                break
            except UpdateConflictError:
                conflicts += 1
    return {"conflicts": conflicts}


def _update(backend: Backend, key: str, revision: str, value: str) -> dict[str, Any]:
    try:
        return {"ok": True, "revision": backend.update(key, value, int(revision)).revision}
    except UpdateConflictError as exc:
        return {"ok": False, "error": type(exc).__name__}


def _apply(backend: Backend, key: str, value: str) -> dict[str, Any]:
    return {"revision": backend.apply(key, value).revision}


COMMANDS = {"counter": _counter, "update": _update, "apply": _apply}


def main(argv: list[str]) -> None:
    spec, command, *args = argv
    backend = open_backend(json.loads(spec))
    try:
        if command == "counter":
            args[1:] = [int(args[1])]  # type: ignore[list-item]
        result = COMMANDS[command](backend, *args)
    finally:
        backend.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
