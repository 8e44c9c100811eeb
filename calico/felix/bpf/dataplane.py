"""The BPF dataplane core: maps, the main programs, per-interface slots and policy programs.

Order for a new interface (no window where traffic passes unpoliced): attach the main programs
first (with no ``cpy_iface`` entry they drop everything), load the policy programs into the
interface's jump-map slots, then write the ``cpy_iface`` entry that makes the main programs
tail-call them. A policy update only swaps the program in the slot (atomic for packets).
Data interfaces get the host endpoint programs the same way, except that without an entry
they allow (upstream's host endpoint default), so a host endpoint is enforced once its entry
is written and :meth:`clear_policies` hands the interface back to allow-all.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Sequence

from calico.felix.bpf import attach, pins
from calico.felix.bpf.bpffs import BPFUnavailable, check_kernel, is_bpffs
from calico.felix.bpf.build import Compiler
from calico.felix.bpf.libbpf import BPFError, LoadedObject
from calico.felix.bpf.maps import (
    IFACE_HEP,
    IFACE_READY,
    IFACE_VALUE,
    IFACE_WEP,
    PROG_FD,
    ROUTE_VALUE,
    RULE_ID,
    Maps,
    MapSizes,
    route_key,
    workload_route,
)
from calico.felix.bpf.polprog import RuleInfo

log = logging.getLogger(__name__)

HOOKS = ("ingress", "egress")  # TC hooks: ingress = pod egress policy, egress = pod ingress


def _on_bpffs(path: str) -> bool:
    """True if the nearest existing ancestor of ``path`` (or itself) is a bpffs."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return is_bpffs(path)


class BPFDataplane:
    def __init__(
        self,
        pin_dir: str,
        cache_dir: str,
        *,
        sizes: MapSizes | None = None,
        netns: str | None = None,
        policy_debug_dir: str | None = None,
        defines: dict[str, int] | None = None,
        attach_type: str = "tc",
        link_dir: str | None = None,
    ) -> None:
        check_kernel()
        if attach_type not in ("tc", "tcx"):
            raise BPFError(f"unknown attach type {attach_type!r} (tc or tcx)")
        self.attach_type = attach_type
        # TCX link pins (upstream: /sys/fs/bpf/tcx); by default next to the map pin directory.
        self.link_dir = link_dir or os.path.join(os.path.dirname(pin_dir.rstrip("/")), "tcx")
        if not _on_bpffs(pin_dir):
            raise BPFUnavailable(f"{pin_dir} is not on a bpffs mount")
        os.makedirs(pin_dir, mode=0o700, exist_ok=True)
        self.pin_dir = pin_dir
        self.netns = netns
        self.policy_debug_dir = policy_debug_dir
        self.compiler = Compiler(cache_dir, {**(sizes or MapSizes()).defines(), **(defines or {})})
        main_obj = self.compiler.compile_file("tc.c")
        resizes = pins.prepare(main_obj, pin_dir)  # pins of another size or layout
        self._main = LoadedObject(main_obj, pin_dir)
        self.resized = pins.finish(resizes, pin_dir)
        self.from_fd = self._main.program_fd("calico_from_wep")
        self.to_fd = self._main.program_fd("calico_to_wep")
        self.from_hep_fd = self._main.program_fd("calico_from_hep")
        self.to_hep_fd = self._main.program_fd("calico_to_hep")
        self.maps = Maps(pin_dir)
        self._slots: dict[str, int] = {}  # iface -> slot (same index in both jump maps)
        self._ifindex: dict[str, int] = {}
        self._rules: dict[tuple[str, str], frozenset[int]] = {}  # (iface, hook) -> rule IDs
        self._routes: dict[str, tuple[int, frozenset[bytes]]] = {}  # iface -> ifindex, keys
        self.compile_seconds = 0.0
        self.load_seconds = 0.0
        self.adopted = self._adopt()

    def _adopt(self) -> list[str]:
        """Take over a predecessor's interfaces from the pinned ``cpy_iface`` map.

        Their attached filters and jump-map programs keep enforcing the old policy (and the
        pinned conntrack keeps established flows) until this Felix reprograms them into the
        same slots; entries whose interface is gone are deleted with their slots.
        """
        names = attach.iface_names(self.netns)
        adopted, stale = [], []
        for key, value in list(self.maps.iface.items()):
            (idx,) = PROG_FD.unpack(key)
            _, slot, _ = IFACE_VALUE.unpack(value)
            name = names.get(idx)
            if name is None or name in self._ifindex:
                stale.append((key, slot))
                continue
            self._ifindex[name], self._slots[name] = idx, slot
            adopted.append(name)
        live = set(self._slots.values())
        for key, slot in stale:
            self.maps.iface.delete(key)
            self.maps.delete_counters(PROG_FD.unpack(key)[0])
            if slot not in live:  # never a slot a live interface still uses
                for hook in HOOKS:
                    self.maps.jump[hook].delete(PROG_FD.pack(slot))
        self._adopt_routes()
        if adopted:
            log.info("Adopted BPF state of %d interfaces from a previous run", len(adopted))
        return sorted(adopted)

    def _adopt_routes(self) -> None:
        """A predecessor's workload routes: those of adopted interfaces stay (no RPF gap until
        :meth:`set_workload_routes` restates them), the others are deleted."""
        names = {idx: name for name, idx in self._ifindex.items()}
        owned: dict[str, set[bytes]] = {}
        for rmap in (self.maps.routes, self.maps.routes6):
            for key, value in list(rmap.items()):
                _, idx = ROUTE_VALUE.unpack(value)
                name = names.get(idx)
                if name is None:
                    rmap.delete(key)
                else:
                    owned.setdefault(name, set()).add(key)
        for name, keys in owned.items():
            self._routes[name] = (self._ifindex[name], frozenset(keys))

    def close(self) -> None:
        self.maps.close()
        self._main.close()

    # ---- interfaces ------------------------------------------------------------------------

    def _slot(self, iface: str) -> int:
        if iface not in self._slots:
            used = set(self._slots.values())
            self._slots[iface] = next(i for i in range(len(used) + 1) if i not in used)
        return self._slots[iface]

    def slot(self, iface: str) -> int | None:
        return self._slots.get(iface)

    def attach_iface(self, iface: str, *, hep: bool = False) -> int:
        """Attach the main programs (a workload is deny-all until :meth:`set_policies`, a
        data interface allows all until then); returns ifindex."""
        fds = (self.from_hep_fd, self.to_hep_fd) if hep else (self.from_fd, self.to_fd)
        idx = attach.attach(
            iface, *fds, self.netns, hep=hep, mode=self.attach_type, link_dir=self.link_dir
        )
        self.register(iface, idx)
        return idx

    def register(self, iface: str, idx: int) -> None:
        """Record ``iface``'s ifindex (attach does this; BPF_PROG_TEST_RUN runs on lo, 1)."""
        old = self._ifindex.get(iface)
        if old is not None and old != idx:
            self.maps.iface.delete(PROG_FD.pack(old))
            self.maps.delete_counters(old)
        self._ifindex[iface] = idx
        if self.maps.read_counters(idx) is None:  # kept across re-attach and restarts
            for hook in HOOKS:
                self.maps.reset_counters(idx, hook)

    def set_workload_routes(self, iface: str, nets: Sequence[str]) -> None:
        """The workload's addresses (CIDRs, either family) -> LOCAL|WORKLOAD routes on its
        interface, replacing the ones written for it before: from-WEP's reverse-path check
        drops any source without one. Call before :meth:`set_policies` makes it ready."""
        idx = self._ifindex.get(iface)
        if idx is None:
            raise BPFError(f"{iface}: set_workload_routes before attach_iface")
        keys = set()
        for net in nets:
            try:
                keys.add(route_key(net))
            except ValueError:
                log.error("%s: ignoring unparseable workload address %r", iface, net)
        old_idx, old = self._routes.get(iface, (idx, frozenset()))
        value = workload_route(idx)
        for key in keys if old_idx != idx else keys - old:
            self.maps.route_map(key).update(key, value)
        self._routes[iface] = (idx, frozenset(keys))
        self._drop_routes(old - keys)

    def _drop_routes(self, keys: frozenset[bytes]) -> None:
        """Delete routes no interface claims any more (a moved address keeps its new owner)."""
        live = frozenset().union(*(k for _, k in self._routes.values()))
        for key in keys - live:
            self.maps.route_map(key).delete(key)

    def set_policies(
        self,
        iface: str,
        sources: dict[str, str],
        rules: dict[str, Sequence[RuleInfo]] | None = None,
        *,
        hep: bool = False,
    ) -> None:
        """Load hook -> policy C source into the interface's slots, then mark it ready.

        ``rules`` (hook -> the program's rules) feeds the policy debug listing and the rule
        counters' clean-up: a rule ID no interface uses any more loses its counter."""
        idx = self._ifindex.get(iface)
        if idx is None:
            raise BPFError(f"{iface}: set_policies before attach_iface")
        slot = self._slot(iface)
        for hook in HOOKS:
            t0 = time.monotonic()
            path = self.compiler.compile_source(sources[hook], f"pol_{hook}")
            t1 = time.monotonic()
            obj = LoadedObject(path, self.pin_dir)
            try:
                fd = obj.program_fd("calico_policy")
                self.maps.jump[hook].update(PROG_FD.pack(slot), PROG_FD.pack(fd))
            finally:
                obj.close()  # the jump map keeps the program alive
            self.compile_seconds += t1 - t0
            self.load_seconds += time.monotonic() - t1
        kind = IFACE_HEP if hep else IFACE_WEP
        self.maps.iface.update(PROG_FD.pack(idx), IFACE_VALUE.pack(kind | IFACE_READY, slot, slot))
        if rules is not None:
            for hook in HOOKS:
                self._set_rules(iface, hook, rules.get(hook, ()))

    def clear_policies(self, iface: str) -> None:
        """A data interface whose host endpoint went: back to no policy (the HEP programs
        then allow all, as upstream's for an interface without a host endpoint)."""
        idx = self._ifindex.get(iface)
        if idx is not None:
            self.maps.iface.delete(PROG_FD.pack(idx))
        slot = self._slots.pop(iface, None)
        if slot is not None:
            for hook in HOOKS:
                self.maps.jump[hook].delete(PROG_FD.pack(slot))
        for hook in HOOKS:
            self._drop_rule_counters(self._rules.pop((iface, hook), frozenset()))
            if self.policy_debug_dir is not None:
                remove_listing(self.policy_debug_dir, iface, hook)

    def _set_rules(self, iface: str, hook: str, rules: Sequence[RuleInfo]) -> None:
        old = self._rules.pop((iface, hook), frozenset())
        new = frozenset(r.id for r in rules)
        if new:
            self._rules[(iface, hook)] = new
        self._drop_rule_counters(old - new)
        if self.policy_debug_dir is not None:
            write_listing(self.policy_debug_dir, iface, hook, rules)

    def prune_rule_counters(self) -> int:
        """Delete counters of rule IDs no program of ours holds (a predecessor's, after a
        restart); call once every interface is programmed. Returns how many went."""
        live = frozenset().union(*self._rules.values()) if self._rules else frozenset()
        keys = list(self.maps.rule_ctrs.keys())
        stale = [k for k in keys if RULE_ID.unpack(k)[0] not in live]
        for key in stale:
            self.maps.rule_ctrs.delete(key)
        return len(stale)

    def _drop_rule_counters(self, ids: frozenset[int]) -> None:
        live = frozenset().union(*self._rules.values()) if self._rules else frozenset()
        for rid in ids - live:
            self.maps.rule_ctrs.delete(RULE_ID.pack(rid))

    def remove_iface(self, iface: str) -> None:
        """Detach, then drop the interface's map entries and free its slot."""
        attach.detach(iface, self.netns, self.link_dir)
        _, routes = self._routes.pop(iface, (0, frozenset()))
        self._drop_routes(routes)
        idx = self._ifindex.pop(iface, None)
        if idx is not None:
            self.maps.iface.delete(PROG_FD.pack(idx))
            self.maps.delete_counters(idx)
        for hook in HOOKS:
            self._drop_rule_counters(self._rules.pop((iface, hook), frozenset()))
            if self.policy_debug_dir is not None:
                remove_listing(self.policy_debug_dir, iface, hook)
        slot = self._slots.pop(iface, None)
        if slot is not None:
            for hook in HOOKS:
                self.maps.jump[hook].delete(PROG_FD.pack(slot))

    @property
    def ifaces(self) -> list[str]:
        return sorted(self._ifindex)

    def ifindex(self, iface: str) -> int | None:
        return self._ifindex.get(iface)


def listing_path(directory: str, iface: str, hook: str) -> str:
    """Upstream's name: ``<iface>_<hook>_v4.json`` (hook = TC hook: ingress or egress)."""
    return os.path.join(directory, f"{iface}_{hook}_v4.json")


def write_listing(directory: str, iface: str, hook: str, rules: Sequence[RuleInfo]) -> None:
    """The policy debug listing (BPFPolicyDebugEnabled), written atomically."""
    os.makedirs(directory, exist_ok=True)
    path = listing_path(directory, iface, hook)
    doc = {
        "iface": iface,
        "hook": hook,
        "rules": [
            {"id": f"{r.id:016x}", "owner": r.owner, "index": r.index, "action": r.action,
             "rule_hash": r.rule_hash}
            for r in rules
        ],
    }  # fmt: skip
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def remove_listing(directory: str, iface: str, hook: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(listing_path(directory, iface, hook))
