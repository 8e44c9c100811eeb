"""Keep pydantic's plugin discovery out of every process that validates a resource.

calico uses no pydantic plugin, so ``PYDANTIC_DISABLE_PLUGINS`` defaults to ``__all__``
(pydantic's documented switch; a value the user set is kept). With plugins disabled pydantic
never scans for them, yet its loader module still imports ``importlib.metadata`` (and with it
``email``, ``zipfile``, ``csv``) on the first schema build: 35-50 ms of a ``calicoctl`` or Felix
start (design/performance.md "Imports"). While every plugin is disabled, the loader is served
by this module's ``get_plugins``, which answers what pydantic's own would (no plugins) without
the import; the moment the variable says otherwise it hands over to pydantic's real loader.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Iterable
from typing import Any

ENV = "PYDANTIC_DISABLE_PLUGINS"
#: The values for which pydantic's ``get_plugins`` returns no plugin without looking.
DISABLE_ALL = ("__all__", "1", "true")
#: pydantic's loader, imported by ``create_schema_validator`` on each schema build.
LOADER = "pydantic.plugin._loader"


def get_plugins() -> Iterable[Any]:
    """pydantic's ``get_plugins``: none while all are disabled, else the real loader's answer."""
    if os.environ.get(ENV) in DISABLE_ALL:
        return ()
    if getattr(sys.modules.get(LOADER), "get_plugins", None) is get_plugins:
        del sys.modules[LOADER]  # the real loader replaces this one from now on
    return importlib.import_module(LOADER).get_plugins()


def disable_plugin_scan() -> None:
    """Default the switch to "no plugins" and, if all are disabled, stand in for the loader.

    Call before the first schema build; a loader already imported is left alone.
    """
    os.environ.setdefault(ENV, "__all__")
    if os.environ[ENV] not in DISABLE_ALL or LOADER in sys.modules:
        return
    stand_in = types.ModuleType(LOADER, __doc__)
    stand_in.get_plugins = get_plugins  # type: ignore[attr-defined]
    sys.modules[LOADER] = stand_in
