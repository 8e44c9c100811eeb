"""``calico node stop --cleanup``: remove what the node programmed, once its processes are gone.

In order: the demo's workloads (CNI DEL, so their addresses and endpoints are released, then
their sandboxes), every remaining ``cali*`` interface and the VXLAN devices ``vxlan.calico`` /
``vxlan-v6.calico`` in this network namespace (their routes, neighbours and FDB entries go with
them), the routes Felix owns by protocol elsewhere (same-subnet routes via the uplink,
blackholes), the routes BIRD programmed (``proto bird``), the ``inet calico`` nftables table,
the CNI files the node installed, and the state directory (endpoint status files, MTU file,
IPAM lock, felix.cfg, calicoctl.cfg, confd's files). Each step is best effort and reported; a
missing thing is not an error.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calico.node.run import workloads
from calico.node.run.layout import Layout, NodeSettings

log = logging.getLogger(__name__)

NFT_TABLE = ("inet", "calico")
VXLAN_DEVICES = ("vxlan.calico", "vxlan-v6.calico")
# Felix's route protocol for the routes it owns outside its own devices (upstream's 80).
FELIX_ROUTE_PROTO = "80"
# BIRD's kernel protocol uses ``persist``: its routes outlive it (design/confd.md "Node run
# wiring"), so cleanup flushes them by protocol.
BIRD_ROUTE_PROTO = "bird"


def cleanup(settings: NodeSettings | None, layout: Layout, say: Callable[[str], None]) -> None:
    if settings is not None:
        remove_demo_workloads(settings, layout, say)
    links = cali_links()
    routes = cali_routes()
    for name in links:
        workloads.ip_cmd("link", "del", name, check=False)
    say(f"Removed {len(links)} cali* interface(s) and {len(routes)} workload route(s).")
    present = set(link_names())
    vxlan = [name for name in VXLAN_DEVICES if name in present]
    for name in vxlan:
        workloads.ip_cmd("link", "del", name, check=False)
    say(f"Removed {len(vxlan)} VXLAN device(s)" + (f" ({', '.join(vxlan)})." if vxlan else "."))
    owned = felix_routes()
    for family in ("-4", "-6"):
        workloads.ip_cmd(family, "route", "flush", "proto", FELIX_ROUTE_PROTO, check=False)
    say(f"Removed {owned} other Felix route(s) (protocol {FELIX_ROUTE_PROTO}).")
    learned = count_routes(BIRD_ROUTE_PROTO)
    for family in ("-4", "-6"):
        workloads.ip_cmd(family, "route", "flush", "proto", BIRD_ROUTE_PROTO, check=False)
    say(f"Removed {learned} BIRD route(s) (protocol {BIRD_ROUTE_PROTO}).")
    say(
        "Removed the nftables table inet calico."
        if delete_nft_table()
        else "No nftables table inet calico to remove."
    )
    if settings is not None:
        removed = [p for p in settings.cni_files if _unlink(Path(p))]
        say(f"Removed {len(removed)} CNI file(s).")
    shutil.rmtree(layout.state_dir, ignore_errors=True)


def remove_demo_workloads(
    settings: NodeSettings, layout: Layout, say: Callable[[str], None]
) -> None:
    try:
        doc = json.loads(layout.demo_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    for entry in doc.get("workloads", []):
        w = workloads.Workload(**entry)
        error = workloads.delete_workload(settings, w)
        say(f"Removed demo workload {w.namespace}/{w.pod}" + (f" ({error})" if error else "."))
    for name in doc.get("policies", []):
        _delete_policy(settings, name)
    layout.demo_file.unlink(missing_ok=True)


def _delete_policy(settings: NodeSettings, name: str) -> None:
    from calico.datastore.client import Client
    from calico.datastore.config import DatastoreConfig
    from calico.datastore.factory import open_backend

    try:
        backend = open_backend(DatastoreConfig.from_env(settings.datastore_env()))
    except Exception as exc:  # the datastore may be gone; nothing else to do
        log.debug("cannot open the datastore: %s", exc)
        return
    try:
        Client(backend).delete("GlobalNetworkPolicy", name)
    except Exception as exc:
        log.debug("policy %s: %s", name, exc)
    finally:
        backend.close()


def _ip_json(*args: str) -> list[dict[str, Any]]:
    """``ip -j <args>``'s objects (none when ip fails or prints something else)."""
    proc = workloads.ip_cmd("-j", *args, check=False)
    try:
        found = json.loads(proc.stdout or "[]")
    except ValueError:
        return []
    return found if isinstance(found, list) else []


def link_names() -> list[str]:
    return [str(ln.get("ifname", "")) for ln in _ip_json("link", "show")]


def cali_links() -> list[str]:
    return [name for name in link_names() if name.startswith("cali")]


def count_routes(proto: str) -> int:
    """How many routes (both families) carry ``proto``."""
    return sum(len(_ip_json(family, "route", "show", "proto", proto)) for family in ("-4", "-6"))


def felix_routes() -> int:
    """How many routes (both families) carry Felix's protocol, outside its own devices."""
    return count_routes(FELIX_ROUTE_PROTO)


def cali_routes() -> list[str]:
    routes = _ip_json("route", "show")
    return [r["dst"] for r in routes if str(r.get("dev", "")).startswith("cali")]


def delete_nft_table() -> bool:
    """Delete ``inet calico`` via libnftables (nft CLI as a fallback); True if it was there."""
    family, name = NFT_TABLE
    try:
        import nftables

        nft = nftables.Nftables()
        rc, _, _ = nft.cmd(f"list table {family} {name}")
        if rc != 0:
            return False
        rc, _, err = nft.cmd(f"delete table {family} {name}")
        if rc != 0:
            log.warning("deleting table %s %s failed: %s", family, name, err.strip())
        return rc == 0
    except ImportError:
        listed = subprocess.run(["nft", "list", "table", family, name], capture_output=True)
        if listed.returncode != 0:
            return False
        return subprocess.run(["nft", "delete", "table", family, name]).returncode == 0


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
