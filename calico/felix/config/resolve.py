"""Merge raw sources into one typed Config, and decide whether a change needs a restart.

Per parameter the highest-priority source with a non-empty value wins:
defaults < datastore global < datastore per-selector < datastore per-host < config file <
environment < internal override. Upstream's rules apply: ``none`` selects the type's zero
value (refused for ``non-zero`` params); local-only params are ignored from the datastore; an
invalid value is logged with a warning and replaced by the *default* (not by a lower source's
value, as upstream); invalid ``die-on-fail`` values and cross-field problems are also recorded in
``Config.errors`` so that startup can refuse them. Unknown names are kept raw.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from typing import Any

from calico.felix.config.params import HOT_RELOADABLE, PARAMS, lookup
from calico.felix.config.parsers import ParseError
from calico.felix.config.sources import DATASTORE_SOURCES, Source

log = logging.getLogger(__name__)

RawSources = Mapping[Source, Mapping[str, str]]


def default_hostname() -> str:
    """The kernel hostname, lower-cased (``$HOSTNAME`` if that fails), as upstream."""
    try:
        name = socket.gethostname()
    except OSError as exc:
        log.warning("Failed to get hostname from kernel, trying HOSTNAME variable: %s", exc)
        name = os.environ.get("HOSTNAME", "")
    return name.lower()


def _key(name: str) -> str:
    return name.replace("_", "").lower()


_BY_KEY = {_key(name): name for name in PARAMS}


class Config:
    """Resolved, typed Felix configuration (read-only).

    Access a value as ``config.health_port`` (any case, underscores ignored) or
    ``config["HealthPort"]``; ``source(name)`` says where it came from.
    """

    __slots__ = (
        "_hostname",
        "_inputs",
        "_raw",
        "_sources",
        "_values",
        "errors",
        "invalid",
        "unknown",
    )  # fmt: skip

    def __init__(
        self,
        values: dict[str, Any],
        sources: dict[str, Source],
        raw: dict[str, str],
        inputs: dict[Source, dict[str, str]],
        hostname: str,
    ) -> None:
        self._values = values
        self._sources = sources
        self._raw = raw
        self._inputs = inputs
        self._hostname = hostname
        self.unknown: dict[str, str] = {}
        self.errors: list[str] = []
        self.invalid: dict[str, tuple[Source, str, str]] = {}

    def _name(self, name: str) -> str:
        try:
            return _BY_KEY[_key(name)]
        except KeyError:
            raise KeyError(f"unknown Felix config parameter {name!r}") from None

    def __getitem__(self, name: str) -> Any:
        return self._values[self._name(name)]

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        try:
            return self[attr]
        except KeyError:
            raise AttributeError(f"Config has no parameter {attr!r}") from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _key(name) in _BY_KEY

    def __repr__(self) -> str:
        changed = {k: v for k, v in self._values.items() if self._sources[k] != Source.DEFAULT}
        return f"Config({changed!r})"

    def source(self, name: str) -> Source:
        """Which source the value of ``name`` came from (DEFAULT if none, or if invalid)."""
        return self._sources[self._name(name)]

    def raw(self, name: str) -> str | None:
        """The raw text that set ``name``, or None for a default."""
        return self._raw.get(self._name(name))

    def text(self, name: str) -> str:
        """The value of ``name`` in its parameter's canonical text form."""
        canonical = self._name(name)
        return PARAMS[canonical].parser.format(self._values[canonical])

    def values(self) -> dict[str, Any]:
        """A copy of every known parameter's value, by canonical name."""
        return dict(self._values)

    @property
    def inputs(self) -> dict[Source, dict[str, str]]:
        """The raw sources this config was resolved from (copies)."""
        return {s: dict(v) for s, v in self._inputs.items()}

    def with_sources(self, updates: RawSources) -> Config:
        """Re-resolve with some sources replaced (others kept)."""
        merged: dict[Source, Mapping[str, str]] = dict(self._inputs)
        merged.update(updates)
        return resolve(merged, hostname=self._hostname)

    def with_datastore(
        self,
        global_config: Mapping[str, str],
        selector_config: Mapping[str, str],
        host_config: Mapping[str, str],
    ) -> Config:
        """Re-resolve with new datastore config (the ConfigBatcher's on_config_update)."""
        return self.with_sources(datastore_sources(global_config, selector_config, host_config))


def datastore_sources(
    global_config: Mapping[str, str],
    selector_config: Mapping[str, str],
    host_config: Mapping[str, str],
) -> dict[Source, Mapping[str, str]]:
    """The three datastore dicts keyed by their Source."""
    return dict(zip(DATASTORE_SOURCES, (global_config, selector_config, host_config), strict=True))


def _clean(source: Source, raw: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, value in raw.items():
        if value == "":
            log.info(
                "Ignoring empty configuration parameter %s from %s; use 'none' to explicitly "
                "disable the default.",
                name,
                source,
            )
            continue
        out[name] = value
    return out


def resolve(sources: RawSources, *, hostname: str | None = None) -> Config:
    """Merge raw ``{name: value}`` dicts per Source into a typed Config.

    ``hostname``: FelixHostname's default (detected from the kernel when None).
    """
    host = default_hostname() if hostname is None else hostname
    inputs = {Source(s): _clean(Source(s), raw) for s, raw in sources.items() if raw is not None}
    values = {name: param.default for name, param in PARAMS.items()}
    values["FelixHostname"] = host
    config = Config(values, dict.fromkeys(PARAMS, Source.DEFAULT), {}, inputs, host)
    seen_unknown: set[str] = set()
    for source in sorted(inputs, reverse=True):
        for raw_name, text in inputs[source].items():
            param = lookup(raw_name)
            if param is None:
                if raw_name.lower() not in seen_unknown:
                    seen_unknown.add(raw_name.lower())
                    config.unknown[raw_name] = text
                    log.info("Ignoring unknown config param %s (from %s)", raw_name, source)
                continue
            name = param.name
            if config._sources[name] != Source.DEFAULT or name in config.invalid:
                log.debug("Skipping %s from %s; already set by a higher source", name, source)
                continue
            if param.local and not source.local:
                log.warning("Ignoring local-only configuration %s=%r from %s", name, text, source)
                continue
            _apply(config, param.name, text, source)
    _validate(config)
    return config


def _apply(config: Config, name: str, text: str, source: Source) -> None:
    param = PARAMS[name]
    try:
        if text.lower() == "none":
            if param.non_zero:
                raise ParseError("non-zero field cannot be set to none")
            value = param.zero
        else:
            value = param.parse(text)
    except ParseError as exc:
        reason = str(exc)
        config.invalid[name] = (source, text, reason)
        log.warning(
            "Invalid value for config parameter %s from %s: %r: %s; using the default %r",
            name,
            source,
            text,
            reason,
            param.default_text,
        )
        if param.die_on_fail or text.lower() == "none":
            config.errors.append(f"{name}={text!r} from {source}: {reason}")
        return
    config._values[name] = value
    config._sources[name] = source
    config._raw[name] = text


def _validate(config: Config) -> None:
    """Cross-field checks upstream makes before starting."""
    v = config._values
    if not v["FelixHostname"]:
        config.errors.append("failed to determine hostname")
    if v["DatastoreType"] == "etcdv3" and not v["EtcdEndpoints"]:
        if not v["EtcdScheme"]:
            config.errors.append("both EtcdEndpoints and EtcdScheme are missing")
        if not v["EtcdAddr"]:
            config.errors.append("both EtcdEndpoints and EtcdAddr are missing")
    typha_tls = [v[n] for n in ("TyphaKeyFile", "TyphaCertFile", "TyphaCAFile")]
    names = v["TyphaCN"] or v["TyphaURISAN"]
    if (any(typha_tls) or names) and not (all(typha_tls) and names):
        config.errors.append(
            "if any Felix-Typha TLS config parameters are specified, they _all_ must be - "
            "except that either TyphaCN or TyphaURISAN may be left unset"
        )
    for message in config.errors:
        log.error("Invalid Felix configuration: %s", message)


def diff(old: Config, new: Config) -> set[str]:
    """Names of the known parameters whose resolved value differs."""
    a, b = old._values, new._values
    return {name for name in PARAMS if a[name] != b[name]}


def needs_restart(old: Config, new: Config) -> bool:
    """Whether moving from ``old`` to ``new`` needs Felix to restart (exit 129): any change
    except to the hot-reloadable parameters."""
    return bool(diff(old, new) - HOT_RELOADABLE)
