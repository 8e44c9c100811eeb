"""Worker process for the IPAM race tests: ``python ipam_worker.py '<spec>' <host> <n> <tag>``.

Opens its own backend, waits for a line on stdin (so the parent can start all workers at
once), allocates ``n`` single addresses with handles ``<tag>-<i>`` and prints them as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from calico.datastore.backend import Backend
from calico.datastore.client import Client
from calico.ipam import IPAMClient

DATASTORE_TESTS = Path(__file__).resolve().parent.parent / "datastore"


def open_backend(spec: dict[str, Any]) -> Backend:
    if spec["kind"] == "local":
        from calico.datastore.local import LocalBackend

        return LocalBackend(spec["path"])
    sys.path.insert(0, str(DATASTORE_TESTS))
    from etcd_fixture import make_etcd_backend

    return make_etcd_backend(spec["endpoints"], spec["prefix"])


def main() -> None:
    spec, host, count, tag = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    backend = open_backend(spec)
    ipam = IPAMClient(Client(backend))
    print("ready", flush=True)
    sys.stdin.readline()
    got = []
    for i in range(count):
        v4, _ = ipam.auto_assign(1, 0, f"{tag}-{i}", {"node": host}, host)
        got.append(str(v4[0].ip))
    print(json.dumps(got), flush=True)
    backend.close()


if __name__ == "__main__":
    main()
