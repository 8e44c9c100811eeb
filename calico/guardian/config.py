"""Guardian's configuration from the environment, with upstream's names and defaults.

Upstream reads it with envconfig and the prefix ``GUARDIAN``: every field is
``GUARDIAN_<NAME>``; the two fields carrying an explicit ``envconfig`` tag (``HEALTH_ENABLED``,
``HEALTH_PORT``) are also read unprefixed when the prefixed name is unset. Values parse as Go
does (``strconv.ParseBool``, ``ParseInt``, ``time.ParseDuration``). A bad value is a
ConfigError naming the variable; the daemon prints it and exits non-zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from calico.durations import DurationError, parse_duration
from calico.gobool import go_bool

PREFIX = "GUARDIAN"
DEFAULT_TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token"
DEFAULT_CA_BUNDLE_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"


class ConfigError(ValueError):
    """A missing or malformed setting; the message names the variable."""


def _env(
    name: str, kind: str, default: Any, *, unprefixed: bool = False, required: bool = False
) -> Any:
    return field(
        default=default,
        metadata={"env": name, "kind": kind, "unprefixed": unprefixed, "required": required},
    )


@dataclass(frozen=True)
class GuardianConfig:
    log_level: str = _env("LOGLEVEL", "str", "INFO")
    cert_path: str = _env("CERT_PATH", "str", "/certs")
    voltron_ca_type: str = _env("VOLTRON_CA_TYPE", "str", "Tigera")
    voltron_url: str = _env("VOLTRON_URL", "str", "", required=True)
    health_enabled: bool = _env("HEALTH_ENABLED", "bool", True, unprefixed=True)
    health_port: int = _env("HEALTH_PORT", "port", 8080, unprefixed=True)
    keep_alive_enable: bool = _env("KEEP_ALIVE_ENABLE", "bool", True)
    keep_alive_interval_ms: int = _env("KEEP_ALIVE_INTERVAL", "int", 100)
    k8s_endpoint: str = _env("K8S_ENDPOINT", "str", "https://kubernetes.default")
    tunnel_dial_retry_attempts: int = _env("TUNNEL_DIAL_RETRY_ATTEMPTS", "int", -1)
    tunnel_dial_retry_interval: float = _env("TUNNEL_DIAL_RETRY_INTERVAL", "duration", 5.0)
    tunnel_dial_timeout: float = _env("TUNNEL_DIAL_TIMEOUT", "duration", 10.0)
    tunnel_dial_recreate_on_tunnel_close: bool = _env(
        "TUNNEL_DIAL_RECREATE_ON_TUNNEL_CLOSE", "bool", True
    )
    connection_retry_attempts: int = _env("CONNECTION_RETRY_ATTEMPTS", "int", 25)
    connection_retry_interval: float = _env("CONNECTION_RETRY_INTERVAL", "duration", 5.0)
    goldmane_endpoint: str = _env("GOLDMANE_ENDPOINT", "str", "https://goldmane.calico-system:7443")
    goldmane_client_cert: str = _env("GOLDMANE_CLIENT_CERT", "str", "")
    goldmane_client_key: str = _env("GOLDMANE_CLIENT_KEY", "str", "")
    ca_file: str = _env("CA_FILE", "str", "/etc/pki/tls/cert.pem")
    listen: bool = _env("LISTEN", "bool", True)
    listen_host: str = _env("LISTEN_HOST", "str", "")
    listen_port: int = _env("LISTEN_PORT", "port", 8080)
    # calico-py extensions (not upstream): where the pod's service-account files are, so the
    # agent can run outside a pod. Defaults are the in-pod paths upstream hard-codes.
    k8s_token_file: str = _env("K8S_TOKEN_FILE", "str", DEFAULT_TOKEN_PATH)
    k8s_ca_file: str = _env("K8S_CA_FILE", "str", DEFAULT_CA_BUNDLE_PATH)

    @property
    def public_ca(self) -> bool:
        return self.voltron_ca_type.lower() == "public"

    @property
    def voltron_host_port(self) -> tuple[str, int]:
        return split_host_port(self.voltron_url, "GUARDIAN_VOLTRON_URL")

    @property
    def keep_alive_interval(self) -> float:
        return self.keep_alive_interval_ms / 1000.0


def split_host_port(text: str, what: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as Go's net.SplitHostPort, with a port number."""
    if "://" in text:
        raise ConfigError(f"{what} {text!r}: expected host:port without a scheme")
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{what} {text!r}: expected host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ConfigError(f"{what} {text!r}: too many colons (bracket an IPv6 address)")
    return host, _port(port, what)


def _port(text: str, what: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise ConfigError(f"{what}: invalid port {text!r}") from None
    if not 0 <= value <= 65535:
        raise ConfigError(f"{what}: port {value} out of range 0-65535")
    return value


def _convert(var: str, kind: str, raw: str) -> Any:
    if kind == "str":
        return raw
    if kind == "bool":
        if (flag := go_bool(raw)) is not None:
            return flag
        raise ConfigError(f"{var}: invalid boolean {raw!r}")
    if kind == "int":
        try:
            return int(raw.strip(), 0)
        except ValueError:
            raise ConfigError(f"{var}: invalid integer {raw!r}") from None
    if kind == "port":
        return _port(raw.strip(), var)
    if kind == "duration":
        try:
            return parse_duration(raw)
        except DurationError as exc:
            raise ConfigError(f"{var}: {exc}") from None
    raise AssertionError(kind)


def load_config(environ: Mapping[str, str]) -> GuardianConfig:
    values: dict[str, Any] = {}
    for f in fields(GuardianConfig):
        meta = f.metadata
        var = f"{PREFIX}_{meta['env']}"
        raw = environ.get(var)
        if raw is None and meta["unprefixed"] and meta["env"] in environ:
            var = meta["env"]
            raw = environ[var]
        if raw is None or (meta["required"] and raw == ""):
            if meta["required"]:
                raise ConfigError(f"required key {PREFIX}_{meta['env']} missing value")
            continue
        values[f.name] = _convert(var, meta["kind"], raw)
    cfg = GuardianConfig(**values)
    cfg.voltron_host_port  # noqa: B018 - validate early, with the variable's name
    return cfg
