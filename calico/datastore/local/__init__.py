"""The embedded default datastore (``DATASTORE_TYPE=local``): one SQLite file per host."""

from calico.datastore.local.store import (
    DEFAULT_COMPACTION_KEEP,
    DEFAULT_POLL_INTERVAL,
    LocalBackend,
)

__all__ = ["DEFAULT_COMPACTION_KEEP", "DEFAULT_POLL_INTERVAL", "LocalBackend"]
