"""``node-services`` / ``monitor-addresses``: the node's long-lived helpers.

Only the helpers that exist here run: the address monitor (unless the networking backend is
``none``) and the tunnel-address allocator (always, as upstream: VXLAN needs no BGP). Each runs
in its own thread; the first one to fail stops the others and the process
exits 1 so runit restarts it; SIGTERM/SIGINT stop everything cleanly with exit 0.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from types import FrameType

from calico.datastore.errors import DatastoreError
from calico.durations import DurationError, parse_duration
from calico.node import autodetect as ad
from calico.node.datastore import datastore_config, open_client
from calico.node.errors import NodeError
from calico.node.interfaces import Interface, list_interfaces
from calico.node.node_resource import sync_node
from calico.node.nodename import determine_node_name

log = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL = 60.0
UPDATE_ATTEMPTS = 3

Service = Callable[[threading.Event], None]


def poll_interval(env: Mapping[str, str]) -> float:
    raw = env.get("AUTODETECT_POLL_INTERVAL", "").strip()
    if not raw:
        return DEFAULT_POLL_INTERVAL
    try:
        value = parse_duration(raw)
    except DurationError:
        value = 0.0
    if value <= 0:
        log.error("error parsing node IP auto-detect polling interval %r; using 60s", raw)
        return DEFAULT_POLL_INTERVAL
    return value


def monitor_addresses(
    env: Mapping[str, str],
    list_ifaces: Callable[[], Sequence[Interface]] = list_interfaces,
    reach: ad.Reach = ad.udp_reach,
) -> Service:
    """Re-detect the addresses every poll interval and update the Node when they change."""

    def run(stop: threading.Event) -> None:
        name = determine_node_name(env)
        interval = poll_interval(env)
        client = open_client(
            datastore_config(env),
            env.get("WAIT_FOR_DATASTORE") == "true",
            stop.wait,
            stop.is_set,
        )
        log.info("Monitoring node %s addresses every %gs", name, interval)
        try:
            while not stop.wait(interval):
                for attempt in range(1, UPDATE_ATTEMPTS + 1):
                    try:
                        _, written = sync_node(
                            client, name, env, list_ifaces, reach, addresses_only=True
                        )
                    except DatastoreError as exc:
                        if attempt == UPDATE_ATTEMPTS:
                            raise NodeError(f"unable to update node {name}: {exc}") from None
                        log.error("Unable to set node resource configuration, retrying: %s", exc)
                        continue
                    if written:
                        log.info("Updated node IP addresses")
                    break
        finally:
            client.backend.close()

    return run


def run_services(services: Mapping[str, Service], stop: threading.Event | None = None) -> int:
    """Run ``services`` until a signal (exit 0) or the first failure (exit 1)."""
    stop = stop or threading.Event()
    failures: list[str] = []
    lock = threading.Lock()

    def wrap(name: str, svc: Service) -> None:
        try:
            svc(stop)
            if not stop.is_set():
                raise NodeError(f"{name} stopped unexpectedly")
        except Exception as exc:  # any failure ends the whole process, as upstream's errgroup
            with lock:
                failures.append(f"{name}: {exc}")
            stop.set()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("Received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    threads = [
        threading.Thread(target=wrap, args=(n, s), name=n, daemon=True) for n, s in services.items()
    ]
    try:
        for t in threads:
            t.start()
        if not threads:
            log.info("No node services to run; waiting for a signal")
        while not stop.wait(0.5):
            pass
        for t in threads:
            t.join(timeout=10)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failures:
        raise NodeError(failures[0])
    return 0


def allocate_tunnel_addrs(env: Mapping[str, str]) -> Service:
    """The tunnel-address allocator as a daemon (calico.node.tunnel_addrs)."""

    def run(stop: threading.Event) -> None:
        from calico.node.tunnel_addrs import run_daemon

        name = determine_node_name(env)
        client = open_client(
            datastore_config(env),
            env.get("WAIT_FOR_DATASTORE") == "true",
            stop.wait,
            stop.is_set,
        )
        log.info("Allocating tunnel addresses for node %s", name)
        try:
            run_daemon(client, name, stop)
        finally:
            client.backend.close()

    return run


def node_services(env: Mapping[str, str]) -> dict[str, Service]:
    services: dict[str, Service] = {}
    if env.get("CALICO_NETWORKING_BACKEND") != "none":
        services["monitor-addresses"] = monitor_addresses(env)
    services["allocate-tunnel-addrs"] = allocate_tunnel_addrs(env)
    return services
