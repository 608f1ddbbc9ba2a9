"""`python -m rlaunch.task --config URL`: what every replica of the child gang runs.

Every replica stages the model and data, and writes a join marker. Rank 0 writes the task-local
final document (staged paths patched in), builds or reuses the runtime environment, and runs the
runtime entrypoint (`run(cfg.skyrl)`) in it; when it ends, rank 0 publishes the gang's outcome.
Other ranks join the gang and leave with rank 0's outcome. The task-local directory (staged
inputs, trainer scratch) is removed when the task ends.
"""

from __future__ import annotations

import copy
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import click

from rlaunch import storage
from rlaunch.cluster.protocol import JOB_ID_ENV, RANK_ENV, WORLD_SIZE_ENV
from rlaunch.launch_config import schema
from rlaunch.launch_config.layout import GANG_OUTCOME, JOINED, attempt_dir
from rlaunch.launch_config.recipe import set_path
from rlaunch.names import sanitize_job_name
from rlaunch.runtimes.registry import get_profile
from rlaunch.storage import utc_now
from rlaunch.task.staging import stage

STAGING_ENV = "RLAUNCH_STAGING_ROOT"
KEEP_ENV = "RLAUNCH_KEEP_TASK_DIR"  # keep staged inputs and trainer scratch for debugging
OUTCOME = GANG_OUTCOME
FINAL_FILE = "final-launch.yaml"


def log(message: str) -> None:
    sys.stderr.write(f"[rlaunch.task rank {os.environ.get(RANK_ENV, '0')}] {message}\n")
    sys.stderr.flush()


def task_dir(doc: schema.SkyRLLaunchConfig, rank: int) -> str:
    root = os.environ.get(STAGING_ENV) or os.path.join(tempfile.gettempdir(), "rlaunch-task")
    return os.path.join(root, sanitize_job_name(doc.run.id), doc.run.attempt_id, f"replica-{rank}")


def stage_inputs(doc: schema.SkyRLLaunchConfig, local_root: str) -> dict[str, str]:
    """Stage model and data; returns each input's local_path -> absolute staged directory."""
    staged: dict[str, str] = {}
    model = doc.inputs.model
    staged[model.local_path] = stage(model.uri, model.identity, os.path.join(local_root, model.local_path), log)
    for data in (*doc.inputs.train_data, *doc.inputs.validation_data):
        if data.local_path not in staged:
            staged[data.local_path] = stage(data.uri, data.identity, os.path.join(local_root, data.local_path), log)
    return staged


def final_document(doc: schema.SkyRLLaunchConfig, staged: dict[str, str]) -> dict:
    """The resolved document with task-local paths patched into the recipe."""
    skyrl = copy.deepcopy(dict(doc.skyrl))
    model_path = staged[doc.inputs.model.local_path]
    set_path(skyrl, "trainer.policy.model.path", model_path)
    set_path(skyrl, "trainer.ref.model.path", model_path)
    for key, sources in (("data.train_data", doc.inputs.train_data), ("data.val_data", doc.inputs.validation_data)):
        set_path(
            skyrl,
            key,
            [
                os.path.join(staged[d.local_path], d.relative_path) if d.relative_path else staged[d.local_path]
                for d in sources
            ],
        )
    return doc.replace_skyrl(skyrl).to_dict()


def trainer_processes(doc: schema.SkyRLLaunchConfig) -> int:
    """Training processes rank 0 starts: one per device slot under torchrun, else one driver."""
    return get_profile(doc.runtime.profile).trainer_processes(doc.cluster.allocation.gpus_per_node)


def write_join_marker(doc: schema.SkyRLLaunchConfig, rank: int, world: int, started_at: str | None = None) -> None:
    marker = storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), JOINED, f"replica-{rank}.json")
    storage.write_json_atomic(
        marker,
        {
            "rank": rank,
            "world_size": world,
            "trainer_processes": trainer_processes(doc) if rank == 0 else 0,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "job_id": os.environ.get(JOB_ID_ENV),
            "started_at": started_at,  # when this task began (the run record's replica_<r>_joined)
            "time": utc_now(),  # its inputs are staged
        },
    )


def run_entrypoint(doc: schema.SkyRLLaunchConfig, final: dict, local_root: str, phases: dict[str, str]) -> int:
    from rlaunch.runtimes.environment import ensure_environment

    profile = get_profile(doc.runtime.profile)
    final_path = os.path.join(local_root, FINAL_FILE)
    with open(final_path, "w", encoding="utf-8") as handle:
        handle.write(schema.dumps(final))
    env = ensure_environment(profile, progress=log)
    slots = trainer_processes(doc)
    command = env.command(profile.entrypoint_module(doc.runtime.entrypoint), ["--config", final_path], nproc=slots)
    process_env = env.process_env(
        {
            "RLAUNCH_ATTEMPT_DIR": attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id),
            "RLAUNCH_RUNTIME_DIGEST": doc.runtime.source_digest,
            "RLAUNCH_COMPATIBLE_DIGESTS": ",".join(doc.runtime.compatible_checkpoint_digests),
            "RLAUNCH_MODEL_IDENTITY": doc.inputs.model.identity,
            "RLAUNCH_TASK_DIR": local_root,
        },
        inherit=True,
    )
    log(f"running {profile.name} entrypoint {doc.runtime.entrypoint} with {slots} process(es)")
    phases["trainer_started_at"] = utc_now()
    return subprocess.call(command, env=process_env, cwd=local_root)


def wait_for_outcome(doc: schema.SkyRLLaunchConfig, poll_seconds: float = 1.0) -> int:
    url = storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), OUTCOME)
    while True:
        outcome = storage.read_json(url)
        if outcome is not None:
            return 0 if outcome.get("exit_code") == 0 else 1
        time.sleep(poll_seconds)


@click.command()
@click.option("--config", "config_url", required=True, help="The resolved launch document (path or URL).")
def main(config_url: str) -> None:
    started_at = utc_now()
    doc = schema.load(config_url)
    rank = int(os.environ.get(RANK_ENV, "0"))
    world = int(os.environ.get(WORLD_SIZE_ENV, "1"))
    local_root = task_dir(doc, rank)
    log(f"rank {rank} of {world} starting: staging under {local_root}")
    os.makedirs(local_root, exist_ok=True)
    try:
        staged = stage_inputs(doc, local_root)
        write_join_marker(doc, rank, world, started_at)
        log(f"joined gang as rank {rank} of {world}")
        if rank != 0:
            sys.exit(wait_for_outcome(doc))
        phases: dict[str, str] = {}
        code = run_entrypoint(doc, final_document(doc, staged), local_root, phases)
        storage.write_json_atomic(
            storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), OUTCOME),
            {"exit_code": code, "time": utc_now(), **phases},
        )
        log(f"entrypoint exited {code}")
        sys.exit(code)
    finally:
        if not os.environ.get(KEEP_ENV):
            shutil.rmtree(local_root, ignore_errors=True)
