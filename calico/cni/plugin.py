"""The ``calico`` network plugin verbs: ADD, DEL, CHECK.

ADD = addresses from the IPAM plugin named in ``ipam.type`` (calico-ipam in-process, others
exec'd from CNI_PATH), then the veth dataplane, then the WorkloadEndpoint. Whatever fails after
addresses were assigned releases them again, so failed pod starts leak nothing. DEL is
idempotent: everything already gone counts as done.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from calico.cni import netconf as nc
from calico.cni.errors import (
    CHECK_FAILED,
    INCOMPATIBLE_VERSION,
    INVALID_NETCONF,
    IPAM_FAILURE,
    CNIError,
)
from calico.cni.identity import CNI, Identity, determine_nodename, host_veth_name, identify
from calico.cni.identity import veth_prefix as _veth_prefix
from calico.cni.types import VERSIONS_WITH_CHECK, Interface, IPConfig, Result, Route

if TYPE_CHECKING:
    from calico.cni.store import Store

log = logging.getLogger(__name__)

CALICO_IPAM = "calico-ipam"


@dataclass
class Call:
    """One parsed invocation."""

    conf: nc.NetConf
    env: nc.CNIEnv
    ident: Identity
    stdin: bytes
    environ: Mapping[str, str]


def prepare(stdin: bytes, environ: Mapping[str, str], *, need_ipam_type: bool = True) -> Call:
    conf = nc.parse(stdin, need_ipam_type=need_ipam_type)
    env = nc.parse_env(environ)
    node = determine_nodename(conf)
    return Call(conf, env, identify(conf, env, node), stdin, environ)


@contextlib.contextmanager
def ready_store(conf: nc.NetConf) -> Iterator[Store]:
    from calico.cni.store import check_ready, open_store

    store = open_store(conf)
    try:
        check_ready(store.backend)
        yield store
    finally:
        store.close()


def resolve_mtu(conf: nc.NetConf, mtu_file: str | None = None) -> int:
    """``mtu`` from the netconf; 0 means "what calico/node detected" (the MTU file), if any."""
    mtu_file = mtu_file or conf.mtu_file
    if conf.mtu:
        return conf.mtu
    try:
        with open(mtu_file, encoding="utf-8") as f:
            return int(f.read().strip())
    except FileNotFoundError:
        if conf.require_mtu_file:
            raise CNIError(
                INVALID_NETCONF, f"MTU file {mtu_file} is required but missing"
            ) from None
        return 0
    except (OSError, ValueError) as exc:
        raise CNIError(INVALID_NETCONF, f"cannot read MTU file {mtu_file}", str(exc)) from None


# -- IPAM delegation -----------------------------------------------------------------------


def ipam_add(call: Call, store: Store) -> Result:
    if call.conf.ipam.type == CALICO_IPAM:
        from calico.cni import ipam_plugin, k8s_annotations

        # Kubernetes datastore: the pod's and namespace's IPAM annotations.
        conf, env = k8s_annotations.apply(call.conf, call.env, call.ident, store.backend)
        call = Call(conf, env, call.ident, call.stdin, call.environ)
        return ipam_plugin.add(store, call.conf, call.env, call.ident)
    from calico.cni import k8s_annotations, pod_cidr
    from calico.cni.ipam_exec import exec_ipam

    k8s_annotations.check_features(call.conf, call.ident, store.backend)
    stdin = pod_cidr.resolve(call.stdin, store.backend, call.ident.node)
    result = exec_ipam(call.conf.ipam.type, "ADD", stdin, call.env, call.environ)
    assert result is not None
    return result


def ipam_del(call: Call, store: Store) -> None:
    if call.conf.ipam.type == CALICO_IPAM:
        from calico.cni import ipam_plugin

        ipam_plugin.delete(store, call.conf, call.ident)
        return
    from calico.cni import pod_cidr
    from calico.cni.ipam_exec import exec_ipam

    stdin = pod_cidr.resolve(call.stdin, store.backend, call.ident.node)
    exec_ipam(call.conf.ipam.type, "DEL", stdin, call.env, call.environ)


def _release_quietly(call: Call, store: Store) -> None:
    try:
        ipam_del(call, store)
    except Exception as exc:
        log.error("Failed to release addresses after a failed ADD: %s", exc)


# -- ADD -----------------------------------------------------------------------------------


def _host_addrs(ipam_result: Result) -> list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]:
    if not ipam_result.ips:
        raise CNIError(IPAM_FAILURE, "the IPAM plugin returned no addresses")
    out = []
    for ip in ipam_result.ips:
        addr = ipaddress.ip_interface(ip.address).ip
        out.append(ipaddress.ip_interface(f"{addr}/{addr.max_prefixlen}"))
    return out


def _routes(
    call: Call, ipam_result: Result, families: set[int]
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    defaults = [ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")]
    routes: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    if call.conf.ipam.type != CALICO_IPAM and ipam_result.routes:
        routes = [ipaddress.ip_network(r.dst, strict=False) for r in ipam_result.routes]
        if call.conf.include_default_routes:
            routes += [d for d in defaults if d not in routes]
    else:
        routes = defaults
    return [r for r in routes if r.version in families]


def cmd_add(call: Call) -> Result:
    from calico.cni import netsetup, wep
    from calico.cni.status_wait import wait_for_policy

    conf, env, ident = call.conf, call.env, call.ident
    mtu = resolve_mtu(conf)
    host_ifname = host_veth_name(ident, _veth_prefix(call.environ))
    with ready_store(conf) as store:
        ipam_result = ipam_add(call, store)
        try:
            addrs = _host_addrs(ipam_result)
            families = {a.version for a in addrs}
            routes = _routes(call, ipam_result, families)
            wep.ensure_profile(store, ident, conf)
            dp = netsetup.setup(
                env.netns,
                env.ifname,
                host_ifname,
                addrs,
                routes,
                mtu=mtu,
                allow_forwarding=conf.allow_ip_forwarding,
                num_queues=conf.num_queues,
            )
            try:
                wep.create_or_update(
                    store, ident, conf, [str(a) for a in addrs], host_ifname, dp.container_mac
                )
            except BaseException:
                with contextlib.suppress(Exception):
                    netsetup.delete_host_link(host_ifname)
                raise
        except BaseException:
            _release_quietly(call, store)
            raise
    wait_for_policy(conf.endpoint_status_dir, ident, float(conf.policy_setup_timeout_seconds))
    result = Result(
        interfaces=[
            Interface(name=host_ifname, mac=netsetup.HOST_MAC),
            Interface(name=env.ifname, mac=dp.container_mac, sandbox=env.netns),
        ],
        dns=dict(ipam_result.dns),
    )
    for addr in addrs:
        gw = netsetup.GATEWAY_V4 if addr.version == 4 else dp.ipv6_gateway
        result.ips.append(IPConfig(address=str(addr), gateway=gw, interface=1))
    for route in routes:
        gw = netsetup.GATEWAY_V4 if route.version == 4 else dp.ipv6_gateway
        result.routes.append(Route(dst=str(route), gw=gw))
    log.info("ADD done: %s on %s with %s", ident.wep_name, host_ifname, [str(a) for a in addrs])
    return result


# -- DEL -----------------------------------------------------------------------------------


def cmd_del(call: Call) -> None:
    from calico.cni import netsetup, wep

    ident = call.ident
    with ready_store(call.conf) as store:
        outcome = wep.remove(store, ident)
        netsetup.teardown(call.env.netns, call.env.ifname)
        if ident.orchestrator == CNI:
            # The host name derives from this container's ID, so it can't be another sandbox's.
            netsetup.delete_host_link(host_veth_name(ident, _veth_prefix(call.environ)))
        ipam_del(call, store)
    log.info("DEL done: %s (endpoint %s)", ident.wep_name, outcome)


# -- CHECK ---------------------------------------------------------------------------------


def _fail(msg: str, details: str = "") -> CNIError:
    return CNIError(CHECK_FAILED, msg, details)


def cmd_check(call: Call) -> None:
    """Compare the WorkloadEndpoint, prevResult and the live interfaces."""
    from calico.cni import netsetup, wep

    if call.conf.cni_version not in VERSIONS_WITH_CHECK:
        raise CNIError(
            INCOMPATIBLE_VERSION,
            f"CHECK is not supported for cniVersion {call.conf.cni_version}",
            f"it needs one of {list(VERSIONS_WITH_CHECK)}",
        )
    ident = call.ident
    with ready_store(call.conf) as store:
        endpoint = wep.get(store.client, ident)
    if endpoint is None:
        raise _fail(f"WorkloadEndpoint {ident.wep_name} does not exist")
    spec = endpoint.spec
    if spec.container_id and spec.container_id != ident.container_id:
        raise _fail(f"WorkloadEndpoint {ident.wep_name} belongs to container {spec.container_id}")
    seen = netsetup.observe(call.env.netns, call.env.ifname, spec.interface_name or "")
    expected = set(spec.ip_networks or [])
    prev: dict[str, Any] = call.conf.prev_result or {}
    for ip in prev.get("ips") or []:
        addr = ipaddress.ip_interface(ip.get("address", "")).ip
        expected.add(f"{addr}/{addr.max_prefixlen}")
    missing = sorted(expected - seen.container_addrs)
    if missing:
        raise _fail(f"addresses {missing} are missing from {call.env.ifname}")
    if not seen.container_up or not seen.host_up:
        raise _fail("the workload's veth is down")
    if seen.host_mac != netsetup.HOST_MAC:
        raise _fail(f"host veth MAC is {seen.host_mac}, expected {netsetup.HOST_MAC}")
