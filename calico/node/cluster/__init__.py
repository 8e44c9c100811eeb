"""A Calico cluster on one machine: N nodes as network namespaces on a bridge, one datastore.

``calico node cluster up|down|status`` (``make cluster`` / ``make cluster-down``) and the
multi-node tests build on it; see design/node-run.md "Cluster on one machine".
"""
