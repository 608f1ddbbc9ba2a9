"""The library's SFT step: its settings and runtime refusals, the configuration it renders for each
runtime, the conversations it trains on, its declared architecture and its memory rows."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments import smoke
from rlaunch.artifacts import ArtifactStep, resolve_version
from rlaunch.artifacts.plan import plan_graph
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.cli.plan_text import placement_lines
from rlaunch.cli.step_checks import StepJobPlacementError, preflight_step_jobs, step_job_problems
from rlaunch.rules.devices import device
from rlaunch.rules.memory import sft_table
from rlaunch.rules.model_shape import from_hf_config
from rlaunch.skyrl import FromConfig, HfModel
from rlaunch.sources.inputs import declared_architecture
from rlaunch.step_jobs import StepExecution
from rlaunch.training import SftSettings, sft_step
from rlaunch.training.warm_start import (
    EXPORT_AT_END,
    conversations,
    sft_memory,
    sft_tool,
    skyrl_sft_overrides,
    trl_cpu_arguments,
)
from tests.rules.test_memory import QWEN3_14B

VERSION = "2026.12.07"
GPU = StepExecution(runtime="fsdp", accelerators=8, accelerator_type="H100")
CPU = StepExecution(runtime="trl-cpu")
SETTINGS = SftSettings(epochs=2, batch_size=16, micro_batch=2, lr=2e-5, max_length=1024, seed=3)
QWEN3_06B = {**QWEN3_14B, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28}
QWEN3_06B |= {"num_attention_heads": 16, "tie_word_embeddings": True}


# ------------------------------------------------------------------ settings and runtimes


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "epochs=None, steps=None; give exactly one"),
        ({"epochs": 1, "steps": 10}, "epochs=1, steps=10; give exactly one"),
        ({"epochs": 0}, r"SftSettings.epochs=0 must be a positive int"),
        ({"steps": 1, "micro_batch": 0}, r"SftSettings.micro_batch=0 must be a positive int"),
        ({"steps": 1, "max_length": True}, r"SftSettings.max_length=True must be a positive int"),
        ({"steps": 1, "lr": 0.0}, r"SftSettings.lr=0.0 must be a learning rate in \(0, 1\)"),
        ({"steps": 1, "lr": 1.0}, r"SftSettings.lr=1.0 must be a learning rate"),
    ],
)
def test_settings_refuse_what_no_trainer_can_run(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SftSettings(**fields)


def test_settings_take_the_smallest_values_each_guard_lets_through() -> None:
    edge = SftSettings(steps=1, batch_size=1, micro_batch=1, max_length=1, lr=1e-9)
    assert edge.batch_problem(1) is None


@pytest.mark.parametrize(
    ("batch", "micro", "devices", "fits"),
    [(16, 2, 8, True), (16, 4, 8, False), (16, 2, 16, False), (8, 8, 1, True), (12, 8, 1, False), (24, 3, 8, True)],
)
def test_the_batch_is_cut_into_whole_micro_batches_on_every_device(
    batch: int, micro: int, devices: int, fits: bool
) -> None:
    problem = SftSettings(steps=1, batch_size=batch, micro_batch=micro).batch_problem(devices)
    assert (problem is None) is fits
    if problem:
        assert f"batch_size={batch} must be a multiple of micro_batch={micro} x {devices} device(s)" in problem


def test_each_runtime_trains_with_its_own_sft_and_one_without_is_refused() -> None:
    assert sft_tool("trl-cpu") == "trl_cpu" and sft_tool("fsdp") == "skyrl"
    with pytest.raises(ValueError, match=r"runtime='megatron' \(adapter 'skyrl', strategy 'megatron'\) has no SFT"):
        sft_tool("megatron")
    with pytest.raises(ValueError, match=r"execution.runtime=None.*StepExecution\(runtime='fsdp'"):
        sft_tool(None)


def steps(build: Any) -> Any:
    with build_context(BuildContext(VersionCodex(VERSION, {}))):
        return build(smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step())


def test_a_gpu_sft_without_gpus_or_on_several_nodes_is_refused_and_a_bad_batch_names_its_devices() -> None:
    def make(execution: StepExecution, settings: SftSettings = SETTINGS) -> Any:
        return steps(lambda m, d: sft_step(m, d, name="s/sft", settings=settings, execution=execution))

    make(dataclasses.replace(GPU, accelerators=1))  # one GPU is enough
    with pytest.raises(ValueError, match=r"sft_step s/sft: execution.accelerators=0, nodes=1; SkyRL's SFT"):
        make(dataclasses.replace(GPU, accelerators=0, accelerator_type=None))
    with pytest.raises(ValueError, match=r"execution.accelerators=8, nodes=2"):
        make(dataclasses.replace(GPU, nodes=2))
    with pytest.raises(ValueError, match=r"sft_step s/sft: SftSettings.batch_size=8 must be a multiple of .* = 16"):
        make(GPU, dataclasses.replace(SETTINGS, batch_size=8))


# ------------------------------------------------------------------ what each runtime is given


def test_skyrl_is_given_every_setting_as_the_sft_config_keys_it_reads() -> None:
    rendered = skyrl_sft_overrides(SETTINGS, model="/m", data_dir="/d", export_dir="/e", gpus=8)
    assert rendered == {
        "strategy": "fsdp",
        "model.path": "/m",
        "placement.num_nodes": 1,
        "placement.num_gpus_per_node": 8,
        "train_datasets": ["/d"],
        "train_dataset_splits": ["train"],
        "messages_key": "messages",
        "train_on_what": "last_assistant_message",
        "num_epochs": 2,
        "batch_size": 16,
        "micro_train_batch_size_per_gpu": 2,
        "max_length": 1024,
        "optimizer_config.lr": 2e-5,
        "seed": 3,
        "logger": "console",
        "disable_cache": True,
        "hf_save_interval": EXPORT_AT_END,
        "export_path": "/e",
    }
    by_steps = skyrl_sft_overrides(
        dataclasses.replace(SETTINGS, epochs=None, steps=7), model="/m", data_dir="/d", export_dir="/e", gpus=1
    )
    assert by_steps["num_steps"] == 7 and "num_epochs" not in by_steps


@pytest.mark.parametrize(("rows", "expected"), [(32, 4), (33, 6), (1, 2)])
def test_the_cpu_twin_takes_the_steps_skyrl_would_take_for_the_epochs(rows: int, expected: int) -> None:
    args = trl_cpu_arguments(SETTINGS, model="M", data="D", out="O", rows=rows)
    assert args == [
        "--model", "M", "--data", "D", "--out", "O", "--steps", str(expected), "--seed", "3",
        "--batch-size", "16", "--micro-batch", "2", "--max-length", "1024", "--lr", "2e-05",
    ]  # fmt: skip
    fixed = trl_cpu_arguments(
        dataclasses.replace(SETTINGS, epochs=None, steps=5), model="M", data="D", out="O", rows=rows
    )
    assert fixed[fixed.index("--steps") + 1] == "5"


# ------------------------------------------------------------------ the conversations


def test_a_row_becomes_its_prompt_then_the_assistants_response() -> None:
    rows = [
        {"prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "1+1?"}], "answer": "2"},
        {"prompt": "2+2?", "answer": 4},
    ]
    text = "\n".join(json.dumps(r) for r in rows) + "\n\n"
    assert conversations(text, "answer", "f") == [
        {"messages": [*rows[0]["prompt"], {"role": "assistant", "content": "2"}]},
        {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]},
    ]


def test_a_row_without_its_response_or_prompt_is_refused_naming_the_line_and_field() -> None:
    text = json.dumps({"prompt": "a", "reward_spec": {"ground_truth": "1"}}) + "\n" + json.dumps({"prompt": "b"})
    with pytest.raises(
        ValueError, match=r"f line 2: no response at 'reward_spec.ground_truth' \(the row's fields: \['prompt'\]\)"
    ):
        conversations(text, "reward_spec.ground_truth", "f")
    with pytest.raises(ValueError, match=r"f line 1: 'prompt' must be a non-empty list"):
        conversations(json.dumps({"prompt": [], "a": "1"}), "a", "f")
    with pytest.raises(ValueError, match="f: no rows to train on"):
        conversations("\n", "a", "f")


@given(st.lists(st.tuples(st.text(min_size=1), st.one_of(st.text(), st.integers())), min_size=1, max_size=5))
def test_every_row_keeps_its_prompt_and_ends_with_its_response(pairs: list[tuple[str, Any]]) -> None:
    text = "".join(json.dumps({"prompt": [{"role": "user", "content": p}], "out": a}) + "\n" for p, a in pairs)
    out = conversations(text, "out", "f")
    assert [c["messages"][0]["content"] for c in out] == [p for p, _ in pairs]
    assert [c["messages"][-1] for c in out] == [
        {"role": "assistant", "content": a if isinstance(a, str) else json.dumps(a)} for _, a in pairs
    ]


# ------------------------------------------------------------------ architecture and memory


def declared(config: dict[str, Any] | None) -> ArtifactStep[HfModel]:
    """A base model step declaring `config` as its config.json (None: declaring nothing)."""
    return ArtifactStep(
        name="s/base",
        version=resolve_version("s/base", None),
        artifact_type=HfModel,
        run=smoke.build_model,
        build_config=lambda ctx: {
            "output_path": ctx.output_path,
            **(FromConfig(config).declaration(ctx) if config is not None else {}),
        },
    )


def sft_on(config: dict[str, Any], execution: StepExecution, settings: SftSettings = SETTINGS) -> Any:
    with build_context(BuildContext(VersionCodex(VERSION, {}))):
        return sft_step(declared(config), smoke.dataset_step(), name="s/sft", settings=settings, execution=execution)


def test_the_sft_model_declares_its_bases_architecture_so_the_step_after_it_is_sized() -> None:
    step = sft_on(QWEN3_06B, GPU)
    assert declared_architecture(step) == QWEN3_06B


def test_the_plan_shows_the_sft_steps_memory_as_a_training_roles_against_its_device(tmp_path) -> None:
    step = sft_on(QWEN3_06B, GPU)
    table = sft_memory(step, str(tmp_path))
    assert table.device == device("H100")
    assert [(r.role, r.phase, r.status) for r in table.rows] == [
        ("sft", "model states", "ok"),
        ("sft", "training step", "ok"),
    ]
    states, train = table.rows
    assert "FSDP over 8 GPUs" in states.detail and "2048 tokens/micro batch" in train.detail  # micro 2 x 1024
    lines = placement_lines(plan_graph([step], str(tmp_path)), [step], str(tmp_path))
    assert any(line.strip().startswith("memory: sft training step ~") and "[ok]" in line for line in lines), lines


def test_the_activations_grow_with_the_micro_batch_and_the_states_shrink_with_the_gpus() -> None:
    arch = from_hf_config(QWEN3_06B)
    h100 = device("H100")
    assert h100 is not None and not isinstance(arch, str)
    one = sft_table(arch, h100, gpus=1, micro_batch=1, max_length=1024).rows  # type: ignore[arg-type]
    two = sft_table(arch, h100, gpus=1, micro_batch=2, max_length=1024).rows  # type: ignore[arg-type]
    eight = sft_table(arch, h100, gpus=8, micro_batch=1, max_length=1024).rows  # type: ignore[arg-type]
    assert two[1].part("activations") == 2 * one[1].part("activations") > 0
    assert eight[0].estimate == one[0].estimate // 8


def test_a_model_too_big_for_the_steps_device_is_refused_with_the_memory_findings_code(tmp_path) -> None:
    small = StepExecution(runtime="fsdp", accelerators=1, accelerator_type="L4")
    settings = dataclasses.replace(SETTINGS, batch_size=2)
    (problem,) = step_job_problems([sft_on(QWEN3_14B, small, settings)], str(tmp_path))
    assert problem.startswith(f"s/sft@{VERSION}: memory.model_states: sft model states: the model states alone need")
    assert "but one L4 has 22.49 GiB; give StepExecution.accelerators=1 more GPUs" in problem
    with pytest.raises(StepJobPlacementError, match="memory.model_states"):
        preflight_step_jobs([sft_on(QWEN3_14B, small, settings)], str(tmp_path))
    # the same model on 8 x H100: its states shard to a fit (the guard's other side)
    assert step_job_problems([sft_on(QWEN3_14B, GPU)], str(tmp_path)) == []


def test_a_base_whose_architecture_is_not_known_is_shown_unsized_not_refused(tmp_path) -> None:
    with build_context(BuildContext(VersionCodex(VERSION, {}))):  # s/base: not built, declares nothing
        step = sft_step(declared(None), smoke.dataset_step(), name="s/sft", settings=SETTINGS, execution=CPU)
    table = sft_memory(step, str(tmp_path))
    assert table.rows == () and table.unsized == (
        f"cannot size the model: s/base@{VERSION} records and declares no config.json",
    )
    assert step_job_problems([step], str(tmp_path)) == []


def test_the_cpu_twin_is_sized_against_its_jobs_memory() -> None:
    step = sft_on(QWEN3_06B, dataclasses.replace(CPU, memory="2GB"))
    table = sft_memory(step, None)
    assert table.device is not None and table.device.bytes == 2 * 10**9
    assert "one full replica per slot" in table.rows[0].detail and "padded" in table.rows[1].detail


def test_a_dry_run_of_an_sft_graph_imports_nothing_heavy(tmp_path) -> None:
    from tests.test_imports import HEAVY, REPO, heavy_imported

    stubs = tmp_path / "stubs"
    for name in HEAVY:
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text("# stand-in: importing this is what the test catches\n")
    code = (
        f"import sys\nsys.path.insert(1, {str(REPO / 'src')!r})\n"  # this checkout's rlaunch, behind the stand-ins
        "from tests.experiments.sft_warm import main\n"
        f"main(['--version', '{VERSION}', '--placement', 'cpu'], standalone_mode=False)\n"
        f"main(['--version', '{VERSION}', '--placement', 'cpu', '--plan-format', 'json'], standalone_mode=False)\n"
        "import rlaunch.training.warm_start, rlaunch.cli.plan_text\n"
        "assert rlaunch.training.warm_start.__file__.startswith(sys.path[1])\n"
    )
    assert heavy_imported(code, stubs, tmp_path) == []
