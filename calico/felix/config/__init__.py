"""Felix configuration: the parameter table, raw-source loaders and typed resolution.

Typical use::

    config = resolve(local_sources())                      # startup: defaults, file, env
    datastore = felix_datastore_config(config)             # libcalico env < file < FELIX_*
    config = config.with_datastore(global_, selector, host)  # on each ConfigBatcher update
    if needs_restart(old, config): exit(129)
"""

from calico.felix.config.datastore_env import felix_datastore_config
from calico.felix.config.loaders import (
    DEFAULT_CONFIG_FILE,
    load_env,
    load_file,
    local_sources,
    parse_config_text,
)
from calico.felix.config.params import HOT_RELOADABLE, LOCAL_ONLY, PARAMS, Param, lookup
from calico.felix.config.parsers import ParseError, severity_level
from calico.felix.config.resolve import (
    Config,
    datastore_sources,
    default_hostname,
    diff,
    needs_restart,
    resolve,
)
from calico.felix.config.sources import Source

#: Exit code asking the wrapper to restart Felix after a config change (as upstream).
CONFIG_CHANGED_EXIT_CODE = 129

__all__ = [
    "CONFIG_CHANGED_EXIT_CODE",
    "DEFAULT_CONFIG_FILE",
    "HOT_RELOADABLE",
    "LOCAL_ONLY",
    "PARAMS",
    "Config",
    "Param",
    "ParseError",
    "Source",
    "datastore_sources",
    "default_hostname",
    "diff",
    "felix_datastore_config",
    "load_env",
    "load_file",
    "local_sources",
    "lookup",
    "needs_restart",
    "parse_config_text",
    "resolve",
    "severity_level",
]
