"""BIRD's CLI protocol (reply codes, continuations, errors) against a fake control socket, and
``calicoctl node status``'s table and name parsing."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico import birdctl
from calico.calicoctl.node_status import peer_address, peer_table


def _serve(path: Path, reply: bytes) -> threading.Thread:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def run() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"0001 BIRD 1.6.8 ready.\n")
            conn.recv(1024)
            conn.sendall(reply)
        srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture
def sock(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "b.ctl"


def test_show_protocols(sock: Path) -> None:
    reply = (
        b"2002-name     proto    table    state  since       info\n"
        b"1002-device1  Device   master   up     12:00:01    \n"
        b" Mesh_10_0_0_2 BGP      master   up     12:00:03    Established   \n"
        b" Node_fd00__2_port_179 BGP master start 2026-12-01 12:00:04  Connect\n"
        b"0000 \n"
    )
    _serve(sock, reply)
    rows = birdctl.show_protocols(str(sock))
    assert [r.name for r in rows] == ["device1", "Mesh_10_0_0_2", "Node_fd00__2_port_179"]
    assert rows[1] == birdctl.Protocol(
        "Mesh_10_0_0_2", "BGP", "master", "up", "12:00:03", "Established"
    )
    assert rows[2].since == "2026-12-01 12:00:04" and rows[2].info == "Connect"


def test_error_code_raises(sock: Path) -> None:
    _serve(sock, b"9001 syntax error\n")
    with pytest.raises(birdctl.BirdError, match="syntax error"):
        birdctl.command(str(sock), "show nonsense")


def test_unreachable_socket(tmp_path: Path) -> None:
    with pytest.raises(birdctl.BirdError, match="No such file"):
        birdctl.command(str(tmp_path / "none.ctl"), "show protocols")


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(_word, _word, _word, st.sampled_from(["up", "start", "down"]), _word), max_size=6
    )
)
def test_reply_round_trip(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, ...]]
) -> None:
    path = tmp_path_factory.mktemp("s") / "b.ctl"
    lines = [b"2002-name proto table state since info\n"]
    for i, (name, proto, table, state, info) in enumerate(rows):
        prefix = b"1002-" if i == 0 else b" "
        lines.append(prefix + f"{name} {proto} {table} {state} 12:00:00 {info}\n".encode())
    lines.append(b"0000 \n")
    _serve(path, b"".join(lines))
    got = birdctl.show_protocols(str(path))
    assert [(p.name, p.proto, p.table, p.state, p.since, p.info) for p in got] == [
        (n, p, t, s, "12:00:00", i) for n, p, t, s, i in rows
    ]


def test_status_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "run" / "st.json"
    assert birdctl.read_status(path) == {}
    birdctl.write_status(path, {"bird": "bird.cfg: syntax error"})
    assert birdctl.read_status(path) == {"bird": "bird.cfg: syntax error"}
    path.write_text("not json")
    assert birdctl.read_status(path) == {}


@pytest.mark.parametrize(
    ("rest", "version", "addr"),
    [
        ("10_192_0_3", 4, "10.192.0.3"),
        ("10_0_0_1_port_1790", 4, "10.0.0.1"),
        ("fd00__3", 6, "fd00::3"),
        ("ac13__57_port_50", 6, "ac13::57"),
    ],
)
def test_peer_address(rest: str, version: int, addr: str) -> None:
    assert peer_address(rest, version) == addr


def test_peer_table_layout() -> None:
    """As upstream's: centred headers (extra space on the right), left-aligned cells."""
    table = peer_table(
        [
            ["10.250.12.185", "node-to-node mesh", "start", "17:37:59", "Connect"],
            ["10.250.12.1", "node specific", "up", "17:38:13", "Established"],
        ]
    )
    assert table.splitlines() == [
        "+---------------+-------------------+-------+----------+-------------+",
        "| PEER ADDRESS  |     PEER TYPE     | STATE |  SINCE   |    INFO     |",
        "+---------------+-------------------+-------+----------+-------------+",
        "| 10.250.12.185 | node-to-node mesh | start | 17:37:59 | Connect     |",
        "| 10.250.12.1   | node specific     | up    | 17:38:13 | Established |",
        "+---------------+-------------------+-------+----------+-------------+",
    ]


def _proc(tmp_path: Path, argvs: list[list[str]]) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    for pid, argv in enumerate(argvs, start=100):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return proc


@pytest.mark.parametrize(
    ("argvs", "running"),
    [
        ([["/usr/bin/python3", "/usr/local/bin/calico", "component", "felix"]], True),
        ([["calico", "component", "confd", "--confdir", "/x"]], True),
        ([["/usr/sbin/bird", "-R", "-s", "/var/run/calico/bird.ctl"]], True),
        ([["calico", "component", "cni", "daemon"], ["birdc", "show"], ["felix-like"]], False),
        ([], False),
    ],
)
def test_calico_running(tmp_path: Path, argvs: list[list[str]], running: bool) -> None:
    from calico.calicoctl.node_status import calico_running

    assert calico_running(_proc(tmp_path, argvs)) is running
