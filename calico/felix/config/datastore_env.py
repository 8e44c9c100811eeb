"""Which datastore Felix opens: the libcalico environment (``DATASTORE_TYPE``,
``ETCD_ENDPOINTS``, ...) overridden by Felix's own ``DatastoreType``/``Etcd*``/
``CalicoDatastorePath`` from its config file and ``FELIX_*`` variables, as upstream Felix does
(design/felix-config.md "Datastore connection"). The rules live in
``calico.datastore.daemon_config``; this only hands over Felix's two node-local layers.
"""

from __future__ import annotations

from collections.abc import Mapping

from calico.datastore.config import DatastoreConfig
from calico.datastore.daemon_config import daemon_datastore_config
from calico.felix.config.resolve import Config
from calico.felix.config.sources import Source


def felix_datastore_config(
    config: Config, environ: Mapping[str, str] | None = None
) -> DatastoreConfig:
    """The datastore for ``config`` (resolved from the local sources); ``environ`` is the
    libcalico environment (``os.environ`` when None). Raises DatastoreConfigError."""
    inputs = config.inputs
    return daemon_datastore_config(
        ("Felix config file", inputs.get(Source.CONFIG_FILE, {})),
        ("FELIX_* environment", inputs.get(Source.ENVIRONMENT, {})),
        env=environ,
    )
