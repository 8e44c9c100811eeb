/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Conntrack: canonical keys, per-leg approval, entry creation after a policy allow. */
#ifndef CALI_CONNTRACK_H
#define CALI_CONNTRACK_H

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/pkt_cls.h>
#include "cali_maps.h"

/* Fill st->ct_key and st->my_leg. src is side A iff (src, sport) < (dst, dport), comparing
 * the network-order address words as native integers, then the host-order ports. */
/* ICMP query/reply pairs share the request's type: 0/8 echo, 13/14 timestamp, 15/16 info,
 * 17/18 address mask. Other types (errors) key on their own type. */
static __always_inline __u32 cali_icmp_request_type(__u8 type)
{
	switch (type) {
	case 0:
		return 8;
	case 14:
		return 13;
	case 16:
		return 15;
	case 18:
		return 17;
	}
	return type;
}

/* ICMPv6: echo 128/129 (the only query/reply pair policy sees; ND skips policy). */
static __always_inline __u32 cali_icmp6_request_type(__u8 type)
{
	return type == 129 ? 128 : type;
}

/* -1, 0, 1 comparing two IPv6 addresses word by word (native-int words, word 0 first). */
static __always_inline int cali_addr6_cmp(const __u32 *a, const __u32 *b)
{
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	}
	return 0;
}

static __always_inline void cali_ct_fill_key6(struct cali_state *st, __u16 sport, __u16 dport)
{
	__u32 proto = st->proto;
	int cmp;

	if (proto == IPPROTO_ICMPV6) {
		sport = dport = st->icmp_id;
		proto |= cali_icmp6_request_type(st->icmp_type) << 8;
	}
	cmp = cali_addr6_cmp(st->ip6_src, st->ip6_dst);
	int src_is_a = cmp < 0 || (cmp == 0 && sport < dport);

	st->ct6_key.proto = proto;
	if (src_is_a) {
		__builtin_memcpy(st->ct6_key.addr_a, st->ip6_src, 16);
		st->ct6_key.port_a = sport;
		__builtin_memcpy(st->ct6_key.addr_b, st->ip6_dst, 16);
		st->ct6_key.port_b = dport;
	} else {
		__builtin_memcpy(st->ct6_key.addr_a, st->ip6_dst, 16);
		st->ct6_key.port_a = dport;
		__builtin_memcpy(st->ct6_key.addr_b, st->ip6_src, 16);
		st->ct6_key.port_b = sport;
	}
	if (st->hook == CALI_HOOK_FROM_WEP)
		st->my_leg = src_is_a ? CALI_CT_LEG_A : CALI_CT_LEG_B;
	else
		st->my_leg = src_is_a ? CALI_CT_LEG_B : CALI_CT_LEG_A;
}

static __always_inline void cali_ct_fill_key(struct cali_state *st)
{
	__u16 sport = st->has_ports ? st->sport : 0;
	__u16 dport = st->has_ports ? st->dport : 0;
	__u32 proto = st->proto;

	if (st->ip_ver == 6) {
		cali_ct_fill_key6(st, sport, dport);
		return;
	}
	if (proto == IPPROTO_ICMP) {
		sport = dport = st->icmp_id;
		proto |= cali_icmp_request_type(st->icmp_type) << 8;
	}
	int src_is_a = st->ip_src < st->ip_dst || (st->ip_src == st->ip_dst && sport < dport);

	st->ct_key.proto = proto;
	if (src_is_a) {
		st->ct_key.addr_a = st->ip_src;
		st->ct_key.port_a = sport;
		st->ct_key.addr_b = st->ip_dst;
		st->ct_key.port_b = dport;
	} else {
		st->ct_key.addr_a = st->ip_dst;
		st->ct_key.port_a = dport;
		st->ct_key.addr_b = st->ip_src;
		st->ct_key.port_b = sport;
	}
	/* from-WEP approves the source's leg, to-WEP the destination's. */
	if (st->hook == CALI_HOOK_FROM_WEP)
		st->my_leg = src_is_a ? CALI_CT_LEG_A : CALI_CT_LEG_B;
	else
		st->my_leg = src_is_a ? CALI_CT_LEG_B : CALI_CT_LEG_A;
}

static __always_inline __u32 cali_tcp_bits(const struct cali_state *st)
{
	__u32 bits = 0;
	if (st->proto == 6 && (st->tcp_flags & 0x01))
		bits |= CALI_CT_FIN_SEEN;
	if (st->proto == 6 && (st->tcp_flags & 0x04))
		bits |= CALI_CT_RST_SEEN;
	return bits;
}

/* This packet's family's conntrack entry (the v4 or v6 map). */
static __always_inline struct cali_ct_value *cali_ct_lookup(struct cali_state *st)
{
	if (st->ip_ver == 6)
		return bpf_map_lookup_elem(&cpy_v6_ct, &st->ct6_key);
	return bpf_map_lookup_elem(&cpy_v4_ct, &st->ct_key);
}

static __always_inline long cali_ct_create(struct cali_state *st, struct cali_ct_value *nv)
{
	if (st->ip_ver == 6)
		return bpf_map_update_elem(&cpy_v6_ct, &st->ct6_key, nv, BPF_NOEXIST);
	return bpf_map_update_elem(&cpy_v4_ct, &st->ct_key, nv, BPF_NOEXIST);
}

/* The source side's recorded ingress interface (to-host hooks only: there, this hook approves
 * the source's leg, so my_leg names the source side). */
static __always_inline __u32 *cali_ct_src_ifindex(struct cali_state *st, struct cali_ct_value *v)
{
	return st->my_leg == CALI_CT_LEG_A ? &v->ifindex_a : &v->ifindex_b;
}

/* Policy said allow: approve this hook's leg, creating the entry if the flow is new. On a
 * to-host hook (TC ingress) the packet passed the reverse-path check before policy, so its
 * interface becomes the source side's recorded one. */
static __always_inline int cali_ct_allow(struct cali_state *st, __u32 ifindex)
{
	__u64 now = bpf_ktime_get_ns();
	struct cali_ct_value *v = cali_ct_lookup(st);
	int to_host = st->hook == CALI_HOOK_FROM_WEP;

	st->pol_rc = CALI_POL_ALLOW;
	if (v) {
		__sync_fetch_and_or(&v->legs, st->my_leg | cali_tcp_bits(st));
		v->last_seen = now;
		if (to_host)
			*cali_ct_src_ifindex(st, v) = ifindex;
		return TC_ACT_UNSPEC;
	}
	struct cali_ct_value nv = {
		.created = now,
		.last_seen = now,
		.legs = st->my_leg | cali_tcp_bits(st),
	};
	if (to_host)
		*cali_ct_src_ifindex(st, &nv) = ifindex;
	if (cali_ct_create(st, &nv) != 0) {
		v = cali_ct_lookup(st);
		if (v) {
			__sync_fetch_and_or(&v->legs, st->my_leg);
			if (to_host)
				*cali_ct_src_ifindex(st, v) = ifindex;
		}
	}
	return TC_ACT_UNSPEC;
}

#endif
