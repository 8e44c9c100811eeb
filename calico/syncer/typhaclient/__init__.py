"""The Typha wire protocol and its client, shared by Typha's server (``calico.typha``) and every
component that syncs through Typha (Felix; later confd and node services). It lives under
``calico.syncer`` because a Typha stream is a syncer source (design/typha.md).
"""

from calico.syncer.typhaclient.client import ClientSettings, SyncClient
from calico.syncer.typhaclient.source import TyphaSyncer

__all__ = ["ClientSettings", "SyncClient", "TyphaSyncer"]
