"""NFLOG prefixes for flow logs, in upstream's form (design/felix-collector.md, "NFLOG prefixes").

When flow logs are on, every policy verdict also copies the packet's headers to an NFLOG group
(1 for ingress, 2 for egress) with a prefix naming the verdict, so the collector can rebuild the
policy trace without asking the kernel which rule matched. The prefix is at most 63 characters
(the kernel keeps 64 bytes including the terminator); longer ones keep their first and last ten
characters around a hash, as upstream, and the collector resolves them through the same function
rather than by parsing.

    <action><owner><dir><rule index>|<name>   a policy or profile rule
    D P <dir>|<tier>                          end of tier, no policy decided (deny)
    P P <dir>|<tier>                          end of tier whose default action is Pass
    D R <dir>                                 no profile matched (deny)

action A(llow), D(eny), P(ass); owner P(olicy) or p(R)ofile; dir I(ngress) or E(gress).
"""

from __future__ import annotations

from calico.felix.nftables.model import Expr, length_limited_id

NFLOG_INBOUND_GROUP = 1
NFLOG_OUTBOUND_GROUP = 2
NFLOG_SNAPLEN = 80  # enough for the IP and L4 headers the collector parses
PREFIX_MAX_LEN = 63
_KEEP = 10
_HASH_LEN = PREFIX_MAX_LEN - 2 * _KEEP - 1

ACTION_CHARS = {"allow": "A", "deny": "D", "pass": "P", "next-tier": "P"}
OWNER_POLICY = "P"
OWNER_PROFILE = "R"


def direction_char(inbound: bool) -> str:
    return "I" if inbound else "E"


def group(inbound: bool) -> int:
    return NFLOG_INBOUND_GROUP if inbound else NFLOG_OUTBOUND_GROUP


def maybe_hash(prefix: str) -> str:
    """Cap at 63 characters; at or over the limit the middle becomes a hash (so a user-chosen
    name of exactly 63 characters cannot impersonate a hashed one)."""
    if len(prefix) < PREFIX_MAX_LEN:
        return prefix
    digest = length_limited_id("", prefix, _HASH_LEN)
    return prefix[:_KEEP] + digest + "_" + prefix[-_KEEP:]


def rule_prefix(action: str, owner: str, inbound: bool, index: int, name: str) -> str:
    return maybe_hash(f"{ACTION_CHARS[action]}{owner}{direction_char(inbound)}{index}|{name}")


def end_of_tier_prefix(inbound: bool, tier: str, default_action: str = "Deny") -> str:
    action = "P" if default_action == "Pass" else "D"
    return maybe_hash(f"{action}{OWNER_POLICY}{direction_char(inbound)}|{tier}")


def no_profile_prefix(inbound: bool) -> str:
    return f"D{OWNER_PROFILE}{direction_char(inbound)}"


def nflog(inbound: bool, prefix: str) -> Expr:
    """The nft ``log group N prefix "..." snaplen 80`` statement."""
    return {"log": {"prefix": prefix, "group": group(inbound), "snaplen": NFLOG_SNAPLEN}}
