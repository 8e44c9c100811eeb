"""DatastoreMigration: triggers and tracks kube-controllers' v1-to-v3 CRD migration. Read
only by kube-controllers and calicoctl, so kept out of ``calico.api.cluster``."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from calico.api.base import CalicoModel, Resource, register
from calico.api.conditions import Condition, Time


class DatastoreMigrationSpec(CalicoModel):
    """Which migration to run; upstream knows one (crd.projectcalico.org/v1 CRDs to v3)."""

    type: Literal["V1ToV3"]


class DatastoreMigrationProgress(CalicoModel):
    total: Annotated[int, Field(ge=0)] | None = None
    migrated: Annotated[int, Field(ge=0)] | None = None
    skipped: Annotated[int, Field(ge=0)] | None = None
    conflicts: Annotated[int, Field(ge=0)] | None = None


class DatastoreMigrationStatus(CalicoModel):
    phase: Literal["Pending", "Migrating", "Converged", "Complete", "Failed"] | None = None
    started_at: Time | None = None
    completed_at: Time | None = None
    progress: DatastoreMigrationProgress | None = None
    conditions: list[Condition] | None = None


@register
class DatastoreMigration(Resource):
    """Triggers and tracks kube-controllers' v1-to-v3 CRD migration (a KDD-only workflow)."""

    KIND: ClassVar[str] = "DatastoreMigration"

    spec: DatastoreMigrationSpec
    status: DatastoreMigrationStatus | None = None
