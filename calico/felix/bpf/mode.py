"""``BPFEnabled=true``: swap workload and host endpoint policy from nftables chains to the
BPF programs.

What stays in nftables (upstream keeps its iptables rules too): the static chains,
masquerade, host endpoints on interfaces that are not data interfaces (with their policy
chains), untracked policy's raw chains (for NOTRACK), and per-endpoint chains of the
endpoints BPF polices — but those become accept-only (conntrack checks, then a built-in allow
profile), so the verdict comes from the BPF programs alone while dispatch, routes, sysctls
and status reporting stay the nftables managers' job. When the kernel or bpffs cannot run
BPF, Felix logs why and keeps the nftables dataplane, as upstream overrides BPFEnabled to
false. Design: design/felix-bpf.md "Felix".
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from calico.felix.bpf import bpffs, failsafes, tcx
from calico.felix.bpf.ctscanner import ConntrackScanner, Timeouts
from calico.felix.bpf.dataplane import BPFDataplane
from calico.felix.bpf.endpoints import BPFEndpointManager
from calico.felix.bpf.libbpf import BPFError
from calico.felix.bpf.maps import MapSizes
from calico.felix.bpf.off import BPFFS_ROOT, LINK_DIR, PIN_DIR
from calico.felix.bpf.off import clean_up as clean_up  # re-exported: mode on and off
from calico.felix.config import PARAMS
from calico.felix.messages import (
    ActiveProfileUpdate,
    HostEndpoint,
    Profile,
    ProfileID,
    Rule,
    ToDataplane,
    WorkloadEndpointUpdate,
)

log = logging.getLogger(__name__)

OBJECT_CACHE = "/var/lib/calico/bpf"
POLICY_DEBUG_DIR = "/var/run/calico/bpf/policy"  # upstream's listing directory (the default)
LOG_LEVELS = {"Off": 0, "Info": 1, "Debug": 2}  # BPFLogLevel -> CALI_LOG_LEVEL
RPF_MODES = {"Disabled": 0, "Strict": 1, "Loose": 2}  # BPFEnforceRPF -> CALI_RPF
# Not a valid v3 name (underscore), so it can never collide with a datastore profile.
ALLOW_PROFILE = "_bpf_policy"
_ALLOW_ALL = Profile(inbound_rules=(Rule(action="allow"),), outbound_rules=(Rule(action="allow"),))


def allow_only_hep(hep: HostEndpoint) -> HostEndpoint:
    """A host endpoint as nftables renders it where BPF polices the interface: conntrack
    checks and a built-in allow profile; its untracked policy is kept, so its raw chains
    still exempt the flows from conntrack."""
    return dataclasses.replace(
        hep, tiers=(), profile_ids=(ALLOW_PROFILE,), pre_dnat_tiers=(), forward_tiers=()
    )


class NftablesWorkloadsAllow:
    """Feeds the nftables endpoint manager the workload endpoints (all BPF's) with chains
    that only allow. Host endpoints pass unchanged: the manager's ``hep_view`` renders
    allow-only the interfaces BPF polices (``BPFEndpointManager.is_data_iface``) after
    resolving them by name or expected IPs, so both sides agree per interface."""

    def __init__(self, endpoints: Any, policies: Any, bpf: BPFEndpointManager | None = None):
        self._endpoints = endpoints
        policies.on_update(ActiveProfileUpdate(ProfileID(ALLOW_PROFILE), _ALLOW_ALL))
        if bpf is not None and bpf.data_ifaces is not None:
            endpoints.hep_view = lambda iface, hep: (
                allow_only_hep(hep) if bpf.is_data_iface(iface) else hep
            )
            # BPF applies the `*` endpoint (data interfaces and workloads): not nftables too.
            endpoints.render_all_interfaces = False

    def on_update(self, msg: ToDataplane) -> None:
        if isinstance(msg, WorkloadEndpointUpdate):
            ep = dataclasses.replace(msg.endpoint, tiers=(), profile_ids=(ALLOW_PROFILE,))
            msg = WorkloadEndpointUpdate(msg.id, ep)
        self._endpoints.on_update(msg)

    def complete_deferred_work(self) -> None:
        self._endpoints.complete_deferred_work()


def map_sizes(config: Any) -> MapSizes:
    return MapSizes(
        conntrack=int(config["BPFMapSizeConntrack"]),
        ipsets=int(config["BPFMapSizeIPSets"]),
        iface=int(config["BPFMapSizeIfState"]),
        routes=int(config["BPFMapSizeRoute"]),
    )


def _private_mount_ns() -> bool:
    """True if this process's mount namespace is not PID 1's (e.g. under ``ip netns exec``)."""
    try:
        return os.readlink("/proc/self/ns/mnt") != os.readlink("/proc/1/ns/mnt")
    except OSError:
        return True


def resolve_attach_type(requested: str, bpffs_outlives_us: bool) -> str:
    """BPFAttachType -> "tcx" or "tc" (design/felix-bpf.md "Attach"): TCX when asked for
    (Netkit means TCX here), the kernel has it and the bpffs holding the link pins outlives
    this Felix (a TCX link dies with its last pin, so a bpffs private to a Felix's mount
    namespace would leave the interfaces unpoliced while it restarts); else tc."""
    if requested == "TC":
        return "tc"
    if not tcx.supported():
        log.info("BPFAttachType=%s: kernel has no TCX (needs 6.6), using tc", requested)
        return "tc"
    if not bpffs_outlives_us:
        log.info(
            "BPFAttachType=%s: the bpffs is private to this Felix (pins die with it), "
            "using tc so that programs survive a restart",
            requested,
        )
        return "tc"
    return "tcx"


def open_dataplane(config: Any) -> BPFDataplane:
    """Kernel check, bpffs (mounted if missing), maps and main programs; BPFUnavailable/BPFError."""
    bpffs.check_kernel()
    mounted_here = False
    if not bpffs.is_bpffs(BPFFS_ROOT):
        if os.path.ismount(BPFFS_ROOT):
            raise bpffs.BPFUnavailable(f"{BPFFS_ROOT} is mounted but is not a bpffs")
        bpffs.mount_bpffs(BPFFS_ROOT)
        mounted_here = True
    outlives = not (mounted_here and _private_mount_ns())
    debug = bool(config["BPFPolicyDebugEnabled"])
    return BPFDataplane(
        PIN_DIR,
        OBJECT_CACHE,
        sizes=map_sizes(config),
        policy_debug_dir=str(config["BPFPolicyDebugDir"]) if debug else None,
        defines={
            "CALI_LOG_LEVEL": LOG_LEVELS[config["BPFLogLevel"]],
            "CALI_RPF": RPF_MODES[config["BPFEnforceRPF"]],
            "CALI_IPV6": int(bool(config["Ipv6Support"])),  # off: IPv6 dropped on workloads
        },
        attach_type=resolve_attach_type(str(config["BPFAttachType"]), outlives),
        link_dir=LINK_DIR,
    )


def enable(config: Any, parts: Any) -> Any:
    """``parts`` with BPF workload policy, or ``parts`` unchanged (logged) if BPF is unusable."""
    try:
        dp = open_dataplane(config)
    except (bpffs.BPFUnavailable, BPFError) as e:
        log.error(
            "BPFEnabled=true but the BPF dataplane cannot run: %s; "
            "falling back to the nftables dataplane",
            e,
        )
        return parts
    prefixes = tuple(config["InterfacePrefix"].split(","))
    data_ifaces = config["BPFDataIfacePattern"]
    try:
        keys = failsafes.failsafe_keys(
            config["FailsafeInboundHostPorts"], config["FailsafeOutboundHostPorts"]
        )
        failsafes.sync(dp.maps, keys)
    except (BPFError, KeyError, ValueError) as e:
        # Without failsafes in the map, BPF must not police host endpoints: nftables keeps them.
        log.error("Cannot write the BPF failsafe map (%s); host endpoints stay on nftables", e)
        data_ifaces = None
    bpf = BPFEndpointManager(
        dp,
        prefixes,
        policy_debug=bool(config["BPFPolicyDebugEnabled"]),
        data_ifaces=data_ifaces,
        # ``LogPrefix = none`` (empty) means the default, as for the nftables log statement.
        log_template=config["LogPrefix"] or PARAMS["LogPrefix"].default,
    )
    try:
        timeouts = Timeouts.parse(config["BPFConntrackTimeouts"])
    except ValueError as e:
        log.error("Invalid BPFConntrackTimeouts (%s); using the defaults", e)
        timeouts = Timeouts()
    ConntrackScanner(dp.maps, timeouts).start()  # daemon thread, lives as long as Felix
    shim = NftablesWorkloadsAllow(parts.endpoints, parts.policies, bpf)
    managers = [m for m in parts.managers if m is not parts.endpoints]
    managers.insert(managers.index(parts.policies), shim)
    managers.insert(managers.index(shim), bpf)
    log.info(
        "BPF dataplane enabled: workload%s policy is enforced by BPF programs (attach: %s)",
        "" if data_ifaces is None else " and host endpoint",
        dp.attach_type,
    )
    return dataclasses.replace(
        parts,
        managers=managers,
        iface_listeners=[*parts.iface_listeners, bpf],
        host_appliers=[*parts.host_appliers, bpf],
    )
