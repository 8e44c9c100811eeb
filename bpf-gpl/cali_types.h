/* SPDX-License-Identifier: GPL-2.0-or-later */
/* calico-py eBPF dataplane: shared types (layouts mirrored in calico/felix/bpf/maps.py). */
#ifndef CALI_TYPES_H
#define CALI_TYPES_H

#include <linux/types.h>

/* Hooks, seen from the host namespace: from-WEP = TC ingress of cali* = pod egress policy. */
#define CALI_HOOK_FROM_WEP 0
#define CALI_HOOK_TO_WEP 1
/* Host endpoints use the same two TC hooks: from-HEP = TC ingress (the HEP's ingress policy),
 * to-HEP = TC egress (its egress policy); cali_state.hep tells them apart. */
#define CALI_HOOK_FROM_HEP CALI_HOOK_FROM_WEP
#define CALI_HOOK_TO_HEP CALI_HOOK_TO_WEP

/* Conntrack key: canonical order, side A is the lower (addr, port) pair (native-int compare).
 * ICMP: both ports hold the query id and proto carries the request type in bits 8-15, so each
 * echo/timestamp/... exchange is its own flow (as in Linux conntrack) and its reply matches. */
struct cali_ct_key {
	__u32 proto;  /* host order; ICMP: 1 | request type << 8 */
	__u32 addr_a; /* network order */
	__u32 addr_b;
	__u16 port_a; /* host order; 0 for ICMP */
	__u16 port_b;
};

/* IPv6: the same with 128-bit addresses (four network-order words, compared word 0 first). */
struct cali_ct6_key {
	__u32 proto;     /* ICMPv6: 58 | request type << 8 */
	__u32 addr_a[4]; /* network order */
	__u32 addr_b[4];
	__u16 port_a;
	__u16 port_b;
};

#define CALI_CT_LEG_A 0x1   /* side A's endpoint approved the flow */
#define CALI_CT_LEG_B 0x2
#define CALI_CT_FIN_SEEN 0x4
#define CALI_CT_RST_SEEN 0x8

/* ifindex_a / ifindex_b: the interface side A's / B's packets last arrived on at a to-host hook
 * (TC ingress: from-WEP, from-HEP), 0 = not seen there yet (upstream's per-leg ifindex). A
 * conntrack hit arriving on another interface is reverse-path checked again. */
struct cali_ct_value {
	__u64 created;   /* bpf_ktime_get_ns() */
	__u64 last_seen;
	__u32 legs;      /* CALI_CT_* bits */
	__u32 ifindex_a;
	__u32 ifindex_b;
	__u32 pad;
};

/* Per-interface state written by Felix: slots in the two jump maps, -1 = no policy yet. */
#define CALI_IFACE_WEP 0x1
#define CALI_IFACE_READY 0x2
#define CALI_IFACE_HEP 0x8 /* upstream's bit: a data interface (BPFDataIfacePattern) */
struct cali_iface {
	__u32 flags;
	__s32 ingress_slot; /* TC ingress hook (pod egress policy) */
	__s32 egress_slot;  /* TC egress hook (pod ingress policy) */
};

/* Routes LPM (upstream's cali_v4_routes / cali_v6_routes, simplified value): Felix writes each
 * local workload's addresses LOCAL|WORKLOAD with its interface; from-WEP's reverse-path check
 * looks the source up at full prefix. */
#define CALI_RT_WORKLOAD 0x4
#define CALI_RT_LOCAL 0x8
struct cali_rt_key {
	__u32 prefixlen; /* host order: the address bits that count */
	__u32 addr;      /* network order */
};
struct cali_rt6_key {
	__u32 prefixlen;
	__u32 addr[4];
};
struct cali_rt {
	__u32 flags;   /* CALI_RT_* */
	__u32 ifindex; /* LOCAL|WORKLOAD: the workload's host-side interface */
};

/* IP set LPM key: prefixlen counts the bits after it; set id big-endian (two NBO words). */
struct cali_ipset_key {
	__u32 prefixlen;
	__u32 id_hi;
	__u32 id_lo;
	__u32 addr;  /* network order */
	__u16 port;  /* host order */
	__u8 proto;
	__u8 pad;
};
#define CALI_IPSET_FULL_PREFIX 128

/* IPv6 IP set LPM key: as above with a 128-bit address (64 + 128 + 16 + 8 = 216 bits). */
struct cali_ipset6_key {
	__u32 prefixlen;
	__u32 id_hi;
	__u32 id_lo;
	__u32 addr[4]; /* network order */
	__u16 port;
	__u8 proto;
	__u8 pad;
};
#define CALI_IPSET6_FULL_PREFIX 216

/* Scratch state handed from the main program to the policy program across the tail call. */
struct cali_state {
	__u32 ip_src;    /* IPv4 only */
	__u32 ip_dst;
	__u32 ip6_src[4]; /* IPv6 only, network order */
	__u32 ip6_dst[4];
	__u8 ip_ver;     /* 4 or 6: which addresses, conntrack key and maps apply */
	__u8 hep;        /* 1 on a host endpoint's hooks */
	__u8 host_flags; /* CALI_ST_*: HEP hooks only */
	__u8 flags;      /* CALI_ST_LOG_PACKET: per packet, reset by the main program */
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 icmp_type;
	__u8 icmp_code;
	__u8 has_ports;
	__u8 hook;
	__u8 tcp_flags;
	__u16 icmp_id;   /* echo/timestamp/info identifier (host order), conntrack only */
	__s32 pol_rc;    /* 1 allow, 2 deny */
	__u32 my_leg;    /* CALI_CT_LEG_* this hook approves */
	struct cali_ct_key ct_key;
	struct cali_ct6_key ct6_key;
};

/* from-HEP: the destination is one of the host's addresses; to-HEP: the source is. Traffic
 * with neither is forwarded through the host (applyOnForward policy). */
#define CALI_ST_DEST_IS_HOST 0x1
#define CALI_ST_SRC_IS_HOST 0x2

/* cali_state.flags: a matching log rule marked the packet (upstream's LOG_PACKET; our own bit
 * in a byte of our own, since host_flags == 0 means forwarded). */
#define CALI_ST_LOG_PACKET 0x1

/* skb mark bit (upstream's SEEN, outside NftablesMarkMask's Felix bits): a workload's
 * from-WEP hook allowed the packet, so a to-HEP hook seeing it after SNAT to a host address
 * still treats it as forwarded, not as the host's own traffic. */
#define CALI_MARK_SEEN 0x01000000

#define CALI_POL_ALLOW 1
#define CALI_POL_DENY 2

/* Per-interface, per-hook packet counters (per-CPU; Felix creates and deletes the entries, so
 * a program never adds one). Names in calico/felix/bpf/maps.py COUNTER_NAMES, same order. */
struct cali_ctr_key {
	__u32 ifindex;
	__u32 hook; /* CALI_HOOK_* */
};
#define CALI_CTR_TOTAL 0           /* every packet the hook saw */
#define CALI_CTR_CT_ACCEPT 1       /* established flow, conntrack fast path */
#define CALI_CTR_POL_ACCEPT 2      /* allowed by the policy program */
#define CALI_CTR_POL_DENY 3        /* denied by the policy program */
#define CALI_CTR_DROP_NO_POLICY 4  /* interface not ready / empty slot */
#define CALI_CTR_DROP_UNSUPPORTED 5 /* not IPv4/IPv6/ARP, or unparseable */
#define CALI_CTR_HOST_BYPASS 6     /* from a host address: not policed */
#define CALI_CTR_FAILSAFE 7        /* HEP: failsafe port, allowed ahead of policy */
#define CALI_CTR_HEP_NO_POLICY 8   /* HEP: no host endpoint (or no program): allowed */
#define CALI_CTR_DROP_RPF 9        /* reverse-path check failed (WEP: strict; HEP: BPFEnforceRPF) */
#define CALI_CTR_N 10
struct cali_ctr_value {
	__u64 c[CALI_CTR_N];
};

/* Failsafe LPM key (upstream's layout): prefixlen counts the bits after it, i.e. 32 (port,
 * proto, flags) + the CIDR's bits; addr is the remote side (inbound: source, outbound:
 * destination). Lookups use the full prefix. */
#define CALI_FSAFE_OUT 0x1
struct cali_fsafe_key {
	__u32 prefixlen;
	__u16 port;  /* host order: the destination port */
	__u8 proto;
	__u8 flags;  /* CALI_FSAFE_OUT for FailsafeOutboundHostPorts */
	__u32 addr;  /* network order */
};
#define CALI_FSAFE_FULL_PREFIX 64
struct cali_fsafe6_key {
	__u32 prefixlen;
	__u16 port;
	__u8 proto;
	__u8 flags;
	__u32 addr[4];
};
#define CALI_FSAFE6_FULL_PREFIX 160

#endif
