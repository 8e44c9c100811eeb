"""Services and EndpointSlices cross Typha's wire as the API's JSON
(``calico.model.values.registry.RAW_KUBERNETES_KINDS``): resourceVersion split off and put
back like any v3 resource; a value that is not an object is refused (Typha turns that into
a deletion)."""

from __future__ import annotations

import pytest

from calico.model import ResourceKey
from calico.model.values import ValueJSONError
from calico.syncer.api import Update, UpdateType
from calico.syncer.typhaclient.kvs import from_serialized, to_serialized

SLICE = {
    "metadata": {"name": "w-1", "namespace": "y", "resourceVersion": "7"},
    "endpoints": [{"addresses": ["10.0.0.1"]}],
    "ports": [{"port": 80, "protocol": "TCP"}],
}


@pytest.mark.parametrize("kind", ["KubernetesEndpointSlice", "KubernetesService"])
def test_round_trip(kind: str) -> None:
    key = ResourceKey(kind, "w-1", "y")
    wire = to_serialized(Update(key, SLICE, "7", UpdateType.NEW))
    assert wire.v3_resource_version == "7"
    assert "resourceVersion" not in wire.value["metadata"]
    back = from_serialized(wire)
    assert back is not None and back.key == key and back.value == SLICE


def test_a_non_object_is_refused() -> None:
    key = ResourceKey("KubernetesEndpointSlice", "w-1", "y")
    with pytest.raises(ValueJSONError):
        to_serialized(Update(key, ["not", "an", "object"], "7", UpdateType.NEW))
