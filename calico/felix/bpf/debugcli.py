"""``calico bpf ...``: read-only views of the BPF dataplane's pinned maps, like upstream's
``calico-node -bpf`` (calico-bpf): conntrack, IP sets, interface state, per-interface counters
and an interface's policy with rule hit counts. Design: design/felix-bpf.md "Debug commands".

Reads the maps from their bpffs pins (``--pin-dir``, Felix's by default) or, when those are not
visible, through the programs attached in this network namespace (by program and map id, as
bpftool does). Run it in the interfaces' network namespace: names come from netlink there.
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

DEFAULT_PIN_DIR = "/sys/fs/bpf/tc/globals"
DEFAULT_POLICY_DIR = "/var/run/calico/bpf/policy"
PROTO_NAMES = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6", 132: "sctp", 136: "udplite"}


@contextmanager
def _maps(pin_dir: str | None) -> Iterator[object]:
    """The pins in ``pin_dir``; without one, Felix's pin directory if this process sees it,
    else the maps of the programs attached in this netns (found by id: Felix's bpffs may be
    private to its mount namespace, as under ``ip netns exec``)."""
    from calico.felix.bpf.libbpf import BPFError
    from calico.felix.bpf.maps import Maps

    try:
        if pin_dir is None and not os.path.isdir(DEFAULT_PIN_DIR):
            maps = Maps.discover()
        else:
            pin_dir = pin_dir or DEFAULT_PIN_DIR
            if not os.path.isdir(pin_dir):
                raise click.ClickException(
                    f"no BPF maps at {pin_dir}: is Felix running with BPFEnabled=true here?"
                )
            maps = Maps(pin_dir)
    except BPFError as e:
        raise click.ClickException(f"cannot open the BPF maps: {e}") from None
    try:
        yield maps
    finally:
        maps.close()


def _iface_names() -> dict[int, str]:
    from calico.felix.bpf import attach

    return attach.iface_names(None)


def _ifindex(name: str) -> int:
    for idx, n in _iface_names().items():
        if n == name:
            return idx
    raise click.ClickException(f"no interface {name!r} in this network namespace")


def _echo_json(obj: object) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True))


pin_dir_option = click.option(
    "--pin-dir",
    default=None,
    help=f"bpffs directory of the pinned maps [default: {DEFAULT_PIN_DIR} if visible, else "
    "the maps of the programs attached in this network namespace].",
)
json_option = click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text")


@click.group("bpf")
def bpf_group() -> None:
    """Inspect the BPF dataplane (BPFEnabled=true): conntrack, IP sets, interfaces, counters."""


@bpf_group.group("conntrack")
def conntrack_group() -> None:
    """The BPF conntrack table."""


@conntrack_group.command("dump")
@pin_dir_option
@json_option
def conntrack_dump(pin_dir: str | None, output: str) -> None:
    """Every conntrack entry: flow, approved legs, FIN/RST seen, each side's recorded ingress
    interface (ifindex, 0 = none), age and idle time."""
    from calico.felix.bpf.maps import CT_FIN_SEEN, CT_LEG_A, CT_LEG_B, CT_RST_SEEN

    now = time.monotonic_ns()  # bpf_ktime_get_ns() is CLOCK_MONOTONIC
    with _maps(pin_dir) as maps:
        entries = maps.conntrack()  # type: ignore[attr-defined]
    rows = []
    for e in sorted(entries, key=lambda e: (e.proto, e.addr_a, e.port_a, e.addr_b, e.port_b)):
        base = e.proto & 0xFF
        flags = [
            name
            for bit, name in (
                (CT_LEG_A, "A"),
                (CT_LEG_B, "B"),
                (CT_FIN_SEEN, "FIN"),
                (CT_RST_SEEN, "RST"),
            )
            if e.legs & bit
        ]
        rows.append(
            {
                "proto": PROTO_NAMES.get(base, str(base)),
                "a": _endpoint(e.addr_a, e.port_a),
                "b": _endpoint(e.addr_b, e.port_b),
                "flags": flags,
                "ifindex_a": e.ifindex_a,
                "ifindex_b": e.ifindex_b,
                "age_s": round((now - e.created_ns) / 1e9, 1),
                "idle_s": round((now - e.last_seen_ns) / 1e9, 1),
            }
        )
    if output == "json":
        _echo_json(rows)
        return
    for r in rows:
        click.echo(
            f"{r['proto']} {r['a']} <-> {r['b']} legs={'|'.join(r['flags']) or '-'} "
            f"if={r['ifindex_a']}/{r['ifindex_b']} age={r['age_s']}s idle={r['idle_s']}s"
        )
    click.echo(f"{len(rows)} entries")


def _endpoint(addr: str, port: int) -> str:
    """``10.0.0.1:80`` / ``[fd00::1]:80``."""
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


@bpf_group.group("ipsets")
def ipsets_group() -> None:
    """The IP set LPM map."""


@ipsets_group.command("dump")
@pin_dir_option
@json_option
def ipsets_dump(pin_dir: str | None, output: str) -> None:
    """Members by 64-bit set id (both families' maps): CIDRs, and ``addr,proto:port`` for
    named-port members."""
    from calico.felix.bpf.maps import IPSET6_KEY, IPSET_ID_BITS, IPSET_KEY

    sets: dict[str, list[str]] = {}
    with _maps(pin_dir) as maps:
        keys = [*maps.ipsets.keys(), *maps.ipsets6.keys()]  # type: ignore[attr-defined]
    for key in keys:
        layout = IPSET6_KEY if len(key) == IPSET6_KEY.size else IPSET_KEY
        plen, sid, addr, port, proto, _ = layout.unpack(key)
        bits = plen - IPSET_ID_BITS
        ip = ipaddress.ip_address(addr)
        if bits > ip.max_prefixlen:
            member = f"{ip},{PROTO_NAMES.get(proto, str(proto))}:{port}"
        else:
            member = str(ipaddress.ip_network(f"{ip}/{bits}"))
        sets.setdefault(f"0x{int.from_bytes(sid, 'big'):016x}", []).append(member)
    out = {k: sorted(v) for k, v in sorted(sets.items())}
    if output == "json":
        _echo_json(out)
        return
    for sid, members in out.items():
        click.echo(f"IP set {sid}: {len(members)} members")
        for m in members:
            click.echo(f"  {m}")


@bpf_group.group("routes")
def routes_group() -> None:
    """The workload routes map (from-WEP's reverse-path check)."""


@routes_group.command("dump")
@pin_dir_option
@json_option
def routes_dump(pin_dir: str | None, output: str) -> None:
    """Per CIDR (both families): flags and the interface a workload may send it from."""
    from calico.felix.bpf.maps import ROUTE_VALUE, RT_LOCAL, RT_WORKLOAD, decode_route

    flag_names = ((RT_LOCAL, "local"), (RT_WORKLOAD, "workload"))
    names = _iface_names()
    with _maps(pin_dir) as maps:
        items = [*maps.routes.items(), *maps.routes6.items()]  # type: ignore[attr-defined]
    rows = []
    for key, value in items:
        flags, idx = ROUTE_VALUE.unpack(value)
        rows.append(
            {
                "cidr": decode_route(key),
                "flags": [n for b, n in flag_names if flags & b],
                "ifindex": idx,
                "iface": names.get(idx, "?"),
            }
        )
    rows.sort(key=lambda r: (":" in r["cidr"], r["cidr"]))
    if output == "json":
        _echo_json(rows)
        return
    for r in rows:
        click.echo(f"{r['cidr']:<44} {','.join(r['flags']) or '-'} {r['iface']} ({r['ifindex']})")
    click.echo(f"{len(rows)} routes")


@bpf_group.group("ifstate")
def ifstate_group() -> None:
    """The interface-state map."""


@ifstate_group.command("dump")
@pin_dir_option
@json_option
def ifstate_dump(pin_dir: str | None, output: str) -> None:
    """Per ifindex: name, flags (workload or host, ready) and the policy jump-map slots."""
    from calico.felix.bpf.maps import IFACE_HEP, IFACE_READY, IFACE_VALUE, IFACE_WEP, PROG_FD

    flag_names = ((IFACE_WEP, "workload"), (IFACE_HEP, "host"), (IFACE_READY, "ready"))
    names = _iface_names()
    with _maps(pin_dir) as maps:
        items = list(maps.iface.items())  # type: ignore[attr-defined]
    rows = []
    for key, value in items:
        (idx,) = PROG_FD.unpack(key)
        flags, ing, egr = IFACE_VALUE.unpack(value)
        rows.append(
            {
                "ifindex": idx,
                "name": names.get(idx, "?"),
                "flags": [n for b, n in flag_names if flags & b],
                "ingress_slot": ing,
                "egress_slot": egr,
            }
        )
    rows.sort(key=lambda r: r["ifindex"])
    if output == "json":
        _echo_json(rows)
        return
    for r in rows:
        click.echo(
            f"{r['ifindex']:>5} {r['name']:<16} {','.join(r['flags']) or '-'} "
            f"ingress={r['ingress_slot']} egress={r['egress_slot']}"
        )


@bpf_group.group("counters")
def counters_group() -> None:
    """Per-interface packet counters."""


@counters_group.command("dump")
@pin_dir_option
@json_option
@click.option("--iface", default=None, help="Only this interface.")
def counters_dump(pin_dir: str | None, output: str, iface: str | None) -> None:
    """Packets seen, accepted (conntrack / policy / host traffic) and dropped, per TC hook."""
    names = _iface_names()
    with _maps(pin_dir) as maps:
        if iface is not None:
            idx = _ifindex(iface)
            found = maps.read_counters(idx)  # type: ignore[attr-defined]
            if found is None:
                raise click.ClickException(f"{iface} has no BPF counters (not a BPF endpoint)")
            table = {iface: found}
        else:
            table = {}
            for idx in maps.counter_ifindexes():  # type: ignore[attr-defined]
                found = maps.read_counters(idx)  # type: ignore[attr-defined]
                if found is not None:
                    table[names.get(idx, f"ifindex {idx}")] = found
    if output == "json":
        _echo_json(table)
        return
    for name, hooks in sorted(table.items()):
        click.echo(name)
        for hook, counts in hooks.items():
            click.echo(f"  {hook}: " + " ".join(f"{k}={v}" for k, v in counts.items()))


@bpf_group.group("policy")
def policy_group() -> None:
    """An interface's policy program, with rule hit counts (BPFPolicyDebugEnabled)."""


@policy_group.command("dump")
@pin_dir_option
@json_option
@click.option(
    "--listing-dir",
    default=DEFAULT_POLICY_DIR,
    show_default=True,
    help="Where Felix writes the policy listings.",
)
@click.argument("iface")
@click.argument("hook", type=click.Choice(["ingress", "egress", "all"]), default="all")
def policy_dump(pin_dir: str | None, output: str, listing_dir: str, iface: str, hook: str) -> None:
    """IFACE's rules in program order with their hit counts, for one TC HOOK (ingress = the
    workload's egress policy) or both."""
    from calico.felix.bpf.dataplane import listing_path

    hooks = ("ingress", "egress") if hook == "all" else (hook,)
    listings = {}
    for h in hooks:
        path = listing_path(listing_dir, iface, h)
        try:
            with open(path) as f:
                listings[h] = json.load(f)
        except FileNotFoundError:
            raise click.ClickException(
                f"no policy listing {path}: unknown interface, or BPFPolicyDebugEnabled=false"
            ) from None
        except (OSError, ValueError) as e:
            raise click.ClickException(f"cannot read {path}: {e}") from None
    with _maps(pin_dir) as maps:
        hits = maps.rule_hits()  # type: ignore[attr-defined]
    out = {
        h: [{**r, "hits": hits.get(int(r["id"], 16), 0)} for r in doc["rules"]]
        for h, doc in listings.items()
    }
    if output == "json":
        _echo_json(out)
        return
    for h, rules in out.items():
        side = "workload egress" if h == "ingress" else "workload ingress"
        click.echo(f"{iface} {h} ({side} policy): {len(rules)} rules")
        for r in rules:
            click.echo(
                f"  {r['owner']} rule {r['index']} {r['action']} id={r['id']} hits={r['hits']}"
            )
