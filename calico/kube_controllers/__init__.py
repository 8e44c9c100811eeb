"""``calico component kube-controllers``: Kubernetes -> Calico garbage collection and sync
(design/kube-controllers.md)."""
