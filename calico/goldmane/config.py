"""Goldmane's configuration: upstream's environment variables, names and defaults (no prefix).

Values parse as Go does (``strconv.ParseBool``/``Atoi``, ``time.ParseDuration``); a bad value
is a ConfigError naming the variable, which the daemon prints before exiting 1. PORT 0 and
HEALTH_PORT 0 bind an ephemeral port (logged), which is how tests run it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from calico.durations import DurationError, parse_duration
from calico.gobool import go_bool


class ConfigError(ValueError):
    """A malformed or unsupported setting; the message names the variable."""


@dataclass(frozen=True)
class GoldmaneConfig:
    log_level: str = "info"
    push_url: str = ""
    file_config_path: str = ""
    port: int = 443
    health_enabled: bool = True
    health_host: str = ""
    health_port: int = 8080
    client_cert_path: str = ""
    client_key_path: str = ""
    ca_cert_path: str = ""
    server_name: str = "tigera-linseed.tigera-elasticsearch.svc"
    server_cert_path: str = ""
    server_key_path: str = ""
    aggregation_window: float = 15.0
    emit_after_seconds: int = 30
    emitter_aggregation_window: float = 300.0
    profile_port: int = 0
    prometheus_port: int = 0
    emitter_state_path: str = "/var/lib/calico/goldmane/flow-emitter-state.json"

    @property
    def tls(self) -> bool:
        """gRPC over mTLS when both server files are given; plaintext otherwise."""
        return bool(self.server_cert_path and self.server_key_path)


_KINDS = {
    "LOG_LEVEL": ("log_level", "str"),
    "PUSH_URL": ("push_url", "str"),
    "FILE_CONFIG_PATH": ("file_config_path", "str"),
    "PORT": ("port", "port"),
    "HEALTH_ENABLED": ("health_enabled", "bool"),
    "HEALTH_HOST": ("health_host", "str"),
    "HEALTH_PORT": ("health_port", "port"),
    "CLIENT_CERT_PATH": ("client_cert_path", "str"),
    "CLIENT_KEY_PATH": ("client_key_path", "str"),
    "CA_CERT_PATH": ("ca_cert_path", "str"),
    "SERVER_NAME": ("server_name", "str"),
    "SERVER_CERT_PATH": ("server_cert_path", "str"),
    "SERVER_KEY_PATH": ("server_key_path", "str"),
    "AGGREGATION_WINDOW": ("aggregation_window", "duration"),
    "EMIT_AFTER_SECONDS": ("emit_after_seconds", "int"),
    "EMITTER_AGGREGATION_WINDOW": ("emitter_aggregation_window", "duration"),
    "PROFILE_PORT": ("profile_port", "int"),
    "PROMETHEUS_PORT": ("prometheus_port", "port"),
    "EMITTER_STATE_PATH": ("emitter_state_path", "str"),  # ours: upstream uses a ConfigMap
}


def _convert(var: str, kind: str, raw: str) -> object:
    if kind == "str":
        return raw
    if kind == "bool":
        if (flag := go_bool(raw)) is not None:
            return flag
        raise ConfigError(f"{var}: invalid boolean {raw!r}")
    if kind == "duration":
        try:
            return parse_duration(raw)
        except DurationError as exc:
            raise ConfigError(f"{var}: {exc}") from None
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        raise ConfigError(f"{var}: invalid integer {raw!r}") from None
    if kind == "port" and not 0 <= value <= 65535:
        raise ConfigError(f"{var}: port {value} out of range 0-65535")
    return value


def load_config(environ: Mapping[str, str]) -> GoldmaneConfig:
    values = {
        attr: _convert(var, kind, environ[var])
        for var, (attr, kind) in _KINDS.items()
        if var in environ
    }
    cfg = GoldmaneConfig(**values)  # type: ignore[arg-type]
    window = cfg.aggregation_window
    if window < 1 or window != int(window):
        raise ConfigError(
            f"AGGREGATION_WINDOW: must be a whole number of seconds >= 1s, got {window}s"
        )
    if bool(cfg.server_cert_path) != bool(cfg.server_key_path):
        raise ConfigError("SERVER_CERT_PATH and SERVER_KEY_PATH must be set together")
    if cfg.tls and not cfg.ca_cert_path:
        raise ConfigError("CA_CERT_PATH: required to verify clients when the server uses TLS")
    if cfg.push_url:
        scheme, sep, rest = cfg.push_url.partition("://")
        if not sep or scheme not in ("http", "https") or not rest:
            raise ConfigError(
                f"PUSH_URL: expected an http:// or https:// URL, got {cfg.push_url!r}"
            )
        if bool(cfg.client_cert_path) != bool(cfg.client_key_path):
            raise ConfigError("CLIENT_CERT_PATH and CLIENT_KEY_PATH must be set together")
    if cfg.emitter_aggregation_window < window:
        raise ConfigError(
            f"EMITTER_AGGREGATION_WINDOW: must be at least AGGREGATION_WINDOW ({window:g}s)"
        )
    if cfg.emit_after_seconds < 0:
        raise ConfigError(f"EMIT_AFTER_SECONDS: must not be negative, got {cfg.emit_after_seconds}")
    return cfg


def emit_shape(cfg: GoldmaneConfig) -> tuple[int, int]:
    """(buckets per emitted collection, buckets to wait before pushing), as upstream's daemon."""
    window = int(cfg.aggregation_window)
    return int(cfg.emitter_aggregation_window) // window, cfg.emit_after_seconds // window
