"""A v3 resource read without pydantic, as the value of its ``ResourceKey``: what the lean
Profile and Node readers (``leanprofile``, ``leannode``) emit where their processors emit the
validated model (design/performance.md "Cold start: no pydantic on a clean start").

Felix's consumers of those values (ProfileDecoder, the route and VXLAN resolvers, the host
metadata pass-through, the config batcher, BGP peer selection) read attributes only, so a view
carries the model's attribute names and values for the fields the lean reader accepted
(``tests/unit/model/test_lean_node_profile.py`` checks each against the model). Everything else
comes from the model itself, built on first need from the same stored JSON with the
processor's own ``decode``: any attribute the view does not hold, ``to_wire`` (Typha's
encoding, so the wire bytes are the model's), equality, pickling and ``repr``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calico.model.resources import ResourceKey


class LeanView:
    """Attributes with a model's names over plain values; any other attribute is read from
    the model object ``fallback()`` returns (built then, once)."""

    def __init__(self, attrs: dict[str, Any], fallback: Callable[[], Any]) -> None:
        self.__dict__.update(attrs)
        self.__dict__["_fallback"] = fallback

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["_fallback"](), name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")


class LeanResource(LeanView):
    """A stored v3 resource with ``metadata``/``spec``/``status`` views; the model
    (``model()``) is decoded from ``raw`` on first need, exactly as the processor decodes."""

    def __init__(
        self, key: ResourceKey, raw: Any, cls: Callable[[], type], attrs: dict[str, Any]
    ) -> None:
        memo: list[Any] = []

        def model() -> Any:
            if not memo:
                from calico.model.processors.common import decode

                memo.append(decode(key, raw, cls()))
            return memo[0]

        super().__init__(attrs, model)
        self.__dict__["model"] = model

    def to_wire(self) -> dict[str, Any]:
        """Typha's encoding of the value: the model's, so the bytes are the same."""
        return self.model().to_wire()  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LeanResource):
            other = other.model()
        return bool(self.model() == other)

    __hash__ = None  # type: ignore[assignment]  # as the (mutable) models

    def __reduce__(self) -> Any:
        return self.model().__reduce__()

    def __repr__(self) -> str:
        return repr(self.model())


def view(attrs: dict[str, Any], fallback: Callable[[], Any]) -> LeanView:
    return LeanView(attrs, fallback)
