"""Userspace conntrack expiry (``cpy_v4_ct``, ``cpy_v6_ct``) with upstream's BPFConntrackTimeouts.

Every ``interval`` seconds the scanner reads each entry and deletes it when it has been idle
longer than its state's timeout (measured on ``last_seen``, in the programs' clock:
CLOCK_MONOTONIC == bpf_ktime_get_ns). Entries younger than CreationGracePeriod are kept. An
entry seen again between the read and the delete is re-read first, so a flow that just became
active again is not cut (upstream's cleanup queue solves the same race with a BPF program).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from calico.durations import DurationError, parse_duration
from calico.felix.bpf.maps import (
    CT_FIN_SEEN,
    CT_LEG_A,
    CT_LEG_B,
    CT_RST_SEEN,
    CTEntry,
    Maps,
    decode_ct,
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUTS = (
    "CreationGracePeriod=10s,TCPSynSent=20s,TCPEstablished=1h,TCPFinsSeen=Auto,"
    "TCPResetSeen=40s,UDPTimeout=60s,GenericTimeout=10m,ICMPTimeout=5s"
)
FIN_SYSCTL = "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_time_wait"
FIN_FALLBACK = 30.0


@dataclass(frozen=True)
class Timeouts:
    creation_grace: float = 10.0
    tcp_syn_sent: float = 20.0
    tcp_established: float = 3600.0
    tcp_fins_seen: float = 30.0
    tcp_reset_seen: float = 40.0
    udp: float = 60.0
    generic: float = 600.0
    icmp: float = 5.0

    @classmethod
    def parse(cls, values: Mapping[str, str]) -> Timeouts:
        """From BPFConntrackTimeouts' key=value map; ValueError names a bad key or value."""
        names = {
            "CreationGracePeriod": "creation_grace",
            "TCPSynSent": "tcp_syn_sent",
            "TCPEstablished": "tcp_established",
            "TCPFinsSeen": "tcp_fins_seen",
            "TCPResetSeen": "tcp_reset_seen",
            "UDPTimeout": "udp",
            "GenericTimeout": "generic",
            "ICMPTimeout": "icmp",
        }
        kw: dict[str, float] = {}
        for key, text in values.items():
            attr = names.get(key)
            if attr is None:
                raise ValueError(f"unknown BPFConntrackTimeouts key {key!r}")
            if text == "Auto":
                kw[attr] = _auto(key)
                continue
            try:
                kw[attr] = parse_duration(text)
            except DurationError as e:
                raise ValueError(f"BPFConntrackTimeouts {key}: {e}") from None
        return cls(**kw)

    def timeout(self, entry: CTEntry) -> float:
        proto = entry.proto & 0xFF
        if proto == 6:
            if entry.legs & CT_RST_SEEN:
                return self.tcp_reset_seen
            if entry.legs & CT_FIN_SEEN:
                return self.tcp_fins_seen
            if entry.legs & (CT_LEG_A | CT_LEG_B) == CT_LEG_A | CT_LEG_B:
                return self.tcp_established
            return self.tcp_syn_sent
        if proto == 17:
            return self.udp
        if proto in (1, 58):  # ICMP, ICMPv6
            return self.icmp
        return self.generic


def _auto(key: str) -> float:
    """``Auto``: the kernel's nf_conntrack value (only TCPFinsSeen has one upstream)."""
    if key != "TCPFinsSeen":
        raise ValueError(f"BPFConntrackTimeouts {key}: Auto is only valid for TCPFinsSeen")
    try:
        with open(FIN_SYSCTL) as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return FIN_FALLBACK


def monotonic_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def scan(maps: Maps, timeouts: Timeouts, now_ns: Callable[[], int] = monotonic_ns) -> int:
    """Delete expired entries once; returns how many were deleted."""
    deleted = 0
    now = now_ns()
    for ct in (maps.ct, maps.ct6):
        for key, value in list(ct.items()):
            entry = decode_ct(key, value)
            if now - entry.created_ns < timeouts.creation_grace * 1e9:
                continue
            if now - entry.last_seen_ns <= timeouts.timeout(entry) * 1e9:
                continue
            again = ct.lookup(key)
            if again is not None and decode_ct(key, again).last_seen_ns != entry.last_seen_ns:
                continue  # traffic arrived meanwhile
            if ct.delete(key):
                deleted += 1
    return deleted


class ConntrackScanner:
    """A daemon thread running :func:`scan` every ``interval`` seconds until ``stop()``."""

    def __init__(self, maps: Maps, timeouts: Timeouts, interval: float = 10.0) -> None:
        self._maps, self._timeouts, self._interval = maps, timeouts, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bpf-ct-scanner", daemon=True)
        self.deleted = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.deleted += scan(self._maps, self._timeouts)
            except Exception:  # a failed scan must not end expiry for good
                log.exception("BPF conntrack scan failed; retrying next interval")
