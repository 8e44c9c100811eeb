"""``calico component node startup``: provision this host in the datastore before the daemons
start. Safe to run on every boot: each step only writes what is missing or changed.

Steps (upstream's, minus the Kubernetes-only ones): node name; datastore client
(``WAIT_FOR_DATASTORE``); validate the pool environment; the Node (addresses, AS number,
orchestrator ref, IP conflict check); directories; default IP pools; ClusterInformation;
Felix/BGP/IPAM defaults; finally the nodename file, which tells rc.local startup succeeded.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from calico.datastore.errors import DatastoreError
from calico.logutils import LogLevelError, parse_level
from calico.node import autodetect as ad
from calico.node.datastore import datastore_config, open_client
from calico.node.defaults import ensure_cluster_information, ensure_default_config
from calico.node.errors import NodeError
from calico.node.interfaces import Interface, list_interfaces
from calico.node.node_resource import sync_node
from calico.node.nodename import determine_node_name, nodename_file, write_nodename_file
from calico.node.pools import ensure_default_pools, ipv6_supported, plan_default_pools

log = logging.getLogger(__name__)

RUN_DIR = "/var/run/calico"


@dataclass
class StartupHooks:
    """The host-facing pieces, replaceable in tests."""

    list_ifaces: Callable[[], Sequence[Interface]] = list_interfaces
    reach: ad.Reach = ad.udp_reach
    hostname: Callable[[], str] = socket.gethostname
    run_dir: str = RUN_DIR


def configure_logging(env: Mapping[str, str]) -> None:
    raw = env.get("CALICO_STARTUP_LOGLEVEL", "").strip()
    if not raw:
        return
    try:
        logging.getLogger().setLevel(parse_level(raw))
    except LogLevelError:
        log.error("Failed to parse CALICO_STARTUP_LOGLEVEL=%r, defaulting to info", raw)
        logging.getLogger().setLevel(logging.INFO)


def ensure_filesystem(env: Mapping[str, str], run_dir: str) -> None:
    """BIRD needs the run dir for its control socket; the nodename file needs its directory."""
    dirs = [nodename_file(env).parent]
    if env.get("CALICO_NETWORKING_BACKEND", "").lower() == "bird":
        dirs.append(Path(run_dir))
    for d in dirs:
        if d.is_dir():
            continue
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise NodeError(f"Unable to create '{d}': {exc.strerror}") from None
        log.warning("Expected %s to be mounted into the container but it wasn't present", d)


def _host_v4(interfaces: Sequence[Interface]) -> list[ipaddress.IPv4Address]:
    return [c.ip for i in interfaces for c in i.of_version(4)]  # type: ignore[misc]


def run_startup(env: Mapping[str, str], version: str, hooks: StartupHooks | None = None) -> str:
    """Run every step; returns the node name. Raises NodeError (one line) on failure."""
    hooks = hooks or StartupHooks()
    configure_logging(env)
    name = determine_node_name(env, hooks.hostname)
    log.info("Starting node %s with version %s", name, version)
    cache: list[Sequence[Interface]] = []

    def interfaces() -> Sequence[Interface]:
        if not cache:
            cache.append(hooks.list_ifaces())
        return cache[0]

    # Fail on a bad pool setting before anything is written.
    needs_v4_default = not env.get("CALICO_IPV4POOL_CIDR", "").strip()
    plan = plan_default_pools(
        env, _host_v4(interfaces()) if needs_v4_default else (), ipv6_supported(env)
    )
    config = datastore_config(env)
    client = open_client(config, env.get("WAIT_FOR_DATASTORE") == "true")
    try:
        _, written = sync_node(client, name, env, interfaces, hooks.reach)
        log.info("Node %s %s", name, "updated" if written else "unchanged")
        ensure_filesystem(env, hooks.run_dir)
        ensure_default_pools(client, plan)
        ensure_cluster_information(client, version, env.get("CLUSTER_TYPE", "").strip())
        ensure_default_config(client, name, config.datastore_type)
    except DatastoreError as exc:
        raise NodeError(f"datastore error during startup: {exc}") from None
    finally:
        client.backend.close()
    write_nodename_file(nodename_file(env), name)
    log.info("Using node name: %s", name)
    return name
