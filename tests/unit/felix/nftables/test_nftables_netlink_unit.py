"""Netlink element encoding without a kernel: exact bytes (as ``nft --debug=netlink`` shows
libnftables sending them) and the inputs left to libnftables."""

from __future__ import annotations

import struct
from socket import SO_RCVBUF, SO_SNDBUF
from typing import Any

import pytest

from calico import nlmsg
from calico.felix.nftables.model import Chain, NftRule
from calico.felix.nftables.netlink import (
    IFNAMSIZ,
    INTERVAL_END,
    MAX_BATCH_BYTES,
    NFT_MSG_DELSETELEM,
    NFT_MSG_NEWSETELEM,
    SO_RCVBUFFORCE,
    SO_SNDBUFFORCE,
    ElementBatch,
    NetlinkElements,
    Unencodable,
    encode_key,
    map_elem,
    set_member_elems,
)
from calico.felix.nftables.table import NftablesTable
from calico.felix.rules import exprs as x

PORTS = ("ipv4_addr", "inet_proto", "inet_service")


def attrs(buf: bytes) -> list[tuple[int, bytes]]:
    """(type without flag bits, payload) of each attribute in ``buf``."""
    out, off = [], 0
    while off < len(buf):
        length, kind = struct.unpack_from("=HH", buf, off)
        out.append((kind & 0x3FFF, buf[off + 4 : off + length]))
        off += length + (-length % 4)
    return out


def elem_fields(elem: bytes) -> dict[int, bytes]:
    ((kind, body),) = attrs(elem)
    assert kind == 1  # NFTA_LIST_ELEM
    return dict(attrs(body))


def key_of(elem: bytes) -> bytes:
    ((kind, value),) = attrs(elem_fields(elem)[1])
    assert kind == 1  # NFTA_DATA_VALUE
    return value


def test_keys_match_libnftables_wire_format() -> None:
    assert encode_key("10.1.0.1", "ipv4_addr") == bytes.fromhex("0a010001")
    assert encode_key("2001:db8::1", "ipv6_addr") == bytes.fromhex("20010db8" + "00" * 10 + "0001")
    # Concatenation fields are padded to 4 bytes each (nft: 0100000a 00000006 00005000).
    assert encode_key(("10.0.0.1", 6, 80), PORTS) == bytes.fromhex("0a0000010600000000500000")
    assert encode_key("cali1", "ifname") == b"cali1".ljust(IFNAMSIZ, b"\0")


def test_interval_members_are_start_and_end_elements() -> None:
    start, end = set_member_elems("10.0.0.0/28", "ipv4_addr", True)
    assert key_of(start) == bytes.fromhex("0a000000") and 3 not in elem_fields(start)
    assert key_of(end) == bytes.fromhex("0a000010")
    assert elem_fields(end)[3] == struct.pack("!I", INTERVAL_END)
    one = set_member_elems("10.1.0.1", "ipv4_addr", True)
    assert [key_of(e) for e in one] == [bytes.fromhex("0a010001"), bytes.fromhex("0a010002")]
    rng = set_member_elems("10.0.0.3-10.0.0.9", "ipv4_addr", True)
    assert [key_of(e) for e in rng] == [bytes.fromhex("0a000003"), bytes.fromhex("0a00000a")]


def test_interval_reaching_the_top_is_open_ended() -> None:
    for member, typ in (("255.255.255.0/24", "ipv4_addr"), ("::/0", "ipv6_addr")):
        (only,) = set_member_elems(member, typ, True)
        fields = elem_fields(only)
        assert 3 not in fields  # no INTERVAL_END: nothing follows
        assert fields[6] == bytes([1, 4, 1, 0, 0, 0])  # libnftnl "interval open" userdata


def test_plain_set_member_is_one_element() -> None:
    (only,) = set_member_elems("10.0.0.1", "ipv4_addr", False)
    assert key_of(only) == bytes.fromhex("0a000001") and set(elem_fields(only)) == {1}


def test_verdict_map_elements() -> None:
    fields = elem_fields(map_elem("cali1", "ifname", ("goto", "chain-x")))
    ((kind, verdict),) = attrs(fields[2])
    assert kind == 2  # NFTA_DATA_VERDICT
    assert dict(attrs(verdict)) == {1: struct.pack("!i", -4), 2: b"chain-x\0"}
    accept = dict(attrs(attrs(elem_fields(map_elem("c", "ifname", ("accept", "")))[2])[0][1]))
    assert accept == {1: struct.pack("!i", 1)}
    assert set(elem_fields(map_elem("cali1", "ifname", None))) == {1}  # removal: key only


@pytest.mark.parametrize(
    ("value", "typ", "interval"),
    [
        ("cali0123456789ab", "ifname", False),  # 16 chars: no room for the NUL
        ("cali*", "ifname", False),  # wildcard names are intervals in nft
        ("", "ifname", False),
        ("10.0.0.0/24", "ipv4_addr", False),  # a prefix needs an interval set
        ("::1", "ipv4_addr", False),
        ("10.0.0.1", "ipv6_addr", True),
        ("10.0.0.9-10.0.0.1", "ipv4_addr", True),  # empty range
        (("10.0.0.1", 6), PORTS, False),
        (("10.0.0.1", 6, 70000), PORTS, False),
        ("1-5", "inet_service", True),  # only address intervals are encoded
        (5, "mark", False),
    ],
)
def test_unencodable_inputs_are_left_to_libnftables(
    value: object, typ: object, interval: bool
) -> None:
    with pytest.raises(Unencodable):
        set_member_elems(value, typ, interval)  # type: ignore[arg-type]


def test_unknown_verdict_is_unencodable() -> None:
    with pytest.raises(Unencodable):
        map_elem("cali1", "ifname", ("queue", ""))


def test_batch_splits_big_deltas_and_frames_messages() -> None:
    batch = ElementBatch("inet", "calico")
    elems = [
        e
        for i in range(4000)
        for e in set_member_elems(f"10.{i // 250}.{i % 250}.1", "ipv4_addr", True)
    ]
    batch.add(False, "s", elems)
    batch.add(True, "s", [])
    assert len(batch.messages) > 1 and all(k == NFT_MSG_NEWSETELEM for k, _, _ in batch.messages)
    assert sum(len(m[2]) for m in batch.messages) == len(elems)
    batch.add(True, "t", elems[:2])
    data, seqs = batch.encode(100)
    assert seqs == list(range(101, 101 + len(batch.messages)))
    assert batch.messages[-1][0] == NFT_MSG_DELSETELEM
    # Begin, one netlink message per element message, end; every length field consistent.
    off, types = 0, []
    while off < len(data):
        length, msg_type = struct.unpack_from("=IH", data, off)
        assert length <= MAX_BATCH_BYTES // 4 + 200
        types.append(msg_type)
        off += length
    assert off == len(data)
    assert types[0] == 0x10 and types[-1] == 0x11 and len(types) == len(batch.messages) + 2
    # Only the last message asks for an ack (design/felix-nftables.md "Transactions over netlink").
    acked = [seq for _t, flags, seq, _b in nlmsg.split(data) if flags & nlmsg.NLM_F_ACK]
    assert acked == [seqs[-1]]
    with pytest.raises(Unencodable):
        ElementBatch("nosuchfamily", "t", batch.messages).encode(1)


class CappedSocket:
    """A netlink socket whose buffers cannot grow past ``cap`` (no CAP_NET_ADMIN, sysctl
    caps): ``SO_*BUFFORCE`` is refused, ``SO_*BUF`` is capped and reads back doubled."""

    def __init__(self, cap: int) -> None:
        self.cap, self.sizes, self.sent = cap, {SO_SNDBUF: 0, SO_RCVBUF: 0}, []

    def getsockopt(self, level: int, opt: int) -> int:
        return self.sizes[opt]

    def setsockopt(self, level: int, opt: int, value: int) -> None:
        if opt in (SO_SNDBUFFORCE, SO_RCVBUFFORCE):
            raise PermissionError(1, "Operation not permitted")
        self.sizes[opt] = 2 * min(value, self.cap)

    def sendall(self, data: bytes) -> None:
        self.sent.append(data)


def big_batch(n: int) -> ElementBatch:
    batch = ElementBatch("inet", "calico")
    batch.add(False, "s", [b"x" * 1000] * n)
    return batch


def test_batch_over_the_socket_buffers_is_not_sent() -> None:
    sender = NetlinkElements()
    sock = CappedSocket(cap=300 * 1024)
    sender._sock = sock  # type: ignore[assignment]
    with pytest.raises(Unencodable, match="socket buffer"):
        sender.send(big_batch(700))  # ~700 KB > 600 KiB
    assert sock.sent == []  # nothing reached the kernel
    assert sock.sizes[SO_SNDBUF] == 600 * 1024


def test_table_sends_an_unsendable_batch_through_libnftables() -> None:
    calls: list[dict[str, Any]] = []

    class Nft:
        def json_cmd(self, root: dict[str, Any]) -> tuple[int, Any, str]:
            calls.append(root)
            if "list" in root["nftables"][0]:
                return 1, "", "Error: No such file or directory"
            return 0, "", ""

    sender = NetlinkElements()
    sock = CappedSocket(cap=64 * 1024)
    sender._sock = sock  # type: ignore[assignment]
    table = NftablesTable("calico", nft=Nft(), netlink=sender)
    table.set_chain(Chain("c", [NftRule([x.ACCEPT], "k" * 100) for _ in range(3000)]))
    result = table.apply()
    assert result.ok and not result.netlink and result.commands > 3000
    assert sock.sent == [] and len(calls) == 2  # readback, then the transaction
