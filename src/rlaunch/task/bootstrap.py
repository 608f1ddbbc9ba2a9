"""`python -m rlaunch.task --config URL`: what every replica of the child gang runs.

Every replica stages the model and data (and the experiment's shipped code, which goes on the
trainer's PYTHONPATH after the adapter's), and writes a join marker. Rank 0 writes the task-local
final document (staged paths patched in), builds or reuses the runtime environment, and runs the
runtime entrypoint (`run(cfg.skyrl)`) in it; when it ends, rank 0 publishes the gang's outcome.
Other ranks join the gang and leave with rank 0's outcome. The task-local directory (staged
inputs, trainer scratch) is removed when the task ends.

A runtime whose trainer is a Ray driver (`launcher: ray-driver`) gets a Ray cluster across the
gang first (`rlaunch.task.ray_cluster`): rank 0 is the head and runs the driver with RAY_ADDRESS,
the other ranks join it and park. On the Ray backend the job already runs inside a Ray cluster:
its single replica runs the driver attached to that cluster.

A cancel signals the task's whole process group. Until the trainer runs, the task stops at once
(`Signalled`) and still removes its directory; once the trainer runs, the signal is the trainer's
to act on and the task leaves with it, recording no outcome (only when the trainer started and
exited, `gang/stopped.json`, which the run's phase table reads).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from types import FrameType
from typing import Any

import click

from rlaunch import storage
from rlaunch.cluster.protocol import BACKEND_ENV, JOB_ID_ENV, RANK_ENV, WORLD_SIZE_ENV
from rlaunch.cluster.ray.contract import GCS_ADDRESS_ENV as RAY_GCS_ADDRESS_ENV
from rlaunch.experiment_code import CODE_PATH_ENV
from rlaunch.experiment_code import stage as stage_shipped
from rlaunch.launch_config import schema
from rlaunch.launch_config.composition import set_path
from rlaunch.launch_config.recipe_keys import DATA, ROLE, role_key
from rlaunch.launch_config.typed import encode
from rlaunch.names import sanitize_job_name
from rlaunch.paths import join_inside, remove_inside
from rlaunch.runs.layout import GANG_OUTCOME, GANG_STOPPED, JOINED, attempt_dir
from rlaunch.runs.resume import FINGERPRINT_ENV, RESUME_FROM_ENV
from rlaunch.runtimes.environment import RuntimeEnvironment, ensure_environment
from rlaunch.runtimes.registry import RAY_DRIVER, get_profile
from rlaunch.storage import utc_now
from rlaunch.task.staging import stage
from rlaunch.waiting import wait_until

STAGING_ENV = "RLAUNCH_STAGING_ROOT"
KEEP_ENV = "RLAUNCH_KEEP_TASK_DIR"  # keep staged inputs and trainer scratch for debugging
OUTCOME = GANG_OUTCOME
FINAL_FILE = "final-launch.yaml"
CODE_DIR = "shipped-code"  # the experiment's code under the task's directory, on the trainer's PYTHONPATH


def log(message: str) -> None:
    sys.stderr.write(f"[rlaunch.task rank {os.environ.get(RANK_ENV, '0')}] {message}\n")
    sys.stderr.flush()


class Signalled:
    """SIGTERM, SIGHUP or SIGINT to a task, while inside `with Signalled() as signalled:` (the
    previous handlers come back after). Until `trainer_running`, the first one stops the task by
    `SystemExit(128 + signum)`: staging stops its copies and removes its partial copy, and the
    caller's cleanup removes the task directory (the default action would end the process on the
    spot and leave the staged inputs on the node's disk). Once the trainer runs it is only noted:
    the trainer got it too and decides when to stop. Later signals are ignored, so none cuts the
    cleanup short."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

    def __init__(self) -> None:
        self.signum = 0
        self.trainer_running = False
        self._previous: list[Any] = []

    def __enter__(self) -> Signalled:
        self._previous = [signal.signal(sig, self._on_signal) for sig in self.SIGNALS]
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in zip(self.SIGNALS, self._previous, strict=True):
            signal.signal(sig, previous)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum:
            return
        self.signum = signum
        if not self.trainer_running:
            log(f"received {signal.Signals(signum).name} before the trainer started: stopping")
            raise SystemExit(128 + signum)


def staging_root() -> str:
    return os.environ.get(STAGING_ENV) or os.path.join(tempfile.gettempdir(), "rlaunch-task")


def task_dir(doc: schema.SkyRLLaunchConfig, rank: int) -> str:
    return join_inside(
        staging_root(), f"{sanitize_job_name(doc.run.id)}/{doc.run.attempt_id}/replica-{rank}", field="run.attempt_id"
    )


def stage_inputs(doc: schema.SkyRLLaunchConfig, local_root: str) -> dict[str, str]:
    """Stage model and data; returns each input's local_path -> absolute staged directory."""
    staged: dict[str, str] = {}
    inputs = doc.inputs
    sources: tuple[tuple[str, schema.ModelInput | schema.DataInput], ...] = (
        ("inputs.model", inputs.model),
        *((f"inputs.train_data[{i}]", d) for i, d in enumerate(inputs.train_data)),
        *((f"inputs.validation_data[{i}]", d) for i, d in enumerate(inputs.validation_data)),
    )
    for field, item in sources:
        if item.local_path not in staged:
            target = join_inside(local_root, item.local_path, field=f"{field}.local_path")
            staged[item.local_path] = stage(item.uri, item.identity, target, log, root=local_root)
    return staged


def stage_code(doc: schema.SkyRLLaunchConfig, local_root: str) -> None:
    """Stage the experiment's shipped code (by its digest) where the trainer imports it from (`code_dir`)."""
    if doc.code is not None:
        stage_shipped(doc.code.uri, doc.code.digest, code_dir(local_root), log, root=local_root)


def code_dir(local_root: str) -> str:
    return join_inside(local_root, CODE_DIR, field="code")


def final_document(doc: schema.SkyRLLaunchConfig, staged: dict[str, str]) -> dict[str, Any]:
    """The resolved document with task-local paths patched into the recipe."""
    skyrl = copy.deepcopy(dict(doc.skyrl))
    model_path = staged[doc.inputs.model.local_path]
    set_path(skyrl, role_key("policy", ROLE.MODEL_PATH), model_path)
    set_path(skyrl, role_key("ref", ROLE.MODEL_PATH), model_path)
    for key, sources in ((DATA.TRAIN_DATA, doc.inputs.train_data), (DATA.VAL_DATA, doc.inputs.validation_data)):
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


def runtime_process_env(doc: schema.SkyRLLaunchConfig, env: RuntimeEnvironment, local_root: str) -> dict[str, str]:
    return env.process_env(
        {
            "RLAUNCH_ATTEMPT_DIR": attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id),
            "RLAUNCH_RUNTIME_DIGEST": doc.runtime.source_digest,
            FINGERPRINT_ENV: doc.run.fingerprint,
            "RLAUNCH_COMPATIBLE_DIGESTS": ",".join(doc.runtime.compatible_checkpoint_digests),
            RESUME_FROM_ENV: json.dumps(encode(doc.runtime.resume_from)) if doc.runtime.resume_from else "",
            "RLAUNCH_MODEL_IDENTITY": doc.inputs.model.identity,
            "RLAUNCH_TASK_DIR": local_root,
            **({CODE_PATH_ENV: code_dir(local_root)} if doc.code is not None else {}),
        },
        inherit=True,
    )


def entrypoint_command(
    doc: schema.SkyRLLaunchConfig, env: RuntimeEnvironment, final: dict[str, Any], local_root: str
) -> list[str]:
    """argv of the runtime entrypoint on the task-local final document (written here)."""
    profile = get_profile(doc.runtime.profile)
    final_path = os.path.join(local_root, FINAL_FILE)
    with open(final_path, "w", encoding="utf-8") as handle:
        handle.write(schema.dumps(final))
    module = profile.entrypoint_module(doc.runtime.entrypoint)
    return env.command(module, ["--config", final_path], nproc=trainer_processes(doc))


def run_entrypoint(
    doc: schema.SkyRLLaunchConfig, final: dict[str, Any], local_root: str, phases: dict[str, str], signalled: Signalled
) -> int:
    profile = get_profile(doc.runtime.profile)
    env = ensure_environment(profile, progress=log)
    command = entrypoint_command(doc, env, final, local_root)
    log(f"running {profile.name} entrypoint {doc.runtime.entrypoint} with {trainer_processes(doc)} process(es)")
    phases["trainer_started_at"] = utc_now()
    signalled.trainer_running = True
    return subprocess.call(command, env=runtime_process_env(doc, env, local_root), cwd=local_root)


def run_ray_gang(
    doc: schema.SkyRLLaunchConfig,
    staged: dict[str, str],
    local_root: str,
    rank: int,
    world: int,
    phases: dict[str, str],
) -> int:
    """A Ray-driver runtime: Ray across the gang (or the cluster this job runs in), then the driver."""
    from rlaunch.task import ray_cluster
    from rlaunch.task.rendezvous import rendezvous_for

    started_at = time.time()
    stop = ray_cluster.Stop().install()
    env = ensure_environment(get_profile(doc.runtime.profile), progress=log)
    process_env = runtime_process_env(doc, env, local_root)
    if os.environ.get(BACKEND_ENV) == "ray":
        command = entrypoint_command(doc, env, final_document(doc, staged), local_root)
        gcs = os.environ.get(RAY_GCS_ADDRESS_ENV)
        if not gcs:
            log(f"the Ray backend gave this job no ${RAY_GCS_ADDRESS_ENV}: the driver cannot attach to the cluster")
            return 1
        phases["trainer_started_at"] = utc_now()
        return ray_cluster.run_attached(
            doc, gcs=gcs, env=process_env, driver_argv=command, cwd=local_root, log=log, stop=stop
        )
    rendezvous = rendezvous_for(doc)
    if rank != 0:
        return ray_cluster.run_worker(
            doc, rendezvous, rank=rank, python=env.python, env=process_env, started_at=started_at, log=log, stop=stop
        )
    command = entrypoint_command(doc, env, final_document(doc, staged), local_root)
    log(f"running {doc.runtime.profile} entrypoint {doc.runtime.entrypoint} as a Ray driver on {world} node(s)")
    return ray_cluster.run_head(
        doc,
        rendezvous,
        world=world,
        python=env.python,
        env=process_env,
        driver_argv=command,
        cwd=local_root,
        log=log,
        stop=stop,
        phases=phases,
    )


def _record_stop(doc: schema.SkyRLLaunchConfig, code: int, signum: int, phases: dict[str, str]) -> None:
    """When the stopped trainer started and exited (the run's phase table keeps them); no verdict,
    so the other ranks, which wait for rank 0's outcome, are not told one. A write that fails loses
    only these times."""
    stopped = {"signal": signal.Signals(signum).name, "exit_code": code, "time": utc_now(), **phases}
    with contextlib.suppress(OSError):
        storage.write_json_atomic(
            storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), GANG_STOPPED), stopped
        )


def wait_for_outcome(doc: schema.SkyRLLaunchConfig, poll_seconds: float = 1.0) -> int:
    url = storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), OUTCOME)
    outcome = wait_until(lambda: storage.read_json(url), None, f"rank 0's outcome at {url}", poll_seconds)
    return 0 if outcome.get("exit_code") == 0 else 1


@click.command()
@click.option("--config", "config_url", required=True, help="The resolved launch document (path or URL).")
def main(config_url: str) -> None:
    with Signalled() as signalled:
        _run_task(config_url, signalled)


def _run_task(config_url: str, signalled: Signalled) -> None:
    started_at = utc_now()
    doc = schema.load(config_url)
    rank = int(os.environ.get(RANK_ENV, "0"))
    world = int(os.environ.get(WORLD_SIZE_ENV, "1"))
    local_root = task_dir(doc, rank)
    log(f"rank {rank} of {world} starting: staging under {local_root}")
    try:
        os.makedirs(local_root, exist_ok=True)
    except OSError as exc:  # a broken or full local disk: this node cannot take part (exit 1, no traceback)
        raise SystemExit(
            f"[rlaunch.task rank {rank}] cannot create the task directory {local_root} "
            f"({type(exc).__name__}: {exc.strerror or exc}): this node's staging disk is unusable; repair or free "
            f"it, or point ${STAGING_ENV} at a writable local directory"
        ) from None
    try:
        staged = stage_inputs(doc, local_root)
        stage_code(doc, local_root)
        write_join_marker(doc, rank, world, started_at)
        log(f"joined gang as rank {rank} of {world}")
        ray_driver = get_profile(doc.runtime.profile).launcher == RAY_DRIVER
        if rank != 0 and not ray_driver:
            sys.exit(wait_for_outcome(doc))
        phases: dict[str, str] = {}
        if ray_driver:
            code = run_ray_gang(doc, staged, local_root, rank, world, phases)
            if rank != 0:
                sys.exit(code)
        else:
            code = run_entrypoint(doc, final_document(doc, staged), local_root, phases, signalled)
            if signalled.signum:  # stopped from outside: the trainer's exit is not the gang's outcome
                log(f"entrypoint exited {code} after {signal.Signals(signalled.signum).name}; no outcome recorded")
                _record_stop(doc, code, signalled.signum, phases)
                sys.exit(128 + signalled.signum)
        try:
            storage.write_json_atomic(
                storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), OUTCOME),
                {"exit_code": code, "time": utc_now(), **phases},
            )
        except OSError as exc:
            if not storage.is_disk_full(exc):
                raise
            log(f"entrypoint exited {code}; its outcome was not recorded: {storage.disk_full_message(exc)}")
            sys.exit(code or 1)  # without its outcome the gang did not finish its work
        log(f"entrypoint exited {code}")
        sys.exit(code)
    finally:
        if not os.environ.get(KEEP_ENV):
            with contextlib.suppress(OSError):
                remove_inside(staging_root(), local_root)
