"""The entry layer: the console-script entry (:mod:`calico.cli.main`) and the ``calico`` click tree.

Nothing in ``calico`` imports this package; it composes the components' command groups.
"""
