"""Parity of shapes: the CPU smoke against a larger run of the same shape, and one mismatch per kind."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep
from rlaunch.judgement.parity import Difference, RunShape, differences, shape_of_document
from rlaunch.skyrl import SkyRLRuntime, skyrl_step
from tests.support import specs as h

pytestmark = pytest.mark.parity


def shape_of_spec(spec: Any, export_hf: bool) -> RunShape:
    """The shape of the document `--run` would launch for `spec` (parity reads documents only)."""
    return shape_of_document(h.planned_view(spec, export_hf=export_hf)[0])


def _kinds(smoke: Any, large: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in differences(smoke, large):
        out.setdefault(d.kind, []).append(d.field)
    return out


def test_cpu_smoke_rehearses_the_scaled_cpu_run() -> None:
    from experiments import cpu_scaled
    from rlaunch.artifacts import BuildContext, VersionCodex, build_context

    with build_context(BuildContext(VersionCodex("2026.11.30", {}))):
        large = cpu_scaled.scaled_step(slots=1)
    assert large.smoke is not None
    prefix = storage.default_prefix()
    smoke_document, large_document = h.launch_of(large.smoke, prefix).document, h.launch_of(large, prefix).document
    assert differences(shape_of_document(smoke_document), shape_of_document(large_document)) == []
    # scale really differs: the batch, the steps
    assert large.spec.topology.role_plan.train_batch_size > large.smoke.spec.topology.role_plan.train_batch_size
    assert (
        large.spec.composed_recipe["trainer"]["max_training_steps"]
        > large.smoke.spec.composed_recipe["trainer"]["max_training_steps"]
    )


def test_scale_alone_is_no_difference() -> None:
    small = h.spec(topo=h.topology(h.plan(train_batch_size=64)))
    large = h.spec(topo=h.topology(h.plan(train_batch_size=128, policy_mini_batch_size=64), num_nodes=1))
    assert differences(shape_of_spec(small, True), shape_of_spec(large, True)) == []


def test_runtime_difference_is_named() -> None:
    cpu = h.spec(
        topo=h.cpu_topology(),
        profile="trl-cpu",
        tree=h.merge(
            h.BASE_RECIPE,
            {
                "environment": {"env_class": "gsm8k"},
                "generator": {"sampling_params": {"max_generate_length": 64}},
                "trainer": {"max_prompt_length": 64},
            },
        ),
    )
    gpu = h.spec(topo=h.topology(h.plan(num_inference_engines=8)))
    kinds = _kinds(shape_of_spec(cpu, True), shape_of_spec(gpu, True))
    assert sorted(kinds["runtime"]) == ["profile", "source_digest"]


def test_strategy_difference_is_named() -> None:
    fsdp = h.spec(topo=h.topology())
    ulysses = h.spec(topo=h.topology(), tree=h.recipe(trainer={"policy": {"sequence_parallel_size": 2}}))
    found = differences(shape_of_spec(fsdp, True), shape_of_spec(ulysses, True))
    assert [(d.kind, d.field, d.smoke, d.large) for d in found] == [("strategy", "policy model parallel", (1,), (2,))]


def test_entrypoint_difference_is_named() -> None:
    loss = {"algorithm": {"policy_loss_type": "rollout_is"}}
    standard = h.spec(topo=h.seed_topology(train_batch_size=64), tree=h.recipe(trainer=loss))
    fully_async = h.spec(
        topo=h.seed_topology(train_batch_size=64),
        tree=h.recipe(
            entrypoint="fully_async", trainer={**loss, "fully_async": {"num_parallel_generation_workers": 128}}
        ),
    )
    found = differences(shape_of_spec(standard, True), shape_of_spec(fully_async, True))
    assert [(d.kind, d.smoke, d.large) for d in found] == [("entrypoint", "standard", "fully_async")]


def test_handoff_difference_is_named() -> None:
    @dataclasses.dataclass(frozen=True)
    class Parquet(Artifact):
        pass

    other_data = ArtifactStep(
        name="data/gsm8k-parquet", version=h.DAY, artifact_type=Parquet, run=lambda c: None, build_config=lambda ctx: {}
    )
    base = h.spec(topo=h.topology())
    swapped = h.spec(topo=h.topology(), data=other_data)
    kinds = _kinds(shape_of_spec(base, True), shape_of_spec(swapped, True))
    assert set(kinds["handoffs"]) >= {"graph", "train data"}


def test_geometry_difference_is_named() -> None:
    colocated = h.spec(topo=h.topology(h.plan(inference_engine_tensor_parallel_size=1)))
    tp2 = h.spec(topo=h.topology(h.plan(num_inference_engines=4, inference_engine_tensor_parallel_size=2)))
    found = differences(shape_of_spec(colocated, True), shape_of_spec(tp2, True))
    assert [(d.kind, d.field, d.smoke, d.large) for d in found] == [("geometry", "engine TP", 1, 2)]


def test_checkpoint_policy_difference_is_named() -> None:
    latest = h.spec(topo=h.topology())
    fresh = h.spec(topo=h.topology(), tree=h.recipe(trainer={"resume_mode": "none"}))
    found = differences(shape_of_spec(latest, True), shape_of_spec(fresh, True))
    assert [(d.kind, d.field, d.smoke, d.large) for d in found] == [("checkpoint", "resume_mode", "latest", "none")]


def test_export_policy_difference_is_named() -> None:
    found = differences(shape_of_spec(h.spec(topo=h.topology()), True), shape_of_spec(h.spec(topo=h.topology()), False))
    assert [(d.kind, d.field, d.smoke, d.large) for d in found] == [("export", "export_hf", True, False)]


def test_a_memory_switch_difference_is_named() -> None:
    """Where memory goes must be rehearsed (offload, checkpointing, LoRA, KV dtype, eager mode)."""
    plain = h.spec(topo=h.topology())
    offloaded = h.spec(
        topo=h.topology(),
        tree=h.recipe(
            trainer={"policy": {"fsdp_config": {"cpu_offload": True}}},
            generator={"inference_engine": {"enforce_eager": True}},
        ),
    )
    found = differences(shape_of_spec(plain, True), shape_of_spec(offloaded, True))
    assert [(d.kind, d.field, d.smoke, d.large) for d in found] == [
        ("memory", "engine eager mode", False, True),
        ("memory", "policy CPU offload", False, True),
    ]


def test_placement_difference_is_named() -> None:
    """Colocated and disaggregated roles differ in weight sync and memory: the one geometry field named."""
    colocated = h.spec(topo=h.topology(h.plan()))
    disaggregated = h.spec(topo=h.topology(h.plan(colocate_all=False), num_nodes=2))
    found = differences(shape_of_spec(colocated, True), shape_of_spec(disaggregated, True))
    assert found == [Difference("geometry", "placement", "colocated", "disaggregated")]


def test_before_its_smoke_ran_the_plan_says_so_and_previews_the_smoke_as_declared() -> None:
    from rlaunch.judgement.judge import SmokeEvidence
    from rlaunch.skyrl.views.plan_view import parity_lines

    prefix = "/nonexistent-prefix"
    smoke = skyrl_step(h.spec(name="checkpoints/smoke", topo=h.topology()), h.iris(), export_hf=True)
    large = h.spec(topo=h.topology(), runtime=SkyRLRuntime("fsdp"), tree=h.recipe(trainer={"resume_mode": "none"}))
    not_run = f"smoke gate: {smoke.identity}; the declared smoke {smoke.identity} has not run; launch it and check it with rlaunch verify-smoke"

    def lines_for(spec: Any) -> list[str]:
        step = skyrl_step(spec, h.iris(), export_hf=True, smoke=smoke)
        return parity_lines(*h.planned_view_of(step, prefix), h.launch_of(smoke, prefix), SmokeEvidence(smoke.identity))

    assert lines_for(large) == [
        not_run,
        "  as declared, it differs from this launch in 1 field(s) (its run would fail parity):",
        "  [checkpoint] resume_mode: smoke 'latest', large 'none'",
    ]
    assert lines_for(h.spec(topo=h.topology())) == [not_run, "  as declared, it has this launch's shape"]


def test_the_parity_table_is_one_table_naming_every_kind_compared() -> None:
    """The module docstring's table is the concepts page's, row for row, and has a row per kind compared."""
    from pathlib import Path

    from rlaunch.judgement import parity

    def rows(text: str) -> list[str]:
        """The table's lines: from its header to the first line that is not a row."""
        lines = text[text.index("| kind | fields compared |") :].splitlines()
        return lines[: next(i for i, line in enumerate(lines) if not line.startswith("|"))]

    page = (Path(__file__).resolve().parents[2] / "docs" / "concepts.md").read_text(encoding="utf-8")
    assert parity.__doc__ is not None and rows(page) == rows(parity.__doc__)
    kinds = {row.split("|")[1].strip().replace("-", "") for row in rows(parity.__doc__)[2:]}
    assert kinds == {*parity.KINDS, "entrypoint"}
