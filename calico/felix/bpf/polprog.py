"""Generate one endpoint's policy program (C, compiled per endpoint and direction).

The walk is the nftables endpoint chain's (``calico.felix.rules.endpoints.endpoint_chain``):
tiers in order, skipping tiers with no enforced (non-staged) policy for the direction; a
policy's rules in order, the first matching allow/deny decides, ``pass``/``next-tier`` skips to
the end of the tier, ``log`` marks the packet (LOG_PACKET) and continues, with a trace-pipe
record naming the rule when BPFLogLevel is on; end of tier denies unless its default action is
Pass; then the profiles (``pass`` in a profile continues with the next profile, as in
nftables), then deny. Criteria are ANDed as in ``calico.felix.rules.matches.rule_match``. The
walk is emitted twice, once per IP family (the main program's ``st->ip_ver`` picks one): a rule
that cannot match in a family (``ipVersion``, ICMP of the other family, positive nets all of
the other family) is left out of that family's walk, as the nftables renderer leaves it out of
that family's chain. Each IP-set criterion is one LPM lookup by the set's 64-bit id in the
family's map; set membership lives in the maps, so it never changes the program.
Design: design/felix-bpf.md "Policy programs".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from calico.felix.messages import Policy, PolicyID, PortRange, Profile, Rule, TierInfo
from calico.felix.rules.matches import ICMP_V4, ICMP_V6, protocol_number
from calico.felix.rules.policy import is_staged, log_prefix, short_kind

FNV64_OFFSET, FNV64_PRIME = 0xCBF29CE484222325, 0x100000001B3


def rule_id(owner: str, direction: str, index: int, rule_hash: str) -> int:
    """64-bit FNV-1a of the rule's identity (upstream hashes its NFLOG prefix the same way):
    the same rule in the same policy has one counter, whichever endpoints use it."""
    h = FNV64_OFFSET
    for b in f"{owner}|{direction}|{index}|{rule_hash}".encode():
        h = ((h ^ b) * FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


@dataclass(frozen=True)
class RuleInfo:
    """One rule of a generated program, for the policy debug listing and rule counters."""

    id: int
    owner: str  # "policy tier/namespace/name" or "profile name"
    index: int
    action: str
    rule_hash: str


@dataclass(frozen=True)
class EndpointPolicy:
    """Everything one direction of one endpoint's program depends on."""

    tiers: tuple[TierInfo, ...]
    profile_ids: tuple[str, ...]
    inbound: bool  # True: the pod's ingress policy (to-WEP hook); a HEP's (from-HEP hook)
    admin_down: bool = False
    # A host endpoint (design/felix-bpf.md "Host endpoints"): its extra policy kinds.
    host: bool = False
    untracked_tiers: tuple[TierInfo, ...] = ()
    pre_dnat_tiers: tuple[TierInfo, ...] = ()
    forward_tiers: tuple[TierInfo, ...] = ()
    # A workload endpoint while an all-interfaces (``*``) host endpoint exists: its pre-DNAT
    # and applyOnForward tiers, walked in the host endpoint's direction (the reverse of the
    # workload's) before the workload's own policy; its normal policy never applies here.
    wild_pre_dnat_tiers: tuple[TierInfo, ...] = ()
    wild_forward_tiers: tuple[TierInfo, ...] = ()


def _nbo_word(addr: ipaddress.IPv4Address | ipaddress.IPv4Network) -> int:
    """The u32 a BPF program sees when it loads these network-order bytes (little-endian)."""
    if isinstance(addr, ipaddress.IPv4Network):
        addr = addr.network_address
    return int.from_bytes(addr.packed, "little")


def _mask_word(prefixlen: int) -> int:
    mask = (0xFFFFFFFF << (32 - prefixlen)) & 0xFFFFFFFF if prefixlen else 0
    return int.from_bytes(mask.to_bytes(4, "big"), "little")


Net = ipaddress.IPv4Network | ipaddress.IPv6Network


def _family_nets(nets: Sequence[str], version: int) -> list[Net]:
    out = []
    for n in nets:
        net = ipaddress.ip_network(n, strict=False)
        if net.version == version:
            out.append(net)
    return out


def _net6_term(field: str, net: ipaddress.IPv6Network) -> str:
    """One IPv6 CIDR against the state's four network-order words (only words the mask
    covers are compared; ::/0 is always true)."""
    packed = net.network_address.packed
    terms = []
    for i in range(4):
        bits = min(32, max(0, net.prefixlen - 32 * i))
        if not bits:
            break
        want = int.from_bytes(packed[4 * i : 4 * i + 4], "little")
        if bits == 32:
            terms.append(f"st->{field}[{i}] == 0x{want:08x}")
        else:
            terms.append(f"(st->{field}[{i}] & 0x{_mask_word(bits):08x}) == 0x{want:08x}")
    return "(" + (" && ".join(terms) or "1") + ")"


def _nets_expr(field: str, nets: Sequence[Net]) -> str:
    terms = []
    for n in nets:
        if isinstance(n, ipaddress.IPv6Network):
            terms.append(_net6_term(field.replace("ip_", "ip6_"), n))
        else:
            mask, want = _mask_word(n.prefixlen), _nbo_word(n)
            terms.append(f"((st->{field} & 0x{mask:08x}) == 0x{want:08x})")
    return "(" + " || ".join(terms) + ")"


def _ports_expr(port: str, ports: Sequence[PortRange]) -> str:
    terms = []
    for pr in sorted(set(ports), key=lambda p: (p.first, p.last)):
        if pr.first == pr.last:
            terms.append(f"{port} == {pr.first}")
        else:
            terms.append(f"({port} >= {pr.first} && {port} <= {pr.last})")
    return "(st->has_ports && (" + " || ".join(terms) + "))"


def _c_literal(text: str) -> str:
    """``text`` as a C string literal that is also a literal printf format: quotes and
    backslashes escaped, ``%`` doubled, anything but printable ASCII dropped."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "%":
            out.append("%%")
        elif " " <= ch <= "~":
            out.append(ch)
    return '"' + "".join(out) + '"'


class Generator:
    """C source for an endpoint direction; ``ipset_id`` maps calc-graph set ids to 64-bit ids."""

    def __init__(
        self,
        policies: Mapping[PolicyID, Policy],
        profiles: Mapping[str, Profile],
        ipset_id: Callable[[str], int],
        *,
        rule_counters: bool = False,
        log_template: str = "calico-packet",
    ) -> None:
        self._policies = policies
        self._log_template = log_template  # LogPrefix, as the nftables log statement's
        self._profiles = profiles
        self._ipset_id = ipset_id
        self._rule_counters = rule_counters  # BPFPolicyDebugEnabled
        self.ipsets_used: set[str] = set()
        self.rules: list[RuleInfo] = []  # the last source()'s rules, in program order
        # A rule in both families' walks is listed once, at its place in the policy order.
        self._order: dict[int, tuple[int, int]] = {}  # rule ID -> (owner's place, index)
        self._owner_seq = 0

    def _prefix(self, tier: str, kind: str, name: str, namespace: str) -> str:
        return _c_literal(log_prefix(self._log_template, tier, kind, name, namespace))

    def _set_lookup(self, set_id: str, side: str, version: int = 4) -> str:
        self.ipsets_used.add(set_id)
        sid = self._ipset_id(set_id)
        hi = int.from_bytes((sid >> 32).to_bytes(4, "big"), "little")
        lo = int.from_bytes((sid & 0xFFFFFFFF).to_bytes(4, "big"), "little")
        addr, port = (
            ("ip_src", "CALI_SRC_PORT(st)") if side == "src" else ("ip_dst", "CALI_DST_PORT(st)")
        )
        if version == 6:
            addr = addr.replace("ip_", "ip6_")
            return f"cali_ipset6_has(0x{hi:08x}, 0x{lo:08x}, st->{addr}, {port}, st->proto)"
        return f"cali_ipset_has(0x{hi:08x}, 0x{lo:08x}, st->{addr}, {port}, st->proto)"

    def rule_conditions(self, rule: Rule, version: int = 4) -> list[str] | None:
        """C conditions (all must hold), or None if the rule cannot match in ``version``."""
        proto = None if rule.protocol is None else protocol_number(rule.protocol)
        icmp_proto = ICMP_V4 if version == 4 else ICMP_V6
        if rule.ip_version and rule.ip_version != version:
            return None
        if proto in (ICMP_V4, ICMP_V6) and proto != icmp_proto:
            return None
        conds: list[str] = []
        if proto is not None:
            conds.append(f"st->proto == {proto}")
        if rule.not_protocol is not None:
            conds.append(f"st->proto != {protocol_number(rule.not_protocol)}")
        for field, nets, not_nets in (
            ("ip_src", rule.src_net, rule.not_src_net),
            ("ip_dst", rule.dst_net, rule.not_dst_net),
        ):
            if nets:
                mine = _family_nets(nets, version)
                if not mine:
                    return None
                conds.append(_nets_expr(field, mine))
            theirs = _family_nets(not_nets, version)
            if theirs:
                conds.append("!" + _nets_expr(field, theirs))
        for side, ids, negate in (
            ("src", rule.src_ip_set_ids, False),
            ("src", rule.not_src_ip_set_ids, True),
            ("dst", rule.dst_ip_set_ids, False),
            ("dst", rule.not_dst_ip_set_ids, True),
            ("src", rule.src_ip_port_set_ids, False),
        ):
            conds.extend(("!" if negate else "") + self._set_lookup(i, side, version) for i in ids)
        for side, ports, named, not_ports, not_named in (
            ("src", rule.src_ports, rule.src_named_port_ip_set_ids, rule.not_src_ports,
             rule.not_src_named_port_ip_set_ids),
            ("dst", rule.dst_ports, rule.dst_named_port_ip_set_ids, rule.not_dst_ports,
             rule.not_dst_named_port_ip_set_ids),
        ):  # fmt: skip
            port = "st->sport" if side == "src" else "st->dport"
            alts = [_ports_expr(port, ports)] if ports else []
            alts += [self._set_lookup(i, side, version) for i in named]
            if alts:
                conds.append("(" + " || ".join(alts) + ")")
            if not_ports:
                conds.append("!" + _ports_expr(port, not_ports))
            conds.extend("!" + self._set_lookup(i, side, version) for i in not_named)
        conds.extend(self._set_lookup(i, "dst", version) for i in rule.dst_ip_port_set_ids)
        for icmp, negated in ((rule.icmp, False), (rule.not_icmp, True)):
            if icmp is None:
                continue
            if proto != icmp_proto:
                raise ValueError("an ICMP type match needs protocol icmp or icmpv6")
            c = f"st->icmp_type == {icmp.type}"
            if icmp.code is not None:
                c = f"({c} && st->icmp_code == {icmp.code})"
            conds.append(f"!({c})" if negated else c)
        return conds

    def _rules(
        self,
        out: list[str],
        rules: Sequence[Rule],
        label: str,
        on_pass: str,
        owner: str,
        direction: str,
        version: int,
        allow: str,
        prefix: str,
    ) -> None:
        """``prefix``: the log rules' record prefix (:func:`_c_literal` text)."""
        self._owner_seq += 1
        for n, rule in enumerate(rules):
            conds = self.rule_conditions(rule, version)
            if conds is None:
                continue
            nxt = f"{label}_r{n}_next"
            out.append(f"\t/* rule {n} {rule.rule_id} action {rule.action} */")
            out.extend(f"\tif (!({c}))\n\t\tgoto {nxt};" for c in conds)
            info = RuleInfo(rule_id(owner, direction, n, rule.rule_id), owner, n, rule.action,
                            rule.rule_id)  # fmt: skip
            if info.id not in self._order:
                self._order[info.id] = (self._owner_seq, n)
                self.rules.append(info)
            if self._rule_counters:
                out.append(f"\tcali_rule_hit(0x{info.id:016x}ULL);")
            if rule.action == "allow":
                out.append(f"\tgoto {allow};")
            elif rule.action == "deny":
                out.append(f"\tgoto v{version}_deny;")
            elif rule.action in ("pass", "next-tier"):
                out.append(f"\tgoto {on_pass};")
            elif rule.action == "log":
                out.append(f"\tCALI_LOG_RULE_V{version}({prefix}, 0x{info.id:016x}ULL);")
            else:
                raise ValueError(f"unknown rule action {rule.action!r}")
            out.append(f"{nxt}:")

    def _tiers(
        self,
        out: list[str],
        tiers: Sequence[TierInfo],
        inbound: bool,
        version: int,
        tag: str,
        *,
        allow: str,
        end_deny: bool = True,
    ) -> bool:
        """Emit a tier walk; ``tag`` keeps the section's labels unique, ``allow`` is its allow
        exit. True if any tier had an enforced policy for the direction."""
        direction = "inbound" if inbound else "outbound"
        v = f"v{version}_"
        any_policy = False
        for t, tier in enumerate(tiers):
            ids = tier.ingress_policies if inbound else tier.egress_policies
            enforced = [p for p in ids if not is_staged(p)]
            enforced = [p for p in enforced if not self._policies.get(p, Policy()).staged]
            if not enforced:
                continue
            any_policy = True
            end = f"{v}{tag}tier{t}_end"
            out.append(f"\t/* tier {tier.name} */")
            for p, pid in enumerate(enforced):
                pol = self._policies.get(pid)
                if pol is None:
                    continue  # not (yet) active: as an empty chain, no rule matches
                rules = pol.inbound_rules if inbound else pol.outbound_rules
                owner = f"policy {pid.tier}/{pid.namespace}/{pid.name}"
                out.append(f"\t/* {owner} */")
                prefix = self._prefix(pid.tier or pol.tier, short_kind(pid), pid.name,
                                      pid.namespace)  # fmt: skip
                self._rules(out, rules, f"{v}{tag}t{t}p{p}", end, owner, direction, version,
                            allow, prefix)  # fmt: skip
            if end_deny and tier.default_action != "Pass":
                out.append(f"\tgoto {v}deny; /* end of tier {tier.name} */")
            out.append(f"{end}:")
        return any_policy

    def _profile_walk(self, out: list[str], ep: EndpointPolicy, version: int) -> None:
        direction = "inbound" if ep.inbound else "outbound"
        v = f"v{version}_"
        for n, prof_id in enumerate(ep.profile_ids):
            prof = self._profiles.get(prof_id, Profile())
            rules = prof.inbound_rules if ep.inbound else prof.outbound_rules
            out.append(f"\t/* profile {prof_id} */")
            pend = f"{v}pro{n}_end"
            self._rules(out, rules, f"{v}pro{n}", pend, f"profile {prof_id}", direction, version,
                        f"{v}allow", self._prefix("", "pro", prof_id, ""))  # fmt: skip
            out.append(f"{pend}:")
        out.append(f"\tgoto {v}deny; /* no profile matched */")

    def _host_sections(self, out: list[str], ep: EndpointPolicy, version: int) -> None:
        """A host endpoint's walk (design/felix-bpf.md "Host endpoints"): untracked policy
        (allow without conntrack), pre-DNAT policy (ingress only), then traffic to/from the
        host itself takes the normal tiers and profiles, forwarded traffic the applyOnForward
        tiers (allowed when there are none). Untracked and pre-DNAT sections only ever allow
        or deny by rule: no end-of-tier or final deny, as their nftables chains."""
        v = f"v{version}_"
        out.append("\t/* untracked (doNotTrack) policy */")
        self._tiers(out, ep.untracked_tiers, ep.inbound, version, "nt",
                    allow=f"{v}allow_nt", end_deny=False)  # fmt: skip
        if ep.inbound:
            out.append("\t/* pre-DNAT policy */")
            self._tiers(out, ep.pre_dnat_tiers, True, version, "pd",
                        allow=f"{v}allow", end_deny=False)  # fmt: skip
        out.append(f"\tif (!st->host_flags)\n\t\tgoto {v}forward;")
        self._tiers(out, ep.tiers, ep.inbound, version, "", allow=f"{v}allow")
        self._profile_walk(out, ep, version)
        out.append(f"{v}forward: /* forwarded through the host: applyOnForward policy */")
        if self._tiers(out, ep.forward_tiers, ep.inbound, version, "fw", allow=f"{v}allow"):
            out.append(f"\tgoto {v}deny; /* no forward policy allowed */")
        out.append(f"\tgoto {v}allow; /* no forward policy */")
        out += [f"{v}allow_nt:", "\treturn cali_policy_allow_untracked(skb, st);"]

    def _wild_sections(self, out: list[str], ep: EndpointPolicy, version: int) -> None:
        """The ``*`` host endpoint's policy on a workload's hooks, as upstream's BPF mode adds
        it (design/felix-bpf.md "Host endpoints"): the workload's interface is one of "all
        interfaces", so traffic leaving the pod enters the host through it (the host
        endpoint's ingress) and traffic to the pod leaves through it (egress). Pre-DNAT
        (ingress only): allow skips to the workload policy, deny drops, no match continues.
        Then traffic to or from the host itself skips host policy (the normal tiers are never
        applied to host <-> own workload traffic, upstream's SuppressNormalHostPolicy), and
        forwarded traffic takes the applyOnForward tiers: allow -> workload policy, end of
        tier denies. Either way the workload's own policy still decides after."""
        v = f"v{version}_"
        hep_inbound = not ep.inbound
        if not (ep.wild_forward_tiers or (hep_inbound and ep.wild_pre_dnat_tiers)):
            return
        wep = f"{v}wep"
        if hep_inbound:
            out.append("\t/* all-interfaces host endpoint: pre-DNAT policy */")
            self._tiers(out, ep.wild_pre_dnat_tiers, True, version, "wpd", allow=wep,
                        end_deny=False)  # fmt: skip
        fwd: list[str] = []
        if self._tiers(fwd, ep.wild_forward_tiers, hep_inbound, version, "wfw", allow=wep):
            if hep_inbound:
                # from-WEP: the pod's traffic to the host itself skips host policy (to-WEP
                # never gets here from the host: host-to-workload is allowed before policy)
                out.append(f"\tif (cali_to_host(st))\n\t\tgoto {wep};")
            out.append("\t/* all-interfaces host endpoint: applyOnForward policy */")
            out += [*fwd, f"\tgoto {v}deny; /* no forward policy allowed */"]
        out.append(f"{wep}: /* the workload's own policy */")

    def body(self, ep: EndpointPolicy, version: int = 4) -> list[str]:
        """The walk for one IP family; its labels carry the family (``v4_``/``v6_``)."""
        out: list[str] = []
        v = f"v{version}_"
        self._owner_seq = 0
        if ep.host:
            self._host_sections(out, ep, version)
        else:
            if ep.admin_down:
                out.append(f"\tgoto {v}deny; /* endpoint admin down */")
            self._wild_sections(out, ep, version)
            self._tiers(out, ep.tiers, ep.inbound, version, "", allow=f"{v}allow")
            self._profile_walk(out, ep, version)
        # Each family's own exits: jumps stay within its walk (16-bit BPF jump offsets).
        out += [f"{v}allow:", "\treturn cali_policy_allow(skb, st);"]
        out += [f"{v}deny:", "\treturn cali_policy_deny(skb, st);"]
        return out

    def source(self, ep: EndpointPolicy) -> str:
        self.rules = []
        self._order = {}
        walks = []
        for version in (4, 6):
            walks += [
                f"/* The IPv{version} walk: a subprogram of its own, so that its jumps stay",
                " * within it (16-bit offsets); calls have 32-bit offsets. */",
                f"static __noinline int cali_walk_v{version}(struct __sk_buff *skb,"
                " struct cali_state *st)",
                "{",
                *self.body(ep, version),
                "}",
                "",
            ]
        lines = [
            "// SPDX-License-Identifier: GPL-2.0-or-later",
            "/* Generated by calico/felix/bpf/polprog.py: do not edit. */",
            '#include "policy.h"',
            "",
            *walks,
            'SEC("tc")',
            "int calico_policy(struct __sk_buff *skb)",
            "{",
            "\tstruct cali_state *st = cali_state_get();",
            "",
            "\tif (!st)",
            "\t\treturn TC_ACT_SHOT;",
            "\tif (st->ip_ver == 6)",
            "\t\treturn cali_walk_v6(skb, st);",
            "\treturn cali_walk_v4(skb, st);",
            "}",
            "",
            'char _license[] SEC("license") = "GPL";',
            "",
        ]
        self.rules.sort(key=lambda r: self._order[r.id])
        return "\n".join(lines)
