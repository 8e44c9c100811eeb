"""Native Kubernetes objects seen as Calico resources (design/datastore-kubernetes.md "Native
resources"): Nodes, Pods, Namespaces and ServiceAccounts, NetworkPolicies."""
