"""The task bootstrap of one replica, run in-process on a real launch document and the registered
`test-marker` runtime (a real trainer process in the host interpreter): what each rank stages and
records, which rank runs the trainer, and how rank 0's outcome (success or failure) ends the gang.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.cluster.protocol import BACKEND_ENV, JOB_ID_ENV, RANK_ENV, WORLD_SIZE_ENV
from rlaunch.cluster.ray.contract import GCS_ADDRESS_ENV as RAY_GCS_ADDRESS_ENV
from rlaunch.launch_config import schema
from rlaunch.launch_config.typed import decode
from rlaunch.paths import ConfinementError
from rlaunch.runs.layout import GANG_OUTCOME, GANG_STOPPED, JOINED, attempt_dir
from rlaunch.runs.run_record import marker_phases
from rlaunch.runtimes import environment
from rlaunch.runtimes.environment import RuntimeEnvironment
from rlaunch.task import bootstrap
from rlaunch.task.staging import StagingError
from tests.support.documents import rendered_document

from .conftest import make_artifact

MODEL_FILES = {"config.json": b"{}", "model.safetensors": b"weights"}
DATA_FILES = {"train.parquet": b"train rows", "test.parquet": b"test rows"}


def document(prefix: str, tmp_path: Path, scenario: str = "ok", gpus_per_node: int = 8) -> schema.SkyRLLaunchConfig:
    """The rendered launch document, retargeted to the test-marker runtime, with its inputs built."""
    data = rendered_document(prefix)
    data["runtime"]["profile"] = "test-marker"
    data["run"]["export_hf"] = False  # the marker trainer would export config.json and tokenizer.json
    data["cluster"]["allocation"]["gpus_per_node"] = gpus_per_node
    art = data["artifacts"]
    trainer = data["skyrl"]["trainer"]
    trainer.update(
        ckpt_path=art["checkpoint_root"], export_path=art["export_root"], max_training_steps=1, ckpt_interval=1,
        max_ckpts_to_keep=1, resume_mode="none",
    )  # fmt: skip
    data["skyrl"]["environment"] = {"env_class": scenario}
    for item, files in ((data["inputs"]["model"], MODEL_FILES), (data["inputs"]["train_data"][0], DATA_FILES)):
        name_version, _, fingerprint = item["identity"].partition(":")
        name, _, version = name_version.partition("@")
        make_artifact(Path(item["uri"]), files, name=name, version=version, fingerprint=fingerprint)
    return schema.from_dict(data)


def written(doc: schema.SkyRLLaunchConfig, tmp_path: Path) -> str:
    path = tmp_path / "resolved-launch.yaml"
    path.write_text(schema.dumps(doc))
    return str(path)


def attempt(doc: schema.SkyRLLaunchConfig) -> Path:
    return Path(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id))


def run_task(monkeypatch: pytest.MonkeyPatch, config: str, rank: int, world: int) -> int | str | None:
    """`python -m rlaunch.task --config ...` as replica `rank` of `world`: its exit code."""
    monkeypatch.setenv(RANK_ENV, str(rank))
    monkeypatch.setenv(WORLD_SIZE_ENV, str(world))
    with pytest.raises(SystemExit) as info:
        bootstrap.main.main(["--config", config], standalone_mode=False)
    return info.value.code


def replica_dir(tmp_path: Path, doc: schema.SkyRLLaunchConfig, rank: int) -> Path:
    return tmp_path / "staging" / "checkpoints-gsm8k-grpo-2026.11.30" / doc.run.attempt_id / f"replica-{rank}"


def test_the_task_directory_is_per_run_attempt_and_replica(tmp_path: Path, prefix: str, marker_runtime: None) -> None:
    doc = document(prefix, tmp_path)
    assert bootstrap.task_dir(doc, 3) == str(replica_dir(tmp_path, doc, 3))


def test_the_staging_root_defaults_to_the_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert bootstrap.staging_root() == str(tmp_path / "staging")
    monkeypatch.delenv(bootstrap.STAGING_ENV)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    assert bootstrap.staging_root() == str(tmp_path / "tmp" / "rlaunch-task")


def test_inputs_are_staged_once_per_local_path_and_patched_into_the_recipe(
    tmp_path: Path, prefix: str, marker_runtime: None
) -> None:
    doc = document(prefix, tmp_path)
    root = tmp_path / "task"
    before = copy.deepcopy(doc.to_dict())
    staged = bootstrap.stage_inputs(doc, str(root))
    # train and validation data share one local path: staged once
    assert staged == {"models/qwen3-8b": str(root / "models/qwen3-8b"), "data/gsm8k": str(root / "data/gsm8k")}
    assert (root / "data/gsm8k/train.parquet").read_bytes() == b"train rows"
    final = bootstrap.final_document(doc, staged)
    trainer, data = final["skyrl"]["trainer"], final["skyrl"]["data"]
    assert trainer["policy"]["model"]["path"] == trainer["ref"]["model"]["path"] == str(root / "models/qwen3-8b")
    assert data == {
        "train_data": [str(root / "data/gsm8k/train.parquet")],
        "val_data": [str(root / "data/gsm8k/test.parquet")],
    }
    assert doc.to_dict() == before  # the document itself is left as it was
    assert final["inputs"] == doc.to_dict()["inputs"]


def test_a_data_source_without_relative_path_is_its_staged_directory(
    tmp_path: Path, prefix: str, marker_runtime: None
) -> None:
    doc = document(prefix, tmp_path)
    data = doc.to_dict()
    data["inputs"]["validation_data"][0]["relative_path"] = ""
    doc = schema.from_dict(data)
    final = bootstrap.final_document(doc, {"models/qwen3-8b": "/t/m", "data/gsm8k": "/t/d"})
    assert final["skyrl"]["data"] == {"train_data": ["/t/d/train.parquet"], "val_data": ["/t/d"]}


def test_rank_0_success_publishes_the_outcome_and_removes_its_task_directory(
    tmp_path: Path,
    prefix: str,
    marker_runtime: None,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    doc = document(prefix, tmp_path)
    monkeypatch.setenv(JOB_ID_ENV, "job-7")
    assert run_task(monkeypatch, written(doc, tmp_path), rank=0, world=1) == 0
    outcome = json.loads((attempt(doc) / GANG_OUTCOME).read_text())
    assert outcome["exit_code"] == 0 and set(outcome) == {"exit_code", "time", "trainer_started_at"}
    joined = json.loads((attempt(doc) / JOINED / "replica-0.json").read_text())
    assert (joined["rank"], joined["world_size"], joined["trainer_processes"], joined["job_id"]) == (0, 1, 1, "job-7")
    assert joined["pid"] == os.getpid() and joined["started_at"] <= joined["time"]
    assert joined["time"] <= outcome["trainer_started_at"] <= outcome["time"]  # all utc_now() stamps
    marker = json.loads((attempt(doc) / "marker.json").read_text())  # the trainer ran on the staged inputs
    staged_model = str(replica_dir(tmp_path, doc, 0) / "models/qwen3-8b")
    assert marker["skyrl"]["trainer"]["policy"]["model"]["path"] == staged_model
    assert marker["model_files"] == [".rlaunch-staged.json", "config.json", "model.safetensors"]
    assert marker["cwd"] == marker["task_dir"] == os.path.realpath(replica_dir(tmp_path, doc, 0))
    assert joined["host"] == socket.gethostname()
    assert not replica_dir(tmp_path, doc, 0).exists()
    err = capfd.readouterr().err
    assert "[rlaunch.task rank 0] joined gang as rank 0 of 1\n" in err
    assert "[rlaunch.task rank 0] entrypoint exited 0\n" in err
    assert "[rlaunch.task rank 0] running test-marker entrypoint standard with 1 process(es)\n" in err


def test_a_task_without_rank_and_world_size_is_rank_0_of_1_and_runs_the_trainer(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    doc = document(prefix, tmp_path)
    monkeypatch.delenv(RANK_ENV, raising=False)
    monkeypatch.delenv(WORLD_SIZE_ENV, raising=False)
    with pytest.raises(SystemExit) as info:
        bootstrap.main.main(["--config", written(doc, tmp_path)], standalone_mode=False)
    assert info.value.code == 0
    joined = json.loads((attempt(doc) / JOINED / "replica-0.json").read_text())
    assert (joined["rank"], joined["world_size"], joined["trainer_processes"]) == (0, 1, 1)
    assert json.loads((attempt(doc) / GANG_OUTCOME).read_text())["exit_code"] == 0
    assert (attempt(doc) / "marker.json").exists()  # this rank ran the trainer
    assert "[rlaunch.task rank 0] rank 0 of 1 starting: staging under " in capfd.readouterr().err


def test_a_node_whose_staging_disk_is_broken_leaves_with_one_line_that_names_the_directory_and_the_fix(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = document(prefix, tmp_path)
    blocked = replica_dir(tmp_path, doc, 1)
    blocked.parent.mkdir(parents=True)
    blocked.write_text("not a directory\n")
    code = run_task(monkeypatch, written(doc, tmp_path), rank=1, world=2)
    assert code == (
        f"[rlaunch.task rank 1] cannot create the task directory {blocked} (FileExistsError: File exists): this "
        f"node's staging disk is unusable; repair or free it, or point ${bootstrap.STAGING_ENV} at a writable "
        "local directory"
    )
    assert not (attempt(doc) / JOINED / "replica-1.json").exists()


def test_rank_0_trainer_failure_is_the_gang_outcome_and_waiting_ranks_leave_with_it(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = document(prefix, tmp_path, scenario="fail_at_1")
    waited: list[int] = []
    waiter = threading.Thread(
        target=lambda: waited.append(bootstrap.wait_for_outcome(doc, poll_seconds=0.01)), daemon=True
    )
    waiter.start()  # another rank, already waiting for rank 0's verdict
    assert run_task(monkeypatch, written(doc, tmp_path), rank=0, world=2) == 3  # the trainer's own exit code
    waiter.join(timeout=10)
    assert waited == [1]
    assert json.loads((attempt(doc) / GANG_OUTCOME).read_text())["exit_code"] == 3
    assert run_task(monkeypatch, written(doc, tmp_path), rank=1, world=2) == 1  # a rank that comes later
    assert not replica_dir(tmp_path, doc, 0).exists() and not replica_dir(tmp_path, doc, 1).exists()


def _outcome_write_fails(monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    """The attempts filesystem refuses the gang's outcome (and only it) with `error`."""
    write = storage.write_json_atomic

    def refusing(url: str, value: Any) -> None:
        if url.endswith(GANG_OUTCOME):
            raise error
        write(url, value)

    monkeypatch.setattr(storage, "write_json_atomic", refusing)


@pytest.mark.parametrize(("scenario", "leaves_with"), [("ok", 1), ("fail_at_1", 3)])
def test_rank_0_whose_outcome_does_not_fit_on_a_full_disk_says_so_and_never_leaves_with_success(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str], scenario: str, leaves_with: int,
) -> None:  # fmt: skip
    doc = document(prefix, tmp_path, scenario=scenario)
    outcome = attempt(doc) / GANG_OUTCOME
    _outcome_write_fails(monkeypatch, OSError(errno.ENOSPC, "No space left on device", str(outcome)))
    assert run_task(monkeypatch, written(doc, tmp_path), rank=0, world=1) == leaves_with
    code = 0 if scenario == "ok" else 3
    assert (
        f"[rlaunch.task rank 0] entrypoint exited {code}; its outcome was not recorded: No space left on device "
        f"(ENOSPC) writing {outcome}: free space" in capfd.readouterr().err
    )
    assert not outcome.exists() and not replica_dir(tmp_path, doc, 0).exists()


def test_rank_0_whose_outcome_cannot_be_written_for_another_reason_fails_with_that_error(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = document(prefix, tmp_path)
    _outcome_write_fails(monkeypatch, PermissionError(errno.EACCES, "Permission denied"))
    monkeypatch.setenv(RANK_ENV, "0")
    with pytest.raises(PermissionError):
        bootstrap.main.main(["--config", written(doc, tmp_path)], standalone_mode=False)
    assert not replica_dir(tmp_path, doc, 0).exists()


@pytest.mark.parametrize(("exit_code", "leaves_with"), [(0, 0), (3, 1), (-9, 1), (None, 1)])
def test_a_rank_above_0_stages_joins_and_leaves_with_rank_0s_outcome_without_training(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch, exit_code: int | None,
    leaves_with: int, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    doc = document(prefix, tmp_path)
    storage.write_json_atomic(str(attempt(doc) / GANG_OUTCOME), {"exit_code": exit_code})
    assert run_task(monkeypatch, written(doc, tmp_path), rank=2, world=4) == leaves_with
    joined = json.loads((attempt(doc) / JOINED / "replica-2.json").read_text())
    assert (joined["rank"], joined["world_size"], joined["trainer_processes"]) == (2, 4, 0)
    assert not (attempt(doc) / "marker.json").exists()  # no trainer on this rank
    assert json.loads((attempt(doc) / GANG_OUTCOME).read_text()) == {"exit_code": exit_code}  # not overwritten
    assert not replica_dir(tmp_path, doc, 2).exists()
    assert "[rlaunch.task rank 2] joined gang as rank 2 of 4\n" in capfd.readouterr().err


def test_a_replica_that_cannot_stage_never_joins(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = document(prefix, tmp_path)
    Path(doc.inputs.model.uri, "model.safetensors").write_bytes(b"corrupted")
    monkeypatch.setenv(RANK_ENV, "0")
    with pytest.raises(StagingError, match="model.safetensors does not match the sha256"):
        bootstrap.main.main(["--config", written(doc, tmp_path)], standalone_mode=False)
    assert not (attempt(doc) / JOINED).exists() and not (attempt(doc) / GANG_OUTCOME).exists()
    assert not replica_dir(tmp_path, doc, 0).exists()


def test_the_task_directory_is_kept_when_asked(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = document(prefix, tmp_path)
    monkeypatch.setenv(bootstrap.KEEP_ENV, "1")
    assert run_task(monkeypatch, written(doc, tmp_path), rank=0, world=1) == 0
    kept = replica_dir(tmp_path, doc, 0)
    assert (kept / "models/qwen3-8b/model.safetensors").read_bytes() == b"weights"
    final: dict[str, Any] = schema.loads((kept / bootstrap.FINAL_FILE).read_text()).to_dict()
    assert final["skyrl"]["data"]["train_data"] == [str(kept / "data/gsm8k/train.parquet")]


def test_a_task_rerun_where_its_directory_was_kept_reuses_the_staged_inputs(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    doc = document(prefix, tmp_path)
    monkeypatch.setenv(bootstrap.KEEP_ENV, "1")
    assert run_task(monkeypatch, written(doc, tmp_path), rank=0, world=1) == 0
    capfd.readouterr()
    monkeypatch.delenv(bootstrap.KEEP_ENV)
    assert run_task(monkeypatch, written(doc, tmp_path), rank=0, world=1) == 0  # the same replica, again
    err = capfd.readouterr().err
    assert f"already staged at {replica_dir(tmp_path, doc, 0) / 'models/qwen3-8b'}" in err
    assert "[rlaunch.task rank 0] entrypoint exited 0\n" in err
    assert not replica_dir(tmp_path, doc, 0).exists()


def test_the_trainer_process_gets_the_run_identity_in_its_environment(
    tmp_path: Path, prefix: str, marker_runtime: None
) -> None:
    doc = document(prefix, tmp_path)
    env = bootstrap.ensure_environment(bootstrap.get_profile("test-marker"))
    process_env = bootstrap.runtime_process_env(doc, env, "/task")
    assert {k: process_env[k] for k in ("RLAUNCH_ATTEMPT_DIR", "RLAUNCH_RUNTIME_DIGEST", "RLAUNCH_RUN_FINGERPRINT",
        "RLAUNCH_COMPATIBLE_DIGESTS", "RLAUNCH_MODEL_IDENTITY", "RLAUNCH_TASK_DIR")} == {
        "RLAUNCH_ATTEMPT_DIR": str(attempt(doc)),
        "RLAUNCH_RUNTIME_DIGEST": doc.runtime.source_digest,
        "RLAUNCH_RUN_FINGERPRINT": doc.run.fingerprint,
        "RLAUNCH_COMPATIBLE_DIGESTS": "",
        "RLAUNCH_MODEL_IDENTITY": doc.inputs.model.identity,
        "RLAUNCH_TASK_DIR": "/task",
    }  # fmt: skip
    assert os.environ["PATH"] == process_env["PATH"]  # inherited
    assert process_env["RLAUNCH_RESUME_FROM"] == ""  # no pinned checkpoint


def test_the_trainer_process_gets_the_pinned_checkpoint_to_resume_from_as_json(
    tmp_path: Path, prefix: str, marker_runtime: None
) -> None:
    data = document(prefix, tmp_path).to_dict()
    pin = {"checkpoint_root": f"{prefix}/checkpoints/earlier", "step": 40, "runtime_digest": "d" * 64}
    data["runtime"]["resume_from"] = pin
    doc = schema.from_dict(data)
    env = bootstrap.ensure_environment(bootstrap.get_profile("test-marker"))
    assert json.loads(bootstrap.runtime_process_env(doc, env, "/task")["RLAUNCH_RESUME_FROM"]) == pin


@pytest.mark.parametrize(("rank", "publishes"), [(0, True), (1, False)])
def test_a_ray_driver_job_without_the_clusters_address_fails_before_any_trainer_starts(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch, signal_handlers: None,
    capfd: pytest.CaptureFixture[str], rank: int, publishes: bool,
) -> None:  # fmt: skip
    monkeypatch.setenv("RLAUNCH_RUNTIME_PLUGINS", "tests.plugins.marker_runtime,tests.plugins.ray_driver_runtime")
    monkeypatch.setenv(BACKEND_ENV, "ray")
    monkeypatch.delenv(RAY_GCS_ADDRESS_ENV, raising=False)
    data = document(prefix, tmp_path).to_dict()
    data["runtime"]["profile"] = "test-ray-driver"
    doc = schema.from_dict(data)
    assert run_task(monkeypatch, written(doc, tmp_path), rank=rank, world=2) == 1
    assert (
        f"[rlaunch.task rank {rank}] the Ray backend gave this job no ${RAY_GCS_ADDRESS_ENV}" in capfd.readouterr().err
    )
    outcome = storage.read_json(str(attempt(doc) / GANG_OUTCOME))
    assert outcome == ({"exit_code": 1, "time": outcome["time"]} if publishes else None)  # no trainer_started_at
    assert not (attempt(doc) / "marker.json").exists()


class RayGangCalls:
    """Stands in for the Ray transport (`rlaunch.task.ray_cluster`, tested with real Ray in
    tests/multinode): records which role each rank took and with what, and returns `code`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
        from rlaunch.task import ray_cluster, rendezvous

        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.code = code
        for role in ("run_head", "run_worker", "run_attached"):
            monkeypatch.setattr(ray_cluster, role, self._role(role))
        monkeypatch.setattr(rendezvous, "rendezvous_for", lambda doc: ("rendezvous of", doc.run.attempt_id))

    def _role(self, role: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> int:
            self.calls.append((role, args, kwargs))
            if "phases" in kwargs:
                kwargs["phases"]["trainer_started_at"] = "driver start"
            return self.code

        return run


@pytest.mark.parametrize(
    ("backend", "rank", "role"), [("local", 0, "run_head"), ("local", 1, "run_worker"), ("ray", 0, "run_attached")]
)
def test_a_ray_driver_runtime_makes_rank_0_the_head_running_the_driver_and_the_others_workers(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch, signal_handlers: None,
    backend: str, rank: int, role: str, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from rlaunch.task import ray_cluster

    monkeypatch.setenv("RLAUNCH_RUNTIME_PLUGINS", "tests.plugins.marker_runtime,tests.plugins.ray_driver_runtime")
    monkeypatch.setenv(BACKEND_ENV, backend)
    monkeypatch.setenv(RAY_GCS_ADDRESS_ENV, "10.0.0.1:6379")
    monkeypatch.setenv(bootstrap.KEEP_ENV, "1")
    data = document(prefix, tmp_path).to_dict()
    data["runtime"]["profile"] = "test-ray-driver"
    doc = schema.from_dict(data)
    gang = RayGangCalls(monkeypatch, code=5)
    before = time.time()
    assert run_task(monkeypatch, written(doc, tmp_path), rank=rank, world=2) == 5
    err = capfd.readouterr().err
    local_root = str(replica_dir(tmp_path, doc, rank))
    ((called, args, kwargs),) = gang.calls
    assert called == role
    env = kwargs.pop("env")
    assert env["RLAUNCH_TASK_DIR"] == local_root and env["RLAUNCH_ATTEMPT_DIR"] == str(attempt(doc))
    assert isinstance(kwargs.pop("stop"), ray_cluster.Stop) and kwargs.pop("log") is bootstrap.log
    driver = [sys.executable, "-m", "rlaunch_test_marker.ray_driver", "--config", f"{local_root}/final-launch.yaml"]
    rendezvous = ("rendezvous of", doc.run.attempt_id)
    if role == "run_worker":
        started_at = kwargs.pop("started_at")
        assert before <= started_at <= time.time()
        assert (args, kwargs) == ((doc, rendezvous), {"rank": 1, "python": sys.executable})
        assert not (Path(local_root) / bootstrap.FINAL_FILE).exists()  # a worker runs no driver
    else:
        phases = kwargs.pop("phases", None)
        expected = {"driver_argv": driver, "cwd": local_root}
        if role == "run_head":
            assert (args, phases) == ((doc, rendezvous), {"trainer_started_at": "driver start"})
            line = "[rlaunch.task rank 0] running test-ray-driver entrypoint standard as a Ray driver on 2 node(s)\n"
            assert line in err
            expected |= {"world": 2, "python": sys.executable}
        else:
            assert args == (doc,) and phases is None
            expected |= {"gcs": "10.0.0.1:6379"}
        assert kwargs == expected
        final = schema.loads((Path(local_root) / bootstrap.FINAL_FILE).read_text())
        assert final.skyrl["trainer"]["policy"]["model"]["path"] == f"{local_root}/models/qwen3-8b"
    outcome = storage.read_json(str(attempt(doc) / GANG_OUTCOME))
    if rank == 0:
        assert outcome["exit_code"] == 5 and outcome["trainer_started_at"] is not None
    else:
        assert outcome is None  # only rank 0 publishes


def test_log_lines_name_the_rank_and_rank_0_when_unset(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(RANK_ENV, raising=False)
    bootstrap.log("hello")
    monkeypatch.setenv(RANK_ENV, "3")
    bootstrap.log("again")
    assert capfd.readouterr().err == "[rlaunch.task rank 0] hello\n[rlaunch.task rank 3] again\n"


@pytest.mark.parametrize(
    ("dotted", "value", "message"),
    [
        ("run.attempt_id", "../../x", "run.attempt_id='checkpoints-gsm8k-grpo-2026.11.30/../../x/replica-0' contains"),
        ("inputs.model.local_path", "/abs/model", "inputs.model.local_path='/abs/model' is absolute"),
        ("inputs.train_data.0.local_path", "../data", "inputs.train_data[0].local_path='../data' contains '..'"),
        ("inputs.validation_data.0.local_path", "a/../b", "inputs.validation_data[0].local_path='a/../b' contains"),
    ],
)
def test_a_document_that_skipped_the_loader_still_cannot_leave_the_task_root(
    tmp_path: Path, prefix: str, marker_runtime: None, dotted: str, value: str, message: str
) -> None:
    data = document(prefix, tmp_path).to_dict()
    node: Any = data
    *parents, last = dotted.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[last] = value
    unchecked = decode(schema.SkyRLLaunchConfig, data)
    with pytest.raises(ConfinementError) as info:
        bootstrap.stage_inputs(unchecked, bootstrap.task_dir(unchecked, 0))
    assert str(info.value).startswith(message)


def test_a_torchrun_runtime_starts_one_trainer_process_per_device(tmp_path: Path, prefix: str) -> None:
    data = document(prefix, tmp_path).to_dict()
    data["runtime"]["profile"] = "trl-cpu"
    data["runtime"]["compatible_checkpoint_digests"] = ["d1", "d2"]
    doc = schema.from_dict(data)
    assert bootstrap.trainer_processes(doc) == 8
    env = RuntimeEnvironment("trl-cpu", "d", "host", "/py", "/adapter", "/base.yaml", "/profile.yaml", "torchrun")
    root = tmp_path / "task"
    root.mkdir()
    command = bootstrap.entrypoint_command(doc, env, {"skyrl": {"k": "v"}}, str(root))
    module = bootstrap.get_profile("trl-cpu").entrypoint_module("standard")
    assert command == [
        "/py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=8", "-m", module,
        "--config", str(root / bootstrap.FINAL_FILE),
    ]  # fmt: skip
    assert (root / bootstrap.FINAL_FILE).read_text() == schema.dumps({"skyrl": {"k": "v"}})
    assert bootstrap.runtime_process_env(doc, env, str(root))["RLAUNCH_COMPATIBLE_DIGESTS"] == "d1,d2"


def test_a_venv_runtime_snapshotted_on_the_node_says_so_in_the_tasks_log_lines(
    tmp_path: Path, prefix: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    data = document(prefix, tmp_path).to_dict()
    data["runtime"]["profile"] = "trl-cpu"
    doc = schema.from_dict(data)
    profile = bootstrap.get_profile("trl-cpu")
    cache = tmp_path / "runtime-cache"
    monkeypatch.setenv(environment.CACHE_ENV, str(cache))
    venv = cache / "venvs" / environment.venv_key(profile)  # its venv already built here: only the snapshot is new
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\nexit 0\n")  # a trainer that succeeds at once
    (venv / "bin" / "python").chmod(0o755)
    (venv / environment.COMPLETE).write_text("{}")
    assert run_task(monkeypatch, written(doc, tmp_path), rank=0, world=1) == 0
    assert f"[rlaunch.task rank 0] runtime trl-cpu source snapshot {profile.source_digest[:16]} at " in (
        capfd.readouterr().err
    )


def test_a_signal_before_the_trainer_stops_the_task_at_once_and_restores_the_handlers(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(RANK_ENV, "2")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped, bootstrap.Signalled() as signalled:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises as soon as the signal arrives
    assert stopped.value.code == 128 + signal.SIGTERM and signalled.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert capfd.readouterr().err == "[rlaunch.task rank 2] received SIGTERM before the trainer started: stopping\n"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_once_the_trainer_runs_a_signal_is_noted_and_the_first_one_kept(sig: signal.Signals) -> None:
    with bootstrap.Signalled() as signalled:
        assert (signalled.signum, signalled.trainer_running) == (0, False)
        signalled.trainer_running = True
        os.kill(os.getpid(), sig)
        os.kill(os.getpid(), signal.SIGTERM if sig != signal.SIGTERM else signal.SIGHUP)
        time.sleep(0.05)
    assert signalled.signum == sig


def test_a_signal_while_the_trainer_runs_is_the_trainers_and_the_task_leaves_with_it_recording_no_outcome(
    tmp_path: Path, prefix: str, marker_runtime: None, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    doc = document(prefix, tmp_path, scenario="signal_task")
    assert run_task(monkeypatch, written(doc, tmp_path), rank=0, world=1) == 128 + signal.SIGTERM
    assert "[rlaunch.task rank 0] entrypoint exited 0 after SIGTERM; no outcome recorded\n" in capfd.readouterr().err
    assert (attempt(doc) / "finished.json").exists(), "the trainer was stopped by its task, not by itself"
    assert not (attempt(doc) / GANG_OUTCOME).exists()  # a signalled gang's outcome is not the trainer's exit
    assert not replica_dir(tmp_path, doc, 0).exists()
    stopped = json.loads((attempt(doc) / GANG_STOPPED).read_text())  # only its times, for the phase table
    assert (stopped["signal"], stopped["exit_code"]) == ("SIGTERM", 0)
    phases = marker_phases(str(attempt(doc)))
    assert (phases["trainer_started"], phases["trainer_exited"]) == (stopped["trainer_started_at"], stopped["time"])
    assert phases["inputs_staged"] <= phases["trainer_started"] <= phases["trainer_exited"]
