// SPDX-License-Identifier: GPL-2.0-or-later
/* calico-py workload programs: attached to the host side of each cali* interface.
 *
 * calico_from_wep: TC ingress (packets leaving the pod) -> the pod's egress policy.
 * calico_to_wep:   TC egress (packets towards the pod)  -> the pod's ingress policy.
 *
 * ARP passes, other non-IPv4 is dropped. A conntrack hit whose leg this hook already approved
 * passes without policy (TCP SYNs are always re-policed). Otherwise the packet is parsed into
 * cpy_state and the endpoint's policy program is tail-called from the hook's jump map at the
 * slot cpy_iface gives; a missing interface entry, slot or program drops the packet, so an
 * interface stays deny-all until its policy is in place. Packets to a workload from one of the
 * host's own addresses (cpy_v4_hostips) pass without policy, as in the nftables dataplane.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "cali_maps.h"
#include "conntrack.h"

static __always_inline int cali_parse(struct __sk_buff *skb, struct cali_state *st)
{
	struct iphdr ip;
	__u8 l4[4];
	__u32 l4off;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0)
		return -1;
	if (ip.ihl < 5)
		return -1;
	st->ip_src = ip.saddr;
	st->ip_dst = ip.daddr;
	st->proto = ip.protocol;
	st->sport = 0;
	st->dport = 0;
	st->icmp_type = 0;
	st->icmp_code = 0;
	st->has_ports = 0;
	st->tcp_flags = 0;
	st->icmp_id = 0;
	st->pol_rc = 0;
	/* Non-first fragments carry no L4 header. */
	if (ip.frag_off & bpf_htons(0x1fff))
		return 0;
	l4off = ETH_HLEN + ip.ihl * 4;
	switch (ip.protocol) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_SCTP:
	case IPPROTO_UDPLITE:
		if (bpf_skb_load_bytes(skb, l4off, l4, 4) < 0)
			return -1;
		st->sport = (l4[0] << 8) | l4[1];
		st->dport = (l4[2] << 8) | l4[3];
		st->has_ports = 1;
		if (ip.protocol == IPPROTO_TCP &&
		    bpf_skb_load_bytes(skb, l4off + 13, &st->tcp_flags, 1) < 0)
			return -1;
		break;
	case IPPROTO_ICMP: {
		__u8 icmp[6];
		if (bpf_skb_load_bytes(skb, l4off, icmp, 6) < 0)
			return -1;
		st->icmp_type = icmp[0];
		st->icmp_code = icmp[1];
		st->icmp_id = (icmp[4] << 8) | icmp[5];
		break;
	}
	}
	return 0;
}

static __always_inline int cali_main(struct __sk_buff *skb, __u8 hook)
{
	struct cali_state *st;
	struct cali_iface *iface;
	struct cali_ct_value *ct;
	__u32 ifindex = skb->ifindex;
	__s32 slot;

	cali_count(ifindex, hook, CALI_CTR_TOTAL);
	if (skb->protocol == bpf_htons(ETH_P_ARP))
		return TC_ACT_UNSPEC;
	if (skb->protocol != bpf_htons(ETH_P_IP))
		goto unsupported;
	st = cali_state_get();
	if (!st)
		goto unsupported;
	if (cali_parse(skb, st) < 0)
		goto unsupported;
	st->hook = hook;
	cali_ct_fill_key(st);

	ct = bpf_map_lookup_elem(&cpy_v4_ct, &st->ct_key);
	if (ct && (ct->legs & st->my_leg)) {
		int syn = st->proto == IPPROTO_TCP && (st->tcp_flags & 0x12) == 0x02;
		if (!syn) {
			ct->last_seen = bpf_ktime_get_ns();
			if (cali_tcp_bits(st))
				__sync_fetch_and_or(&ct->legs, cali_tcp_bits(st));
			cali_count(ifindex, hook, CALI_CTR_CT_ACCEPT);
			CALI_LOG_DEBUG("if %d hook %d: conntrack hit, allow", ifindex, hook);
			return TC_ACT_UNSPEC;
		}
	}

	iface = bpf_map_lookup_elem(&cpy_iface, &ifindex);
	if (!iface || !(iface->flags & CALI_IFACE_READY))
		goto no_policy;
	/* From the host itself (not forwarded): allowed without policy; the entry approves the
	 * workload's leg so its replies pass from-WEP without its egress policy. */
	if (hook == CALI_HOOK_TO_WEP && bpf_map_lookup_elem(&cpy_v4_hostips, &st->ip_src)) {
		cali_count(ifindex, hook, CALI_CTR_HOST_BYPASS);
		return cali_ct_allow(st);
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
	/* No policy program in the slot: deny. */
no_policy:
	cali_count(ifindex, hook, CALI_CTR_DROP_NO_POLICY);
	CALI_LOG_INFO("if %d hook %d: no policy program, drop", ifindex, hook);
	return TC_ACT_SHOT;
unsupported:
	cali_count(ifindex, hook, CALI_CTR_DROP_UNSUPPORTED);
	CALI_LOG_INFO("if %d hook %d: unsupported packet, drop", ifindex, hook);
	return TC_ACT_SHOT;
}

SEC("tc")
int calico_from_wep(struct __sk_buff *skb)
{
	return cali_main(skb, CALI_HOOK_FROM_WEP);
}

SEC("tc")
int calico_to_wep(struct __sk_buff *skb)
{
	return cali_main(skb, CALI_HOOK_TO_WEP);
}

char _license[] SEC("license") = "GPL";
