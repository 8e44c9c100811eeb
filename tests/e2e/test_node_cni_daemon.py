"""``calico node run`` supervises the resident CNI helper, and the launchers it installs use it.

Whether a call ran in the daemon is told by the pids on the CNI log's lines (as in
``tests/integration/cni/test_daemon.py``): the launcher keeps its pid through ``ip netns exec``
and ``exec python``, so a line with any other pid came from a forked daemon worker.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from node_harness import Node, Workload, in_ns, run

from calico.node.run import workloads as wl
from calico.node.run.layout import layout_for, load_settings

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def sv_status(node: Node, svc: str) -> str:
    return run("sv", "status", str(node.state_dir / "service" / svc), check=False).stdout


def daemon_pid(node: Node) -> int:
    m = re.match(r"run: \S+ \(pid (\d+)\)", sv_status(node, "cni-daemon"))
    assert m, sv_status(node, "cni-daemon")
    return int(m.group(1))


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def cni_add(node: Node, pod: str) -> tuple[Workload, int, set[int]]:
    """A runtime's ADD through the installed launcher, run in the node's host netns.

    Returns the workload, the launcher's pid and the pids on the CNI log lines it produced.
    """
    settings = load_settings(layout_for(node.state_dir))
    assert settings is not None
    w = Workload("cnid", pod, f"e2e-{uuid.uuid4().hex[:6]}-{pod}", f"cnid{uuid.uuid4().hex}")
    run("ip", "netns", "add", w.netns)
    node.workloads.append(w)  # teardown deletes the sandbox
    log = Path(settings.log_dir) / "cni" / "cni.log"
    start = log.stat().st_size if log.exists() else 0
    env = {k: v for k, v in os.environ.items() if k != "CALICO_CNI_DAEMON_SOCKET"}
    env.update(
        CNI_COMMAND="ADD",
        CNI_CONTAINERID=w.container_id,
        CNI_NETNS=os.path.join(wl.NETNS_DIR, w.netns),
        CNI_IFNAME="eth0",
        CNI_PATH=settings.cni_bin_dir,
        CNI_ARGS=f"IgnoreUnknown=1;K8S_POD_NAMESPACE={w.namespace};K8S_POD_NAME={w.pod}",
    )
    proc = subprocess.Popen(
        ["ip", "netns", "exec", node.host, str(Path(settings.cni_bin_dir) / "calico")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err = proc.communicate(json.dumps(wl.plugin_netconf(settings)).encode(), timeout=30)
    assert proc.returncode == 0, (out + err).decode()
    w.ip = json.loads(out)["ips"][0]["address"].split("/")[0]
    with open(log, "rb") as f:
        f.seek(start)
        pids = {int(p) for p in re.findall(rb"\]\[(\d+)\]", f.read())}
    assert pids, "the ADD wrote no log lines"
    return w, proc.pid, pids


def test_cni_daemon_serves_the_launchers_and_calls_fall_back_without_it(
    fresh_node: Node,
) -> None:
    node = fresh_node
    sock = node.state_dir / "cni-daemon.sock"
    node.start()
    node.wait_ready()
    assert sv_status(node, "cni-daemon").startswith("run:")
    assert f"{'cni-daemon':<14} run:" in node.calico("node", "status").stdout
    for name in ("calico", "calico-ipam"):
        assert f"CALICO_CNI_DAEMON_SOCKET={sock}" in (node.cni_bin_dir / name).read_text()
    wait_for(sock.is_socket, f"the CNI daemon never listened on {sock}")
    assert sock.stat().st_mode & 0o777 == 0o600

    # Fast path: a worker of the node's daemon served the ADD, and the workload is plumbed.
    served, launcher, pids = cni_add(node, "fast")
    assert launcher not in pids
    links = in_ns(node.host, "ip", "link", "show").stdout
    assert re.search(rf"cali\S+@if\d+:.*\n.*link-netns {served.netns}\n", links), links
    assert served.ip in in_ns(served.netns, "ip", "addr", "show", "eth0").stdout

    # Kill the daemon for good (runsv must not restart it): its socket stays behind, stale.
    pid = daemon_pid(node)
    run("sv", "once", str(node.state_dir / "service" / "cni-daemon"))
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: sv_status(node, "cni-daemon").startswith("down:"), "daemon still up")
    assert sock.is_socket()
    local, launcher, pids = cni_add(node, "slow")
    assert pids == {launcher}  # the launcher did the work itself
    assert local.ip != served.ip
    assert local.ip in in_ns(local.netns, "ip", "addr", "show", "eth0").stdout

    # Stopping leaves no process and no stale socket; --cleanup removes the rest.
    assert "Calico node stopped" in node.stop().stdout
    assert node.marked_processes() == []
    assert not sock.exists()
    assert "Cleanup done." in node.calico("node", "stop", "--cleanup").stdout
    assert not node.state_dir.exists()
    assert list(node.cni_bin_dir.iterdir()) == []
