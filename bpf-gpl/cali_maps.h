/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Maps shared by the main programs and every generated policy program (pinned by name). */
#ifndef CALI_MAPS_H
#define CALI_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "cali_types.h"

#ifndef CALI_CT_MAP_SIZE
#define CALI_CT_MAP_SIZE 512000
#endif
#ifndef CALI_IPSETS_MAP_SIZE
#define CALI_IPSETS_MAP_SIZE 1048576
#endif
#ifndef CALI_IFACE_MAP_SIZE
#define CALI_IFACE_MAP_SIZE 1000
#endif
#ifndef CALI_HOSTIPS_MAP_SIZE
#define CALI_HOSTIPS_MAP_SIZE 1024
#endif
#ifndef CALI_RULE_CTRS_MAP_SIZE
#define CALI_RULE_CTRS_MAP_SIZE 10000
#endif
#ifndef CALI_ROUTES_MAP_SIZE
#define CALI_ROUTES_MAP_SIZE 262144
#endif
#ifndef CALI_JUMP_MAP_SIZE
#define CALI_JUMP_MAP_SIZE 16384
#endif

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct cali_ct_key);
	__type(value, struct cali_ct_value);
	__uint(max_entries, CALI_CT_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v4_ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct cali_ct6_key);
	__type(value, struct cali_ct_value);
	__uint(max_entries, CALI_CT_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v6_ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct cali_ipset6_key);
	__type(value, __u32);
	__uint(max_entries, CALI_IPSETS_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v6_ipsets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct cali_ipset_key);
	__type(value, __u32);
	__uint(max_entries, CALI_IPSETS_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v4_ipsets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct cali_rt_key);
	__type(value, struct cali_rt);
	__uint(max_entries, CALI_ROUTES_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v4_routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct cali_rt6_key);
	__type(value, struct cali_rt);
	__uint(max_entries, CALI_ROUTES_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v6_routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct cali_iface);
	__uint(max_entries, CALI_IFACE_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_iface SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, CALI_JUMP_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_jump_ing SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, CALI_JUMP_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_jump_egr SEC(".maps");

/* This host's own IPv4 addresses (network order) -> 1: traffic from the host to a workload is
 * not policed, as in the nftables dataplane (cali-OUTPUT "Host to workload: not policed"). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, CALI_HOSTIPS_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v4_hostips SEC(".maps");

/* The same for the host's IPv6 addresses (16 network-order bytes). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct { __u32 a[4]; });
	__type(value, __u32);
	__uint(max_entries, CALI_HOSTIPS_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v6_hostips SEC(".maps");

#ifndef CALI_FSAFES_MAP_SIZE
#define CALI_FSAFES_MAP_SIZE 65536
#endif
/* FailsafeInbound/OutboundHostPorts (Felix writes them at start): allowed on host endpoints
 * ahead of any policy. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct cali_fsafe_key);
	__type(value, __u32);
	__uint(max_entries, CALI_FSAFES_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v4_fsafes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct cali_fsafe6_key);
	__type(value, __u32);
	__uint(max_entries, CALI_FSAFES_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_v6_fsafes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct cali_state);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, struct cali_ctr_key);
	__type(value, struct cali_ctr_value);
	__uint(max_entries, 2 * CALI_IFACE_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_counters SEC(".maps");

/* Rule ID (FNV-1a 64, calico/felix/bpf/polprog.py rule_id) -> hits, with BPFPolicyDebugEnabled. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, __u64);
	__type(value, __u64);
	__uint(max_entries, CALI_RULE_CTRS_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cpy_rule_ctrs SEC(".maps");

/* BPFLogLevel: 0 off, 1 info (drops), 2 debug (every verdict); bpf_printk -> trace_pipe. */
#ifndef CALI_LOG_LEVEL
#define CALI_LOG_LEVEL 0
#endif
#define CALI_LOG_INFO(fmt, ...)                                                               \
	do {                                                                                  \
		if (CALI_LOG_LEVEL >= 1)                                                      \
			bpf_printk("cali " fmt, ##__VA_ARGS__);                              \
	} while (0)
#define CALI_LOG_DEBUG(fmt, ...)                                                              \
	do {                                                                                  \
		if (CALI_LOG_LEVEL >= 2)                                                      \
			bpf_printk("cali " fmt, ##__VA_ARGS__);                              \
	} while (0)

static __always_inline void cali_count(__u32 ifindex, __u32 hook, __u32 idx)
{
	struct cali_ctr_key k = {.ifindex = ifindex, .hook = hook};
	struct cali_ctr_value *v = bpf_map_lookup_elem(&cpy_counters, &k);

	if (v && idx < CALI_CTR_N)
		v->c[idx]++; /* per-CPU: no atomics needed */
}

/* Is the packet's source / destination one of the host's addresses? (The main programs and,
 * for the all-interfaces host endpoint's forward policy on workloads, the policy programs.) */
static __always_inline int cali_from_host(const struct cali_state *st)
{
	if (st->ip_ver == 6)
		return bpf_map_lookup_elem(&cpy_v6_hostips, st->ip6_src) != 0;
	return bpf_map_lookup_elem(&cpy_v4_hostips, &st->ip_src) != 0;
}

static __always_inline int cali_to_host(const struct cali_state *st)
{
	if (st->ip_ver == 6)
		return bpf_map_lookup_elem(&cpy_v6_hostips, st->ip6_dst) != 0;
	return bpf_map_lookup_elem(&cpy_v4_hostips, &st->ip_dst) != 0;
}

static __always_inline struct cali_state *cali_state_get(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpy_state, &zero);
}

#endif
