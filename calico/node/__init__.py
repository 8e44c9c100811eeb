"""``calico component node``: the node agent's lifecycle commands.

``startup`` provisions this host's datastore state (Node, default pools, cluster defaults) before
the daemons start; ``node-services`` keeps the Node's addresses current; ``health`` is the probe
the node container's liveness/readiness checks run.
"""
