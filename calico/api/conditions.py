"""Kubernetes ``metav1.Condition``: the status entries controllers write on Tier and
DatastoreMigration (kept to the API server's own limits so a stored status round-trips)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from calico.api.base import CalicoModel

_TYPE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def _matching(regex: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not regex.match(value):
            raise ValueError(f"{what} {value!r} does not match {regex.pattern}")
        return value

    return AfterValidator(check)


def rfc3339(value: str) -> str:
    """A Kubernetes ``metav1.Time``: RFC 3339 text, kept as written."""
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is not an RFC 3339 time, e.g. 2024-01-02T15:04:05Z") from None
    return value


Time = Annotated[str, AfterValidator(rfc3339)]


class Condition(CalicoModel):
    type: Annotated[str, Field(max_length=316), _matching(_TYPE, "condition type")]
    status: Literal["True", "False", "Unknown"]
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    last_transition_time: Time
    reason: Annotated[
        str, Field(min_length=1, max_length=1024), _matching(_REASON, "condition reason")
    ]
    message: Annotated[str, Field(max_length=32768)]
