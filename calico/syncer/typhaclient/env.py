"""Typha client settings for components other than Felix: ``<PREFIX>TYPHA<FIELD>`` variables.

As upstream's ``syncclientutils``: ADDR, K8SSERVICENAME, K8SNAMESPACE, READTIMEOUT and
WRITETIMEOUT (float seconds), KEYFILE, CERTFILE, CAFILE, CN, URISAN — e.g. ``CONFD_TYPHAADDR``.
Several prefixes may be given (confd reads ``CONFD_``, ``FELIX_``, ``CALICO_``, as upstream):
per field the first prefix with a value wins; empty and ``none`` count as unset.
No ADDR means "not through Typha". Discovery by Kubernetes service name needs the Kubernetes
datastore, so a service name without an address is reported and ignored.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from calico.syncer.typhaclient.client import ClientSettings

log = logging.getLogger(__name__)


def settings_from_env(
    prefixes: str | Sequence[str],
    syncer_type: str,
    hostname: str = "",
    env: Mapping[str, str] | None = None,
) -> ClientSettings | None:
    """The settings, or None when Typha is not configured; ValueError for a bad value."""
    env = os.environ if env is None else env
    names = (prefixes,) if isinstance(prefixes, str) else tuple(prefixes)
    prefix = names[0]
    found: dict[str, str] = {}  # field -> the variable that supplied it (for error messages)

    def get(field: str) -> str:
        for p in names:
            value = env.get(f"{p}TYPHA{field}", "").strip()
            if value and value.lower() != "none":
                found[field] = f"{p}TYPHA{field}"
                return value
        return ""

    addr = get("ADDR")
    if not addr:
        if get("K8SSERVICENAME"):
            log.warning(
                "%s ignored: Typha discovery needs the Kubernetes datastore",
                found["K8SSERVICENAME"],
            )
        return None

    def seconds(field: str, default: float) -> float:
        raw = get(field)
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{found[field]}={raw!r} is not a number of seconds") from None
        if value <= 0:
            raise ValueError(f"{found[field]} must be positive, got {raw!r}")
        return value

    settings = ClientSettings(
        addr=addr,
        syncer_type=syncer_type,
        hostname=hostname,
        info=prefix.rstrip("_").lower(),
        read_timeout=seconds("READTIMEOUT", 30.0),
        write_timeout=seconds("WRITETIMEOUT", 10.0),
        key_file=get("KEYFILE"),
        cert_file=get("CERTFILE"),
        ca_file=get("CAFILE"),
        cn=get("CN"),
        uri_san=get("URISAN"),
    )
    settings.host_port()
    settings.tls_enabled()
    return settings
