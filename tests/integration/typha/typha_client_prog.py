"""A Typha client process for the integration tests: ``python typha_client_prog.py ADDR OUT``.

It syncs (restart-aware, through a DedupeBuffer) until SIGTERM, then writes its final view as
JSON ``{key path: v1 JSON value}`` to OUT, plus the number of connections it made, and exits 0.
"""

from __future__ import annotations

import json
import signal
import sys
import threading

from calico.model.values import encode_value
from calico.syncer import DedupeBuffer
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.syncer.typhaclient import ClientSettings, SyncClient


class View:
    def __init__(self) -> None:
        self.state: dict = {}
        self.status: SyncStatus | None = None

    def on_status_updated(self, status: SyncStatus) -> None:
        self.status = status

    def on_updates(self, updates: list[Update]) -> None:
        for u in updates:
            if u.update_type is UpdateType.DELETED:
                self.state.pop(u.key, None)
            else:
                self.state[u.key] = u.value


def main() -> None:
    addr, out = sys.argv[1], sys.argv[2]
    view = View()
    buf = DedupeBuffer(view)
    client = SyncClient(ClientSettings(addr), buf)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    buf.start()
    client.start()
    print("started", flush=True)
    done.wait()
    client.stop()
    buf.wait_idle()
    buf.stop()
    state = {k.default_path(): encode_value(k, v) for k, v in view.state.items()}
    with open(out, "w") as f:
        json.dump({"status": view.status.value if view.status else None,
                   "connections": client.connections, "state": state}, f)  # fmt: skip


if __name__ == "__main__":
    main()
