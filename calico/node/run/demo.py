"""The ``make run`` demo, on top of a running ``calico node run``.

Three pod-like workloads are created through the installed CNI plugin, as a container runtime
would: ``web`` (an HTTP server) in namespace ``<prefix>-backend``, ``trusted`` and ``untrusted``
in ``<prefix>-frontend``. Both clients reach the server; then calicoctl labels the trusted client
and applies a GlobalNetworkPolicy that lets only ``role == 'trusted'`` in and denies everyone
else. Every step and every observed connection result is printed. The CNI plugin gives
endpoints only namespace/orchestrator labels (there is no Kubernetes API to copy pod labels
from), which is why the label is set with calicoctl.

    python -m calico.node.run.demo [--state-dir DIR] [--non-interactive]

Interactive mode leaves everything running until Ctrl-C, then removes the demo's workloads and
policy; ``--non-interactive`` does that right after the checks (the smoke test). Exit code 1
when an observed result is not the expected one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from calico.datastore.config import DEFAULT_LOCAL_PATH
from calico.health import probe
from calico.model.names import wep_name
from calico.node.errors import NodeError
from calico.node.run import layout as lay
from calico.node.run import workloads as wl
from calico.node.run.demo_net import SERVER_PORT, Server, wait_for
from calico.node.run.environ import inherited

POLICY_WAIT = 10.0  # seconds to wait for an expected connection result


def say(msg: str = "") -> None:
    click.echo(msg)


def typed(name: str) -> str:
    """How the user should type this installation's ``name`` (calico, calicoctl) in a new shell:
    the bare name when PATH finds this venv's script (``make setup`` links it), else its path."""
    mine = Path(sys.executable).parent / name
    found = shutil.which(name)
    if found and os.path.realpath(found) == os.path.realpath(mine):
        return name
    return str(mine)


def step(n: int, title: str) -> None:
    say()
    say(click.style(f"Step {n}. {title}", bold=True))


class DemoFailed(click.ClickException):
    """An observed result that is not the expected one."""


@dataclass
class Demo:
    settings: lay.NodeSettings
    layout: lay.Layout
    prefix: str
    made: list[wl.Workload] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)
    server: Server | None = None

    @property
    def backend_ns(self) -> str:
        return f"{self.prefix}-backend"

    @property
    def frontend_ns(self) -> str:
        return f"{self.prefix}-frontend"

    @property
    def policy_name(self) -> str:
        return f"{self.prefix}-allow-trusted"

    # -- bookkeeping: what cleanup (here or 'calico node stop --cleanup') must remove --------

    def record(self) -> None:
        doc = {"workloads": [w.to_json() for w in self.made], "policies": self.policies}
        self.layout.demo_file.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")

    def cleanup(self) -> None:
        say()
        say("Removing the demo's workloads and policy...")
        if self.server is not None:
            self.server.stop()
        for name in self.policies:
            calicoctl(self.settings, "delete", "globalnetworkpolicy", name, show=False)
        for w in reversed(self.made):
            error = wl.delete_workload(self.settings, w)
            say(f"   CNI DEL {w.namespace}/{w.pod}" + (f": {error}" if error else ": done"))
        self.made.clear()
        self.layout.demo_file.unlink(missing_ok=True)

    # -- the steps ----------------------------------------------------------------------------

    def create(self, namespace: str, pod: str) -> wl.Workload:
        netns = f"{self.prefix}-{pod}"
        w = wl.Workload(namespace, pod, netns, container_id=netns)
        if os.path.exists(w.netns_path):  # left over by an interrupted demo
            wl.delete_workload(self.settings, w)
        w = wl.add_workload(self.settings, w)
        self.made.append(w)
        self.record()
        say(f"   {namespace + '/' + pod:<32} netns {netns:<24} IP {w.ip}")
        return w

    def expect(self, client: wl.Workload, url: str, want_ok: bool) -> None:
        answer, waited = wait_for(client.netns, url, want_ok, POLICY_WAIT)
        who = f"{client.namespace}/{client.pod}"
        verdict = "allowed" if answer.ok else "BLOCKED"
        after = f" (after {waited:.1f}s)" if waited >= 0.5 else ""
        say(f"   {who:<32} -> {url}  {verdict}: {answer.text}{after}")
        if answer.ok != want_ok:
            raise DemoFailed(
                f"{who} was {'allowed' if answer.ok else 'blocked'}, expected the opposite"
            )

    def run(self) -> None:
        s = self.settings
        step(1, "Create three workloads through the CNI plugin, as a container runtime would")
        say(f"   (ip netns add, then {s.cni_bin_dir}/calico ADD with the conflist in")
        say(f"   {s.cni_conf_dir}; Calico IPAM assigns addresses from the default IP pool)")
        web = self.create(self.backend_ns, "web")
        trusted = self.create(self.frontend_ns, "trusted")
        untrusted = self.create(self.frontend_ns, "untrusted")
        url = f"http://{web.ip}:{SERVER_PORT}/"

        step(2, f"Start an HTTP server in {web.namespace}/web on port {SERVER_PORT}")
        self.server = Server(web.netns, f"hello from {web.namespace}/web")
        self.server.start()
        say(f"   ip netns exec {web.netns} python3 -m http.server {SERVER_PORT}")

        step(3, "No policy yet: both clients reach the server")
        self.expect(trusted, url, True)
        self.expect(untrusted, url, True)

        step(4, "Label the trusted client with calicoctl")
        name = wep_name(s.name, "k8s", "trusted", "eth0")
        calicoctl(s, "label", "workloadendpoint", name, "role=trusted", "-n", trusted.namespace)

        step(5, "Apply a GlobalNetworkPolicy with calicoctl")
        policy = policy_yaml(self.policy_name, self.backend_ns)
        for line in policy.rstrip().splitlines():
            say(f"   | {line}")
        self.policies.append(self.policy_name)
        self.record()
        calicoctl(s, "apply", "-f", "-", stdin=policy)

        step(6, "With the policy in place: the trusted client is allowed, the other is denied")
        self.expect(trusted, url, True)
        self.expect(untrusted, url, False)
        say()
        say(click.style("Demo checks passed.", fg="green", bold=True))
        say(f"Try it yourself:  ip netns exec {trusted.netns} curl {url}")
        say(f"                  ip netns exec {untrusted.netns} curl -m 2 {url}")


def policy_yaml(name: str, backend_ns: str) -> str:
    return f"""apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: {name}
spec:
  selector: projectcalico.org/namespace == '{backend_ns}'
  types: [Ingress]
  ingress:
    - action: Allow
      protocol: TCP
      source:
        selector: role == 'trusted'
      destination:
        ports: [{SERVER_PORT}]
    - action: Deny
"""


def calicoctl(
    settings: lay.NodeSettings, *args: str, stdin: str | None = None, show: bool = True
) -> None:
    """calicoctl against the node's own datastore: its ``<state>/calicoctl.cfg`` when the node
    wrote one (so a host-wide /etc/calico/calicoctl.cfg never redirects the demo), else the
    node's datastore variables."""
    exe = Path(sys.executable).parent / "calicoctl"
    if show:
        say(f"   $ {typed('calicoctl')} {' '.join(args)}")
    config = lay.layout_for(settings.state_dir).calicoctl_config_file
    use_file = ["-c", str(config)] if config.exists() else []
    proc = subprocess.run(
        [str(exe), *args, *use_file],
        input=stdin,
        env={**inherited(os.environ), **settings.datastore_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if show:
        for line in (proc.stdout + proc.stderr).strip().splitlines():
            say(f"   {line}")
        if proc.returncode != 0:
            raise DemoFailed(f"calicoctl {args[0]} failed")


def wait_for_node(
    layout: lay.Layout, timeout: float, node_pid: int | None, node_log: str
) -> lay.NodeSettings:
    """The running node's settings, once Felix reports ready."""
    deadline = time.monotonic() + timeout
    say("Waiting for the Calico node to be ready...")
    while True:
        if node_pid is not None and not lay.pid_alive(node_pid):
            tail = _tail(node_log)
            raise click.ClickException(
                "calico node run exited" + (f"; its last words: {tail}" if tail else "")
            )
        settings = lay.load_settings(layout)
        if settings is not None and lay.read_pid(layout) is not None:
            check = probe.check(
                settings.felix_health_host, settings.felix_health_port, "readiness", "1s"
            )
            if check.ok:
                say(f"   Felix is ready ({settings.health_url()})")
                return settings
        if time.monotonic() > deadline:
            raise click.ClickException(
                f"the Calico node on {layout.state_dir} is not running and ready after "
                f"{timeout:.0f}s (start it with '{typed('calico')} node run'; "
                "logs in /var/log/calico)"
            )
        time.sleep(0.5)


def _tail(path: str, lines: int = 1) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return " / ".join(text.splitlines()[-lines:])


def show_node_log(path: str) -> None:
    """What ``calico node run`` printed so far (it runs in the background under make run)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace").rstrip()
    except OSError:
        return
    say(f"   --- {path} ---")
    for line in text.splitlines():
        say(f"   {line}")
    say("   ---")


def print_running(settings: lay.NodeSettings) -> None:
    say()
    say(click.style("The Calico node keeps running:", bold=True))
    say(f"   Felix readiness   {settings.health_url('readiness')}")
    say(f"   Felix liveness    {settings.health_url('liveness')}")
    custom = settings.state_dir != lay.DEFAULT_STATE_DIR
    flag = f" --state-dir {settings.state_dir}" if custom else ""
    say(f"   Node status       {typed('calico')} node status{flag}")
    env = settings.datastore_env()
    if env.get("CALICO_DATASTORE_PATH") == DEFAULT_LOCAL_PATH:
        env = {}  # calicoctl's own default
    prefix = "".join(f"{k}={v} " for k, v in env.items())
    say(f"   calicoctl         {prefix}{typed('calicoctl')} get workloadendpoints -A")
    say(f"   Logs              {settings.log_dir}/<service>/current")
    if "whisker-backend" in settings.services:
        say(f"   Whisker           {settings.whisker_url()}")


def wait_for_interrupt() -> None:
    say()
    say("Press Ctrl-C to remove the demo's workloads and stop.")
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass


@click.command("demo")
@click.option("--state-dir", envvar=lay.STATE_DIR_ENV, default=lay.DEFAULT_STATE_DIR)
@click.option("--prefix", default="calico-demo", show_default=True, help="Names' prefix.")
@click.option("--non-interactive", is_flag=True, help="Clean up and exit after the checks.")
@click.option("--wait", "wait_seconds", type=float, default=180.0, help="Node readiness wait.")
@click.option("--netns", default="", help="Run in this network namespace (the node's; tests).")
@click.option("--node-pid", type=int, default=None, help="Give up when this process exits.")
@click.option("--node-log", default="", help="calico node run's output, shown once it is up.")
def demo_command(
    state_dir: str,
    prefix: str,
    non_interactive: bool,
    wait_seconds: float,
    netns: str,
    node_pid: int | None,
    node_log: str,
) -> None:
    """Workloads, traffic and a calicoctl policy on the running node."""
    # Ctrl-C (and SIGTERM) end the demo through its cleanup, even when started with SIGINT
    # ignored (as background jobs of a non-interactive shell are).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if netns:
        wl.enter_netns(netns)
    layout = lay.layout_for(state_dir)
    say(click.style("Calico demo: workloads and network policy on a single node", bold=True))
    settings = wait_for_node(layout, wait_seconds, node_pid, node_log)
    if node_log:
        show_node_log(node_log)
    demo = Demo(settings, layout, prefix)
    try:
        demo.run()
        print_running(settings)
        if not non_interactive:
            wait_for_interrupt()
    except wl.WorkloadError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    finally:
        demo.cleanup()


def main() -> None:
    try:
        demo_command.main(standalone_mode=False)
    except click.ClickException as exc:
        click.echo(f"Error: {exc.format_message()}", err=True)
        sys.exit(1)
    except NodeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except click.Abort:
        sys.exit(130)


if __name__ == "__main__":
    main()
