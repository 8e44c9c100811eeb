"""nftables programming for Felix: one ``inet calico`` table, applied in single transactions."""
