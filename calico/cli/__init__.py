"""The combined ``calico`` command and its argv[0] / CNI_COMMAND dispatch."""
