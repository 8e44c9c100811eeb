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

#define CALI_SRC_PORT(st) ((st)->has_ports ? (st)->sport : 0)
#define CALI_DST_PORT(st) ((st)->has_ports ? (st)->dport : 0)

static __always_inline int cali_policy_deny(struct cali_state *st)
{
	st->pol_rc = CALI_POL_DENY;
	return TC_ACT_SHOT;
}

#endif
