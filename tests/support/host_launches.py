"""`rlaunch launch --config` on the seed's document as a test edits it, in process: the host prepares
the child job and submits nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rlaunch.host.cli import launch
from rlaunch.launch_config.loader import dump_yaml
from tests.support.documents import rendered_document


def launch_edited(prefix: str, edit: Callable[[dict[str, Any]], None]) -> tuple[int, dict[str, Any], str]:
    doc = rendered_document(prefix)
    doc["run"]["submission"] = "prepare"  # builds the child job, submits nothing
    doc["cluster"].update(backend="local", placement={})
    edit(doc)
    path = Path(prefix).parent / "doc.yaml"
    path.write_text(dump_yaml(doc))
    done = CliRunner().invoke(launch, ["--config", str(path)])
    return done.exit_code, json.loads(done.stdout.strip().splitlines()[-1]), done.stderr
