"""CalicoNodeStatus: a request (``spec``: which node, which classes, how often) that
calico-node answers in ``status``. Felix never reads it, so it lives apart from
``calico.api.cluster``."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from calico.api import validators as v
from calico.api.base import CalicoModel, Resource, register


class BGPDaemonStatus(CalicoModel):
    state: str | None = None
    version: str | None = None
    router_id: str | None = Field(default=None, alias="routerID")
    last_boot_time: str | None = None
    last_reconfiguration_time: str | None = None


class CalicoNodeAgentStatus(CalicoModel):
    bird_v4: BGPDaemonStatus | None = Field(default=None, alias="birdV4")
    bird_v6: BGPDaemonStatus | None = Field(default=None, alias="birdV6")


class CalicoNodePeer(CalicoModel):
    peer_ip: str | None = Field(default=None, alias="peerIP")
    type: str | None = None
    state: str | None = None
    since: str | None = None


class CalicoNodeBGPStatus(CalicoModel):
    number_established_v4: int = Field(default=0, alias="numberEstablishedV4")
    number_established_v6: int = Field(default=0, alias="numberEstablishedV6")
    number_not_established_v4: int = Field(default=0, alias="numberNotEstablishedV4")
    number_not_established_v6: int = Field(default=0, alias="numberNotEstablishedV6")
    peers_v4: list[CalicoNodePeer] | None = Field(default=None, alias="peersV4")
    peers_v6: list[CalicoNodePeer] | None = Field(default=None, alias="peersV6")


class CalicoNodeRouteLearnedFrom(CalicoModel):
    source_type: str | None = None
    peer_ip: str | None = Field(default=None, alias="peerIP")


class CalicoNodeRoute(CalicoModel):
    type: str | None = None
    destination: str | None = None
    gateway: str | None = None
    interface: str | None = None
    learned_from: CalicoNodeRouteLearnedFrom | None = None


class CalicoNodeBGPRouteStatus(CalicoModel):
    routes_v4: list[CalicoNodeRoute] | None = Field(default=None, alias="routesV4")
    routes_v6: list[CalicoNodeRoute] | None = Field(default=None, alias="routesV6")


class CalicoNodeStatusSpec(CalicoModel):
    """Which node to report on, which classes of information, and how often (0 = never)."""

    node: str | None = None
    classes: list[Literal["Agent", "BGP", "Routes"]] | None = None
    update_period_seconds: Annotated[int, Field(ge=0, le=2147483647)] | None = None

    @model_validator(mode="after")
    def _unique_classes(self) -> CalicoNodeStatusSpec:
        if self.classes and len(set(self.classes)) != len(self.classes):
            v.raise_at(("classes",), "classes must not contain duplicates")
        return self


class CalicoNodeStatusStatus(CalicoModel):
    last_updated: str | None = None
    agent: CalicoNodeAgentStatus | None = None
    bgp: CalicoNodeBGPStatus | None = None
    routes: CalicoNodeBGPRouteStatus | None = None


@register
class CalicoNodeStatus(Resource):
    KIND: ClassVar[str] = "CalicoNodeStatus"

    kind: str = "CalicoNodeStatus"
    spec: CalicoNodeStatusSpec = Field(default_factory=CalicoNodeStatusSpec)
    status: CalicoNodeStatusStatus | None = None
