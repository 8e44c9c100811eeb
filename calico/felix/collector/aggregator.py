"""Per-interval flow aggregation: NFLOG verdicts name the flows, conntrack counts them.

A connection's first packet crosses policy once per direction it is policed in (egress at the
source's chain: reporter Src; ingress at the destination's: reporter Dst), so each NFLOG trace
registers (direction, 5-tuple) under a flow key. Allowed connections are then counted from
conntrack deltas (in/out relative to the reporting endpoint): a dump's counters while the
entry lives, its DESTROY event's final counters when it goes (or the dump noticing it gone, if
the event was lost); denied packets never get a confirmed conntrack entry, so each denied NFLOG
counts one packet itself. An allowed connection is started (counted, sampled) when conntrack
first shows it, because only conntrack knows where it was opened to: policy saw it after DNAT,
and a connection to a service's cluster IP and port gets the service in its key
(``dest_service_*``). ``flush`` turns the
interval into Goldmane ``Flow`` messages and starts the next one. Source addresses and ports
(a calico-py extension, design/goldmane.md "Source IPs and ports") are sampled per flow: the
first ``SAMPLE_SIZE`` distinct values of the interval; a source no endpoint owns also puts its
address in the key. Not thread-safe: the collector calls it from one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from calico.felix.collector.conntrack import CtCounters, Entry
from calico.felix.collector.lookups import Endpoint, Hit, Service
from calico.felix.collector.nflog import PROTO_NAMES, FiveTuple
from calico.proto.goldmane import api_pb2 as pb

SAMPLE_SIZE = 10  # as Goldmane's bound (calico.goldmane.types)
RECENT_SIZE = 10000  # unmatched DESTROY events kept until the next dump (see on_destroyed)
NO_SERVICE = Service()
TraceKey = tuple[tuple[int, str, str, str, int, int, int, object], ...]


@dataclass(frozen=True)
class FlowKey:
    reporter: int
    source: Endpoint
    dest: Endpoint
    dest_port: int
    proto: str
    action: int
    trace: tuple[pb.PolicyHit, ...] = field(compare=False, hash=False)
    pending: tuple[pb.PolicyHit, ...] = field(compare=False, hash=False)
    trace_key: tuple[TraceKey, TraceKey] = ((), ())
    source_ip: str = ""  # only for a source no endpoint owns (type Network)
    service: Service = NO_SERVICE  # the destination service, when opened to its cluster IP
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Hashed once: every conntrack delta and DESTROY event looks its key up (the nested
        # endpoints and traces made each lookup cost microseconds).
        object.__setattr__(
            self,
            "_hash",
            hash(
                (
                    self.reporter,
                    self.source,
                    self.dest,
                    self.dest_port,
                    self.proto,
                    self.action,
                    self.trace_key,
                    self.source_ip,
                    self.service,
                )
            ),
        )

    def __hash__(self) -> int:
        return self._hash


@dataclass
class _Counts:
    packets_in: int = 0
    packets_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    started: int = 0
    completed: int = 0
    live: int = 0
    ips: set[str] = field(default_factory=set)
    ports: set[int] = field(default_factory=set)

    def sample(self, tup: FiveTuple) -> None:
        if len(self.ips) < SAMPLE_SIZE:
            self.ips.add(tup.src)
        if tup.sport and len(self.ports) < SAMPLE_SIZE:  # 0: a protocol without ports
            self.ports.add(tup.sport)


_ZERO = CtCounters(0, 0, 0, 0)


@dataclass
class _Conn:
    key: FlowKey  # the verdict's key; with its service once conntrack names the original dst
    verdict_key: FlowKey
    last: CtCounters = _ZERO
    started: bool = False  # counted as started (at its first conntrack sighting)


OrigDst = tuple[str, int] | None
ServiceFor = Callable[[str, str, int], Service | None]


def hits_to_proto(hits: Sequence[Hit], trigger: Callable[[Hit], Hit | None]) -> list[pb.PolicyHit]:
    """Goldmane PolicyHits, ``policy_index`` = position in the trace; end-of-tier hits carry
    the tier's last policy as their trigger (and its name, as upstream)."""
    out = []
    for index, h in enumerate(hits):
        msg = pb.PolicyHit(
            kind=h.kind,
            namespace=h.namespace,
            name=h.name,
            tier=h.tier,
            action=h.action,
            policy_index=index,
            rule_index=h.rule_index,
        )
        if h.end_of_tier:
            t = trigger(h)
            if t is not None:
                msg.name, msg.namespace = t.name, t.namespace
                msg.trigger.CopyFrom(
                    pb.PolicyHit(
                        kind=t.kind,
                        namespace=t.namespace,
                        name=t.name,
                        tier=t.tier,
                        action=h.action,
                        policy_index=index,
                        rule_index=-1,
                    )
                )
        out.append(msg)
    return out


def _trace_key(hits: Sequence[pb.PolicyHit]) -> TraceKey:
    return tuple(
        (
            h.kind,
            h.namespace,
            h.name,
            h.tier,
            h.action,
            h.policy_index,
            h.rule_index,
            h.trigger.SerializeToString() if h.HasField("trigger") else b"",
        )
        for h in hits
    )


class Aggregator:
    def __init__(self, clock: Callable[[], float], service_for: ServiceFor | None = None) -> None:
        self.clock = clock
        self.service_for = service_for  # (proto, ip, port) -> the service there
        self.interval_start = int(clock())
        self._counts: dict[FlowKey, _Counts] = {}
        self._conns: dict[tuple[bool, FiveTuple], _Conn] = {}
        self._denied_seen: set[tuple[bool, FiveTuple]] = set()
        # Final counters of destroyed entries no registered connection matched yet: a
        # connection whose NFLOG verdict is handled after its DESTROY event still gets them
        # when the next dump finds it gone.
        self._recent: dict[FiveTuple, tuple[CtCounters, OrigDst]] = {}
        self.destroyed = 0  # registered connections completed by a DESTROY event

    @property
    def tracked(self) -> int:
        """Allowed connections currently counted from conntrack."""
        return len(self._conns)

    def pending_flows(self) -> dict[int, int]:
        """Flow keys of the interval so far, by action (Goldmane's enum)."""
        out: dict[int, int] = {}
        for key in list(self._counts):
            out[key.action] = out.get(key.action, 0) + 1
        return out

    def key_for(
        self,
        inbound: bool,
        tup: FiveTuple,
        src: Endpoint,
        dst: Endpoint,
        hits: Sequence[pb.PolicyHit],
        pending: Sequence[pb.PolicyHit],
        action: int,
    ) -> FlowKey:
        return FlowKey(
            reporter=pb.Dst if inbound else pb.Src,
            source=src,
            dest=dst,
            dest_port=tup.dport,
            proto=PROTO_NAMES.get(tup.proto, str(tup.proto)),
            action=action,
            trace=tuple(hits),
            pending=tuple(pending),
            trace_key=(_trace_key(hits), _trace_key(pending)),
            source_ip=tup.src if src.type == pb.Network else "",
        )

    def _counts_for(self, key: FlowKey) -> _Counts:
        c = self._counts.get(key)
        if c is None:
            c = self._counts[key] = _Counts()
        return c

    def on_verdict(self, inbound: bool, tup: FiveTuple, key: FlowKey, length: int) -> None:
        """A traced packet: a new allowed connection, or one denied packet."""
        conn_id = (inbound, tup)
        if key.action == pb.Deny:
            c = self._counts_for(key)
            c.sample(tup)
            if inbound:
                c.packets_in, c.bytes_in = c.packets_in + 1, c.bytes_in + length
            else:
                c.packets_out, c.bytes_out = c.packets_out + 1, c.bytes_out + length
            if conn_id not in self._denied_seen:
                self._denied_seen.add(conn_id)
                c.started += 1
                c.completed += 1
            return
        known = self._conns.get(conn_id)
        if known is not None and known.verdict_key == key:
            return  # a retransmitted first packet
        if known is not None and not known.started:
            self._start(known, tup, None)  # the 5-tuple's previous connection
        self._conns[conn_id] = _Conn(key, key)

    def _start(self, conn: _Conn, tup: FiveTuple, orig_dst: OrigDst) -> None:
        """Count ``conn`` as started, under its service's key when ``orig_dst`` (where it
        was opened to, if DNATed) is a service's cluster IP and port."""
        if conn.started:
            return
        conn.started = True
        if orig_dst is not None and self.service_for is not None:
            svc = self.service_for(conn.key.proto, *orig_dst)
            if svc is not None:
                conn.key = replace(conn.key, service=svc)
        c = self._counts_for(conn.key)
        c.started += 1
        c.sample(tup)

    def on_conntrack(self, table: Mapping[FiveTuple, CtCounters]) -> None:
        """Counter deltas for every tracked connection; a vanished one completed (with the
        final counters of its DESTROY event if that came before its verdict)."""
        gone = []
        orig_dsts: Mapping[FiveTuple, tuple[str, int]] = getattr(table, "orig_dst", {})
        for conn_id, conn in self._conns.items():
            inbound, tup = conn_id
            now = table.get(tup)
            if now is None:
                final, orig_dst = self._recent.get(tup, (None, None))
                self._start(conn, tup, orig_dst)
                if final is not None:
                    self._add(inbound, conn, final)
                self._complete(conn, tup)
                gone.append(conn_id)
                continue
            self._start(conn, tup, orig_dsts.get(tup))
            self._add(inbound, conn, now)
        for conn_id in gone:
            del self._conns[conn_id]
        self._recent = {}

    def on_destroyed(self, entries: Iterable[Entry]) -> None:
        """DESTROY events: each registered connection of the entry (either view, either
        direction: two local endpoints both report it) takes its final counters and completes."""
        for orig, seen, final in entries:
            matched = False
            dnat = (
                (orig.dst, orig.dport) if (orig.dst, orig.dport) != (seen.dst, seen.dport) else None
            )
            for tup in (orig,) if seen == orig else (orig, seen):
                for inbound in (True, False):
                    conn = self._conns.pop((inbound, tup), None)
                    if conn is not None:
                        self._start(conn, tup, dnat if tup == seen else None)
                        self._add(inbound, conn, final)
                        self._complete(conn, tup)
                        self.destroyed += 1
                        matched = True
            if not matched and len(self._recent) < RECENT_SIZE:
                self._recent[orig] = (final, None)
                self._recent.setdefault(seen, (final, dnat))

    def _complete(self, conn: _Conn, tup: FiveTuple) -> None:
        c = self._counts_for(conn.key)
        c.completed += 1
        c.sample(tup)

    def _add(self, inbound: bool, conn: _Conn, now: CtCounters) -> None:
        """The counters' growth since ``conn`` was last counted, in/out for its reporter."""
        c = self._counts_for(conn.key)
        last = conn.last
        dop = max(0, now.orig_packets - last.orig_packets)
        dob = max(0, now.orig_bytes - last.orig_bytes)
        drp = max(0, now.reply_packets - last.reply_packets)
        drb = max(0, now.reply_bytes - last.reply_bytes)
        conn.last = now
        if inbound:  # the destination reports: original direction comes in
            c.packets_in += dop
            c.bytes_in += dob
            c.packets_out += drp
            c.bytes_out += drb
        else:
            c.packets_out += dop
            c.bytes_out += dob
            c.packets_in += drp
            c.bytes_in += drb

    def flush(self) -> list[pb.Flow]:
        """This interval's flows; live connections carry over into the next interval."""
        now = int(self.clock())
        for (_, tup), conn in self._conns.items():
            self._start(conn, tup, None)  # conntrack never showed it: no service known
            c = self._counts_for(conn.key)
            c.live += 1
            c.sample(tup)
        flows = [self._flow(key, c, now) for key, c in self._counts.items()]
        self._counts = {}
        self._denied_seen = set()
        self.interval_start = now
        return flows

    def _flow(self, key: FlowKey, c: _Counts, now: int) -> pb.Flow:
        fk = pb.FlowKey(
            source_name=key.source.name,
            source_namespace=key.source.namespace,
            source_type=key.source.type,
            dest_name=key.dest.name,
            dest_namespace=key.dest.namespace,
            dest_type=key.dest.type,
            dest_port=key.dest_port,
            proto=key.proto,
            reporter=key.reporter,
            action=key.action,
            source_ip=key.source_ip,
            dest_service_name=key.service.name,
            dest_service_namespace=key.service.namespace,
            dest_service_port_name=key.service.port_name,
            dest_service_port=key.service.port,
        )
        fk.policies.enforced_policies.extend(key.trace)
        fk.policies.pending_policies.extend(key.pending)
        return pb.Flow(
            Key=fk,
            start_time=self.interval_start,
            end_time=max(now, self.interval_start),
            source_labels=list(key.source.labels),
            dest_labels=list(key.dest.labels),
            packets_in=c.packets_in,
            packets_out=c.packets_out,
            bytes_in=c.bytes_in,
            bytes_out=c.bytes_out,
            num_connections_started=c.started,
            num_connections_completed=c.completed,
            num_connections_live=c.live,
            source_ips=sorted(c.ips),
            source_ports=sorted(c.ports),
        )
