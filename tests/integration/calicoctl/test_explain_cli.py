"""``calicoctl explain`` through the real command line, on each datastore (local and etcd)."""

from __future__ import annotations

import json

import pytest
import yaml
from ctl_helpers import Ctl

MANIFEST = """
apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: security}
spec: {order: 100}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: security.pass-web}
spec:
  tier: security
  order: 10
  selector: app == 'web'
  ingress:
  - {action: Pass, protocol: TCP, destination: {ports: [80]}}
  - {action: Deny}
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: allow-front, namespace: prod}
spec:
  selector: app == 'web'
  ingress:
  - {action: Allow, protocol: TCP, source: {selector: app == 'front'}, destination: {ports: [http]}}
---
apiVersion: projectcalico.org/v3
kind: StagedNetworkPolicy
metadata: {name: allow-front, namespace: prod}
spec:
  selector: app == 'web'
  ingress: [{action: Deny}]
---
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {name: node1-k8s-front-eth0, namespace: prod, labels: {app: front}}
spec: {node: node1, orchestrator: k8s, pod: front, endpoint: eth0, interfaceName: cali1,
       ipNetworks: [10.0.0.1/32], profiles: [kns.prod]}
---
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {name: node1-k8s-web-eth0, namespace: prod, labels: {app: web}}
spec: {node: node1, orchestrator: k8s, pod: web, endpoint: eth0, interfaceName: cali2,
       ipNetworks: [10.0.0.2/32], profiles: [kns.prod],
       ports: [{name: http, port: 80, protocol: TCP}]}
---
apiVersion: projectcalico.org/v3
kind: HostEndpoint
metadata: {name: node1-eth0, labels: {role: host}}
spec: {node: node1, interfaceName: eth0, expectedIPs: [192.168.0.1]}
---
apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: kns.prod}
spec:
  ingress: [{action: Allow}]
  egress: [{action: Allow}]
"""


@pytest.fixture
def loaded(ctl: Ctl) -> Ctl:
    r = ctl("apply", "-f", "-", stdin=MANIFEST)
    assert r.code == 0, r
    return ctl


def test_allowed_connection_chain_and_staged_view(loaded: Ctl) -> None:
    r = loaded("explain", "--from", "prod/front", "--to", "prod/web", "--port", "80", "-o", "json")
    assert r.code == 0, r
    report = json.loads(r.out)
    assert report["result"] == {"verdict": "Allow"}
    chain = report["ingress"]["chain"]
    assert [(s["tier"], s["policy"], s["ruleIndex"], s["action"]) for s in chain] == [
        ("security", "GlobalNetworkPolicy security.pass-web", 0, "Pass"),
        ("default", "NetworkPolicy prod/allow-front", 0, "Allow"),
    ]
    assert chain[1]["rule"]["destination"] == {"ports": ["http"]}
    assert report["egress"]["chain"][0]["policy"] == "Profile kns.prod"
    assert report["staged"]["enforced"] is False
    assert report["staged"]["result"]["verdict"] == "Deny"


def test_denied_connection_text_output(loaded: Ctl) -> None:
    r = loaded("explain", "--from", "prod/front", "--to", "prod/web", "--port", "81")
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[0] == "TCP 10.0.0.1:40000 -> 10.0.0.2:81"
    assert "GlobalNetworkPolicy security.pass-web: rule 1" in r.out
    assert lines[-2] == "Verdict: Deny (at the ingress of workloadendpoint prod/node1-k8s-web-eth0)"
    assert lines[-1] == "Staged policies (not enforced): no change"


def test_ip_and_host_endpoint_forms_yaml(loaded: Ctl) -> None:
    r = loaded("explain", "--from", "192.168.0.1", "--to", "10.0.0.2", "--port", "80", "-o", "yaml")
    assert r.code == 0, r
    report = yaml.safe_load(r.out)
    assert report["egress"]["endpoint"] == "hostendpoint node1-eth0"
    # The host to its own workload (both on node1) is not policed: OUTPUT returns for workload
    # interfaces, so web's ingress policy (which would deny: not app == 'front') never runs.
    assert report["result"]["verdict"] == "Allow"
    assert [s["step"] for s in report["ingress"]["chain"]] == ["host-to-workload"]
    r = loaded("explain", "--from", "hep/node1-eth0", "--to", "203.0.113.9", "--protocol", "icmp")
    assert r.code == 0, r
    assert r.out.startswith("ICMP 192.168.0.1 -> 203.0.113.9 (type 8 code 0)")
    assert "a non-Calico address" in r.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "prod/nope", "--to", "prod/web", "--port", "80"],
         "endpoint 'prod/nope' not found"),
        (["--from", "prod/front", "--to", "prod/web", "--port", "65536"], "invalid port '65536'"),
        (["--from", "prod/front", "--to", "prod/web", "--port", "x"], "invalid port 'x'"),
        (["--from", "prod/front", "--to", "prod/web", "--protocol", "GRE", "--port", "1"],
         "invalid protocol 'GRE'"),
        (["--from", "prod/front", "--to", "prod/web"], "--port is required for TCP"),
        (["--from", "prod/front", "--to", "prod/web", "--protocol", "ICMP", "--port", "1"],
         "--port and --src-port do not apply to ICMP"),
        (["--from", "prod/front", "--port", "80"], "explain needs --from and --to"),
        (["--from", "prod/front", "--to", "prod/web", "--port", "80", "-o", "xml"],
         "unrecognized output format 'xml'"),
        (["--from", "prod/front", "--to", "prod/web", "--port", "80", "--ip-version", "6"],
         "endpoint 'prod/front' has no IPv6 address"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_1(loaded: Ctl, args: list[str], message: str) -> None:
    r = loaded("explain", *args)
    assert r.code == 1, r
    assert r.err.startswith(message), r
    assert "Traceback" not in r.err


def test_explain_endpoint_lists_ordered_policies(loaded: Ctl) -> None:
    r = loaded("explain", "endpoint", "prod/web", "-o", "json")
    assert r.code == 0, r
    report = json.loads(r.out)
    assert [(p["tier"], p["kind"], p.get("staged", False)) for p in report["ingress"]] == [
        ("security", "GlobalNetworkPolicy", False),
        ("default", "NetworkPolicy", False),
        ("default", "StagedNetworkPolicy", True),
    ]
    assert report["ingress"][0]["selector"] == "app == 'web'"
    assert report["egress"] == []
    r = loaded("explain", "endpoint", "prod/gone")
    assert (r.code, r.err) == (1, "endpoint 'prod/gone' not found\n")


def test_explain_policy_selection(loaded: Ctl) -> None:
    r = loaded(
        "explain", "policy", "allow-front", "-n", "prod", "-k", "NetworkPolicy", "-o", "json"
    )
    assert r.code == 0, r
    report = json.loads(r.out)
    assert report["selects"] == ["workloadendpoint prod/node1-k8s-web-eth0"]
    assert report["ingress"][0]["source"]["matches"]["endpoints"] == [
        "workloadendpoint prod/node1-k8s-front-eth0"
    ]
    r = loaded("explain", "policy", "allow-front")
    assert r.code == 1 and "is ambiguous" in r.err, r


def test_installed_script(ds_env: dict[str, str], ctl_bin: Ctl) -> None:
    assert ctl_bin("apply", "-f", "-", stdin=MANIFEST).code == 0
    r = ctl_bin("explain", "--from", "prod/front", "--to", "prod/web", "--port", "80")
    assert r.code == 0, r
    assert "Verdict: Allow" in r.out


def test_get_show_policies_matches_explain_endpoint(loaded: Ctl) -> None:
    explained = loaded("explain", "endpoint", "prod/web", "-o", "json")
    r = loaded("get", "wep", "node1-k8s-web-eth0", "-n", "prod", "--show-policies", "-o", "json")
    assert r.code == 0, r
    assert json.loads(r.out) == json.loads(explained.out)
    r = loaded("get", "workloadendpoint", "node1-k8s-web-eth0", "-n", "prod", "--show-policies")
    assert r.code == 0, r
    assert r.out.splitlines()[:2] == [
        "workloadendpoint prod/node1-k8s-web-eth0",
        "Ingress policies:",
    ]
    r = loaded("get", "hostendpoint", "node1-eth0", "--show-policies", "-o", "yaml")
    assert r.code == 0, r
    assert yaml.safe_load(r.out)["endpoint"] == "hostendpoint node1-eth0"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ippool", "p1"],
         "--show-policies applies to workloadendpoint and hostendpoint, not IPPool"),
        (["wep"], "--show-policies needs exactly one endpoint: KIND NAME"),
        (["wep", "a", "b"], "--show-policies needs exactly one endpoint: KIND NAME"),
        (["wep", "node1-k8s-web-eth0", "-n", "prod", "-o", "go-template=x"],
         "--show-policies prints ps, wide, yaml or json, not 'go-template=x'"),
        (["wep", "node1-k8s-web-eth0", "-A"], "--show-policies takes one KIND and NAME"),
        (["wep", "node1-k8s-web-eth0"], "endpoint 'workloadendpoint/default/node1-k8s-web-eth0' "
         "not found"),
    ],
)  # fmt: skip
def test_get_show_policies_bad_input(loaded: Ctl, args: list[str], message: str) -> None:
    r = loaded("get", *args, "--show-policies")
    assert r.code == 1, r
    assert r.err.startswith(message), r
    assert "Traceback" not in r.err


HEP_MANIFEST = """
apiVersion: projectcalico.org/v3
kind: HostEndpoint
metadata: {name: auto-node1, labels: {role: auto}}
spec: {node: node1, interfaceName: "*", expectedIPs: [192.168.0.1, 192.168.7.1]}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: untracked-no-8080}
spec:
  selector: role == 'host'
  doNotTrack: true
  applyOnForward: true
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, destination: {ports: [8080]}}]
---
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: node.node1}
spec:
  failsafeInboundHostPorts: [{protocol: TCP, port: 2222}]
"""


def test_host_endpoint_layers_text_yaml_json(loaded: Ctl) -> None:
    """The host endpoint layers through the CLI: failsafe from the node's FelixConfiguration,
    the untracked layer in the text rendering, the named endpoint over the ``*`` one."""
    assert loaded("apply", "-f", "-", stdin=HEP_MANIFEST).code == 0
    base = ["explain", "--from", "203.0.113.9", "--to", "192.168.0.1"]
    r = loaded(*base, "--port", "2222")
    assert r.code == 0, r
    assert r.out.splitlines()[1:4] == [
        "Egress of a non-Calico address: Allow",
        "  not a Calico endpoint: no policy applies -> Allow",
        "Ingress of hostendpoint node1-eth0: Allow",  # named, over auto-node1
    ]
    assert r.out.splitlines()[4] == "  failsafe port tcp:2222 (FailsafeInboundHostPorts) -> Allow"
    r = loaded(*base, "--port", "22")  # node1's config replaced the default list
    assert "failsafe" not in r.out and "Verdict: Deny" in r.out, r
    r = loaded(*base, "--port", "8080")
    untracked = (
        '  [untracked] tier default GlobalNetworkPolicy untracked-no-8080: rule 0 {"action": '
        '"Deny", "destination": {"ports": [8080]}, "protocol": "TCP"} -> Deny'
    )
    assert r.out.splitlines()[4] == untracked, r
    report = yaml.safe_load(loaded(*base, "--port", "8080", "-o", "yaml").out)
    assert report["ingress"]["chain"][0]["layer"] == "untracked"
    report = json.loads(loaded(*base[:-1], "192.168.7.1", "--port", "2222", "-o", "json").out)
    assert report["ingress"]["endpoint"] == "hostendpoint auto-node1"  # only * holds it
    assert report["ingress"]["chain"] == [
        {"step": "failsafe", "action": "Allow",
         "note": "failsafe port tcp:2222 (FailsafeInboundHostPorts)"}
    ]  # fmt: skip
    report = json.loads(loaded(*base[:-1], "192.168.7.1", "--port", "2221", "-o", "json").out)
    assert [s["step"] for s in report["ingress"]["chain"]] == ["default"]  # no policy: deny


def test_bad_failsafe_annotation_is_a_clear_error(loaded: Ctl) -> None:
    """An annotation override is not validated on write (as upstream); Felix would refuse the
    value, and so does explain, in one line, when a host endpoint needs it."""
    bad = """
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata:
  name: default
  annotations: {config.projectcalico.org/FailsafeInboundHostPorts: "tcp:1:2:3"}
spec: {}
"""
    assert loaded("apply", "-f", "-", stdin=bad).code == 0
    r = loaded("explain", "--from", "203.0.113.9", "--to", "192.168.0.1", "--port", "22")
    assert r.code == 1, r
    assert r.err.startswith("cannot evaluate host endpoint policy: 'tcp:1:2:3' is not of the"), r
    assert "Traceback" not in r.err
    r = loaded("explain", "--from", "prod/front", "--to", "prod/web", "--port", "80")
    assert r.code == 0, r  # workloads only: the config is never needed


def test_explain_endpoint_lists_host_endpoint_layers(loaded: Ctl) -> None:
    assert loaded("apply", "-f", "-", stdin=HEP_MANIFEST).code == 0
    r = loaded("explain", "endpoint", "hep/node1-eth0", "-o", "json")
    assert r.code == 0, r
    report = json.loads(r.out)
    assert [p["name"] for p in report["untracked"]["ingress"]] == ["untracked-no-8080"]
    assert report["untracked"]["egress"] == [] == report["preDNAT"]["ingress"]
    assert report["ingress"] == []  # an untracked policy is not a normal one
    text = loaded("explain", "endpoint", "hep/node1-eth0").out.splitlines()
    assert text[-10:] == [
        "Untracked ingress policies:",
        "  tier default: GlobalNetworkPolicy untracked-no-8080  selector: role == 'host'",
        "Untracked egress policies:",
        "  (none)",
        "Pre-DNAT ingress policies:",
        "  (none)",
        "Forward ingress policies:",  # applyOnForward normal policy only
        "  (none)",
        "Forward egress policies:",
        "  (none)",
    ]
    star = json.loads(loaded("explain", "endpoint", "hep/auto-node1", "-o", "json").out)
    assert "untracked" not in star and star["preDNAT"] == {"ingress": []}
    wep = json.loads(loaded("explain", "endpoint", "prod/web", "-o", "json").out)
    assert "untracked" not in wep and "preDNAT" not in wep


FWD_MANIFEST = """
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: uplink-fwd-in}
spec:
  selector: role == 'host'
  applyOnForward: true
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, destination: {ports: [81]}}, {action: Allow}]
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node1}
spec:
  bgp: {ipv4Address: 192.168.0.1/24}
  ipv4VXLANTunnelAddr: 10.0.0.129
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node2}
spec:
  addresses: [{address: 192.168.5.2, type: InternalIP}]
"""


def test_forwarded_through_host_endpoint_text_yaml_json(loaded: Ctl) -> None:
    """Outside -> a workload crosses node1's one uplink endpoint: its applyOnForward policy
    decides in the forward chain; ``--via-interface`` picks another interface (``*``'s);
    two uplinks without it are a clear error."""
    assert loaded("apply", "-f", "-", stdin=FWD_MANIFEST).code == 0
    base = ["explain", "--from", "203.0.113.9", "--to", "prod/web", "--port"]
    r = loaded(*base, "81")
    assert r.code == 0, r
    assert r.out.splitlines()[3:7] == [
        "Ingress of workloadendpoint prod/node1-k8s-web-eth0: Deny",
        "  [forward]: (forwarded in through hostendpoint node1-eth0 of node node1 (cali-fhfw-))",
        "  [forward hostendpoint node1-eth0] tier default GlobalNetworkPolicy uplink-fwd-in: "
        'rule 0 {"action": "Deny", "destination": {"ports": [81]}, "protocol": "TCP"} -> Deny',
        "Verdict: Deny (at the ingress of workloadendpoint prod/node1-k8s-web-eth0, by "
        "hostendpoint node1-eth0)",
    ], r.out
    report = yaml.safe_load(loaded(*base, "81", "-o", "yaml").out)
    assert report["result"]["hostEndpoint"] == "hostendpoint node1-eth0"
    assert report["ingress"]["chain"][1]["layer"] == "forward"
    # Port 80: the forward policy allows, then the workload's own policy has its say.
    report = json.loads(loaded(*base, "80", "-o", "json").out)
    assert [
        (s["step"], s.get("layer"), s.get("hostEndpoint"), s["action"])
        for s in report["ingress"]["chain"]
    ] == [
        ("forward-chain", "forward", "hostendpoint node1-eth0", None),
        ("rule", "forward", "hostendpoint node1-eth0", "Allow"),
        ("rule", None, None, "Pass"),  # security.pass-web
        ("no-match", None, None, None),  # allow-front wants app == 'front'
        ("end-of-tier", None, None, "Deny"),
    ]
    assert "hostEndpoint" not in report["result"]
    # No `*` endpoint on node1 here: another interface has no host endpoint at all.
    r = loaded(*base, "81", "--via-interface", "eth1", "-o", "json")
    assert json.loads(r.out)["ingress"]["chain"][0]["step"] != "forward-chain"
    assert loaded(*base, "81", "--via-interface", " ").err.startswith(
        "--via-interface needs an interface name"
    )
    second = """
apiVersion: projectcalico.org/v3
kind: HostEndpoint
metadata: {name: node1-eth1, labels: {role: other}}
spec: {node: node1, interfaceName: eth1}
"""
    assert loaded("apply", "-f", "-", stdin=second).code == 0
    r = loaded(*base, "81")
    assert r.code == 1, r
    assert r.err.strip() == (
        "cannot tell which host endpoint traffic forwarded by node node1 crosses: eth0, eth1 "
        "all have one; pass --via-interface IFACE"
    )
    assert "Traceback" not in r.err
    r = loaded(*base, "81", "--via-interface", "eth0")
    assert r.code == 0 and "Verdict: Deny" in r.out, r


def test_node_address_is_the_hosts(loaded: Ctl) -> None:
    """An address only a Node lists: the host of that node, policed by the endpoint of the
    interface it crosses (node1's uplink), or by none (node2 has no host endpoints)."""
    assert loaded("apply", "-f", "-", stdin=FWD_MANIFEST).code == 0
    r = loaded("explain", "--from", "203.0.113.9", "--to", "10.0.0.129", "--port", "22")
    assert r.code == 0, r
    assert r.out.splitlines()[3:5] == [
        "Ingress of hostendpoint node1-eth0: Allow",
        "  (10.0.0.129 is node node1's (spec.ipv4VXLANTunnelAddr), listed by no host endpoint: "
        "hostendpoint node1-eth0 polices the interface it crosses)",
    ], r.out
    report = json.loads(
        loaded("explain", "--from", "prod/web", "--to", "10.0.0.129", "--port", "22", "-o",
               "json").out
    )  # fmt: skip
    assert report["ingress"]["chain"][0]["step"] == "workload-to-host"
    report = json.loads(
        loaded("explain", "--from", "203.0.113.9", "--to", "192.168.5.2", "--port", "22", "-o",
               "json").out
    )  # fmt: skip
    assert report["ingress"]["endpoint"] == "host of node node2"
    assert report["ingress"]["chain"] == [
        {"step": "host-address", "action": "Allow",
         "note": "192.168.5.2 is node node2's (spec.addresses), listed by no host endpoint; no "
         "host endpoint polices the interface it crosses: not policed"}
    ]  # fmt: skip
    # from that host to a workload of node1: forwarded in through node1's uplink
    report = json.loads(
        loaded("explain", "--from", "192.168.5.2", "--to", "prod/web", "--port", "81", "-o",
               "json").out
    )  # fmt: skip
    assert report["egress"]["endpoint"] == "host of node node2"
    assert report["result"]["hostEndpoint"] == "hostendpoint node1-eth0"


TUNNEL_MANIFEST = """
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: pods}
spec: {cidr: 10.0.0.0/16, vxlanMode: CrossSubnet, ipipMode: Never}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: uplink-no-far}
spec:
  order: 1
  selector: role == 'host'
  applyOnForward: true
  types: [Ingress]
  ingress: [{action: Deny, source: {nets: [10.0.2.5/32]}}]
---
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {name: node2-k8s-far-eth0, namespace: prod, labels: {app: front}}
spec: {node: node2, orchestrator: k8s, pod: far, endpoint: eth0, interfaceName: cali9,
       ipNetworks: [10.0.2.5/32], profiles: [kns.prod]}
"""


def test_forwarded_between_nodes_crosses_the_tunnel(loaded: Ctl) -> None:
    """node2's workload -> node1's: a CrossSubnet VXLAN pool with node2 (a /32 InternalIP)
    outside node1's subnet arrives on vxlan.calico, where node1's named uplink endpoint (whose
    forward policy denies node2's workload) is not crossed; in one subnet it arrives on the
    uplink and is denied there; ``--via-interface`` overrides the routing."""
    assert loaded("apply", "-f", "-", stdin=FWD_MANIFEST).code == 0
    assert loaded("apply", "-f", "-", stdin=TUNNEL_MANIFEST).code == 0
    base = ["explain", "--from", "prod/far", "--to", "prod/web", "--port", "80"]
    r = loaded(*base)
    assert r.code == 0, r
    lines = r.out.splitlines()
    at = lines.index("Ingress of workloadendpoint prod/node1-k8s-web-eth0: Allow")
    assert lines[at + 1] == (
        "  (node node1 receives it on vxlan.calico: pool pods (10.0.0.0/16) vxlanMode "
        "CrossSubnet, node node1 not in node node2's subnet)"
    ), r.out
    assert "Verdict: Allow" in lines, r.out
    for fmt, parse in (("json", json.loads), ("yaml", yaml.safe_load)):
        report = parse(loaded(*base, "-o", fmt).out)
        first = report["ingress"]["chain"][0]
        assert (first["step"], first["action"], first["device"]) == (
            "crossing", None, "vxlan.calico"
        )  # fmt: skip
        assert all("hostEndpoint" not in s for s in report["ingress"]["chain"])
        assert report["result"] == {"verdict": "Allow"}
    # node2 in node1's subnet: the pool's traffic goes unencapsulated, over the uplink.
    same = "apiVersion: projectcalico.org/v3\nkind: Node\nmetadata: {name: node2}\n"
    same += "spec: {bgp: {ipv4Address: 192.168.0.2/24}}\n"
    assert loaded("apply", "-f", "-", stdin=same).code == 0
    report = json.loads(loaded(*base, "-o", "json").out)
    first = report["ingress"]["chain"][0]
    assert first["step"] == "crossing" and "device" not in first
    assert "node node1 receives it on its uplink" in first["note"]
    assert report["ingress"]["chain"][1]["note"] == (
        "forwarded in through hostendpoint node1-eth0 of node node1 (cali-fhfw-)"
    )
    assert report["result"]["hostEndpoint"] == "hostendpoint node1-eth0"
    # An Always pool: the tunnel again, whatever the subnets; the option overrides it.
    always = TUNNEL_MANIFEST.split("---")[0].replace("CrossSubnet", "Always")
    assert loaded("apply", "-f", "-", stdin=always).code == 0
    r = loaded(*base, "-o", "json")
    assert json.loads(r.out)["result"] == {"verdict": "Allow"}, r
    r = loaded(*base, "--via-interface", "eth0", "-o", "json")
    report = json.loads(r.out)
    assert report["result"]["hostEndpoint"] == "hostendpoint node1-eth0", r
    assert all(s["step"] != "crossing" for s in report["ingress"]["chain"])
    # To node1's VXLAN tunnel address: node1's INPUT on vxlan.calico, where no endpoint is.
    to_tunnel = ["explain", "--from", "prod/far", "--to", "10.0.0.129", "--port", "8080"]
    report = json.loads(loaded(*to_tunnel, "-o", "json").out)
    assert report["ingress"]["endpoint"] == "host of node node1"
    assert [(s["step"], s["action"], s.get("device")) for s in report["ingress"]["chain"]] == [
        ("host-address", "Allow", None),
        ("crossing", None, "vxlan.calico"),
    ]
    report = json.loads(loaded(*to_tunnel, "--via-interface", "eth0", "-o", "json").out)
    assert report["ingress"]["endpoint"] == "hostendpoint node1-eth0"
    assert report["result"]["verdict"] == "Deny", report  # uplink-no-far, in the normal layer too
