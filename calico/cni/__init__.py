"""The ``calico`` and ``calico-ipam`` CNI plugins (entry point: :func:`calico.cni.main.run_plugin`).

Modules are imported lazily by verb so a VERSION probe or a parse error costs no datastore or
netlink imports.
"""
