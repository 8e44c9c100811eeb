"""``NftablesTable``: desired state for one ``inet calico`` table, applied in one transaction.

Callers record what they want (chains, sets, verdict maps) and call :meth:`apply`. Each apply is
one atomic transaction (a raw nfnetlink batch when every command encodes, else one libnftables
``json_cmd``), touches only what changed since the last successful apply, and makes no kernel
call at all when nothing changed. A resync (refresh timer,
:meth:`invalidate`, first apply, or after a failure) reads the table back and diffs by rule-hash
comments, so restarts and drift repairs rewrite only chains that actually differ.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from calico.felix.nftables.elements import Verdict, canonical, canonical_all, canonical_verdict
from calico.felix.nftables.model import TABLE_FAMILY, TABLE_NAME, Chain, NftSet, VerdictMap
from calico.felix.nftables.netlink import ElementBatch, NetlinkElements, Unencodable
from calico.felix.nftables.nlbatch import plan_batch
from calico.felix.nftables.nlreadback import Dumper, Undecodable, read_table
from calico.felix.nftables.nlrules import rule_body
from calico.felix.nftables.readback import parse_listing
from calico.felix.nftables.state import KernelState, MapState, RenderedChain, SetState
from calico.felix.nftables.state import render_chain as _render
from calico.felix.nftables.transaction import Desired, Dirty, Plan, Stats, build_plan

log = logging.getLogger(__name__)

DEFAULT_REFRESH_INTERVAL = 180.0  # NftablesRefreshInterval
DEFAULT_MAX_FAILURES = 3  # consecutive failures before the whole table is re-added


class NftHandle(Protocol):
    """The slice of ``nftables.Nftables`` we use (injectable for tests)."""

    def json_cmd(self, json_root: dict[str, Any]) -> tuple[int, Any, str]: ...


class ElementSender(Protocol):
    """Commits a netlink batch atomically (:class:`NetlinkElements`; injectable)."""

    def send(self, batch: ElementBatch) -> str | None: ...


class NftablesError(RuntimeError):
    pass


@dataclass
class ApplyResult:
    ok: bool
    error: str | None = None
    kernel_calls: int = 0  # kernel round trips (readback + transaction)
    netlink: bool = False  # the transaction went out as a raw nfnetlink batch
    commands: int = 0  # commands in the transaction (0: nothing sent)
    resynced: bool = False  # the table was read back first
    full_rewrite: bool = False  # the transaction deleted and re-added the whole table
    fallback: str | None = None  # why a transaction went through libnftables, not netlink
    stats: Stats = field(default_factory=Stats)
    seconds: float = 0.0

    def raise_for_error(self) -> None:
        if not self.ok:
            raise NftablesError(self.error or "nftables apply failed")


#: Chains :meth:`NftablesTable.prepare_chain` keeps rendered (two per prepared policy).
PREPARED_CHAINS = 4096


def _same(then: tuple[Any, ...], now: list[Any]) -> bool:
    """The same rule objects in the same order (a Chain's list may have been changed)."""
    return len(then) == len(now) and all(a is b for a, b in zip(then, now, strict=True))


class NftablesTable:
    """Desired state of one nftables table plus the logic to converge the kernel onto it.

    Not thread-safe: owned by the dataplane loop, like upstream's tables.
    """

    def __init__(
        self,
        name: str = TABLE_NAME,
        family: str = TABLE_FAMILY,
        *,
        nft: NftHandle | None = None,
        clock: Callable[[], float] = time.monotonic,
        refresh_interval: float = DEFAULT_REFRESH_INTERVAL,
        max_failures: int = DEFAULT_MAX_FAILURES,
        netlink: ElementSender | None = None,
        reader: Dumper | None = None,
    ) -> None:
        """``netlink``: where encodable transactions go (design/felix-nftables.md "Transactions
        over netlink"); made here along with ``nft`` when that is not given, else none.
        ``reader``: where readbacks are dumped over netlink (design/felix-nftables.md
        "Readback over netlink"); the netlink sender when made here, else none (libnftables
        reads the table)."""
        if nft is None:
            import nftables  # Debian's binding; created here so it binds the caller's netns

            nft = nftables.Nftables()
            netlink = NetlinkElements() if netlink is None else netlink
            if reader is None and isinstance(netlink, NetlinkElements):
                reader = netlink
        self._netlink = netlink
        self._reader = reader
        self.readback_fallback: str | None = None  # why the last readback used libnftables
        self.name, self.family = name, family
        self._nft = nft
        self._clock = clock
        self.refresh_interval = refresh_interval
        self.max_failures = max_failures
        self._desired = Desired()
        self._known = KernelState()
        self._dirty = Dirty()
        self._readback_pending = True  # a new instance must learn what a previous Felix left
        self._next_refresh = math.inf
        self.consecutive_failures = 0
        # Chains rendered by prepare_chain, by name: the Chain object, its rules then, and
        # what they rendered to.
        self._prepared: dict[str, tuple[Chain, tuple[Any, ...], RenderedChain]] = {}

    # ---- desired state -------------------------------------------------------------------------

    def prepare_chain(self, chain: Chain) -> None:
        """Do ahead what ``set_chain`` and the next apply would do for ``chain`` (its rule
        text, hashes and comments, and with netlink its rules' encoding) without setting it:
        setting this Chain object later costs less. No desired state changes. Kept for at
        most :data:`PREPARED_CHAINS` chains, oldest dropped first."""
        rendered = _render(chain)
        self._prepared.pop(chain.name, None)
        self._prepared[chain.name] = (chain, tuple(chain.rules), rendered)
        if len(self._prepared) > PREPARED_CHAINS:
            del self._prepared[next(iter(self._prepared))]
        if self._netlink is None:
            return
        for exprs, comment in rendered.rules:
            try:
                rule_body(rendered.name, exprs, comment)  # fills the encoder's memos
            except Unencodable:
                return  # the apply sends this chain through libnftables

    def set_chain(self, chain: Chain) -> None:
        prepared = self._prepared.pop(chain.name, None)
        if prepared is not None and prepared[0] is chain and _same(prepared[1], chain.rules):
            rendered = prepared[2]  # prepare_chain's work, for the same unchanged Chain
        else:
            rendered = _render(chain)
        old = self._desired.chains.get(chain.name)
        if old is not None and old.state == rendered.state and old.base == rendered.base:
            return
        self._desired.chains[chain.name] = rendered
        self._dirty.chains.add(chain.name)

    def remove_chain(self, name: str) -> None:
        if self._desired.chains.pop(name, None) is not None:
            self._dirty.chains.add(name)

    def set_set(self, nft_set: NftSet) -> None:
        typ = tuple(nft_set.type) if isinstance(nft_set.type, list | tuple) else nft_set.type
        elements = canonical_all(nft_set.elements, typ)
        self._desired.sets[nft_set.name] = SetState(typ, nft_set.interval, elements)
        self._dirty.touch_set(nft_set.name)

    def add_set_members(self, name: str, members: Iterable[Any]) -> None:
        s = self._desired.sets[name]
        added = canonical_all(members, s.type)
        s.elements.update(added)
        self._dirty.touch_members(name, added)

    def remove_set_members(self, name: str, members: Iterable[Any]) -> None:
        s = self._desired.sets[name]
        removed = canonical_all(members, s.type)
        s.elements.difference_update(removed)
        self._dirty.touch_members(name, removed)

    def remove_set(self, name: str) -> None:
        if self._desired.sets.pop(name, None) is not None:
            self._dirty.touch_set(name)

    def set_map(self, vmap: VerdictMap) -> None:
        key_type = vmap.key_type
        elements = {canonical(k, key_type): canonical_verdict(v) for k, v in vmap.elements.items()}
        self._desired.maps[vmap.name] = MapState(key_type, elements)
        self._dirty.touch_map(vmap.name)

    def set_map_element(self, map_name: str, key: Any, verdict: Verdict) -> None:
        m = self._desired.maps[map_name]
        k = canonical(key, m.key_type)
        m.elements[k] = canonical_verdict(verdict)
        self._dirty.touch_map_keys(map_name, (k,))

    def remove_map_element(self, map_name: str, key: Any) -> None:
        m = self._desired.maps[map_name]
        k = canonical(key, m.key_type)
        m.elements.pop(k, None)
        self._dirty.touch_map_keys(map_name, (k,))

    def remove_map(self, name: str) -> None:
        if self._desired.maps.pop(name, None) is not None:
            self._dirty.touch_map(name)

    # ---- timers and status ---------------------------------------------------------------------

    def invalidate(self) -> None:
        """Distrust our picture of the kernel: the next apply reads the table back first."""
        self._readback_pending = True

    @property
    def next_refresh(self) -> float:
        """Clock time of the next periodic readback (``-inf`` when one is already due)."""
        return -math.inf if self._readback_pending else self._next_refresh

    def needs_refresh(self, now: float | None = None) -> bool:
        return self.next_refresh <= (self._clock() if now is None else now)

    @property
    def dirty(self) -> bool:
        """True when the next apply has work to do (changes, a due readback, or a retry)."""
        return bool(self._dirty) or self.needs_refresh()

    def rendered_chain(self, name: str) -> RenderedChain | None:
        """The desired chain as it will be programmed (hashes, comments); for callers and tests."""
        return self._desired.chains.get(name)

    # ---- apply ---------------------------------------------------------------------------------

    def apply(self) -> ApplyResult:
        """Converge the kernel onto the desired state in one transaction; never raises for
        kernel errors (see :attr:`ApplyResult.ok`), keeping everything dirty for the retry."""
        start = time.perf_counter()
        result = self._apply(ApplyResult(ok=True))
        result.seconds = time.perf_counter() - start
        return result

    def _apply(self, result: ApplyResult) -> ApplyResult:
        full = self.consecutive_failures >= self.max_failures
        if not full and self.needs_refresh():
            result.kernel_calls += 1
            error = self._readback()
            if error is not None:
                return self._failed(result, f"reading back table: {error}")
            result.resynced = True
        if not full and not self._dirty:
            return result
        plan = build_plan(
            self.family, self.name, self._desired, self._known, self._dirty, full_rewrite=full
        )
        result.stats, result.full_rewrite = plan.stats, full
        if not plan.empty:
            result.commands = len(plan.commands)
            result.kernel_calls += 1
            error = self._send(plan, result)
            if error is not None:
                return self._failed(result, error)
        self._committed(plan)
        return result

    def _send(self, plan: Plan, result: ApplyResult) -> str | None:
        """One atomic transaction: as a raw netlink batch when every command encodes (no
        libnftables cache fill), else through libnftables."""
        batch = self._netlink_batch(plan, result) if self._netlink else None
        if batch is not None:
            assert self._netlink is not None
            try:
                error = self._netlink.send(batch)
            except Unencodable as exc:  # the socket cannot take it; nothing was sent
                log.debug("netlink batch not sendable (%s); using libnftables", exc)
                result.fallback = f"not sendable: {exc}"
            else:
                result.netlink = True
                return error
        rc, _out, err = self._nft.json_cmd({"nftables": plan.json_commands()})
        return None if rc == 0 else (err.strip() or f"json_cmd rc={rc}")

    def _netlink_batch(self, plan: Plan, result: ApplyResult) -> ElementBatch | None:
        try:
            return plan_batch(self.family, self.name, plan) or None
        except Unencodable as exc:
            log.debug("transaction not encodable for netlink (%s); using libnftables", exc)
            result.fallback = str(exc)
            return None

    def _readback(self) -> str | None:
        known = self._netlink_readback()
        if known is None:
            rc, out, err = self._nft.json_cmd(
                {"nftables": [{"list": {"table": {"family": self.family, "name": self.name}}}]}
            )
            if rc != 0 and "No such file or directory" not in err:
                return err.strip() or f"rc={rc}"
            known = parse_listing(out, self.name) if rc == 0 else KernelState()
        self._known = known
        self._dirty.mark_all(self._desired, self._known)
        self._readback_pending = False
        self._next_refresh = self._clock() + self.refresh_interval
        if self.refresh_interval <= 0:
            self._next_refresh = math.inf
        return None

    def _netlink_readback(self) -> KernelState | None:
        """The table read over netlink dumps (design/felix-nftables.md "Readback over
        netlink"); None, with the reason logged and kept, when libnftables must read it."""
        if self._reader is None:
            return None
        try:
            state = read_table(self._reader, self.family, self.name)
        except (Undecodable, Unencodable, OSError) as exc:
            if self.readback_fallback != str(exc):
                log.info("reading table %s back through libnftables: %s", self.name, exc)
            self.readback_fallback = str(exc)
            return None
        self.readback_fallback = None
        return state

    def _failed(self, result: ApplyResult, error: str) -> ApplyResult:
        self.consecutive_failures += 1
        self._readback_pending = True  # our picture may be why it failed
        log.warning(
            "nftables apply of table %s %s failed (%d in a row): %s",
            self.family,
            self.name,
            self.consecutive_failures,
            error,
        )
        result.ok, result.error = False, error
        return result

    def _committed(self, plan: Plan) -> None:
        plan.commit(self._known)
        self._dirty.clear()
        if plan.replace_all:  # we now know the table exactly; no readback needed
            self._readback_pending = False
            self._next_refresh = self._clock() + self.refresh_interval
        if self.consecutive_failures:
            log.info("nftables table %s %s recovered", self.family, self.name)
        self.consecutive_failures = 0
