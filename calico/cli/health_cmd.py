"""``calico health``: the exec probe pods use instead of per-component probe binaries."""

from __future__ import annotations

import click


@click.command("health")
@click.option("--host", default="localhost", show_default=True, help="Host of the health server.")
@click.option(
    "--port", type=click.IntRange(1, 65535), required=True, help="Port of the health server."
)
@click.option(
    "--type",
    "check_type",
    default="readiness",
    show_default=True,
    help='What to check: "readiness" or "liveness".',
)
@click.option(
    "--timeout",
    default="5s",
    show_default=True,
    help="Request timeout as a Go duration (5s, 500ms, 1m).",
)
def health_command(host: str, port: int, check_type: str, timeout: str) -> None:
    """Probe a component's /readiness or /liveness endpoint.

    Exits 0 when the endpoint answers 2xx or 3xx, otherwise 1 with the reason on stderr.
    """
    from calico.health.probe import check  # requests: ~60 ms every other command must not pay

    result = check(host, port, check_type, timeout)
    if not result.ok:
        click.echo(result.message, err=True)
        raise SystemExit(1)
