"""The datastore documents Felix's benchmarks share, so a start-up read measured alone
(``bench_felix_startup_read.py``) reads what the whole-Felix bench (``bench_felix.py``) stores.

Plain dicts of v3 resources (no ``apiVersion``); importing this module imports nothing of
calico's, so a child process's start-up imports stay its own.
"""

from __future__ import annotations

from typing import Any

#: The namespace every benchmark workload and policy lives in.
NAMESPACE = "bench"


def ingress_policy(
    name: str, namespace: str, selector: str, source: str, port: int
) -> dict[str, Any]:
    """A NetworkPolicy letting ``source`` reach the endpoints ``selector`` picks on TCP
    ``port``: the one rule shape every Felix bench policy has."""
    return {
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": selector,
            "types": ["Ingress"],
            "ingress": [
                {
                    "action": "Allow",
                    "protocol": "TCP",
                    "source": {"selector": source},
                    "destination": {"ports": [port]},
                }
            ],
        },
    }


def noise_policies(n: int, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """``n`` ingress policies over ten label groups ``group == 'gK'`` (so a new workload is
    selected by ~1/10 of them), each letting one of seven source roles reach its own port."""
    return [
        ingress_policy(
            f"noise-{i}", namespace, f"group == 'g{i % 10}'", f"role == 'r{i % 7}'", 9000 + i
        )
        for i in range(n)
    ]


def standing_policies(n: int, port: int, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """One policy letting clients reach the server on ``port``, plus ``n - 1`` noise
    policies."""
    server = ingress_policy(
        "server-from-clients", namespace, "app == 'server'", "role == 'client'", port
    )
    return [server, *noise_policies(n - 1, namespace)]


def client_labels(i: int) -> dict[str, str]:
    """The labels of client workload ``i``: a client, in label group ``i % 10``."""
    return {"role": "client", "group": f"g{i % 10}"}


def real_cluster_config(
    hostname: str,
    node_ip: str,
    uplink_ip: str,
    *,
    ipip_tunnel_addr: str | None = None,
    extra_felix_spec: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """calico-node's first-start documents: the FelixConfiguration ``default`` and this
    host's Node (``node_ip`` with its prefix length; ``uplink_ip`` bare; an IPIP tunnel
    address if given)."""
    felix_spec = {
        "bpfLogLevel": "",
        "floatingIPs": "Disabled",
        "logSeverityScreen": "Info",
        "reportingInterval": "0s",
        **(extra_felix_spec or {}),
    }
    bgp = {"ipv4Address": node_ip}
    if ipip_tunnel_addr is not None:
        bgp["ipv4IPIPTunnelAddr"] = ipip_tunnel_addr
    return [
        {"kind": "FelixConfiguration", "metadata": {"name": "default"}, "spec": felix_spec},
        {
            "kind": "Node",
            "metadata": {
                "name": hostname,
                "labels": {"kubernetes.io/hostname": hostname, "kubernetes.io/os": "linux"},
            },
            "spec": {
                "bgp": bgp,
                "addresses": [
                    {"address": node_ip, "type": "CalicoNodeIP"},
                    {"address": uplink_ip, "type": "InternalIP"},
                ],
                "orchRefs": [{"nodeName": hostname, "orchestrator": "k8s"}],
            },
        },
    ]
