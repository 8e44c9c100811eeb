"""calc_graph.named_ports shares NamedPort values through a cache; it must answer what building
each one directly (the reference) does, types included."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from calico.felix.calc.calc_graph import named_ports
from calico.felix.labelindex import NamedPort
from calico.model import values as v1

_ports = st.lists(
    st.builds(
        v1.EndpointPort,
        name=st.sampled_from(["", "http", "dns"]),
        protocol=st.one_of(
            st.none(), st.sampled_from(["tcp", "UDP", "", "6"]), st.integers(0, 255)
        ),
        port=st.one_of(st.integers(0, 65535), st.booleans()),
    ),
    max_size=4,
)


def _reference(ports: list[v1.EndpointPort]) -> tuple[NamedPort, ...]:
    return tuple(NamedPort(p.name, str(p.protocol or ""), p.port) for p in ports if p.name)


@given(_ports)
def test_named_ports_equal_direct_construction(ports: list[v1.EndpointPort]) -> None:
    value = v1.WorkloadEndpoint(state="active", name="cali1", ports=tuple(ports))
    got = named_ports(value)
    assert got == _reference(ports)
    assert [type(p.port) for p in got] == [type(p.port) for p in _reference(ports)]
