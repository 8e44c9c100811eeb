"""The collector's wiring: NFLOG reader, conntrack poller and flusher on one thread, the
Goldmane client on another, policy/endpoint lookups fed from the dataplane message stream.

One thread owns the aggregator (no locks on the hot path): it reads NFLOG batches with a short
timeout, after each drains the conntrack DESTROY events (final counters of connections that
ended), and between them polls conntrack every ``poll_interval`` (the resync) and flushes every
``flush_interval``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from calico.felix.collector import conntrack
from calico.felix.collector.aggregator import Aggregator, FlowKey, hits_to_proto
from calico.felix.collector.client import FlowClient, TLSFiles
from calico.felix.collector.lookups import Hit, Lookups
from calico.felix.collector.nflog import FiveTuple, NflogPacket, NflogReader
from calico.felix.collector.traces import TraceBuilder, split
from calico.felix.rules.nflog import NFLOG_INBOUND_GROUP, NFLOG_OUTBOUND_GROUP
from calico.proto.goldmane import api_pb2 as pb

log = logging.getLogger(__name__)

MEMO_SIZE = 10000  # distinct (direction, addresses, port, trace) combinations remembered


class Collector:
    def __init__(
        self,
        client: Any,
        *,
        flush_interval: float,
        poll_interval: float = 5.0,
        reader_factory: Callable[[], Any] | None = None,
        ct_dump: Callable[[], Any] = conntrack.dump,
        events_factory: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.time,
        metrics: Any = None,
    ) -> None:
        self.client = client
        self.lookups = Lookups()
        self.traces = TraceBuilder(self.lookups)
        self.agg = Aggregator(clock, self.lookups.service)
        self.flush_interval = flush_interval
        self.poll_interval = min(poll_interval, flush_interval)
        self.reader_factory = reader_factory or (
            lambda: NflogReader([NFLOG_INBOUND_GROUP, NFLOG_OUTBOUND_GROUP])
        )
        self.ct_dump = ct_dump
        self.events_factory = events_factory
        self.events: Any = None
        self.clock = clock
        self.metrics = metrics
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.flows_pushed = 0
        self._memo: dict[tuple[object, ...], FlowKey] = {}
        self._memo_generation = -1
        self._drops_reported = (0, 0, 0)

    def on_messages(self, batch: Iterable[object]) -> None:
        self.lookups.on_messages(batch)

    def handle(self, packets: Iterable[NflogPacket]) -> None:
        if self.metrics is not None and packets:
            with self.metrics.packet_latency.time():
                self._handle(packets)
        else:
            self._handle(packets)

    def _handle(self, packets: Iterable[NflogPacket]) -> None:
        for pkt in packets:
            done = self.traces.add(pkt)
            if done is None:
                continue
            inbound, hits = done
            tup = pkt.tuple
            key = self._flow_key(inbound, tup, tuple(hits))
            self.agg.on_verdict(inbound, tup, key, pkt.length)

    def _flow_key(self, inbound: bool, tup: FiveTuple, hits: tuple[Hit, ...]) -> FlowKey:
        """The flow key of a traced packet, memoised per (direction, addresses, port, hits)
        until the lookups change: building the proto traces is most of a packet's cost."""
        if self._memo_generation != self.lookups.generation:
            self._memo.clear()
            self._memo_generation = self.lookups.generation
        memo_key = (inbound, tup.proto, tup.src, tup.dst, tup.dport, hits)
        key = self._memo.get(memo_key)
        if key is not None:
            return key
        src, dst = self.lookups.endpoint(tup.src), self.lookups.endpoint(tup.dst)
        local_ip = tup.dst if inbound else tup.src
        enforced, pending = split(
            hits, inbound, lambda tier: self.lookups.tier_info(local_ip, tier)
        )

        def trigger(h: Hit, staged: bool) -> Hit | None:
            return self.lookups.trigger(local_ip, h.tier, inbound, include_staged=staged)

        key = self.agg.key_for(
            inbound,
            tup,
            src,
            dst,
            hits_to_proto(enforced, lambda h: trigger(h, False)),
            hits_to_proto(pending, lambda h: trigger(h, True)),
            hits[-1].action,
        )
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[memo_key] = key
        return key

    def poll_conntrack(self) -> None:
        started = time.perf_counter()
        try:
            table = self.ct_dump()
        except OSError as e:
            log.warning("Conntrack dump failed: %s", e)
            return
        if self.events is not None:
            # A dump reaps the expired entries it meets, and their DESTROY events are queued
            # by the time it returns: take their final counters before the dump's "gone".
            self.on_destroyed(self.events.read())
        self.agg.on_conntrack(table)
        if self.metrics is not None:
            self.metrics.conntrack_latency.observe(time.perf_counter() - started)

    def on_destroyed(self, entries: list[conntrack.Entry]) -> None:
        """DESTROY events (design/felix-collector.md "Conntrack counters")."""
        if not entries:
            return
        started = time.perf_counter()
        self.agg.on_destroyed(entries)
        if self.metrics is not None:
            self.metrics.conntrack_latency.observe(time.perf_counter() - started)

    def flush(self) -> list[pb.Flow]:
        self.poll_conntrack()
        self.traces.reset()
        flows = self.agg.flush()
        for flow in flows:
            self.client.push(flow)
        self.flows_pushed += len(flows)
        return flows

    def start(self) -> None:
        reader = self.reader_factory()  # bind errors surface to the caller
        if self.events_factory is not None:
            try:
                self.events = self.events_factory()
            except OSError as e:  # the dumps still count, only short connections' ends blur
                log.warning("Conntrack DESTROY events unavailable, dumps only: %s", e)
        self.client.start()
        self._thread = threading.Thread(
            target=self._run, args=(reader,), name="flow-collector", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.client.stop(timeout)

    def _report_drops(self, reader: Any) -> None:
        """Say so when the kernel dropped NFLOG batches (this collector fell behind) or the
        client dropped flows (Goldmane too slow or away): flow logs are incomplete."""
        drops = (
            getattr(reader, "dropped", 0),
            getattr(self.client, "dropped", 0),
            getattr(self.events, "dropped", 0),
        )
        if drops != self._drops_reported:
            log.warning(
                "Flow logs incomplete: %d NFLOG batches dropped by the kernel, %d flows "
                "dropped for Goldmane, %d conntrack event batches dropped (totals)",
                *drops,
            )
            self._drops_reported = drops

    def _run(self, reader: Any) -> None:
        next_poll = time.monotonic() + self.poll_interval
        next_flush = time.monotonic() + self.flush_interval
        try:
            while not self._stop.is_set():
                try:
                    wait = max(0.0, min(next_poll, next_flush) - time.monotonic())
                    self.handle(reader.read(min(wait, 0.5)))
                    if self.events is not None:
                        self.on_destroyed(self.events.read())
                    now = time.monotonic()
                    if now >= next_flush:
                        self.flush()
                        self._report_drops(reader)
                        next_flush = now + self.flush_interval
                        next_poll = now + self.poll_interval
                    elif now >= next_poll:
                        self.poll_conntrack()
                        next_poll = now + self.poll_interval
                except Exception:  # a bug must cost flow logs for a moment, not for good
                    log.exception("Flow collector iteration failed; carrying on")
                    self._stop.wait(1.0)
        finally:
            reader.close()
            if self.events is not None:
                self.events.close()


def from_config(config: Any, registry: Any = None) -> Collector:
    """The collector for a Felix config with ``FlowLogsGoldmaneServer`` set; Goldmane's client
    TLS reuses Felix's Typha client files, as upstream. With ``registry`` (Felix's Prometheus
    registry) its ``felix_collector_*`` metrics are registered there."""
    tls = TLSFiles(
        cert=config["TyphaCertFile"] or "",
        key=config["TyphaKeyFile"] or "",
        ca=config["TyphaCAFile"] or "",
    )
    client = FlowClient(config["FlowLogsGoldmaneServer"], tls=tls)
    interval = float(config["FlowLogsFlushInterval"])
    if interval <= 0:  # the parameter admits any number; a zero interval would spin
        log.warning("FlowLogsFlushInterval=%s is not positive; using %ss", interval, 300)
        interval = 300.0
    collector = Collector(client, flush_interval=interval, events_factory=conntrack.DestroyEvents)
    if registry is not None:
        from calico.felix.collector.metrics import CollectorMetrics

        collector.metrics = CollectorMetrics(collector, registry)
    return collector
