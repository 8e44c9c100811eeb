"""Which HTTP proxy, if any, the tunnel goes through: Go's ``httpproxy.FromEnvironment``.

``HTTPS_PROXY``/``https_proxy`` names the proxy (a bare ``host:port`` means ``http://``);
``NO_PROXY``/``no_proxy`` lists exceptions: ``*``, IPs, CIDRs and domains (``foo.com`` covers
itself and its subdomains, ``.foo.com`` and ``*.foo.com`` only subdomains), each optionally
with a port. ``localhost`` and loopback addresses never use a proxy. Guardian accepts only
``http`` and ``https`` proxies and fills in the default port (80 / 443).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from calico.guardian.config import ConfigError


@dataclass(frozen=True)
class ProxyURL:
    scheme: str
    host: str
    port: int
    username: str | None = None
    password: str | None = None

    def redacted(self) -> str:
        auth = f"{self.username}:xxxxx@" if self.username is not None else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{auth}{host}:{self.port}"


def _get(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name) or environ.get(name.lower()) or ""


def _parse_proxy(raw: str) -> ProxyURL:
    parts = urlsplit(raw)
    if not parts.scheme or not parts.netloc:
        parts = urlsplit("http://" + raw)
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"proxy URL had invalid scheme ({parts.scheme}) - must be http or https")
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"invalid proxy URL {raw!r}: {exc}") from None
    if not parts.hostname:
        raise ConfigError(f"invalid proxy URL {raw!r}: no host")
    if port is None:
        port = 80 if parts.scheme == "http" else 443
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return ProxyURL(parts.scheme, parts.hostname, port, user, password)


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    host = host.lower()
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        return True
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        try:
            if ip is not None and ip in ipaddress.ip_network(entry, strict=False) and "/" in entry:
                return True
        except ValueError:
            pass
        ehost, eport = entry, ""
        if entry.startswith("["):
            ehost, _, rest = entry[1:].partition("]")
            eport = rest.lstrip(":")
        elif entry.count(":") == 1:
            ehost, _, eport = entry.partition(":")
        if eport and eport != str(port):
            continue
        try:
            entry_ip = ipaddress.ip_address(ehost)
        except ValueError:
            entry_ip = None
        if entry_ip is not None:
            if ip == entry_ip:
                return True
            continue
        if ehost.startswith("*."):
            ehost = ehost[1:]
        if ehost.startswith("."):
            if host.endswith(ehost):
                return True
        elif host == ehost or host.endswith("." + ehost):
            return True
    return False


def proxy_for(host: str, port: int, environ: Mapping[str, str]) -> ProxyURL | None:
    """The proxy for an ``https://host:port`` target, or None to dial directly."""
    raw = _get(environ, "HTTPS_PROXY")
    if not raw:
        return None
    if _bypassed(host, port, _get(environ, "NO_PROXY")):
        return None
    return _parse_proxy(raw)
