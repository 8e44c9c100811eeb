// SPDX-License-Identifier: GPL-2.0-or-later
/* calico-py main programs: attached to the host side of each cali* interface and to each
 * data interface (BPFDataIfacePattern).
 *
 * calico_from_wep: TC ingress (packets leaving the pod) -> the pod's egress policy.
 * calico_to_wep:   TC egress (packets towards the pod)  -> the pod's ingress policy.
 * calico_from_hep: TC ingress of a data interface -> the host endpoint's ingress policy.
 * calico_to_hep:   TC egress of a data interface  -> the host endpoint's egress policy.
 *
 * Host endpoint hooks differ from workload ones as upstream's: non-IP traffic passes; an
 * interface with no host endpoint (no cpy_iface entry, not READY, or an empty slot) passes
 * without policy; failsafe ports (cpy_v4_fsafes / cpy_v6_fsafes) to (from-HEP) or from
 * (to-HEP) the host's own addresses pass ahead of policy and are tracked; the policy program
 * learns from st->host_flags whether the host itself is the destination / source. New flows
 * arriving on a data interface are reverse-path checked first (BPFEnforceRPF, CALI_RPF), new
 * flows from a workload strictly against the routes map (cpy_v4_routes / cpy_v6_routes);
 * conntrack hits at TC ingress arriving on another interface than recorded are re-checked.
 *
 * ARP and ICMPv6 ND/MLD pass; IPv4 and IPv6 are policed; anything else is dropped. A conntrack hit whose leg this hook already approved
 * passes without policy (TCP SYNs are always re-policed). Otherwise the packet is parsed into
 * cpy_state and the endpoint's policy program is tail-called from the hook's jump map at the
 * slot cpy_iface gives; a missing interface entry, slot or program drops the packet, so an
 * interface stays deny-all until its policy is in place. Packets to a workload from one of the
 * host's own addresses (cpy_v4_hostips, cpy_v6_hostips) pass without policy, as in the
 * nftables dataplane.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "cali_maps.h"
#include "conntrack.h"

/* BPFEnforceRPF on from-HEP: 0 Disabled, 1 Strict, 2 Loose (upstream's default). */
#ifndef CALI_RPF
#define CALI_RPF 2
#endif

/* Ipv6Support: 0 drops IPv6 on workload interfaces as unsupported (upstream's BPF mode with
 * IPv6 off does the same). */
#ifndef CALI_IPV6
#define CALI_IPV6 1
#endif

static __always_inline void cali_state_reset(struct cali_state *st, __u8 proto)
{
	st->proto = proto;
	st->sport = 0;
	st->dport = 0;
	st->icmp_type = 0;
	st->icmp_code = 0;
	st->has_ports = 0;
	st->tcp_flags = 0;
	st->icmp_id = 0;
	st->pol_rc = 0;
	st->flags = 0;
}

/* Ports / TCP flags / ICMP (icmp_proto: IPPROTO_ICMP or IPPROTO_ICMPV6) at l4off. */
static __always_inline int cali_parse_l4(struct __sk_buff *skb, struct cali_state *st,
					 __u32 l4off, __u8 icmp_proto)
{
	__u8 l4[4];

	switch (st->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_SCTP:
	case IPPROTO_UDPLITE:
		if (bpf_skb_load_bytes(skb, l4off, l4, 4) < 0)
			return -1;
		st->sport = (l4[0] << 8) | l4[1];
		st->dport = (l4[2] << 8) | l4[3];
		st->has_ports = 1;
		if (st->proto == IPPROTO_TCP &&
		    bpf_skb_load_bytes(skb, l4off + 13, &st->tcp_flags, 1) < 0)
			return -1;
		return 0;
	}
	if (st->proto == icmp_proto) {
		__u8 icmp[6];
		if (bpf_skb_load_bytes(skb, l4off, icmp, 6) < 0)
			return -1;
		st->icmp_type = icmp[0];
		st->icmp_code = icmp[1];
		st->icmp_id = (icmp[4] << 8) | icmp[5];
	}
	return 0;
}

static __always_inline int cali_parse(struct __sk_buff *skb, struct cali_state *st)
{
	struct iphdr ip;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0)
		return -1;
	if (ip.ihl < 5)
		return -1;
	st->ip_ver = 4;
	st->ip_src = ip.saddr;
	st->ip_dst = ip.daddr;
	cali_state_reset(st, ip.protocol);
	/* Non-first fragments carry no L4 header. */
	if (ip.frag_off & bpf_htons(0x1fff))
		return 0;
	return cali_parse_l4(skb, st, ETH_HLEN + ip.ihl * 4, IPPROTO_ICMP);
}

/* IPv6: walk up to CALI_V6_MAX_EXT extension headers (hop-by-hop, routing, destination
 * options, fragment, AH) to the upper-layer protocol; more than that is unsupported. A
 * non-first fragment has the fragment header's next header as protocol and no L4. */
#define CALI_V6_MAX_EXT 6
static __always_inline int cali_parse6(struct __sk_buff *skb, struct cali_state *st)
{
	struct ipv6hdr ip6;
	__u32 off = ETH_HLEN + sizeof(struct ipv6hdr);
	__u8 nh;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)) < 0)
		return -1;
	st->ip_ver = 6;
	st->ip_src = 0;
	st->ip_dst = 0;
	__builtin_memcpy(st->ip6_src, &ip6.saddr, 16);
	__builtin_memcpy(st->ip6_dst, &ip6.daddr, 16);
	nh = ip6.nexthdr;
#pragma unroll
	for (int i = 0; i < CALI_V6_MAX_EXT; i++) {
		__u8 ext[4];

		if (nh != IPPROTO_HOPOPTS && nh != IPPROTO_ROUTING && nh != IPPROTO_DSTOPTS &&
		    nh != IPPROTO_FRAGMENT && nh != IPPROTO_AH)
			break;
		if (bpf_skb_load_bytes(skb, off, ext, 4) < 0)
			return -1;
		if (nh == IPPROTO_FRAGMENT) {
			nh = ext[0];
			off += 8;
			if (((ext[2] << 8) | ext[3]) & 0xfff8) { /* offset != 0: no L4 header */
				cali_state_reset(st, nh);
				return 0;
			}
		} else if (nh == IPPROTO_AH) {
			nh = ext[0];
			off += (ext[1] + 2) * 4;
		} else {
			nh = ext[0];
			off += (ext[1] + 1) * 8;
		}
	}
	if (nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS ||
	    nh == IPPROTO_FRAGMENT || nh == IPPROTO_AH)
		return -1;
	cali_state_reset(st, nh);
	return cali_parse_l4(skb, st, off, IPPROTO_ICMPV6);
}

/* ICMPv6 MLD (130-132, 143) and ND (133-137): link-local control traffic that skips policy,
 * as upstream's BPF mode and the nftables workload-to-host chain let it through. */
static __always_inline int cali_icmp6_nd(const struct cali_state *st)
{
	if (st->ip_ver != 6 || st->proto != IPPROTO_ICMPV6)
		return 0;
	return (st->icmp_type >= 130 && st->icmp_type <= 137) || st->icmp_type == 143;
}

/* A failsafe port: TCP/UDP to the host (from-HEP: FailsafeInboundHostPorts, keyed on the
 * source) or from it (to-HEP: FailsafeOutboundHostPorts, keyed on the destination). */
static __always_inline int cali_failsafe(const struct cali_state *st, __u8 hook)
{
	int out = hook == CALI_HOOK_TO_HEP;

	if (!st->has_ports || (st->proto != IPPROTO_TCP && st->proto != IPPROTO_UDP))
		return 0;
	if (!(st->host_flags & (out ? CALI_ST_SRC_IS_HOST : CALI_ST_DEST_IS_HOST)))
		return 0;
	if (st->ip_ver == 6) {
		struct cali_fsafe6_key k6 = {
			.prefixlen = CALI_FSAFE6_FULL_PREFIX,
			.port = st->dport,
			.proto = st->proto,
			.flags = out ? CALI_FSAFE_OUT : 0,
		};
		__builtin_memcpy(k6.addr, out ? st->ip6_dst : st->ip6_src, 16);
		return bpf_map_lookup_elem(&cpy_v6_fsafes, &k6) != 0;
	}
	struct cali_fsafe_key k = {
		.prefixlen = CALI_FSAFE_FULL_PREFIX,
		.port = st->dport,
		.proto = st->proto,
		.flags = out ? CALI_FSAFE_OUT : 0,
		.addr = out ? st->ip_dst : st->ip_src,
	};
	return bpf_map_lookup_elem(&cpy_v4_fsafes, &k) != 0;
}

/* Reverse-path check of a new flow arriving on a data interface: a FIB lookup of the route
 * back to the source (source and destination swapped, from this interface). Strict: that route
 * must leave through this interface; Loose: some route must exist. IPv6 link-local sources and
 * ICMPv6 are on-link by definition and pass. */
static __always_inline int cali_hep_rpf_ok(struct __sk_buff *skb, const struct cali_state *st)
{
	struct bpf_fib_lookup fib;
	__u32 in = skb->ingress_ifindex;
	int rc;

	if (CALI_RPF == 0)
		return 1;
	__builtin_memset(&fib, 0, sizeof(fib));
	fib.ifindex = in;
	fib.l4_protocol = st->proto;
	fib.sport = bpf_htons(st->dport);
	fib.dport = bpf_htons(st->sport);
	if (st->ip_ver == 6) {
		const __u8 *src6 = (const __u8 *)st->ip6_src;

		if (st->proto == IPPROTO_ICMPV6 || (src6[0] == 0xfe && (src6[1] & 0xc0) == 0x80))
			return 1;
		fib.family = 10; /* AF_INET6 */
		__builtin_memcpy(fib.ipv6_src, st->ip6_dst, 16);
		__builtin_memcpy(fib.ipv6_dst, st->ip6_src, 16);
	} else {
		fib.family = 2; /* AF_INET */
		fib.ipv4_src = st->ip_dst;
		fib.ipv4_dst = st->ip_src;
	}
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH &&
	    rc != BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return 0;
	if (fib.ifindex == in)
		return 1;
	return CALI_RPF == 2 && fib.ifindex != 0;
}

/* Workload reverse-path check (upstream's wep_rpf_check, always strict): the route to the
 * source (cpy_v4_routes / cpy_v6_routes, full-prefix LPM lookup) must exist, be a local
 * workload's and name the interface the packet came in on. ICMPv6 needs only some route (as
 * upstream; ND/MLD skipped this before). */
static __always_inline int cali_wep_rpf_ok(const struct cali_state *st, __u32 ifindex)
{
	struct cali_rt *r;

	if (st->ip_ver == 6) {
		struct cali_rt6_key k6 = {.prefixlen = 128};

		__builtin_memcpy(k6.addr, st->ip6_src, 16);
		r = bpf_map_lookup_elem(&cpy_v6_routes, &k6);
		if (r && st->proto == IPPROTO_ICMPV6)
			return 1;
	} else {
		struct cali_rt_key k = {.prefixlen = 32, .addr = st->ip_src};

		r = bpf_map_lookup_elem(&cpy_v4_routes, &k);
	}
	if (!r)
		return 0;
	return (r->flags & (CALI_RT_LOCAL | CALI_RT_WORKLOAD)) ==
		       (CALI_RT_LOCAL | CALI_RT_WORKLOAD) &&
	       r->ifindex == ifindex;
}

static __always_inline int cali_rpf_ok(struct __sk_buff *skb, const struct cali_state *st,
				       const int hep, __u32 ifindex)
{
	return hep ? cali_hep_rpf_ok(skb, st) : cali_wep_rpf_ok(st, ifindex);
}

static __always_inline int cali_main(struct __sk_buff *skb, __u8 hook, const int hep)
{
	struct cali_state *st;
	struct cali_iface *iface;
	struct cali_ct_value *ct;
	__u32 ifindex = skb->ifindex;
	__s32 slot;

	cali_count(ifindex, hook, CALI_CTR_TOTAL);
	if (skb->protocol == bpf_htons(ETH_P_ARP))
		return TC_ACT_UNSPEC;
	st = cali_state_get();
	if (!st)
		goto unsupported;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (cali_parse(skb, st) < 0)
			goto unsupported;
	} else if (CALI_IPV6 && skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (cali_parse6(skb, st) < 0)
			goto unsupported;
		if (cali_icmp6_nd(st))
			return TC_ACT_UNSPEC;
	} else {
		if (hep) /* upstream: other ethertypes (and IPv6 with IPv6 off) pass on HEPs */
			goto hep_no_policy;
		goto unsupported;
	}
	st->hook = hook;
	st->hep = hep;
	st->host_flags = 0;
	if (hep) {
		if (hook == CALI_HOOK_FROM_HEP && cali_to_host(st))
			st->host_flags = CALI_ST_DEST_IS_HOST;
		else if (hook == CALI_HOOK_TO_HEP && !(skb->mark & CALI_MARK_SEEN) &&
			 cali_from_host(st))
			st->host_flags = CALI_ST_SRC_IS_HOST;
	}
	cali_ct_fill_key(st);

	ct = cali_ct_lookup(st);
	if (ct && (ct->legs & st->my_leg)) {
		int syn = st->proto == IPPROTO_TCP && (st->tcp_flags & 0x12) == 0x02;
		if (!syn) {
			/* To-host hook: a hit arriving on another interface than the source side's
			 * recorded one (or the first there, e.g. a reply) is reverse-path checked
			 * again (upstream's CT RPF re-check); on success it is recorded. */
			if (hook == CALI_HOOK_FROM_WEP) {
				__u32 *rec = cali_ct_src_ifindex(st, ct);

				if (*rec != ifindex) {
					if (!cali_rpf_ok(skb, st, hep, ifindex))
						goto rpf_drop;
					*rec = ifindex;
				}
			}
			ct->last_seen = bpf_ktime_get_ns();
			if (cali_tcp_bits(st))
				__sync_fetch_and_or(&ct->legs, cali_tcp_bits(st));
			if (!hep && hook == CALI_HOOK_FROM_WEP)
				skb->mark = skb->mark | CALI_MARK_SEEN;
			cali_count(ifindex, hook, CALI_CTR_CT_ACCEPT);
			CALI_LOG_DEBUG("if %d hook %d: conntrack hit, allow", ifindex, hook);
			return TC_ACT_UNSPEC;
		}
	}

	/* Upstream checks every new flow on a data interface, host endpoint or not, and every
	 * new flow from a workload (strictly, against the routes map). */
	if (hook == CALI_HOOK_FROM_WEP && !cali_rpf_ok(skb, st, hep, ifindex))
		goto rpf_drop;
	iface = bpf_map_lookup_elem(&cpy_iface, &ifindex);
	if (!iface || !(iface->flags & CALI_IFACE_READY)) {
		if (hep)
			goto hep_no_policy;
		goto no_policy;
	}
	if (hep && cali_failsafe(st, hook)) {
		cali_count(ifindex, hook, CALI_CTR_FAILSAFE);
		CALI_LOG_DEBUG("if %d hook %d: failsafe port %d, allow", ifindex, hook, st->dport);
		return cali_ct_allow(st, ifindex);
	}
	/* From the host itself (not forwarded): allowed without policy; the entry approves the
	 * workload's leg so its replies pass from-WEP without its egress policy. */
	if (!hep && hook == CALI_HOOK_TO_WEP && cali_from_host(st)) {
		cali_count(ifindex, hook, CALI_CTR_HOST_BYPASS);
		return cali_ct_allow(st, ifindex);
	}
	if (hook == CALI_HOOK_FROM_WEP) {
		slot = iface->ingress_slot;
		if (slot >= 0)
			bpf_tail_call(skb, &cpy_jump_ing, slot);
	} else {
		slot = iface->egress_slot;
		if (slot >= 0)
			bpf_tail_call(skb, &cpy_jump_egr, slot);
	}
	/* No policy program in the slot: a HEP passes (upstream), a workload denies. */
	if (hep)
		goto hep_no_policy;
no_policy:
	cali_count(ifindex, hook, CALI_CTR_DROP_NO_POLICY);
	CALI_LOG_INFO("if %d hook %d: no policy program, drop", ifindex, hook);
	return TC_ACT_SHOT;
hep_no_policy:
	cali_count(ifindex, hook, CALI_CTR_HEP_NO_POLICY);
	return TC_ACT_UNSPEC;
rpf_drop:
	cali_count(ifindex, hook, CALI_CTR_DROP_RPF);
	CALI_LOG_INFO("if %d hook %d: reverse-path check failed, drop", ifindex, hook);
	return TC_ACT_SHOT;
unsupported:
	cali_count(ifindex, hook, CALI_CTR_DROP_UNSUPPORTED);
	CALI_LOG_INFO("if %d hook %d: unsupported packet, drop", ifindex, hook);
	return TC_ACT_SHOT;
}

SEC("tc")
int calico_from_wep(struct __sk_buff *skb)
{
	return cali_main(skb, CALI_HOOK_FROM_WEP, 0);
}

SEC("tc")
int calico_to_wep(struct __sk_buff *skb)
{
	return cali_main(skb, CALI_HOOK_TO_WEP, 0);
}

SEC("tc")
int calico_from_hep(struct __sk_buff *skb)
{
	return cali_main(skb, CALI_HOOK_FROM_HEP, 1);
}

SEC("tc")
int calico_to_hep(struct __sk_buff *skb)
{
	return cali_main(skb, CALI_HOOK_TO_HEP, 1);
}

char _license[] SEC("license") = "GPL";
