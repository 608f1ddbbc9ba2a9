"""The library's evaluation step: its scorer and runtime refusals, its sampling, the tool's arguments."""

from __future__ import annotations

import dataclasses

import pytest

from experiments import rl_plan_example, smoke
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.evaluation import Sampling, evaluation_step
from rlaunch.evaluation.eval_step import TOOLS, evaluate, evaluation_tool
from rlaunch.step_jobs import StepExecution
from tests.support.adapters import import_adapter

VERSION = "2026.11.30"


def test_the_trl_cpu_tool_scores_with_every_reward_the_runtime_registers() -> None:
    assert list(TOOLS["trl_cpu"].scorers) == import_adapter().rewards.names()


def test_a_runtimes_tool_is_found_by_its_adapter() -> None:
    assert evaluation_tool("trl-cpu", "arithmetic") == "trl_cpu"
    assert evaluation_tool("fsdp", "gsm8k") == "skyrl"


@pytest.mark.parametrize(
    ("runtime", "scorer", "refusal"),
    [
        ("fsdp", "arithmetic", r"scorer='arithmetic' is not scored by runtime 'fsdp'.*\['gsm8k'\]"),
        (None, "gsm8k", r"execution.runtime=None.*StepExecution\(runtime='trl-cpu'\)"),
    ],
    ids=["a-scorer-the-runtime-does-not-know-by-name", "without-a-runtime"],
)
def test_an_evaluation_no_runtime_can_score_is_refused(runtime: str | None, scorer: str, refusal: str) -> None:
    with pytest.raises(ValueError, match=refusal):
        evaluation_tool(runtime, scorer)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"samples": 8}, "samples=8 with temperature=0"),
        ({"samples": 0}, "samples=0 must be at least 1"),
        ({"temperature": -0.1}, "temperature=-0.1 cannot be negative"),
        ({"max_new_tokens": 0}, "max_new_tokens=0 must be at least 1"),
    ],
)
def test_sampling_refuses_what_no_tool_can_draw(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sampling(**{"max_new_tokens": 8, **fields})
    Sampling(max_new_tokens=1, temperature=0.5, samples=2)  # the edge each guard lets through


def test_a_gpu_evaluation_without_gpus_is_refused() -> None:
    with build_context(BuildContext(VersionCodex(VERSION, {}))):
        data = smoke.dataset_step()
        model = smoke.model_step(smoke.tokenizer_step())
        gpu, sampling = (
            StepExecution(runtime="fsdp", accelerators=1, accelerator_type="H100"),
            Sampling(max_new_tokens=8),
        )
        evaluation_step(
            model, data, name="e/gpu", split="test.parquet", execution=gpu, sampling=sampling
        )  # one GPU is enough
        with pytest.raises(ValueError, match=r"evaluation_step e/cpu: execution.accelerators=0, but rlaunch_skyrl"):
            cpu = dataclasses.replace(gpu, accelerators=0, accelerator_type=None)
            evaluation_step(model, data, name="e/cpu", split="test.parquet", execution=cpu, sampling=sampling)


def config(tool: str, **extra: object) -> dict[str, object]:
    sampling = dataclasses.asdict(Sampling(max_new_tokens=8, temperature=1.0, samples=4, seed=3))
    return {"tool": tool, "scorer": "gsm8k", "sampling": sampling, "tensor_parallel_size": 8, **extra}


def test_the_cpu_tool_is_told_the_scorer_and_the_gpu_tool_its_gpus() -> None:
    common = ["--model", "M", "--data", "D", "--max-new-tokens", "8", "--seed", "3", "--temperature", "1.0"]
    assert TOOLS["trl_cpu"].arguments(config("trl_cpu"), "M", "D") == [
        *common,
        "--samples",
        "4",
        "--env-class",
        "gsm8k",
    ]
    assert TOOLS["skyrl"].arguments(config("skyrl"), "M", "D") == [
        *common, "--samples", "4", "--tensor-parallel-size", "8",
    ]  # fmt: skip


def steps() -> dict[str, object]:
    with build_context(BuildContext(VersionCodex(VERSION, {}))):
        data = smoke.dataset_step()
        rl = smoke.rl_step(smoke.model_step(smoke.tokenizer_step()), data, 1, 4)
        return {
            "smoke": smoke.evaluation_step(rl, data),
            "sampled": smoke.evaluation_step(
                rl, data, sampling=Sampling(max_new_tokens=16, temperature=1.0, samples=8)
            ),
            "gpu": rl_plan_example.evaluation(rl_plan_example.rl_step(False)),
        }


def test_the_examples_evaluations_are_the_librarys_step_with_their_scorer_and_split() -> None:
    built = steps()
    assert {s.run for s in built.values()} == {evaluate}
    smoke_config = built["smoke"].fingerprint_config
    assert smoke_config["scorer"] == "arithmetic" and smoke_config["tool"] == "trl_cpu"
    assert smoke_config["data_uri"].endswith("/validation.jsonl")
    gpu_config = built["gpu"].fingerprint_config
    assert gpu_config["scorer"] == "gsm8k" and gpu_config["tool"] == "skyrl"
    assert gpu_config["data_uri"].endswith("/test.parquet")


def test_the_sampling_is_part_of_the_evaluations_identity() -> None:
    built = steps()
    assert built["smoke"].fingerprint != built["sampled"].fingerprint
