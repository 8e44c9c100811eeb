"""Conntrack counters by original tuple, from one ctnetlink dump per address family.

Why a dump and not events: the counters the collector reports are cumulative per connection,
and a periodic dump reads them for every tracked connection at once; the collector only keeps
the entries whose tuples it saw a verdict for.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from calico.felix.collector.nflog import FiveTuple

log = logging.getLogger(__name__)


class CtCounters(NamedTuple):
    orig_packets: int
    orig_bytes: int
    reply_packets: int
    reply_bytes: int


def _get(msg: Any, name: str) -> Any:
    for key, value, *_ in msg["attrs"]:
        if key == name:
            return value
    return None


def _tuple(nested: Any) -> FiveTuple | None:
    if nested is None:
        return None
    ip, proto = _get(nested, "CTA_TUPLE_IP"), _get(nested, "CTA_TUPLE_PROTO")
    if ip is None or proto is None:
        return None
    src = _get(ip, "CTA_IP_V4_SRC") or _get(ip, "CTA_IP_V6_SRC")
    dst = _get(ip, "CTA_IP_V4_DST") or _get(ip, "CTA_IP_V6_DST")
    num = _get(proto, "CTA_PROTO_NUM")
    if src is None or dst is None or num is None:
        return None
    sport = _get(proto, "CTA_PROTO_SRC_PORT") or 0
    dport = _get(proto, "CTA_PROTO_DST_PORT") or 0
    return FiveTuple(int(num), str(src), str(dst), int(sport), int(dport))


def _counts(nested: Any) -> tuple[int, int]:
    if nested is None:
        return 0, 0
    return int(_get(nested, "CTA_COUNTERS_PACKETS") or 0), int(
        _get(nested, "CTA_COUNTERS_BYTES") or 0
    )


def entries_from_messages(
    messages: Iterable[Any],
) -> Iterator[tuple[FiveTuple, FiveTuple, CtCounters]]:
    """(original tuple, reply tuple reversed, counters) per decodable conntrack message."""
    for msg in messages:
        orig = _tuple(_get(msg, "CTA_TUPLE_ORIG"))
        reply = _tuple(_get(msg, "CTA_TUPLE_REPLY"))
        if orig is None or reply is None:
            continue
        op, ob = _counts(_get(msg, "CTA_COUNTERS_ORIG"))
        rp, rb = _counts(_get(msg, "CTA_COUNTERS_REPLY"))
        # The reply tuple seen from the originator's side: the post-NAT view of the connection.
        seen = FiveTuple(reply.proto, reply.dst, reply.src, reply.dport, reply.sport)
        yield orig, seen, CtCounters(op, ob, rp, rb)


def dump(
    families: Iterable[int] = (socket.AF_INET, socket.AF_INET6),
) -> dict[FiveTuple, CtCounters]:
    """Every conntrack entry of this namespace, keyed by its original and its post-NAT tuple."""
    from pyroute2.netlink.nfnetlink.nfctsocket import NFCTSocket

    out: dict[FiveTuple, CtCounters] = {}
    for family in families:
        ct = NFCTSocket(nfgen_family=family)
        try:
            for orig, seen, counters in entries_from_messages(ct.dump()):
                out[orig] = counters
                out.setdefault(seen, counters)
        finally:
            ct.close()
    return out
