"""The VXLAN manager's kernel access: the device (pyroute2 ``IPRoute``), readback of the
neighbours, FDB entries and routes Felix owns, and batched writes
(``calico.felix.nlbatch``).

Ownership on readback (upstream vxlanfdb and the main-table route policy): on the VXLAN
device only permanent neighbour/FDB entries with a MAC count; a main-table route is ours when
it is on the VXLAN device or carries the exclusive protocol (blackholes, same-subnet routes
on the NIC). Kernel-protocol routes are never touched.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

from calico.felix import nlbatch as nb
from calico.felix.dataplane.vxlan_model import DeviceSpec, RouteSpec
from calico.felix.nlbatch import (
    MAIN_TABLE,
    NUD_PERMANENT,
    RTN_BLACKHOLE,
    RTN_UNICAST,
    RTNH_F_ONLINK,
    BatchWriter,
    Failure,
    Request,
)

log = logging.getLogger(__name__)

IFF_UP = 0x1
IFF_RUNNING = 0x40
IFA_F_NODAD = 0x02  # the tunnel address is ours alone: skip duplicate detection
RTPROT_KERNEL = 2
V6_DEFAULT_PRIORITY = 1024


class KernelError(RuntimeError):
    """A device could not be programmed; the text says what and why."""


def route_priority(version: int) -> int:
    """The FIB priority Felix programs: 0 for IPv4; IPv6 stores 0 as 1024, so use that."""
    return 0 if version == 4 else V6_DEFAULT_PRIORITY


@dataclass(frozen=True)
class Link:
    name: str
    index: int
    mtu: int
    oper_up: bool


def _family(version: int) -> int:
    return socket.AF_INET if version == 4 else socket.AF_INET6


class VXLANKernel:
    """One family's kernel view; single owner thread (the dataplane loop)."""

    def __init__(self, version: int, *, netns: str | None = None) -> None:
        self.version = version
        self._netns = netns
        self._ipr: Any = None
        self._owner: int | None = None
        self.writer = BatchWriter(netns)

    # -- plumbing ------------------------------------------------------------------------------

    def _sock(self) -> Any:
        me = threading.get_ident()
        if self._ipr is not None and self._owner != me:
            self._close_ipr()
        if self._ipr is None:
            from pyroute2 import IPRoute

            kwargs: dict[str, Any] = {}
            if self._netns is not None:
                kwargs.update(netns=self._netns, flags=0)
            self._ipr = IPRoute(**kwargs)
            self._owner = me
        return self._ipr

    def _close_ipr(self) -> None:
        ipr, self._ipr, self._owner = self._ipr, None, None
        if ipr is not None:
            try:
                ipr.close()
            except Exception:
                log.debug("ignoring error closing netlink socket", exc_info=True)

    def close(self) -> None:
        self._close_ipr()
        self.writer.close()

    def _call(self, what: str, fn: str, *args: Any, **kwargs: Any) -> Any:
        from pyroute2 import NetlinkError

        try:
            return getattr(self._sock(), fn)(*args, **kwargs)
        except NetlinkError as e:
            raise KernelError(f"{what}: {e}") from e
        except OSError as e:
            self._close_ipr()
            raise KernelError(f"{what}: {e}") from e

    def send(self, requests: list[Request]) -> list[Failure]:
        return self.writer.send(requests)

    # -- links ---------------------------------------------------------------------------------

    def links(self) -> list[Link]:
        """Every link, read with the struct decoder (``nlbatch.decode_link``), not pyroute2."""
        try:
            replies = self.writer.dump(nb.link_dump_request())
        except OSError as e:
            raise KernelError(f"dump links: {e}") from e
        out = []
        for mtype, body in replies:
            if mtype != nb.RTM_NEWLINK:
                continue
            link = nb.decode_link(body)
            up = bool(link.flags & IFF_UP and link.flags & IFF_RUNNING)
            out.append(Link(link.name, link.index, link.mtu, up))
        return out

    def link_with_address(self, ip: str) -> Link | None:
        """The first link carrying ``ip`` (the VXLAN device's parent)."""
        want = ipaddress.ip_address(ip)
        index = None
        for m in self._call("dump addresses", "addr", "dump", family=_family(self.version)):
            text = m.get_attr("IFA_LOCAL") or m.get_attr("IFA_ADDRESS")
            if text and ipaddress.ip_address(text) == want:
                index = m["index"]
                break
        if index is None:
            return None
        return next((link for link in self.links() if link.index == index), None)

    def _get_link(self, name: str) -> Any | None:
        try:
            msgs = self._sock().link("get", ifname=name)
        except Exception as e:
            if getattr(e, "code", None) in (errno.ENODEV, errno.ENOENT):
                return None
            raise KernelError(f"get link {name}: {e}") from e
        return msgs[0] if msgs else None

    def link_index(self, name: str) -> int | None:
        msg = self._get_link(name)
        return None if msg is None else msg["index"]

    def delete_device(self, name: str) -> bool:
        """Remove ``name`` if present (VXLAN off at start-up); True if it was there.

        Presence is read from the struct-decoded link dump: on the usual start (no device)
        no pyroute2 socket is opened, which was ~10% of a cold start's CPU for two families.
        """
        if all(link.name != name for link in self.links()):
            return False
        self._call(f"delete link {name}", "link", "del", ifname=name)
        return True

    def ensure_device(self, spec: DeviceSpec, parent: Link) -> int:
        """Create or repair the VXLAN device; returns its ifindex. Incompatible devices
        (VNI, port, parent, local address, MAC, kind) are deleted and recreated; MTU,
        addresses and admin state are fixed in place."""
        msg = self._get_link(spec.name)
        if msg is not None and (why := _incompatible(msg, spec, parent.index)):
            log.info("Recreating %s: %s", spec.name, why)
            self._call(f"delete link {spec.name}", "link", "del", index=msg["index"])
            msg = None
        if msg is None:
            local = "vxlan_local" if spec.version == 4 else "vxlan_local6"
            try:
                self._call(
                    f"create {spec.name}",
                    "link",
                    "add",
                    ifname=spec.name,
                    kind="vxlan",
                    address=spec.mac,
                    vxlan_id=spec.vni,
                    vxlan_link=parent.index,
                    vxlan_port=spec.port,
                    vxlan_learning=0,
                    **{local: spec.local_ip},
                )
            except KernelError as e:
                if "File exists" in str(e):
                    raise KernelError(
                        f"{e} (another device with VNI {spec.vni} and port {spec.port} may "
                        "already exist)"
                    ) from e
                raise
            msg = self._get_link(spec.name)
            if msg is None:
                raise KernelError(f"{spec.name} missing right after creation")
        index = msg["index"]
        if (msg.get_attr("IFLA_MTU") or 0) != spec.mtu:
            try:
                self._call(f"set MTU of {spec.name}", "link", "set", index=index, mtu=spec.mtu)
            except KernelError as e:
                log.warning("%s", e)  # upstream: logged only
        self._ensure_address(index, spec)
        if not msg["flags"] & IFF_UP:
            self._call(f"set {spec.name} up", "link", "set", index=index, state="up")
        return index

    def _ensure_address(self, index: int, spec: DeviceSpec) -> None:
        plen = 32 if spec.version == 4 else 128
        family = _family(spec.version)
        want = ipaddress.ip_address(spec.address)
        have = False
        for m in self._call("dump addresses", "addr", "dump", family=family, index=index):
            if m["index"] != index:
                continue
            text = m.get_attr("IFA_LOCAL") or m.get_attr("IFA_ADDRESS")
            addr = ipaddress.ip_address(text)
            if addr == want and m["prefixlen"] == plen:
                have = True
            elif not (addr.version == 6 and addr.is_link_local):
                self._call(
                    f"delete address {text} from {spec.name}",
                    "addr",
                    "del",
                    index=index,
                    address=text,
                    prefixlen=m["prefixlen"],
                )
        if not have:
            self._call(
                f"add address {spec.address} to {spec.name}",
                "addr",
                "add",
                index=index,
                address=spec.address,
                prefixlen=plen,
                **({"flags": IFA_F_NODAD} if spec.version == 6 else {}),
            )

    # -- readback ------------------------------------------------------------------------------

    def _dump(self, request: nb.Request) -> list[bytes]:
        try:
            return [body for _, body in self.writer.dump(request)]
        except OSError as e:
            raise KernelError(str(e)) from e

    def read_neighbours(self, ifindex: int) -> dict[str, str]:
        """Permanent ARP/NDP entries with a MAC on the device: tunnel IP -> MAC."""
        out: dict[str, str] = {}
        for body in self._dump(nb.neigh_dump_request(_family(self.version))):
            n = nb.decode_neigh(body)
            if n.ifindex != ifindex or not n.state & NUD_PERMANENT:
                continue
            ip, mac = n.attrs.get(nb.NDA_DST), n.attrs.get(nb.NDA_LLADDR)
            if ip and mac:
                out[nb.ip_text(ip)] = nb.mac_text(mac)
        return out

    def read_fdb(self, ifindex: int) -> dict[str, str]:
        """Permanent FDB entries with a destination on the device: MAC -> node IP."""
        out: dict[str, str] = {}
        want_len = 4 if self.version == 4 else 16
        for body in self._dump(nb.neigh_dump_request(socket.AF_BRIDGE)):
            n = nb.decode_neigh(body)
            if n.ifindex != ifindex or not n.state & NUD_PERMANENT:
                continue
            mac, dst = n.attrs.get(nb.NDA_LLADDR), n.attrs.get(nb.NDA_DST)
            if mac and dst and len(dst) == want_len:
                out[nb.mac_text(mac)] = nb.ip_text(dst)
        return out

    def read_routes(
        self, ifindex: int | None, exclusive_proto: int, names: dict[int, str]
    ) -> dict[tuple[str, int], RouteSpec]:
        """Owned main-table routes, keyed by (CIDR, priority)."""
        out: dict[tuple[str, int], RouteSpec] = {}
        zero = "0.0.0.0" if self.version == 4 else "::"
        for body in self._dump(nb.route_dump_request(_family(self.version))):
            r = nb.decode_route(body)
            a = r.attrs
            table = struct.unpack("=I", a[nb.RTA_TABLE])[0] if nb.RTA_TABLE in a else r.table
            if table != MAIN_TABLE or r.rtype not in (RTN_UNICAST, RTN_BLACKHOLE):
                continue
            if r.proto == RTPROT_KERNEL:
                continue
            oif = struct.unpack("=I", a[nb.RTA_OIF])[0] if nb.RTA_OIF in a else None
            if not (r.proto == exclusive_proto or (ifindex is not None and oif == ifindex)):
                continue
            dst = nb.ip_text(a[nb.RTA_DST]) if nb.RTA_DST in a else zero
            cidr = f"{dst}/{r.dst_len}"
            mtu = 0
            if nb.RTA_METRICS in a:
                metrics = nb.parse_attrs(a[nb.RTA_METRICS], 0)
                if nb.RTAX_MTU in metrics:
                    mtu = struct.unpack("=I", metrics[nb.RTAX_MTU])[0]
            device = "" if r.rtype == RTN_BLACKHOLE else names.get(oif or 0, f"if{oif}")
            spec = RouteSpec(
                cidr,
                device=device,
                gateway=nb.ip_text(a[nb.RTA_GATEWAY]) if nb.RTA_GATEWAY in a else "",
                proto=r.proto,
                scope=r.scope,
                onlink=bool(r.flags & RTNH_F_ONLINK),
                mtu=mtu,
            )
            prio = struct.unpack("=I", a[nb.RTA_PRIORITY])[0] if nb.RTA_PRIORITY in a else 0
            out[(cidr, prio)] = spec
        return out


def _incompatible(msg: Any, spec: DeviceSpec, parent_index: int) -> str:
    """Why an existing link cannot be reused for ``spec`` ("" = it can)."""
    info = msg.get_attr("IFLA_LINKINFO")
    kind = info.get_attr("IFLA_INFO_KIND") if info is not None else None
    if kind != "vxlan":
        return f"kind is {kind!r}, not 'vxlan'"
    data = info.get_attr("IFLA_INFO_DATA")
    if data is None:
        return "no VXLAN attributes"
    local = data.get_attr("IFLA_VXLAN_LOCAL" if spec.version == 4 else "IFLA_VXLAN_LOCAL6")
    checks = (
        ("VNI", data.get_attr("IFLA_VXLAN_ID"), spec.vni),
        ("port", data.get_attr("IFLA_VXLAN_PORT"), spec.port),
        ("parent", data.get_attr("IFLA_VXLAN_LINK"), parent_index),
        ("local address", local and str(ipaddress.ip_address(local)), spec.local_ip),
        ("MAC", (msg.get_attr("IFLA_ADDRESS") or "").lower(), spec.mac),
    )
    for what, have, want in checks:
        if have != want:
            return f"{what} is {have!r}, want {want!r}"
    return ""


__all__ = ["KernelError", "Link", "VXLANKernel", "route_priority"]
