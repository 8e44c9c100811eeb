"""Workloads the way a container runtime makes them: an ``ip netns`` sandbox, then the
installed CNI plugin run with ``CNI_*`` variables and the installed conflist on stdin.

Used by the demo and by ``calico node stop --cleanup`` (which deletes the demo's workloads
through the same plugin, so their addresses and WorkloadEndpoints are released too).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from calico.node.run.environ import inherited
from calico.node.run.layout import CNI_CONFLIST_NAME, NodeSettings

NETNS_DIR = "/var/run/netns"
CNI_TIMEOUT = 60.0


CLONE_NEWNET = 0x40000000


def enter_netns(name: str) -> None:
    """Move this process (network only) into the named netns, as the node runs there.

    Unlike ``ip netns exec``, the mount namespace stays the host's, so sandboxes this process
    creates with ``ip netns add`` stay visible to everyone else.
    """
    path = os.path.join(NETNS_DIR, name)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise WorkloadError(f"cannot open network namespace {name}: {exc.strerror}") from None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise WorkloadError(f"cannot enter network namespace {name}: {os.strerror(err)}")
    finally:
        os.close(fd)


class WorkloadError(RuntimeError):
    """A sandbox or CNI step failed; the message is one line."""


@dataclass(frozen=True)
class Workload:
    """One pod-like sandbox: Kubernetes-style namespace/pod names, its netns, its address."""

    namespace: str
    pod: str
    netns: str
    container_id: str
    ip: str = ""

    @property
    def netns_path(self) -> str:
        return os.path.join(NETNS_DIR, self.netns)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def plugin_netconf(settings: NodeSettings) -> dict[str, Any]:
    """The single plugin of the installed conflist, as a runtime hands it to the plugin."""
    path = Path(settings.cni_conf_dir) / CNI_CONFLIST_NAME
    try:
        conflist = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WorkloadError(f"cannot read the CNI conflist {path}: {exc}") from None
    plugin = dict(conflist["plugins"][0])
    plugin["name"] = conflist["name"]
    plugin["cniVersion"] = conflist["cniVersion"]
    return plugin


def cni(settings: NodeSettings, command: str, w: Workload) -> dict[str, Any]:
    """Run the calico plugin once; returns its JSON result, raises WorkloadError on failure."""
    netconf = plugin_netconf(settings)
    env = {
        **inherited(os.environ),  # the conflist and the launchers pick datastore and helper
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": w.container_id,
        "CNI_NETNS": w.netns_path,
        "CNI_IFNAME": "eth0",
        "CNI_PATH": settings.cni_bin_dir,
        "CNI_ARGS": (
            f"IgnoreUnknown=1;K8S_POD_NAMESPACE={w.namespace};K8S_POD_NAME={w.pod};"
            f"K8S_POD_INFRA_CONTAINER_ID={w.container_id}"
        ),
    }
    exe = os.path.join(settings.cni_bin_dir, netconf["type"])
    try:
        proc = subprocess.run(
            [exe],
            input=json.dumps(netconf),
            env=env,
            capture_output=True,
            text=True,
            timeout=CNI_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkloadError(f"CNI {command} for {w.namespace}/{w.pod} failed: {exc}") from None
    try:
        result: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except ValueError:
        result = {"msg": proc.stdout.strip() or proc.stderr.strip()}
    if proc.returncode != 0:
        msg = result.get("msg") or proc.stderr.strip() or f"exit code {proc.returncode}"
        raise WorkloadError(f"CNI {command} for {w.namespace}/{w.pod} failed: {msg}")
    return result


def ip_cmd(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise WorkloadError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def add_workload(settings: NodeSettings, w: Workload) -> Workload:
    """Create the sandbox and network it with CNI ADD; returns it with its address."""
    ip_cmd("netns", "add", w.netns)
    try:
        ip_cmd("netns", "exec", w.netns, "ip", "link", "set", "lo", "up")
        result = cni(settings, "ADD", w)
        ips = [entry["address"].split("/")[0] for entry in result.get("ips", [])]
        if not ips:
            raise WorkloadError(f"CNI ADD for {w.namespace}/{w.pod} returned no address")
    except BaseException:
        ip_cmd("netns", "del", w.netns, check=False)
        raise
    return Workload(w.namespace, w.pod, w.netns, w.container_id, ips[0])


def delete_workload(settings: NodeSettings, w: Workload) -> str | None:
    """CNI DEL then remove the sandbox; returns the DEL error (the sandbox goes regardless)."""
    error: str | None = None
    try:
        cni(settings, "DEL", w)
    except WorkloadError as exc:
        error = str(exc)
    if os.path.exists(w.netns_path):
        stop_sandbox_processes(w.netns)
        ip_cmd("netns", "del", w.netns, check=False)
    return error


def stop_sandbox_processes(netns: str) -> None:
    """Kill what still runs inside a sandbox (the demo's server), so nothing outlives it."""
    pids = [int(p) for p in ip_cmd("netns", "pids", netns, check=False).stdout.split()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
