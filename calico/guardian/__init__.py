"""Guardian: the managed cluster's outbound mTLS tunnel to the management plane (Voltron).

See design/guardian.md for the moving parts; ``calico.guardian.daemon`` is the entry point.
"""
