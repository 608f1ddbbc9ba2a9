"""Task environment: fixed values and passthrough patterns reach the child gang; credentials never
travel this way."""

from __future__ import annotations

import pytest

from rlaunch.host.allocate import child_job_spec
from rlaunch.launch_config import schema
from rlaunch.launch_config.task_env import check_task_env, passed_through, task_environment
from rlaunch.skyrl import LocalSkyRLExecution
from tests.support.documents import rendered_document


def test_passthrough_copies_matching_names_and_never_credentials() -> None:
    environ = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "NCCL_TOKEN": "secret-123456", "HOME": "/root",
               "LD_LIBRARY_PATH": "/opt/lib", "RLAUNCH_PREFIX": "/x"}  # fmt: skip
    assert passed_through(("NCCL_*", "LD_LIBRARY_PATH", "RLAUNCH_*"), environ) == {
        "LD_LIBRARY_PATH": "/opt/lib",
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "mlx5",
    }
    fixed = task_environment(({"NCCL_DEBUG": "WARN"}, {"A": "1"}), ("NCCL_*",), environ)
    assert fixed == {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5", "A": "1"}


@pytest.mark.parametrize(
    ("task_env", "passthrough", "message"),
    [
        ({"HF_TOKEN": "x"}, (), "allow-list"),
        ({"MY_API_KEY": "x"}, (), "credential-like"),
        ({"NCCL_DEBUG": 1}, (), "must be a string"),
        ({"1BAD": "x"}, (), "not an environment variable name"),
        ({}, ("AWS_SECRET_*",), "credential-like"),
        ({}, ("NCCL_*_X",), "PREFIX\\* pattern"),
        ({}, ("RLAUNCH_*",), "rlaunch's own"),
        ({}, "NCCL_*", "tuple of names"),
    ],
)
def test_bad_task_environment_is_refused_naming_the_field(task_env: dict, passthrough: object, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message) as info:
        check_task_env("LocalSkyRLExecution", task_env, passthrough)
    assert "LocalSkyRLExecution." in str(info.value)


def test_an_execution_refuses_a_credential_in_task_env() -> None:
    with pytest.raises(ValueError, match="LocalSkyRLExecution.task_env"):
        LocalSkyRLExecution(task_env={"WANDB_API_KEY": "k"})


def test_the_document_carries_the_task_env_to_every_replica(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = rendered_document(str(tmp_path))
    data["cluster"]["task_env"] = {"NCCL_DEBUG": "INFO"}
    doc = schema.from_dict(data)
    spec = child_job_spec(doc, "file:///doc.yaml", None)
    assert spec.env["NCCL_DEBUG"] == "INFO"


def test_rendering_puts_fixed_and_passed_through_values_in_the_document_not_the_identity(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from rlaunch.artifacts import StepContext
    from rlaunch.skyrl import skyrl_step
    from tests.support.documents import rl_step

    monkeypatch.setenv("NCCL_IB_HCA", "mlx5")
    monkeypatch.setenv("NCCL_SECRET_TOKEN", "never-forwarded-123")
    base = rl_step()
    execution = dataclasses.replace(base.execution, task_env={"NCCL_DEBUG": "INFO"}, env_passthrough=("NCCL_*",))
    step = skyrl_step(base.spec, execution, export_hf=True)
    doc = step.build_config(StepContext.for_run(step, str(tmp_path)))["launch_document"]
    assert doc["cluster"]["task_env"] == {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5"}
    fingerprint = step.build_config(StepContext.for_fingerprint(step))
    assert fingerprint == base.build_config(StepContext.for_fingerprint(base))
