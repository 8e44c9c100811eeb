"""The demo across nodes: a web pod on the last node, two clients on the first, one blocked.

As ``make run``'s demo, but the traffic crosses the overlay: both clients reach the server
first; then calicoctl labels one client and applies a GlobalNetworkPolicy that admits only
``role == 'trusted'``. Every result is polled (up to 10 s) and a wrong one is an error. The
server keeps running afterwards (``down`` ends it), so the user can try it by hand.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from calico.model.names import wep_name
from calico.node.cluster import ctl, pods, procs
from calico.node.cluster.spec import ClusterSpec, save
from calico.node.errors import NodeError
from calico.node.run import workloads as wl
from calico.node.run.demo import policy_yaml
from calico.node.run.demo_net import SERVER_PORT, wait_for

BACKEND_NS = "demo-backend"
FRONTEND_NS = "demo-frontend"
POLICY = "demo-allow-trusted"
WAIT = 10.0


@dataclass(frozen=True)
class DemoResult:
    web: wl.Workload
    trusted: wl.Workload
    untrusted: wl.Workload
    url: str


def run(spec: ClusterSpec, say: Callable[[str], None]) -> tuple[ClusterSpec, DemoResult]:
    """Run the demo; returns the spec with the demo's sandboxes recorded (for ``down``)."""
    first, last = spec.nodes[0], spec.nodes[-1]
    say(f"Demo: web on {last.name}, clients on {first.name} (CNI ADD in each node's namespace)")
    made: list[wl.Workload] = []
    for node, namespace, pod in (
        (last, BACKEND_NS, "web"),
        (first, FRONTEND_NS, "trusted"),
        (first, FRONTEND_NS, "untrusted"),
    ):
        spec = spec.with_pod(spec.sandbox(pod))
        save(spec)  # before the ADD, so 'down' removes even a half-made sandbox
        w = pods.add_pod(spec, node, namespace, pod)
        made.append(w)
        say(f"   {node.name}: {namespace}/{pod:<10} sandbox {w.netns:<28} IP {w.ip}")
    web, trusted, untrusted = made
    www = Path(spec.root) / "demo" / "www"
    www.mkdir(parents=True, exist_ok=True)
    (www / "index.html").write_text(f"hello from {last.name}/web\n", encoding="utf-8")
    procs.spawn_in(
        web.netns,
        [sys.executable, "-m", "http.server", str(SERVER_PORT), "--directory", str(www)],
        spec.root,
        Path(spec.root) / "demo" / "web.log",
    )
    url = f"http://{web.ip}:{SERVER_PORT}/"
    say(f"   HTTP server in {BACKEND_NS}/web on {last.name}: {url}")
    say("No policy yet: both clients reach the server across nodes")
    expect(trusted, url, True, say)
    expect(untrusted, url, True, say)
    name = wep_name(first.name, "k8s", "trusted", "eth0")
    say(f"Label the trusted client: calicoctl label workloadendpoint {name} role=trusted")
    ctl.calicoctl(spec, "label", "workloadendpoint", name, "role=trusted", "-n", FRONTEND_NS)
    say(f"Apply GlobalNetworkPolicy {POLICY} (allow TCP {SERVER_PORT} from role == 'trusted')")
    ctl.calicoctl(spec, "apply", "-f", "-", stdin=policy_yaml(POLICY, BACKEND_NS))
    expect(trusted, url, True, say)
    expect(untrusted, url, False, say)
    return spec, DemoResult(web, trusted, untrusted, url)


def expect(client: wl.Workload, url: str, want_ok: bool, say: Callable[[str], None]) -> None:
    answer, waited = wait_for(client.netns, url, want_ok, WAIT)
    verdict = "allowed" if answer.ok else "BLOCKED"
    after = f" (after {waited:.1f}s)" if waited >= 0.5 else ""
    say(f"   {client.namespace}/{client.pod:<10} -> {url}  {verdict}: {answer.text}{after}")
    if answer.ok != want_ok:
        raise NodeError(
            f"{client.pod} was {'allowed' if answer.ok else 'blocked'}, expected the opposite"
        )
