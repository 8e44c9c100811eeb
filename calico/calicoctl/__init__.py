"""calicoctl: the operator's command line for Calico resources (``calicoctl`` / ``calico ctl``)."""

from calico.calicoctl.root import ctl

__all__ = ["ctl"]
