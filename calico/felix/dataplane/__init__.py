"""Linux dataplane pieces for Felix (netlink, sysctls, conntrack, status files)."""
