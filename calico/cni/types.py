"""CNI results in the shapes of spec versions 0.3.0, 0.3.1, 0.4.0 and 1.0.0.

Internally a result is version-neutral (:class:`Result`); :meth:`Result.to_dict` renders it for
the version the runtime asked for. The only shape difference in that range is the per-IP
``version`` field, which 1.0.0 dropped.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0")
CURRENT_VERSION = "1.0.0"
VERSIONS_WITH_CHECK = ("0.4.0", "1.0.0")


@dataclass
class Interface:
    name: str
    mac: str = ""
    sandbox: str = ""


@dataclass
class IPConfig:
    address: str  # CIDR notation, e.g. "10.0.0.5/32"
    gateway: str = ""
    interface: int | None = None

    @property
    def version(self) -> int:
        return ipaddress.ip_interface(self.address).version


@dataclass
class Route:
    dst: str
    gw: str = ""


@dataclass
class Result:
    interfaces: list[Interface] = field(default_factory=list)
    ips: list[IPConfig] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    dns: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, cni_version: str) -> dict[str, Any]:
        legacy = cni_version != "1.0.0"
        ips: list[dict[str, Any]] = []
        for ip in self.ips:
            entry: dict[str, Any] = {}
            if legacy:
                entry["version"] = str(ip.version)
            if ip.interface is not None:
                entry["interface"] = ip.interface
            entry["address"] = ip.address
            if ip.gateway:
                entry["gateway"] = ip.gateway
            ips.append(entry)
        out: dict[str, Any] = {"cniVersion": cni_version}
        if self.interfaces:
            out["interfaces"] = [
                {k: v for k, v in (("name", i.name), ("mac", i.mac), ("sandbox", i.sandbox)) if v}
                for i in self.interfaces
            ]
        out["ips"] = ips
        if self.routes:
            out["routes"] = [{"dst": r.dst, **({"gw": r.gw} if r.gw else {})} for r in self.routes]
        out["dns"] = dict(self.dns)
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Result:
        """Parse any supported version's result (an exec'd IPAM plugin's output)."""
        res = cls()
        for i in doc.get("interfaces") or []:
            res.interfaces.append(
                Interface(
                    name=i.get("name", ""), mac=i.get("mac", ""), sandbox=i.get("sandbox", "")
                )
            )
        for ip in doc.get("ips") or []:
            addr = ip.get("address")
            if not isinstance(addr, str):
                raise ValueError("IPAM result has an IP without an address")
            ipaddress.ip_interface(addr)
            res.ips.append(
                IPConfig(
                    address=addr, gateway=ip.get("gateway") or "", interface=ip.get("interface")
                )
            )
        for r in doc.get("routes") or []:
            res.routes.append(Route(dst=r["dst"], gw=r.get("gw") or ""))
        res.dns = dict(doc.get("dns") or {})
        return res


def version_result(requested: str) -> dict[str, Any]:
    """The VERSION reply; it echoes the runtime's cniVersion when we support it."""
    version = requested if requested in SUPPORTED_VERSIONS else CURRENT_VERSION
    return {"cniVersion": version, "supportedVersions": list(SUPPORTED_VERSIONS)}
