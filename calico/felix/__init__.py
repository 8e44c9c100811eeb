"""Felix: the per-host agent that turns Calico state into kernel state."""
