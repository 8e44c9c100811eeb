"""The fan-out fast path (``calico.typha.fanout``): caught-up clients are parked and written
in one pass per crumb, mixed compression modes each get their own frames, metrics count every
client, and a client whose socket stops draining is handed back to its own task while the
parked ones keep receiving."""

from __future__ import annotations

import socket
import time

from typha_helpers import ServerThread, State, eventually, hello, send

from calico.model import GlobalConfigKey
from calico.syncer.api import SyncStatus, Update, UpdateType
from calico.syncer.typhaclient import ClientSettings, SyncClient


def cfg(name: str, value: str, rev: str = "1") -> Update:
    return Update(GlobalConfigKey(name), value, rev, UpdateType.NEW)


def test_parked_clients_get_every_delta_in_order_with_mixed_compression() -> None:
    with ServerThread() as srv:
        srv.feed("felix", [cfg("a", "0")], SyncStatus.IN_SYNC)
        states = [State() for _ in range(12)]
        clients = [
            SyncClient(ClientSettings(srv.addr, compression=i % 2 == 0), st)
            for i, st in enumerate(states)
        ]
        for c in clients:
            c.start()
        try:
            for st in states:
                st.wait(lambda s: s.status is SyncStatus.IN_SYNC and len(s.state) == 1)
            fan = srv.server.fanouts["felix"]
            eventually(lambda: len(fan.parked) == 12)
            block = srv.metrics.breadcrumb_block.value("felix")
            kvs_count = srv.metrics.kvs_per_msg.labels("felix")._count.get()
            for i in range(1, 6):
                srv.feed("felix", [cfg("a", str(i), str(i + 1)), cfg(f"n{i}", "x")])
                time.sleep(0.05)  # one crumb per feed
            for st in states:
                st.wait(lambda s: s.state.get(GlobalConfigKey("a")) == "5" and len(s.state) == 6)
            # every client parked again and was counted per crumb, not once per group
            eventually(lambda: len(fan.parked) == 12)
            assert srv.metrics.breadcrumb_block.value("felix") - block == 12 * 5
            assert srv.metrics.kvs_per_msg.labels("felix")._count.get() - kvs_count == 12 * 5
            srv.feed("felix", SyncStatus.RESYNC_IN_PROGRESS)
            for st in states:
                st.wait(lambda s: s.status is SyncStatus.RESYNC_IN_PROGRESS)
                assert st.statuses.count(SyncStatus.IN_SYNC) == 1  # a status only on change
        finally:
            for c in clients:
                c.stop()


def test_a_client_that_stops_reading_leaves_the_fast_path_alone() -> None:
    with ServerThread(write_timeout=1.0) as srv:
        srv.feed("felix", [cfg("a", "0")], SyncStatus.IN_SYNC)
        good = State()
        c = SyncClient(ClientSettings(srv.addr), good)
        c.start()
        host, port = srv.addr.rsplit(":", 1)
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect((host, int(port)))
        try:
            send(stuck, hello())
            good.wait(lambda s: s.status is SyncStatus.IN_SYNC)
            fan = srv.server.fanouts["felix"]
            eventually(lambda: len(fan.parked) == 2)
            for i in range(40):  # ~4 MB of deltas the stuck client never reads
                srv.feed("felix", [cfg(f"big{i}", "x" * 100_000, str(i + 2))])
            good.wait(lambda s: len(s.state) == 41)
            eventually(lambda: srv.rejected("slow-reader") == 1, timeout=15)
            srv.feed("felix", [cfg("after", "ok")])
            good.wait(lambda s: s.state.get(GlobalConfigKey("after")) == "ok")
            eventually(lambda: len(fan.parked) == 1)
            assert c.connections == 1
        finally:
            stuck.close()
            c.stop()
