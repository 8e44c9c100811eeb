"""Felix's calculation graph: datastore updates in, ordered dataplane messages out."""
