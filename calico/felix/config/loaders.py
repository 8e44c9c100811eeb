"""Raw config sources: ``FELIX_*`` environment variables, the INI config file and the
datastore dicts the calc graph's config batcher hands over. Loaders only collect
``{name: raw string}``; parsing and precedence are resolve's job.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from calico.felix.config.sources import Source

if TYPE_CHECKING:  # imported when a config file is read: most starts have none
    import configparser

log = logging.getLogger(__name__)

DEFAULT_CONFIG_FILE = "/etc/calico/felix.cfg"
ENV_PREFIX = "felix_"


def load_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``FELIX_<NAME>=v`` (prefix and name in any case) -> ``{"<name>": v}``, name lower-cased.

    Values are never logged: they may hold credentials.
    """
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for key, value in env.items():
        low = key.lower()
        if low.startswith(ENV_PREFIX) and len(low) > len(ENV_PREFIX):
            name = low[len(ENV_PREFIX) :]
            log.info("Found felix environment variable: %s=<set>", name)
            out[name] = value
    return out


def _parser() -> configparser.RawConfigParser:
    import configparser

    parser = configparser.RawConfigParser(
        strict=False,
        interpolation=None,
        delimiters=("=", ":"),
        comment_prefixes=("#", ";"),
        inline_comment_prefixes=None,
        default_section="\x00none",  # keep a real [DEFAULT] section an ordinary section
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names' case
    return parser


def parse_config_text(text: str, source: str = "<string>") -> dict[str, str]:
    """All keys of all sections, flattened (later definitions of a key win, with a warning).

    Lines before any section header are accepted, as go-ini treats them as its default
    section. Raises ValueError for text that is not INI.
    """
    import configparser

    parser = _parser()
    try:
        parser.read_string("[\x00top]\n" + text, source=source)
    except configparser.Error as exc:
        raise ValueError(f"invalid config file {source}: {exc}") from None
    out: dict[str, str] = {}
    for section in parser.sections():
        for key, value in parser.items(section):
            if key in out:
                log.warning("Multiple values defined for key %s in %s", key, source)
            out[key] = _unquote(value or "")
    return out


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        return value[1:-1]
    return value


def load_file(path: str = DEFAULT_CONFIG_FILE) -> dict[str, str]:
    """The config file's parameters; a missing file is simply empty.

    An unreadable or malformed file is logged as a warning and treated as empty, so a broken
    felix.cfg degrades to the other sources rather than stopping Felix.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        log.info("Ignoring absent config file: %s", path)
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("Failed to read config file %s: %s", path, exc)
        return {}
    try:
        return parse_config_text(text, path)
    except ValueError as exc:
        log.warning("Ignoring config file: %s", exc)
        return {}


def local_sources(
    environ: Mapping[str, str] | None = None, config_file: str = DEFAULT_CONFIG_FILE
) -> dict[Source, dict[str, str]]:
    """The node-local sources Felix reads at startup: the config file and the environment."""
    return {Source.CONFIG_FILE: load_file(config_file), Source.ENVIRONMENT: load_env(environ)}
