"""Where a config value came from, ordered by priority (higher wins)."""

from __future__ import annotations

from enum import IntEnum

_NAMES = {
    0: "<default>",
    1: "datastore (global)",
    2: "datastore (per-selector)",
    3: "datastore (per-host)",
    4: "config file",
    5: "environment variable",
    6: "internal override",
}


class Source(IntEnum):
    """Config sources, lowest priority first; names print as upstream logs them."""

    DEFAULT = 0
    DATASTORE_GLOBAL = 1
    DATASTORE_SELECTOR = 2
    DATASTORE_PER_HOST = 3
    CONFIG_FILE = 4
    ENVIRONMENT = 5
    INTERNAL_OVERRIDE = 6

    @property
    def local(self) -> bool:
        """Whether this source is on the node itself (may set local-only params)."""
        return self not in (
            Source.DATASTORE_GLOBAL,
            Source.DATASTORE_SELECTOR,
            Source.DATASTORE_PER_HOST,
        )

    def __str__(self) -> str:
        return _NAMES[self.value]


DATASTORE_SOURCES = (Source.DATASTORE_GLOBAL, Source.DATASTORE_SELECTOR, Source.DATASTORE_PER_HOST)
