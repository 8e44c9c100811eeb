"""Typha: the syncer fan-out proxy (``calico component typha``); see design/typha.md."""
