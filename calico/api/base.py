"""Shared base classes and the kind registry for projectcalico.org/v3 resources.

Python attribute names are snake_case; the wire names are upstream's camelCase, produced by
the alias generator or given explicitly with ``Field(alias=...)`` where upstream's spelling is
not plain camelCase (``peerIP``, ``ipipMTU``...). Unknown fields are rejected (``extra=forbid``),
which is what makes "field ... is not recognized" errors possible.
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar, Self, get_args

from calico.api.pydantic_plugins import disable_plugin_scan

# pydantic looks for plugins through importlib.metadata entry points on the first schema build:
# 50-100 ms of reading every installed distribution's metadata, in every process that validates
# a resource, for plugins calico does not use (calico.api.pydantic_plugins).
disable_plugin_scan()

from pydantic import BaseModel, ConfigDict, Field, model_validator  # noqa: E402
from pydantic.alias_generators import to_camel  # noqa: E402

from calico.api.kind_table import KIND_MODULES, KINDS, v3_kind_named  # noqa: E402

API_GROUP = "projectcalico.org"
API_VERSION = "projectcalico.org/v3"


class CalicoModel(BaseModel):
    """Base of every v3 structure: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        validate_assignment=False,
        ser_json_timedelta="iso8601",
        # Build validators on first use, not at import: a CNI call or a health probe loads every
        # kind but touches two or three, and building all schemas up front costs ~150 ms.
        defer_build=True,
    )

    @classmethod
    def model_rebuild(
        cls,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Any = None,
    ) -> bool | None:
        """pydantic's build of a deferred model (first use), with the models its fields hold
        built first, each on its own: a parent then reuses their schemas. Built inside the
        parent instead, a shared model (ObjectMeta, Rule, EntityRule...) would be generated
        again for every kind that holds it (design/performance.md "Schema builds")."""
        if not cls.__pydantic_complete__ or force:
            for sub in _held_models(cls, {cls}):
                if not sub.__pydantic_complete__:
                    sub.model_rebuild(raise_errors=False)
        return super().model_rebuild(
            force=force,
            raise_errors=raise_errors,
            _parent_namespace_depth=_parent_namespace_depth + 1,
            _types_namespace=_types_namespace,
        )

    def to_wire(self) -> dict[str, Any]:
        """The upstream JSON/YAML shape: aliases, no unset optional fields."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def _held_models(cls: type[CalicoModel], seen: set[type]) -> list[type[CalicoModel]]:
    """The CalicoModels ``cls``'s fields hold (through lists, unions, ``Annotated``...),
    innermost first, each once."""
    found: list[type[CalicoModel]] = []

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, CalicoModel):
            if annotation not in seen:
                seen.add(annotation)
                found.extend(_held_models(annotation, seen))
                found.append(annotation)
            return
        for arg in get_args(annotation):
            visit(arg)

    for field in cls.__pydantic_fields__.values():
        visit(field.annotation)
    return found


class ObjectMeta(CalicoModel):
    """Kubernetes ObjectMeta: every field is accepted on input, as upstream's types embed it.

    calicoctl keeps only name, namespace, resourceVersion, labels and annotations from a
    manifest (the rest is server-owned); ``clusterName`` (dropped from Kubernetes in 1.25,
    still in older manifests) is accepted and never stored.
    """

    name: str = ""
    namespace: str | None = None
    generate_name: str | None = None
    self_link: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    resource_version: str | None = None
    uid: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    generation: int | None = None
    finalizers: list[str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    managed_fields: list[dict[str, Any]] | None = None
    cluster_name: str | None = Field(default=None, exclude=True)


class Resource(CalicoModel):
    """A top-level v3 resource. Subclasses set ``KIND`` and a typed ``spec``; ``PLURAL``,
    ``NAMESPACED`` and ``ALIASES`` come from the kind table (calico.api.kind_table), which
    resolves an alias without importing any model module."""

    KIND: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""  # lower-case plural used in etcd keys and CRD names
    NAMESPACED: ClassVar[bool] = False
    # calicoctl kind aliases, lower-case, e.g. ("ippool", "ippools", "ipp", "ipps", "pool", "pools")
    ALIASES: ClassVar[tuple[str, ...]] = ()

    api_version: str = Field(default=API_VERSION)
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        """Why ``name`` is unacceptable for this kind, or None. Default: a DNS-1123 subdomain.

        Override for kinds with stricter names (tiers, policies). An empty name is not checked
        here: the loader requires one, code building objects in memory may fill it later.
        """
        from calico.api.validators import dns1123_subdomain

        try:
            dns1123_subdomain(name)
        except ValueError as exc:
            return str(exc)
        return None

    @model_validator(mode="after")
    def _check_resource_metadata(self) -> Self:
        """Rules upstream applies to every kind: kind/apiVersion, scope, name, labels."""
        from calico.api import validators as v

        if not self.kind:
            self.kind = self.KIND
        issues: list[tuple[tuple[str | int, ...], str]] = []
        if self.KIND and self.kind != self.KIND:
            issues.append((("kind",), f"kind must be {self.KIND}"))
        if self.api_version != API_VERSION:
            issues.append((("apiVersion",), f"apiVersion must be {API_VERSION}"))
        meta = self.metadata
        if meta.name and (problem := self.name_problem(meta.name)):
            issues.append((("metadata", "name"), problem))
        if meta.namespace == "":
            meta.namespace = None  # Go's empty string: unset (namespaced kinds get a default)
        if meta.namespace is not None:
            if not self.NAMESPACED:
                issues.append(
                    (
                        ("metadata", "namespace"),
                        f"namespace should not be specified for a non-namespaced resource "
                        f"({self.KIND} is cluster-scoped)",
                    )
                )
            else:
                try:
                    v.dns1123_label(meta.namespace, "namespace")
                except ValueError as exc:
                    issues.append((("metadata", "namespace"), str(exc)))
        for key, value in (meta.labels or {}).items():
            for check, what in ((v.label_key, key), (v.label_value, value)):
                try:
                    check(what)
                except ValueError as exc:
                    issues.append((("metadata", "labels", key), str(exc)))
        total = 0
        for key, value in (meta.annotations or {}).items():
            total += len(key) + len(value)
            try:
                v.annotation_key(key)
            except ValueError as exc:
                issues.append((("metadata", "annotations", key), str(exc)))
        if total > 256 * 1024:
            issues.append(
                (("metadata", "annotations"), "total size of annotations exceeds 256 KiB")
            )
        v.raise_issues(issues)
        return self


class SingletonResource(Resource):
    """A kind that exists only as ``default`` (IPAMConfiguration, ClusterInformation, ...)."""

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        if name != "default":
            return f"{cls.KIND} name {name!r} is invalid: the only allowed name is 'default'"
        return None


_REGISTRY: dict[str, type[Resource]] = {}


def register(cls: type[Resource]) -> type[Resource]:
    """Class decorator: make a resource kind loadable by name; its plural and scope are the
    kind table's."""
    info = KINDS.get(cls.KIND)
    if info is None or info.module != cls.__module__:
        raise TypeError(
            f"{cls.__name__}: kind {cls.KIND!r} not in calico.api.kind_table for its module"
        )
    cls.PLURAL, cls.NAMESPACED = info.plural, info.namespaced
    cls.ALIASES = (cls.KIND.lower(), *info.aliases)
    if cls.KIND in _REGISTRY and _REGISTRY[cls.KIND] is not cls:
        raise TypeError(f"kind {cls.KIND} registered twice")
    _REGISTRY[cls.KIND] = cls
    return cls


def _load_all() -> None:
    for module in sorted(set(KIND_MODULES.values())):
        importlib.import_module(module)


def kind_class(kind: str) -> type[Resource] | None:
    """The class of an exact upstream Kind name, importing only its module."""
    cls = _REGISTRY.get(kind)
    if cls is None and kind in KIND_MODULES:
        importlib.import_module(KIND_MODULES[kind])
        cls = _REGISTRY.get(kind)
    return cls


def kinds() -> dict[str, type[Resource]]:
    """All registered kinds, by upstream Kind name (loads every kind module)."""
    _load_all()
    return dict(_REGISTRY)


def resource_class(kind: str) -> type[Resource] | None:
    """Look up a kind by its exact name, or by a calicoctl alias (case-insensitive)."""
    cls = kind_class(kind)
    if cls is not None:
        return cls
    info = v3_kind_named(kind)  # the kind table knows the aliases: one module is imported
    return kind_class(info.kind) if info is not None else None
