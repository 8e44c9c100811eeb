"""``calico node run|stop|status``: a whole Calico node on this machine, in one command.

``run`` provisions the node (startup), installs the CNI plugin, then supervises the daemons
under runit until Ctrl-C or ``calico node stop``. Everything it creates is described by a
state directory (:mod:`calico.node.run.layout`), which ``stop``, ``status`` and the demo read.
"""
