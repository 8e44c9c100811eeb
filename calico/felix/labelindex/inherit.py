"""Items (endpoints) with their own labels plus labels inherited from parents (profiles).

Precedence, as upstream's InheritIndex: the item's own labels win; among parents, the one
listed *first* wins. A parent may be referenced before its labels arrive (it then contributes
nothing) and is forgotten once it has neither labels nor children.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

Labels = Mapping[str, str]


class Item:
    """One item's inputs and its cached effective labels."""

    __slots__ = ("labels", "own", "parents")

    def __init__(self, own: dict[str, str], parents: tuple[str, ...]) -> None:
        self.own = own
        self.parents = parents
        self.labels: dict[str, str] = {}


class Parent:
    """A parent's labels (``None`` until known) and the items referencing it."""

    __slots__ = ("children", "labels")

    def __init__(self) -> None:
        self.labels: dict[str, str] | None = None
        self.children: set[Hashable] = set()


class InheritStore:
    """Items and parents, with each item's effective labels kept up to date.

    Mutators return what the caller must re-evaluate; they never evaluate selectors themselves.
    """

    def __init__(self) -> None:
        self.items: dict[Hashable, Item] = {}
        self.parents: dict[str, Parent] = {}

    def merged(self, own: Labels, parent_ids: Sequence[str]) -> dict[str, str]:
        """Effective labels for ``own`` over ``parent_ids`` (first parent wins, own wins)."""
        if not parent_ids:
            return dict(own)
        # merged_labels (the reference, tested equal) without its per-call lists.
        parents = self.parents
        out: dict[str, str] = {}
        for pid in reversed(parent_ids):
            parent = parents.get(pid)
            if parent is not None and parent.labels:
                out.update(parent.labels)
        out.update(own)
        return out

    def is_unchanged(self, item_id: Hashable, own: Labels, parent_ids: Sequence[str]) -> bool:
        """True if storing this item would change nothing (a no-op update)."""
        item = self.items.get(item_id)
        return item is not None and item.parents == tuple(parent_ids) and item.own == own

    def put_item(
        self, item_id: Hashable, own: Labels, parent_ids: Sequence[str]
    ) -> tuple[Item | None, Item]:
        """Store an item; returns ``(old, new)``. ``new.labels`` is already recomputed."""
        old = self.items.get(item_id)
        new = Item(dict(own), tuple(parent_ids))
        for pid in new.parents:
            parent = self.parents.get(pid)
            if parent is None:
                parent = self.parents[pid] = Parent()
            parent.children.add(item_id)
        if old is not None:
            self._release(item_id, old.parents, keep=new.parents)
        new.labels = self.merged(new.own, new.parents)
        self.items[item_id] = new
        return old, new

    def pop_item(self, item_id: Hashable) -> Item | None:
        """Forget an item; returns it, or ``None`` if unknown."""
        old = self.items.pop(item_id, None)
        if old is not None:
            self._release(item_id, old.parents, keep=())
        return old

    def set_parent(self, parent_id: str, labels: Labels | None) -> list[Hashable]:
        """Set (``None``: delete) a parent's labels; returns the child IDs whose inputs changed,
        or an empty list for a no-op."""
        parent = self.parents.get(parent_id)
        new = None if labels is None else dict(labels)
        if parent is None:
            if new is None:
                return []
            parent = self.parents[parent_id] = Parent()
        if parent.labels == new:
            return []
        parent.labels = new
        children = list(parent.children)
        if new is None and not parent.children:
            del self.parents[parent_id]
        return children

    def _release(
        self, item_id: Hashable, parent_ids: tuple[str, ...], keep: tuple[str, ...]
    ) -> None:
        for pid in parent_ids:
            if pid in keep:
                continue
            parent = self.parents.get(pid)
            if parent is None:
                continue
            parent.children.discard(item_id)
            if not parent.children and parent.labels is None:
                del self.parents[pid]
