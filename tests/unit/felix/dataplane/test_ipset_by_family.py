"""The IP set manager splits a message's members by family once (``by_family``); against the
per-family filter it replaced (one ``member_family`` test per member per family's set), it
makes the same table calls with the same members in the same order (design/performance.md
"In-sync at 250,000: a safe margin (session 9)")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from calico.felix.dataplane.managers import ipsets
from calico.felix.dataplane.managers.ipsets import IPSetsManager, by_family, member_family
from calico.felix.messages import IPSetDeltaUpdate, IPSetRemove, IPSetType, IPSetUpdate
from calico.felix.nftables.model import NftSet


class RecordingTable:
    """Logs every call the manager makes, members as the list it passed."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def set_set(self, s: NftSet) -> None:
        self.calls.append(("set", s.name, s.type, s.interval, sorted(map(repr, s.elements))))

    def add_set_members(self, name: str, members: Any) -> None:
        self.calls.append(("add", name, list(members)))

    def remove_set_members(self, name: str, members: Any) -> None:
        self.calls.append(("remove", name, list(members)))

    def remove_set(self, name: str) -> None:
        self.calls.append(("drop", name))


class ReferenceManager(IPSetsManager):
    """The manager as it was: each family's set filters the whole message itself."""

    def on_update(self, msg: Any) -> None:
        if isinstance(msg, IPSetDeltaUpdate):
            sets = self._sets.get(msg.id)
            if sets is None:
                return
            for version, fs in sets.items():
                fs.remove(m for m in msg.removed_members if member_family(m) == version)
                fs.add(m for m in msg.added_members if member_family(m) == version)
            return
        super().on_update(msg)

    def _replace(self, set_id: str, kind: IPSetType, members: Iterable[str]) -> None:
        members = list(members)
        new = {}
        for version in self._versions:
            name = ipsets.ipset_name(set_id, version)
            fs = ipsets._FamilySet(self._table, name, kind, version)  # type: ignore[arg-type]
            fs.add(m for m in members if member_family(m) == version)
            new[version] = fs
        self._sets[set_id] = new


_v4 = st.sampled_from(["10.0.0.1", "10.0.0.2", "10.1.0.0", "192.0.2.7"])
_v6 = st.sampled_from(["fd00::1", "fd00::2", "::ffff:1.2.3.4"])
_addr = st.one_of(_v4, _v6)
_net_member = st.one_of(
    st.builds(lambda a: f"{a}/32", _v4),
    st.builds(lambda a: f"{a}/128", _v6),
    st.sampled_from(["10.0.0.0/8", "10.1.0.0/16", "fd00::/64"]),
)
_port_member = st.builds(
    lambda a, p, n: f"{a},{p}:{n}", _addr, st.sampled_from(["tcp", "UDP"]), st.integers(1, 3)
)
_members = st.lists(st.one_of(_net_member, _port_member), max_size=8)
_ids = st.sampled_from(["s:a", "s:b"])
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("update"), _ids, _members),
        st.tuples(st.just("delta"), _ids, st.tuples(_members, _members)),
        st.tuples(st.just("remove"), _ids, st.none()),
    ),
    max_size=12,
)


def _message(op: str, set_id: str, arg: Any) -> Any:
    kind = IPSetType.IP_AND_PORT if set_id == "s:b" else IPSetType.NET
    if op == "update":
        members = [m for m in arg if ("," in m) == (kind is IPSetType.IP_AND_PORT)]
        return IPSetUpdate(set_id, tuple(members), kind)
    if op == "delta":
        keep = [[m for m in ms if ("," in m) == (kind is IPSetType.IP_AND_PORT)] for ms in arg]
        return IPSetDeltaUpdate(
            set_id, added_members=tuple(keep[0]), removed_members=tuple(keep[1])
        )
    return IPSetRemove(set_id)


@settings(max_examples=300, deadline=None)
@given(_ops, st.sampled_from([(4, 6), (4,), (6,)]))
def test_same_table_calls_as_the_per_family_filter(ops: list[Any], versions: Any) -> None:
    fast_table, ref_table = RecordingTable(), RecordingTable()
    fast = IPSetsManager(fast_table, versions)  # type: ignore[arg-type]
    ref = ReferenceManager(ref_table, versions)  # type: ignore[arg-type]
    for op in ops:
        msg = _message(*op)
        fast.on_update(msg)
        ref.on_update(msg)
        assert fast_table.calls == ref_table.calls


def test_by_family_keeps_order_and_duplicates() -> None:
    members = ["fd00::1/128", "10.0.0.1/32", "fd00::1,tcp:80", "10.0.0.1/32", "1.2.3.4,udp:53"]
    assert by_family(members) == {
        6: ["fd00::1/128", "fd00::1,tcp:80"],
        4: ["10.0.0.1/32", "10.0.0.1/32", "1.2.3.4,udp:53"],
    }
    assert by_family([]) == {}
    assert by_family(iter(["::ffff:1.2.3.4,tcp:1"])) == {6: ["::ffff:1.2.3.4,tcp:1"]}
