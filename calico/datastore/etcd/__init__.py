"""The etcdv3 datastore: EtcdBackend, on our own minimal etcd v3 gRPC client."""

from calico.datastore.etcd.backend import EtcdBackend

__all__ = ["EtcdBackend"]
