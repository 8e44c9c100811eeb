"""The Kubernetes datastore (``DATASTORE_TYPE=kubernetes``): design/datastore-kubernetes.md."""

from calico.datastore.kubernetes.backend import KubernetesBackend

__all__ = ["KubernetesBackend"]
