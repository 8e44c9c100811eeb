"""Request time bounds and pagination, shared by every query.

Bounds are unix seconds: a negative value is relative to now; ``gte`` 0 is "oldest held" and
``lt`` 0 is "no upper bound" (the newest bucket included). A bucket is in range when its start
time is in [gte, lt). Pages are 0-based; a page past the end is empty with zero totals, as
upstream returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class QueryError(ValueError):
    """A request the engine rejects (bad time range, sort, page); gRPC InvalidArgument."""


@dataclass(frozen=True, slots=True)
class TimeRange:
    gte: int  # 0 = unbounded
    lt: int  # 0 = unbounded

    def contains(self, bucket_start: int) -> bool:
        return (self.gte == 0 or bucket_start >= self.gte) and (
            self.lt == 0 or bucket_start < self.lt
        )


def time_range(gte: int, lt: int, now: int) -> TimeRange:
    if gte < 0:
        gte = max(now + gte, 1)
    if lt < 0:
        lt = max(now + lt, 1)
    if gte and lt and gte >= lt:
        raise QueryError(f"startTimeGt ({gte}) must be less than startTimeLt ({lt})")
    return TimeRange(gte, lt)


@dataclass(frozen=True, slots=True)
class Page:
    total_results: int
    total_pages: int


def check_page(page: int, page_size: int) -> None:
    if page < 0:
        raise QueryError(f"page must not be negative (got {page})")
    if page_size < 0:
        raise QueryError(f"page_size must not be negative (got {page_size})")


def paginate(items: Sequence[T], page: int, page_size: int) -> tuple[list[T], Page]:
    """The requested page of ``items`` and the totals; page_size 0 = everything in one page."""
    total = len(items)
    if page_size <= 0:
        return list(items), Page(total, 1 if total else 0)
    start = page * page_size
    if start >= total:
        return [], Page(0, 0)
    return list(items[start : start + page_size]), Page(total, -(-total // page_size))
