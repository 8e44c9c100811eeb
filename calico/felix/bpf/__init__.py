"""The eBPF dataplane: programs in ``bpf-gpl/``, loaded through libbpf (design/felix-bpf.md)."""
