"""A smoke rehearses its launch only on the same model architecture, accelerator, algorithm and
token lengths: a 0.6B smoke for an 8B launch, an A100 smoke for an H100 launch, an rloo smoke for
a grpo launch and a 256-token smoke for a 3072-token launch each fail parity, the field named
alike by `differences`, the judgement, the plan's smoke gate and `rlaunch parity`. Scale, and the
same architecture under another name or version, may differ."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep
from rlaunch.cli.parity_command import parity
from rlaunch.cli.plan_text import step_lines
from rlaunch.judgement.parity import Difference, differences, shape_of_document, shape_of_planned
from rlaunch.launch_config import schema
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.runs.run_record import update_attempt
from rlaunch.skyrl import HfModel, skyrl_step
from rlaunch.skyrl.plan import planning
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
from tests.support import specs as h
from tests.support.refusals import run_refusals

pytestmark = pytest.mark.parity

# Qwen/Qwen3-8B's and Qwen/Qwen3-0.6B's config.json (their model cards): one family, two sizes.
QWEN3_8B: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "head_dim": 128,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "max_position_embeddings": 40960,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
QWEN3_0_6B = QWEN3_8B | {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "tie_word_embeddings": True,
}
SMOKE = "checkpoints/gsm8k-grpo-smoke"


def model(name: str, config: dict[str, Any] | None = QWEN3_8B, version: str = h.DAY) -> ArtifactStep[HfModel]:
    """A model step declaring its config.json (what planning reads before it is built)."""
    return ArtifactStep(
        name=name,
        version=version,
        artifact_type=HfModel,
        run=lambda c: None,
        build_config=lambda ctx: {"source": f"hf://{name}", "config": config},
    )


def smoke_step(**changes: Any) -> SkyRLArtifactStep:
    """The launch's shape at its smallest (one policy node, one node-sized TP1 x DP8 engine), then `changes`."""
    plan = h.seed_plan(policy_num_nodes=1, num_inference_engines=1, train_batch_size=16, policy_mini_batch_size=8)
    values: dict[str, Any] = dict(name=SMOKE, model=model("models/qwen3-8b"), topo=h.topology(plan, num_nodes=2))
    return skyrl_step(h.spec(**(values | changes)), h.iris(), export_hf=True, is_smoke=True)


def large_step(smoke: SkyRLArtifactStep | None) -> SkyRLArtifactStep:
    """The seed's 64-GPU run of Qwen3-8B on H100, grpo, 1024 + 3072 tokens."""
    return skyrl_step(h.spec(model=model("models/qwen3-8b")), h.iris(), export_hf=True, smoke=smoke)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    smoke: dict[str, Any]  # the smoke's spec changes
    named: Difference  # one of the differences found


def _tokens(generate: int) -> dict[str, Any]:
    return h.recipe(generator={"sampling_params": {"max_generate_length": generate}})


CASES = (
    Case(
        "0.6B-smoke-for-8B",
        {"model": model("models/qwen3-0.6b", QWEN3_0_6B)},
        Difference("model", "hidden size", 1024, 4096),
    ),
    Case(
        "A100-smoke-for-H100",
        {"topo": dataclasses.replace(smoke_step().spec.topology, gpu_variant="A100-80GB")},
        Difference("accelerator", "accelerator type", "A100-80GB", "H100"),
    ),
    Case(
        "rloo-smoke-for-grpo",
        {"tree": h.recipe(trainer={"algorithm": {"advantage_estimator": "rloo"}})},
        Difference("algorithm", "advantage estimator", "rloo", "grpo"),
    ),
    Case("256-token-smoke-for-3072", {"tree": _tokens(256)}, Difference("lengths", "max generate length", 256, 3072)),
)


def _stored(step: SkyRLArtifactStep, prefix: str) -> None:
    """A succeeded attempt of `step` in storage with the document it ran (as its RL step records them)."""
    document = h.launch_of(step, prefix).document
    url = storage.join(prefix, f"{step.name.replace('/', '-')}-ran.yaml")
    storage.write_text_atomic(url, schema.dumps(document))
    update_attempt(document.artifacts.output_path, document.run.id, "ran-1", {
        "state": "succeeded",
        "runtime_digest": document.runtime.source_digest,
        "launch_document_uri": url,
    })  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_fails_parity_naming_its_field_everywhere(case: Case, prefix: str) -> None:
    smoke = smoke_step(**case.smoke)
    large = large_step(smoke)
    found = differences(shape_of_planned(h.launch_of(smoke, prefix)), shape_of_planned(h.launch_of(large, prefix)))
    assert case.named in found, found

    _stored(smoke, prefix)
    words = f"smoke: parity with smoke {smoke.identity}: {case.named.line()}"
    assert words in run_refusals(h.launch_of(large, prefix).document, "smoke")
    plan = step_lines(planning.plan([large], prefix), large)
    assert any(line.startswith(f"smoke gate: {smoke.identity}; parity FAILS with the run it stored") for line in plan)
    assert f"  {case.named.line()}" in plan

    _stored(large, prefix)
    done = CliRunner().invoke(parity, [smoke.identity, large.identity, "--prefix", prefix])
    assert done.exit_code == 1, done.output
    assert f"  {case.named.line()}" in done.output.splitlines()


def test_the_smallest_smoke_of_the_same_model_accelerator_algorithm_and_lengths_rehearses(prefix: str) -> None:
    """Scale differs (2 nodes for 8, batches, engines); nothing a smoke must rehearse does."""
    smoke = smoke_step()
    _stored(smoke, prefix)
    large = large_step(smoke)
    refused = run_refusals(h.launch_of(large, prefix).document, "smoke")
    assert refused and not [line for line in refused if "parity" in line]  # verify-smoke's files are absent here
    plan = step_lines(planning.plan([large], prefix), large)
    assert (
        f"smoke gate: {smoke.identity}; parity holds with the run it stored (--run also needs its verify-smoke PASS)"
        in plan
    )


@pytest.mark.parametrize(
    "other",
    [
        model("models/qwen3-8b-base", QWEN3_8B),  # another name
        model("models/qwen3-8b", QWEN3_8B, version="2026.12.01"),  # another version
        model("models/qwen3-8b-renamed", QWEN3_8B | {"architectures": ["Other"], "torch_dtype": "float16"}),
    ],
    ids=["name", "version", "facts-not-compared"],
)
def test_the_same_architecture_under_another_name_or_version_rehearses(
    other: ArtifactStep[HfModel], prefix: str
) -> None:
    smoke, large = h.launch_of(smoke_step(model=other), prefix), h.launch_of(large_step(None), prefix)
    assert [d for d in differences(shape_of_planned(smoke), shape_of_planned(large)) if d.kind == "model"] == []


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"num_key_value_heads": 4}, Difference("model", "KV heads", 4, 8)),
        ({"vocab_size": 32000}, Difference("model", "vocabulary", 32000, 151936)),
        ({"model_type": "qwen2"}, Difference("model", "family", "qwen2", "qwen3")),
        ({"num_hidden_layers": 35}, Difference("model", "layers", 35, 36)),
        ({"num_attention_heads": 64, "head_dim": 64}, Difference("model", "attention heads", 64, 32)),
        ({"intermediate_size": 12289}, Difference("model", "MLP width", 12289, 12288)),
    ],
    ids=["kv-heads", "vocabulary", "family", "layers", "heads", "mlp"],
)
def test_each_architecture_fact_is_compared(changed: dict[str, Any], named: Difference, prefix: str) -> None:
    smoke = h.launch_of(smoke_step(model=model("models/other", QWEN3_8B | changed)), prefix)
    found = differences(shape_of_planned(smoke), shape_of_planned(h.launch_of(large_step(None), prefix)))
    assert named in found and {d.kind for d in found} == {"model"}, found


def test_models_without_a_readable_architecture_are_compared_by_name(prefix: str) -> None:
    """A model records no config.json (or one of a family not read here) on either side: its name decides."""
    large = h.launch_of(skyrl_step(h.spec(model=model("models/a", None)), h.iris(), export_hf=True), prefix)
    for smoke_model, found in [
        (model("models/a", None, version="2026.12.01"), []),  # another version of it
        (model("models/b", None), [Difference("model", "artifact", "models/b", "models/a")]),
        (model("models/a", QWEN3_8B), []),  # only one side records an architecture
        (
            model("models/b", QWEN3_8B | {"model_type": "mamba"}),
            [Difference("model", "artifact", "models/b", "models/a")],
        ),
    ]:
        smoke = h.launch_of(smoke_step(model=smoke_model), prefix)
        assert [d for d in differences(shape_of_planned(smoke), shape_of_planned(large)) if d.kind == "model"] == found


@pytest.mark.parametrize(
    ("smoke_changes", "named"),
    [
        ({"topo": h.topology(h.plan(colocate_all=False), num_nodes=2, gpu_variant="h100")}, None),
        (
            {"tree": h.recipe(trainer={"algorithm": {"use_kl_loss": False}})},
            Difference("algorithm", "KL loss", False, True),
        ),
        (
            {"tree": h.recipe(trainer={"algorithm": {"use_kl_in_reward": True}})},
            Difference("algorithm", "KL in reward", True, False),
        ),
        (
            {"tree": h.recipe(trainer={"algorithm": {"policy_loss_type": "gspo"}})},
            Difference("algorithm", "policy loss", "gspo", "regular"),
        ),
        ({"tree": h.recipe(trainer={"max_prompt_length": 256})}, Difference("lengths", "max prompt length", 256, 1024)),
    ],
    ids=["accelerator-by-its-table-name", "kl-loss", "kl-in-reward", "policy-loss", "prompt-length"],
)
def test_the_algorithm_and_lengths_are_compared_key_by_key(
    smoke_changes: dict[str, Any], named: Difference | None, prefix: str
) -> None:
    smoke = h.launch_of(smoke_step(**smoke_changes), prefix)
    found = differences(shape_of_planned(smoke), shape_of_planned(h.launch_of(large_step(None), prefix)))
    assert [d for d in found if d.kind in ("accelerator", "algorithm", "lengths")] == ([named] if named else [])


def test_every_shipped_experiments_smoke_rehearses_its_launch(prefix: str) -> None:
    from experiments import cpu_scaled, rl_plan_example
    from rlaunch.artifacts import BuildContext, VersionCodex, build_context

    with build_context(BuildContext(VersionCodex(h.DAY, {}))):
        launches = [rl_plan_example.rl_step(broken=False), cpu_scaled.scaled_step(slots=1), cpu_scaled.scaled_step(2)]
    for large in launches:
        assert large.smoke is not None
        smoke = shape_of_planned(h.launch_of(large.smoke, prefix))
        assert differences(smoke, shape_of_planned(h.launch_of(large, prefix))) == [], large.identity


# config.json key -> the parity field that compares it
FACTS = {
    "num_hidden_layers": "layers",
    "hidden_size": "hidden size",
    "num_attention_heads": "attention heads",
    "num_key_value_heads": "KV heads",
    "vocab_size": "vocabulary",
    "intermediate_size": "MLP width",
}
_architecture = st.fixed_dictionaries({key: st.sampled_from((8, 16, 32, 4096)) for key in FACTS})


@functools.cache
def _planned() -> SkyRLLaunchConfig:
    return h.launch_of(large_step(None), "/nonexistent-prefix").document


def _with_model(config: dict[str, Any], name: str) -> SkyRLLaunchConfig:
    """The large launch's document with another model: `config` over Qwen3-8B's, named `name`."""
    planned = _planned()
    model = dataclasses.replace(planned.inputs.model, hf_config=QWEN3_8B | config, identity=f"{name}@{h.DAY}:f")
    return dataclasses.replace(planned, inputs=dataclasses.replace(planned.inputs, model=model))


@settings(max_examples=60, deadline=None)
@given(smoke=_architecture, large=_architecture)
def test_the_model_fields_named_are_exactly_the_architecture_facts_that_differ(
    smoke: dict[str, int], large: dict[str, int]
) -> None:
    """Whatever the two architectures (and their names), the model differences are the facts that differ."""
    found = differences(
        shape_of_document(_with_model(smoke, "models/smoke")), shape_of_document(_with_model(large, "models/large"))
    )
    assert {d.field for d in found} == {FACTS[key] for key in FACTS if smoke[key] != large[key]}
    assert {d.kind for d in found} <= {"model"}
