"""`rlaunch launch --config DOC.yaml`: the host's command line. One JSON result on stdout.

Exit codes: 0 the launch did what the document asked, 1 it failed (the child job failed, an
export failed), 2 the document or the environment was refused (`UserError`: one line on stderr
naming the field or file, the value and the fix; the JSON result carries the same message),
143 interrupted.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from typing import Any, TextIO

import click


@click.command()
@click.option("--config", "config_url", required=True, help="Launch document (path or fsspec URL).")
def launch(config_url: str) -> None:
    """Compose, validate and launch one SkyRLLaunchConfig document."""
    from rlaunch.boundary import classify
    from rlaunch.errors import UserError
    from rlaunch.host.launch import HostInterrupted, LaunchRefusedError, execute_launch

    def interrupted(signum: int, frame: object) -> None:
        raise HostInterrupted(signum)

    signal.signal(signal.SIGTERM, interrupted)
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        try:
            result = execute_launch(config_url)
        except LaunchRefusedError as exc:
            _refused(out, str(exc), exc.result.to_json())
        except UserError as exc:
            _refused(out, str(exc), {"state": "failed", "failure": str(exc), "config": config_url})
        except HostInterrupted:
            sys.exit(143)
        except Exception as exc:  # noqa: BLE001 - the boundary's verdict, still as one JSON result
            code, message = classify(exc, "rlaunch launch")
            out.write(json.dumps({"state": "failed", "failure": message, "config": config_url}) + "\n")
            out.flush()
            print(f"error: {message}", file=sys.stderr, flush=True)
            sys.exit(code)
    out.write(json.dumps(result.to_json(), sort_keys=True) + "\n")
    out.flush()
    sys.exit(0 if result.ok else 1)


def _refused(out: TextIO, message: str, result: dict[str, Any]) -> None:
    """An expected refusal: the message on stderr, the JSON result on stdout, exit 2."""
    sys.stderr.write(f"rlaunch launch: {message}\n")
    out.write(json.dumps(result, sort_keys=True) + "\n")
    out.flush()
    sys.exit(2)
