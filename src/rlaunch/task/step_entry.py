"""Inside a step job: stage the inputs by identity, run the step's function, hand back its values.

    python -m rlaunch.task.step_entry --job <step-job.json URL>

Every input's record must carry the identity the coordinator planned with (name@version and
fingerprint, `rlaunch.task.staging`): a substituted input is refused before the function runs.
Each place the config points into an input is staged (verified, checksummed) under the task's
local root, and the function is given the config with those places rewritten to the local copies;
its output path is not an input and stays as it was. The experiment's code the step ships
(`rlaunch.experiment_code`) is staged by its digest and put first on the import path (and on the
PYTHONPATH of the runtime tools the function starts), so the function and what it imports come
from the files the coordinator fingerprinted, not from the working directory. Rank 0 builds the runtime's environment when
the job names one, runs the function and writes its artifact's value fields; other ranks stage
their inputs and leave. The task's local root is removed afterwards (`RLAUNCH_KEEP_TASK_DIR=1`
keeps it).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from rlaunch import storage
from rlaunch.artifacts.artifact import Artifact
from rlaunch.artifacts.fingerprint import canonical_value
from rlaunch.boundary import error_boundary
from rlaunch.cluster.protocol import RANK_ENV
from rlaunch.experiment_code import on_path
from rlaunch.experiment_code import stage as stage_code
from rlaunch.names import sanitize_job_name
from rlaunch.paths import join_inside, remove_inside
from rlaunch.task.bootstrap import KEEP_ENV, Signalled, staging_root
from rlaunch.task.staging import StagingError, stage, verify_identity

Progress = Callable[[str], None]


def log(message: str) -> None:
    print(f"[rlaunch.step] {message}", file=sys.stderr, flush=True)


def _is_directory(uri: str) -> bool:
    fs, path = storage.filesystem(uri)
    return bool(fs.isdir(path))


def staged_config(inputs: list[dict[str, str]], config: Any, root: str, progress: Progress) -> Any:
    """`config` with every place under an input's URI pointing at a verified local copy.

    Every input is checked against its identity first, referenced or not; then each referenced
    directory (a file: its directory) is staged once, verified against its input's identity."""
    for item in inputs:
        verify_identity(item["uri"], item["identity"])
    by_length = sorted(inputs, key=lambda item: len(item["uri"]), reverse=True)  # the innermost input wins
    copies: dict[str, str] = {}

    def local(value: str) -> str:
        for item in by_length:
            uri = item["uri"].rstrip("/")
            if value != uri and not value.startswith(uri + "/"):
                continue
            unit = value if _is_directory(value) else value.rsplit("/", 1)[0]
            if unit not in copies:
                target = join_inside(root, f"inputs/{len(copies)}", field="input")
                os.makedirs(os.path.dirname(target), exist_ok=True)
                copies[unit] = stage(unit, item["identity"], target, progress, root=root)
            return copies[unit] + value[len(unit) :]
        return value

    def rewrite(value: Any) -> Any:
        if isinstance(value, str):
            return local(value)
        if isinstance(value, dict):
            return {key: rewrite(item) for key, item in value.items()}
        if isinstance(value, list):
            return [rewrite(item) for item in value]
        return value

    return rewrite(config)


def load_function(path: str) -> Callable[[Any], Any]:
    module, _, name = path.partition(":")
    try:
        function: Callable[[Any], Any] = getattr(importlib.import_module(module), name)
        return function
    except (ImportError, AttributeError) as exc:
        raise StagingError(
            f"the step job cannot import its function {path} ({exc}); ship its module with the step "
            "(`code=ExperimentCode(modules=(...))`), or run from a working directory that holds it"
        ) from exc


def run_step(document: dict[str, Any], rank: int, root: str) -> None:
    config = staged_config(document["inputs"], document["config"], root, log)
    if rank != 0:
        log(f"rank {rank}: inputs staged; rank 0 runs {document['identity']}")
        return
    code = document.get("code")
    if code:
        on_path(stage_code(code["uri"], code["digest"], join_inside(root, "code", field="code"), log, root=root))
    if document.get("runtime"):
        from rlaunch.runtimes.environment import ensure_environment
        from rlaunch.runtimes.registry import get_profile

        ensure_environment(get_profile(document["runtime"]), progress=log)
    function = load_function(document["function"])
    where = getattr(sys.modules.get(function.__module__), "__file__", None)
    log(f"running {document['function']} for {document['identity']}" + (f" (from {where})" if code else ""))
    value = function(config)
    values = value.values() if isinstance(value, Artifact) else {}
    storage.write_json_atomic(document["result_uri"], {"values": canonical_value(values, "result")})
    log(f"{document['identity']}: result written to {document['result_uri']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rlaunch.task.step_entry")
    parser.add_argument("--job", required=True, help="URL of the step job's document")
    args = parser.parse_args(argv)
    with Signalled():  # a cancel stops the step's function, and its directory is still removed
        _run_job(args.job)


def _run_job(job: str) -> None:
    document = storage.read_json(job)
    if not isinstance(document, dict):
        raise SystemExit(f"[rlaunch.step] no step job document at {job}")
    rank = int(os.environ.get(RANK_ENV, "0"))
    base = staging_root()
    root = join_inside(
        base, f"{sanitize_job_name(document['run_id'])}/{document['attempt_id']}/replica-{rank}", field="attempt_id"
    )
    os.makedirs(root, exist_ok=True)
    try:
        run_step(document, rank, root)
    finally:
        if os.environ.get(KEEP_ENV) != "1":
            remove_inside(base, root)


if __name__ == "__main__":
    with error_boundary("rlaunch.task.step_entry"):
        main()
