"""The Felix parameters that decide a host endpoint's traffic before policy, per node, as Felix
on that node reads them: FailsafeInboundHostPorts / FailsafeOutboundHostPorts and
DefaultEndpointToHostAction, from the ``default`` FelixConfiguration overridden by
``node.<name>`` (each through the syncer's update processor, annotations included), else
upstream's defaults (``calico.api.felixdefaults``). Node-selector scoped configurations are
not read (design/explain.md "Host endpoints")."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from calico.api import felixdefaults
from calico.policyeval.storeddocs import documents

log = logging.getLogger(__name__)

_PARAMS = {
    "failsafeinboundhostports": "failsafe_inbound",
    "failsafeoutboundhostports": "failsafe_outbound",
    "defaultendpointtohostaction": "endpoint_to_host",
}


@dataclass(frozen=True)
class Failsafe:
    """One failsafe entry; ``net`` (may be None) is the peer's required network."""

    protocol: str  # tcp | udp
    port: int
    net: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None

    def __str__(self) -> str:
        if self.net is None:
            return f"{self.protocol}:{self.port}"
        net = f"[{self.net}]" if self.net.version == 6 else str(self.net)
        return f"{self.protocol}:{net}:{self.port}"


def parse_failsafes(text: str) -> tuple[Failsafe, ...]:
    """Felix's v1 form (``tcp:22,udp:68,tcp:10.0.0.0/8:179,tcp:[fd00::/8]:22``, ``none``),
    through the API's grammar for one entry (``calico.api.felixconfig.ProtoPort``)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if items in ([], ["none"]):
        return ()
    from calico.api.felixconfig import ProtoPort

    out = []
    for item in items:
        pp = ProtoPort.parse(item)
        net = ipaddress.ip_network(pp.net, strict=False) if pp.net else None
        out.append(Failsafe(pp.protocol.lower(), int(pp.port), net))
    return tuple(out)


@dataclass(frozen=True)
class HostConfig:
    failsafe_inbound: tuple[Failsafe, ...]
    failsafe_outbound: tuple[Failsafe, ...]
    endpoint_to_host: str  # Drop | Accept | Return
    sources: Mapping[str, str] = field(default_factory=dict)  # parameter -> where it was set


@dataclass
class FelixConfigs:
    """The stored FelixConfiguration documents, converted only for a node that is asked about."""

    raw: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> stored JSON
    # name -> stored text: a document read with its text converts through the conversion cache
    texts: dict[str, str] = field(default_factory=dict)
    _cache: dict[str, HostConfig] = field(default_factory=dict)

    @classmethod
    def from_kvs(cls, prefix: str, kvs: Iterable[Any]) -> FelixConfigs:
        out = cls()
        for name, raw, text in documents(prefix, kvs):
            out.raw[name] = raw
            out.texts[name] = text
        return out

    def _params(self, name: str) -> dict[str, str]:
        raw = self.raw.get(name)
        if raw is None:
            return {}
        from calico.model.resources import ResourceKey

        key = ResourceKey("FelixConfiguration", name, "")
        text = self.texts.get(name)
        try:
            if text is not None:
                from calico.policyeval import convcache

                converted = convcache.default().process(key, text, raw)
            else:
                from calico.model import processors as p

                converted = p.process(key, raw)
        except Exception as exc:  # Felix's syncer drops it too
            log.warning("Ignoring FelixConfiguration %s: %s", name, exc)
            return {}
        out = {}
        for key, value in converted.items():
            param = _PARAMS.get(str(getattr(key, "name", "")).lower())
            if param is not None and isinstance(value, str):
                out[param] = value
        return out

    def for_node(self, node: str) -> HostConfig:
        """The node's effective values (per-node config over the global one over defaults)."""
        done = self._cache.get(node)
        if done is not None:
            return done
        values = {
            "failsafe_inbound": felixdefaults.FAILSAFE_INBOUND_HOST_PORTS,
            "failsafe_outbound": felixdefaults.FAILSAFE_OUTBOUND_HOST_PORTS,
            "endpoint_to_host": felixdefaults.DEFAULT_ENDPOINT_TO_HOST_ACTION,
        }
        sources = dict.fromkeys(values, "default")
        for name in ("default", f"node.{node}"):
            for param, text in self._params(name).items():
                values[param] = text
                sources[param] = f"FelixConfiguration {name}"
        action = values["endpoint_to_host"].strip().capitalize()
        if action not in ("Drop", "Accept", "Return"):
            action = "Drop"  # Felix refuses the value and keeps its default
        out = HostConfig(
            parse_failsafes(values["failsafe_inbound"]),
            parse_failsafes(values["failsafe_outbound"]),
            action,
            sources,
        )
        self._cache[node] = out
        return out
