"""Helpers shared by the IPAM unit tests (datastore fixtures live in conftest.py)."""

from __future__ import annotations

from calico.api.cluster import Node
from calico.api.ipam import IPPool, IPPoolSpec, IPReservation, IPReservationSpec
from calico.datastore.client import Client


def add_pool(client: Client, name: str, cidr: str, **spec: object) -> None:
    pool = IPPool(spec=IPPoolSpec.model_validate({"cidr": cidr, **spec}))
    pool.metadata.name = name
    client.create(pool)


def add_node(client: Client, name: str, labels: dict[str, str] | None = None) -> None:
    node = Node()
    node.metadata.name = name
    node.metadata.labels = labels
    client.create(node)


def add_reservation(client: Client, name: str, cidrs: list[str]) -> None:
    res = IPReservation(spec=IPReservationSpec(reservedCIDRs=cidrs))
    res.metadata.name = name
    client.create(res)
