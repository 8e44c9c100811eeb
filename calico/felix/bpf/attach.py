"""Attach/detach the main programs on an interface: TCX links (``mode="tcx"``, kernel 6.6+,
:mod:`calico.felix.bpf.tcx`) or tc clsact filters (``mode="tc"``, direct-action).

tc filters use a fixed preference and handle, so a re-attach replaces our filter in place (no
gap) and a detach finds it. Switching mode on an interface attaches the new way first, then
removes the old (TCX: our clsact filters; tc: our pinned links). Detach removes both. Design:
design/felix-bpf.md "Attach".
"""

from __future__ import annotations

import errno
import json
import re
from typing import Any

from calico.felix.bpf import tcx
from calico.felix.bpf.libbpf import BPFError

INGRESS_PARENT = 0xFFFFFFF2  # ffff:fff2, TC ingress: from the workload
EGRESS_PARENT = 0xFFFFFFF3  # ffff:fff3, TC egress: towards the workload
FILTER_PRIO = 1
FILTER_HANDLE = 1


def _ipr(netns: str | None) -> Any:
    from pyroute2 import IPRoute

    return IPRoute(netns=netns, flags=0) if netns else IPRoute()


def _index(ipr: Any, iface: str) -> int:
    links = ipr.link_lookup(ifname=iface)
    if not links:
        raise BPFError(f"interface {iface} not found")
    return int(links[0])


def attach(
    iface: str,
    from_fd: int,
    to_fd: int,
    netns: str | None = None,
    *,
    hep: bool = False,
    mode: str = "tc",
    link_dir: str | None = None,
) -> int:
    """Attach the workload or (``hep``) host endpoint programs to ``iface``'s ingress and
    egress hooks; returns its ifindex. ``link_dir``: where TCX links are pinned (needed
    for ``mode="tcx"``; with tc, our links found there are removed)."""
    if mode == "tcx":
        if link_dir is None:
            raise BPFError("TCX attach needs a link pin directory")
        ipr = _ipr(netns)  # one netlink socket: under a netns, pyroute2 opening one is costly
        try:
            idx = _index(ipr, iface)
            tcx.attach(idx, iface, {"ingress": from_fd, "egress": to_fd}, link_dir, netns)
            if set(_filters(ipr, idx).values()) & set(OUR_PROGRAMS):
                ipr.tc("del", "clsact", idx)  # migrated from tc: the filters would run too
        finally:
            ipr.close()
        return idx
    idx = _attach_tc(iface, from_fd, to_fd, netns, HEP_PROGRAMS if hep else WEP_PROGRAMS)
    if link_dir is not None and tcx.supported():
        tcx.detach(idx, iface, link_dir, OUR_PROGRAMS, netns)  # migrated from TCX
    return idx


def _attach_tc(
    iface: str, from_fd: int, to_fd: int, netns: str | None, names: tuple[str, str]
) -> int:
    from pyroute2 import NetlinkError

    ipr = _ipr(netns)
    try:
        idx = _index(ipr, iface)
        try:
            ipr.tc("add", "clsact", idx)
        except NetlinkError as e:
            if e.code != errno.EEXIST:
                raise
        for parent, fd, name in (
            (INGRESS_PARENT, from_fd, names[0]),
            (EGRESS_PARENT, to_fd, names[1]),
        ):
            ipr.tc(
                "replace-filter",
                "bpf",
                idx,
                FILTER_HANDLE,
                fd=fd,
                name=name,
                parent=parent,
                prio=FILTER_PRIO,
                direct_action=True,
            )
        return idx
    except NetlinkError as e:
        raise BPFError(f"attaching BPF programs to {iface} failed: {e}") from e
    finally:
        ipr.close()


def detach(iface: str, netns: str | None = None, link_dir: str | None = None) -> bool:
    """Remove our TCX links (pinned in ``link_dir`` or running our programs) and the clsact
    qdisc (and with it our filters); False if the iface is gone."""
    if tcx.supported():
        ipr = _ipr(netns)
        try:
            links = ipr.link_lookup(ifname=iface)
        finally:
            ipr.close()
        if link_dir is not None or links:
            tcx.detach(links[0] if links else None, iface, link_dir or "/nonexistent",
                       OUR_PROGRAMS, netns)  # fmt: skip
    return _del_clsact(iface, netns)


def _del_clsact(iface: str, netns: str | None) -> bool:
    from pyroute2 import NetlinkError

    ipr = _ipr(netns)
    try:
        links = ipr.link_lookup(ifname=iface)
        if not links:
            return False
        try:
            ipr.tc("del", "clsact", links[0])
        except NetlinkError as e:
            if e.code not in (errno.ENOENT, errno.EINVAL):
                raise BPFError(f"detaching BPF programs from {iface} failed: {e}") from e
        return True
    finally:
        ipr.close()


def attached_programs(iface: str, netns: str | None = None) -> dict[str, str]:
    """Hook -> BPF program name of our programs, TCX links first, then tc filters (for
    tests and debug output)."""
    out = _tc_programs(iface, netns)
    for hook, ours in _tcx_ours(iface, netns).items():
        out[hook] = ours[0]
    return out


def attach_mode(iface: str, netns: str | None = None) -> dict[str, str]:
    """Hook -> "tcx" or "tc": how our program is attached there."""
    tc = _tc_programs(iface, netns)
    out = {hook: "tc" for hook, name in tc.items() if name in OUR_PROGRAMS}
    out.update((hook, "tcx") for hook in _tcx_ours(iface, netns))
    return out


def _tcx_ours(iface: str, netns: str | None) -> dict[str, list[str]]:
    """Hook -> names of our programs on the interface's TCX hooks, in order (hooks without
    one left out; nothing without TCX)."""
    if not tcx.supported():
        return {}
    ipr = _ipr(netns)
    try:
        idx = _index(ipr, iface)
    finally:
        ipr.close()
    out = {}
    for hook, progs in tcx.programs(idx, netns).items():
        ours = [name for name, _ in progs if name in OUR_PROGRAMS]
        if ours:
            out[hook] = ours
    return out


def _tc_programs(iface: str, netns: str | None = None) -> dict[str, str]:
    ipr = _ipr(netns)
    try:
        return _filters(ipr, _index(ipr, iface))
    finally:
        ipr.close()


def _filters(ipr: Any, idx: int) -> dict[str, str]:
    """Hook -> name of the BPF tc filter there (any owner)."""
    out: dict[str, str] = {}
    for hook, parent in (("ingress", INGRESS_PARENT), ("egress", EGRESS_PARENT)):
        for msg in ipr.get_filters(idx, parent=parent):
            opts = msg.get_attr("TCA_OPTIONS")
            name = opts.get_attr("TCA_BPF_NAME") if opts is not None else None
            if name:
                out[hook] = name
    return out


def attached_program_ids(netns: str | None = None) -> dict[str, int]:
    """Program name -> id of our main programs found on any interface in ``netns`` (the
    debug commands reach the dataplane's maps through them when the pins are not visible).
    Read with ``tc -j``: pyroute2 does not decode TCA_BPF_ID."""
    out: dict[str, int] = {}
    import subprocess  # here: an nftables-mode start imports this module for detach_all only

    prefix = ["ip", "netns", "exec", netns] if netns else []
    for idx, name in iface_names(netns).items():
        if tcx.supported():
            for progs in tcx.programs(idx, netns).values():
                for pname, pid in progs:
                    if pname in OUR_PROGRAMS:
                        out.setdefault(pname, pid)
        for hook in ("ingress", "egress"):
            proc = subprocess.run(
                [*prefix, "tc", "-j", "filter", "show", "dev", name, hook],
                capture_output=True,
                text=True,
                check=False,
                timeout=30,
            )
            if proc.returncode != 0 or not proc.stdout.strip():
                continue
            for flt in json.loads(proc.stdout):
                opts = flt.get("options", {})
                prog = opts.get("prog", {})
                if opts.get("bpf_name") in OUR_PROGRAMS and "id" in prog:
                    out.setdefault(opts["bpf_name"], int(prog["id"]))
        if len(out) == len(OUR_PROGRAMS):
            break
    return out


def iface_names(netns: str | None = None) -> dict[int, str]:
    """ifindex -> name of every link (to re-adopt a predecessor's ``cpy_iface`` entries)."""
    ipr = _ipr(netns)
    try:
        return {int(link["index"]): str(link.get_attr("IFLA_IFNAME")) for link in ipr.get_links()}
    finally:
        ipr.close()


WEP_PROGRAMS = ("calico_from_wep", "calico_to_wep")
HEP_PROGRAMS = ("calico_from_hep", "calico_to_hep")
OUR_PROGRAMS = (*WEP_PROGRAMS, *HEP_PROGRAMS)


def detach_all(
    prefixes: tuple[str, ...],
    netns: str | None = None,
    data_ifaces: re.Pattern[str] | None = None,
    link_dir: str | None = None,
) -> list[str]:
    """Detach our programs from every interface named ``prefix*`` (or matching
    ``data_ifaces``, BPFDataIfacePattern) that carries them (the clean-up after BPF mode is
    switched off); returns the interfaces cleaned.

    Every start of an nftables-mode Felix runs this, so the links and their qdiscs come from
    one struct-decoded link dump and qdisc dump (``calico.felix.nlbatch``); tc filters are
    read (pyroute2) only on links with a clsact qdisc, where tc hooks live, and TCX hooks
    with a ``bpf()`` query, no netlink. Two pyroute2 sockets and two filter dumps per
    workload interface were ~18% of a 100-endpoint cold start (design/performance.md "Felix
    cold start").
    """
    from calico.felix import nlbatch as nb

    writer = nb.BatchWriter(netns)
    try:
        links = [
            nb.decode_link(b) for t, b in writer.dump(nb.link_dump_request()) if t == nb.RTM_NEWLINK
        ]
        qdiscs = [
            nb.decode_qdisc(b)
            for t, b in writer.dump(nb.qdisc_dump_request())
            if t == nb.RTM_NEWQDISC
        ]
    finally:
        writer.close()
    clsact = {index for index, kind in qdiscs if kind == "clsact"}
    with_tcx = tcx.supported()
    cleaned = []
    for link in sorted(links, key=lambda lk: lk.name):
        name = link.name
        if not name.startswith(prefixes) and not (data_ifaces and data_ifaces.search(name)):
            continue
        names: set[str] = set()
        try:
            if link.index in clsact:
                names.update(_tc_programs(name, netns).values())
        except BPFError:
            continue  # vanished meanwhile
        if with_tcx:
            names.update(
                prog for progs in tcx.programs(link.index, netns).values() for prog, _ in progs
            )
        if names & set(OUR_PROGRAMS):
            detach(name, netns, link_dir)
            cleaned.append(name)
    return cleaned
