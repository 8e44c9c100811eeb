/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Helpers for the generated per-endpoint policy programs (calico/felix/bpf/polprog.py). */
#ifndef CALI_POLICY_H
#define CALI_POLICY_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "cali_maps.h"
#include "conntrack.h"

/* One LPM lookup: is (addr, port, proto) in the set with this id (two big-endian words)? */
static __always_inline int cali_ipset_has(__u32 id_hi, __u32 id_lo, __u32 addr, __u16 port,
					  __u8 proto)
{
	struct cali_ipset_key k = {
		.prefixlen = CALI_IPSET_FULL_PREFIX,
		.id_hi = id_hi,
		.id_lo = id_lo,
		.addr = addr,
		.port = port,
		.proto = proto,
	};
	return bpf_map_lookup_elem(&cpy_v4_ipsets, &k) != 0;
}

/* The IPv6 lookup: addr points at the state's four network-order words. A BPF-to-BPF call,
 * not inlined: the 32-byte key costs ~15 instructions, which would push a 1,000-policy v6
 * walk past the 16-bit jump offsets to its exits. */
static __noinline int cali_ipset6_has(__u32 id_hi, __u32 id_lo, const __u32 *addr,
					   __u16 port, __u8 proto)
{
	struct cali_ipset6_key k = {
		.prefixlen = CALI_IPSET6_FULL_PREFIX,
		.id_hi = id_hi,
		.id_lo = id_lo,
		.port = port,
		.proto = proto,
	};
	__builtin_memcpy(k.addr, addr, 16);
	return bpf_map_lookup_elem(&cpy_v6_ipsets, &k) != 0;
}

#define CALI_SRC_PORT(st) ((st)->has_ports ? (st)->sport : 0)
#define CALI_DST_PORT(st) ((st)->has_ports ? (st)->dport : 0)

/* A log rule matched: set LOG_PACKET and continue (upstream); with BPFLogLevel Info or Debug
 * also one trace-pipe record naming the rule by its prefix (LogPrefix, nftables' log text) and
 * rule ID. The prefix is a string literal pasted into the format by the generator. */
#define CALI_LOG_RULE_V4(prefix, id)                                                          \
	do {                                                                                  \
		st->flags |= CALI_ST_LOG_PACKET;                                              \
		CALI_LOG_INFO("log " prefix "rule %llx if %d hook %d proto %d src %pI4:%d "     \
			      "dst %pI4:%d", (__u64)(id), skb->ifindex, st->hook, st->proto,  \
			      &st->ip_src, CALI_SRC_PORT(st), &st->ip_dst, CALI_DST_PORT(st)); \
	} while (0)
#define CALI_LOG_RULE_V6(prefix, id)                                                          \
	do {                                                                                  \
		st->flags |= CALI_ST_LOG_PACKET;                                              \
		CALI_LOG_INFO("log " prefix "rule %llx if %d hook %d proto %d src [%pI6]:%d "   \
			      "dst [%pI6]:%d", (__u64)(id), skb->ifindex, st->hook, st->proto, \
			      st->ip6_src, CALI_SRC_PORT(st), st->ip6_dst, CALI_DST_PORT(st)); \
	} while (0)

static __always_inline int cali_policy_deny(struct __sk_buff *skb, struct cali_state *st)
{
	st->pol_rc = CALI_POL_DENY;
	cali_count(skb->ifindex, st->hook, CALI_CTR_POL_DENY);
	CALI_LOG_INFO("if %d hook %d: policy deny proto %d", skb->ifindex, st->hook, st->proto);
	return TC_ACT_SHOT;
}

static __always_inline int cali_policy_allow(struct __sk_buff *skb, struct cali_state *st)
{
	cali_count(skb->ifindex, st->hook, CALI_CTR_POL_ACCEPT);
	CALI_LOG_DEBUG("if %d hook %d: policy allow proto %d", skb->ifindex, st->hook, st->proto);
	if (!st->hep && st->hook == CALI_HOOK_FROM_WEP)
		skb->mark = skb->mark | CALI_MARK_SEEN;
	return cali_ct_allow(st, skb->ifindex);
}

/* Untracked (doNotTrack) host endpoint policy allowed the packet: no conntrack entry, so the
 * other direction needs its own untracked allow, as upstream. */
static __always_inline int cali_policy_allow_untracked(struct __sk_buff *skb,
						       struct cali_state *st)
{
	st->pol_rc = CALI_POL_ALLOW;
	cali_count(skb->ifindex, st->hook, CALI_CTR_POL_ACCEPT);
	CALI_LOG_DEBUG("if %d hook %d: untracked allow proto %d", skb->ifindex, st->hook,
		       st->proto);
	return TC_ACT_UNSPEC;
}

/* BPFPolicyDebugEnabled: one hit of the rule with this ID (the entry is made on first hit).
 * A BPF-to-BPF call, not inlined: each rule then costs 3 instructions instead of ~20, which
 * keeps 1,000-policy programs within the 16-bit jump offsets of the final allow/deny. */
static __noinline void cali_rule_hit(__u64 id)
{
	__u64 *v = bpf_map_lookup_elem(&cpy_rule_ctrs, &id);

	if (v) {
		(*v)++;
	} else {
		__u64 one = 1;
		bpf_map_update_elem(&cpy_rule_ctrs, &id, &one, BPF_NOEXIST);
	}
}

#endif
