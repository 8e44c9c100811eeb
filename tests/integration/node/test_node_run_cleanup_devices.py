"""``calico node stop --cleanup`` removes the VXLAN devices (their routes, neighbours and FDB
entries go with them) and Felix's protocol-80 routes, and leaves every other route alone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from netns_support import NetnsWorker, add_veth, ip, run, worker_netns

from calico.node.run import cleanup
from calico.node.run.layout import layout_for

pytestmark = pytest.mark.root


def test_cleanup_removes_vxlan_devices_and_felix_routes_only(tmp_path: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    with worker_netns(NetnsWorker, "clnvx") as worker:
        ns = worker.name
        add_veth("eth0", "peer0", ns=ns)
        for cmd in (
            ("link", "set", "eth0", "up"),
            ("addr", "add", "10.9.0.1/24", "dev", "eth0"),
            ("addr", "add", "fd09::1/64", "dev", "eth0", "nodad"),
            ("link", "add", "vxlan.calico", "type", "vxlan", "id", "4096", "dstport", "4789",
             "local", "10.9.0.1", "nolearning"),
            ("link", "add", "vxlan-v6.calico", "type", "vxlan", "id", "4096", "dstport", "4789",
             "local", "fd09::1", "nolearning"),
            ("link", "set", "vxlan.calico", "up"),
            ("addr", "add", "10.244.1.0/32", "dev", "vxlan.calico"),
            ("route", "add", "10.244.2.0/26", "via", "10.244.2.0", "dev", "vxlan.calico",
             "onlink", "proto", "boot"),
            ("neigh", "add", "10.244.2.0", "lladdr", "66:aa:00:00:00:02", "dev", "vxlan.calico",
             "nud", "permanent"),
            ("route", "add", "10.244.3.0/26", "via", "10.9.0.3", "dev", "eth0", "onlink",
             "proto", "80"),
            ("-6", "route", "add", "fd00:244::/122", "via", "fd09::3", "dev", "eth0", "proto",
             "80"),
            ("route", "add", "blackhole", "10.244.1.0/26", "proto", "80"),
            ("route", "add", "192.0.2.0/24", "via", "10.9.0.254", "dev", "eth0"),  # not ours
        ):  # fmt: skip
            ip(*cmd, ns=ns)
        run("bridge", "-n", ns, "fdb", "append", "66:aa:00:00:00:02", "dev", "vxlan.calico",
            "dst", "10.9.0.2")  # fmt: skip
        said: list[str] = []
        worker.call(cleanup.cleanup, None, layout_for(tmp_path / "state"), said.append)
        links = {entry["ifname"] for entry in json.loads(ip("-j", "link", "show", ns=ns))}
        assert links == {"lo", "eth0", "peer0"}
        routes4 = json.loads(ip("-j", "-4", "route", "show", ns=ns))
        assert {r["dst"] for r in routes4} == {"10.9.0.0/24", "192.0.2.0/24"}
        routes6 = json.loads(ip("-j", "-6", "route", "show", ns=ns))
        assert not any(r["dst"].startswith("fd00:244") for r in routes6)
        assert "Removed 2 VXLAN device(s) (vxlan.calico, vxlan-v6.calico)." in said
        assert "Removed 3 other Felix route(s) (protocol 80)." in said
