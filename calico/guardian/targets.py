"""Where tunnelled requests go: upstream's Calico targets and Go ServeMux-style matching.

A pattern ending in ``/`` matches every path under it; any other pattern matches exactly; the
longest matching pattern wins. ``/api/`` and ``/apis/`` go to the Kubernetes API with the pod's
service-account token (re-read per request, so a rotated token is picked up) and CA;
``/goldmane.Statistics/List`` goes to Goldmane, verified with ``CA_FILE`` and, when both are
set, presenting ``GOLDMANE_CLIENT_CERT``/``_KEY``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from calico.guardian.config import ConfigError, GuardianConfig
from calico.guardian.tlsconfig import target_client_tls


@dataclass(frozen=True)
class Target:
    path: str
    scheme: str
    host: str
    port: int
    base_path: str
    tls: ssl.SSLContext
    token_file: str | None = None

    @property
    def dest(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.base_path}"

    def matches(self, path: str) -> bool:
        return path.startswith(self.path) if self.path.endswith("/") else path == self.path

    def authorization(self) -> bytes | None:
        """``Bearer <token>`` from the token file; OSError when it cannot be read."""
        if self.token_file is None:
            return None
        token = Path(self.token_file).read_text().strip()
        return f"Bearer {token}".encode()


def make_target(path: str, url: str, tls: ssl.SSLContext, token_file: str | None = None) -> Target:
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise ConfigError(f"target {path}: destination {url!r} must be an https:// URL")
    try:
        port = parts.port or 443
    except ValueError as exc:
        raise ConfigError(f"target {path}: destination {url!r}: {exc}") from None
    return Target(path, parts.scheme, parts.hostname, port, parts.path.rstrip("/"), tls, token_file)


def calico_targets(cfg: GuardianConfig) -> list[Target]:
    k8s_tls = target_client_tls(cfg.k8s_ca_file)
    goldmane_tls = target_client_tls(cfg.ca_file, cfg.goldmane_client_cert, cfg.goldmane_client_key)
    return [
        make_target("/api/", cfg.k8s_endpoint, k8s_tls, cfg.k8s_token_file),
        make_target("/apis/", cfg.k8s_endpoint, k8s_tls, cfg.k8s_token_file),
        make_target("/goldmane.Statistics/List", cfg.goldmane_endpoint, goldmane_tls),
    ]


def match(targets: list[Target], path: str) -> Target | None:
    path = path.split("?", 1)[0]
    best: Target | None = None
    for target in targets:
        if target.matches(path) and (best is None or len(target.path) > len(best.path)):
            best = target
    return best
