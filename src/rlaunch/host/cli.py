"""`rlaunch launch --config DOC.yaml`: the host's command line. One JSON result on stdout."""

from __future__ import annotations

import contextlib
import json
import signal
import sys

import click


@click.command()
@click.option("--config", "config_url", required=True, help="Launch document (path or fsspec URL).")
def launch(config_url: str) -> None:
    """Compose, validate and launch one SkyRLLaunchConfig document."""
    from rlaunch.host.launch import HostInterrupted, execute_launch
    from rlaunch.launch_config.typed import DocumentError

    def interrupted(signum: int, frame: object) -> None:
        raise HostInterrupted(signum)

    signal.signal(signal.SIGTERM, interrupted)
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        try:
            result = execute_launch(config_url)
        except DocumentError as exc:
            out.write(json.dumps({"state": "failed", "failure": str(exc), "config": config_url}) + "\n")
            sys.exit(1)
        except HostInterrupted:
            sys.exit(143)
    out.write(json.dumps(result.to_json(), sort_keys=True) + "\n")
    out.flush()
    sys.exit(0 if result.ok else 1)
