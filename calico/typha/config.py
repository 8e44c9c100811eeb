"""Typha's parameters: upstream's names and defaults, from ``TYPHA_*`` and ``typha.cfg``.

Precedence: environment (``TYPHA_<NAME>``, any case) > the INI file (every section merged into
one map; default ``/etc/calico/typha.cfg``) > default. Empty values are ignored; ``none`` sets
the zero value (refused for ``non-zero`` fields); an invalid value falls back to the default
with a warning, except for ``die-on-fail`` fields, which are start-up errors.

The datastore connection comes from the one daemon loader (``datastore_settings``, through
``calico.datastore.daemon_config``): the libcalico environment every client reads
(``DATASTORE_TYPE``, ``ETCD_ENDPOINTS``, ...) with Typha's own ``DatastoreType``/``Etcd*``/
``CalicoDatastorePath`` from ``typha.cfg`` and ``TYPHA_*`` on top.
"""

from __future__ import annotations

import configparser
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from calico.datastore.config import DatastoreConfig
from calico.datastore.daemon_config import daemon_datastore_config

log = logging.getLogger(__name__)

DEFAULT_CONFIG_FILE = "/etc/calico/typha.cfg"


class TyphaConfigError(ValueError):
    pass


def _bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("true", "1", "yes", "y", "t"):
        return True
    if low in ("false", "0", "no", "n", "f"):
        return False
    raise ValueError(f"invalid boolean {raw!r}")


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw.strip())
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ValueError(f"{value} is out of range [{lo}, {hi}]")
        return value

    return parse


def _float(raw: str) -> float:
    value = float(raw.strip())
    if value < 0:
        raise ValueError(f"negative duration {raw!r}")
    return value


def _str(raw: str) -> str:
    return raw.strip()


def _oneof(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        low = raw.strip().lower()
        for o in options:
            if o.lower() == low:
                return o
        raise ValueError(f"{raw!r} is not one of {', '.join(options)}")

    return parse


_ZERO = {_bool: False, _float: 0.0, _str: ""}


@dataclass(frozen=True)
class Param:
    name: str
    parse: Callable[[str], Any]
    default: str
    flags: frozenset[str] = frozenset()

    def zero(self) -> Any:
        return _ZERO.get(self.parse, 0)


def _p(name: str, parse: Callable[[str], Any], default: str, flags: str = "") -> Param:
    return Param(name, parse, default, frozenset(f for f in flags.split(",") if f))


PARAMS: tuple[Param, ...] = (
    _p("DatastoreType", _oneof("local", "etcdv3", "kubernetes"), "", "die-on-fail"),
    _p("EtcdAddr", _str, ""),
    _p("EtcdScheme", _oneof("http", "https"), "http"),
    _p("EtcdKeyFile", _str, ""),
    _p("EtcdCertFile", _str, ""),
    _p("EtcdCaFile", _str, ""),
    _p("EtcdEndpoints", _str, ""),
    _p("CalicoDatastorePath", _str, ""),
    _p("LogFilePath", _str, "/var/log/calico/typha.log"),
    _p("LogSeverityFile", _str, "INFO"),
    _p("LogSeverityScreen", _str, "INFO"),
    _p("LogSeveritySys", _str, "INFO"),
    _p("HealthEnabled", _bool, "false"),
    _p("HealthHost", _str, "localhost"),
    _p("HealthPort", _int(0, 65535), "9098"),
    _p("PrometheusMetricsEnabled", _bool, "false"),
    _p("PrometheusMetricsHost", _str, ""),
    _p("PrometheusMetricsPort", _int(0, 65535), "9093"),
    _p("PrometheusGoMetricsEnabled", _bool, "true"),
    _p("PrometheusProcessMetricsEnabled", _bool, "true"),
    _p("SnapshotCacheMaxBatchSize", _int(1), "100", "non-zero"),
    _p("ServerMaxMessageSize", _int(1), "100", "non-zero"),
    _p("ServerMaxFallBehindSecs", _float, "300"),
    _p("ServerNewClientFallBehindGracePeriod", _float, "300"),
    _p("ServerMinBatchingAgeThresholdSecs", _float, "0.01"),
    _p("ServerPingIntervalSecs", _float, "10"),
    _p("ServerPongTimeoutSecs", _float, "60"),
    _p("ServerHandshakeTimeoutSecs", _float, "10"),
    _p("ServerWriteTimeoutSecs", _float, "120"),
    _p("ServerPort", _int(-1, 65535), "0"),
    _p("ServerHost", _str, ""),
    _p("ServerKeyFile", _str, ""),
    _p("ServerCertFile", _str, ""),
    _p("CAFile", _str, ""),
    _p("ClientCN", _str, ""),
    _p("ClientURISAN", _str, ""),
    _p("DebugMemoryProfilePath", _str, ""),
    _p("DebugDisableLogDropping", _bool, "false"),
    _p("DebugHost", _str, "localhost"),
    _p("DebugPort", _int(0, 65535), "0"),
    _p("ConnectionRebalancingMode", _oneof("none", "kubernetes"), "none"),
    _p("ConnectionDropIntervalSecs", _float, "1"),
    _p("ShutdownTimeoutSecs", _float, "300"),
    _p("ShutdownConnectionDropIntervalMaxSecs", _float, "1"),
    _p("MaxConnectionsUpperLimit", _int(1), "10000", "non-zero"),
    _p("MaxConnectionsLowerLimit", _int(1), "400", "non-zero"),
    _p("K8sServicePollIntervalSecs", _float, "30"),
    _p("K8sNamespace", _str, "kube-system"),
    _p("K8sServiceName", _str, "calico-typha"),
    _p("K8sPortName", _str, "calico-typha"),
)
BY_LOWER = {p.name.lower(): p for p in PARAMS}


class TyphaConfig:
    """Resolved parameters; ``config.server_port`` or ``config["ServerPort"]``."""

    def __init__(
        self,
        values: dict[str, Any],
        raw: dict[str, str],
        errors: list[str],
        layers: tuple[tuple[str, dict[str, str]], ...] = (),
    ) -> None:
        self._values = values
        self.raw = raw  # the parameters that were set explicitly (name -> text)
        self.errors = errors
        self.layers = layers  # (where, {name: text}) lowest priority first, as read

    def __getitem__(self, name: str) -> Any:
        return self._values[BY_LOWER[name.lower()].name]

    def __getattr__(self, attr: str) -> Any:
        key = attr.replace("_", "").lower()
        if key in BY_LOWER:
            return self._values[BY_LOWER[key].name]
        raise AttributeError(attr)

    def is_set(self, name: str) -> bool:
        return BY_LOWER[name.lower()].name in self.raw

    @property
    def listen_port(self) -> int:
        """``ServerPort`` 0 means the default 5473; -1 a random free port (tests)."""
        port = self["ServerPort"]
        return 5473 if port == 0 else (0 if port == -1 else port)


def read_file(path: str) -> dict[str, str]:
    """Every ``name = value`` of every INI section; missing file = nothing."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except FileNotFoundError:
        return {}
    except (OSError, configparser.Error) as exc:
        raise TyphaConfigError(f"cannot read Typha config file {path}: {exc}") from None
    out: dict[str, str] = {}
    for section in parser.sections():
        out.update(parser.items(section))
    return out


def load(
    config_file: str = DEFAULT_CONFIG_FILE, env: Mapping[str, str] | None = None
) -> TyphaConfig:
    env = os.environ if env is None else env
    layers: list[tuple[str, dict[str, str]]] = [
        (config_file, read_file(config_file)),
        (
            "TYPHA_* environment",
            {k[6:]: v for k, v in env.items() if k.upper().startswith("TYPHA_")},
        ),
    ]
    raw: dict[str, str] = {}
    sources: dict[str, str] = {}
    for source, items in layers:  # later layers win
        for name, value in items.items():
            param = BY_LOWER.get(name.lower())
            if param is None:
                if name.upper() != "EARLYLOGSEVERITYSCREEN":
                    log.debug("Ignoring unknown Typha parameter %s from %s", name, source)
                continue
            if value.strip() == "":
                continue
            raw[param.name] = value
            sources[param.name] = source
    values: dict[str, Any] = {}
    errors: list[str] = []
    for param in PARAMS:
        default = param.parse(param.default) if param.default else param.zero()
        text = raw.get(param.name)
        if text is None:
            values[param.name] = default
            continue
        if text.strip().lower() == "none":
            if "non-zero" in param.flags:
                errors.append(f"{param.name}: 'none' is not allowed")
                values[param.name] = default
            else:
                values[param.name] = param.zero()
            continue
        try:
            values[param.name] = param.parse(text)
        except ValueError as exc:
            msg = f"invalid {param.name}={text!r} from {sources[param.name]}: {exc}"
            if "die-on-fail" in param.flags:
                errors.append(msg)
            else:
                log.warning("%s; using the default %r", msg, param.default)
            values[param.name] = default
    return TyphaConfig(values, raw, errors, tuple(layers))


def datastore_settings(
    config: TyphaConfig, env: Mapping[str, str] | None = None
) -> DatastoreConfig:
    """The one place Typha's datastore connection is decided (see module docstring); raises
    DatastoreConfigError naming the bad parameter and where it came from."""
    return daemon_datastore_config(*config.layers, env=env)
