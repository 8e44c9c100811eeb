"""whisker-backend's configuration: upstream's environment variables and defaults (no prefix).

Upstream serves HTTPS only; ours serves HTTPS when SERVER_TLS_CERT_PATH and
SERVER_TLS_KEY_PATH are both set and otherwise plain HTTP bound to loopback only (an
unencrypted flow API must not be reachable from the network), so a non-loopback HOST without
TLS is refused. The Goldmane connection is mTLS when TLS_CERT_PATH and TLS_KEY_PATH are set
(verified against CA_CERT_PATH) and plaintext otherwise, matching Goldmane's own default.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass


class ConfigError(ValueError):
    """A malformed or unsupported setting; the message names the variable."""


@dataclass(frozen=True)
class WhiskerConfig:
    goldmane_host: str = "goldmane.calico-system.svc:7443"
    host: str = ""
    port: int = 8080
    log_level: str = "info"
    tls_cert_path: str = ""
    tls_key_path: str = ""
    ca_cert_path: str = "/etc/pki/tls/certs/ca.crt"
    server_tls_cert_path: str = ""
    server_tls_key_path: str = ""

    @property
    def server_tls(self) -> bool:
        return bool(self.server_tls_cert_path and self.server_tls_key_path)

    @property
    def goldmane_tls(self) -> bool:
        return bool(self.tls_cert_path and self.tls_key_path)

    @property
    def bind_host(self) -> str:
        """Where to listen: HOST, or loopback when HOST is empty and there is no TLS."""
        if self.host:
            return self.host
        return "" if self.server_tls else "127.0.0.1"


_VARS = {
    "GOLDMANE_HOST": "goldmane_host",
    "HOST": "host",
    "PORT": "port",
    "LOG_LEVEL": "log_level",
    "TLS_CERT_PATH": "tls_cert_path",
    "TLS_KEY_PATH": "tls_key_path",
    "CA_CERT_PATH": "ca_cert_path",
    "SERVER_TLS_CERT_PATH": "server_tls_cert_path",
    "SERVER_TLS_KEY_PATH": "server_tls_key_path",
}


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_config(environ: Mapping[str, str]) -> WhiskerConfig:
    values: dict[str, object] = {
        attr: environ[var] for var, attr in _VARS.items() if var in environ
    }
    if "port" in values:
        raw = str(values["port"])
        try:
            port = int(raw.strip(), 10)
        except ValueError:
            raise ConfigError(f"PORT: invalid integer {raw!r}") from None
        if not 0 <= port <= 65535:
            raise ConfigError(f"PORT: port {port} out of range 0-65535")
        values["port"] = port
    cfg = WhiskerConfig(**values)  # type: ignore[arg-type]
    if not cfg.goldmane_host:
        raise ConfigError("GOLDMANE_HOST: must be host:port")
    if bool(cfg.server_tls_cert_path) != bool(cfg.server_tls_key_path):
        raise ConfigError("SERVER_TLS_CERT_PATH and SERVER_TLS_KEY_PATH must be set together")
    if bool(cfg.tls_cert_path) != bool(cfg.tls_key_path):
        raise ConfigError("TLS_CERT_PATH and TLS_KEY_PATH must be set together")
    if not cfg.server_tls and cfg.host and not _is_loopback(cfg.host):
        raise ConfigError(
            f"HOST: {cfg.host} is not a loopback address; serving beyond localhost needs "
            "SERVER_TLS_CERT_PATH and SERVER_TLS_KEY_PATH"
        )
    return cfg
