"""confd: renders BIRD's configuration from the datastore (design/confd.md)."""
