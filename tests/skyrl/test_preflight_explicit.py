"""Explicitness: W&B identity, checkpoint/resume/export policy, the token budget against the model.

The model facts come from the model step's stored record: a real record is written by running a
model step into the test's prefix.
"""

from __future__ import annotations

import pytest

from rlaunch.artifacts import ArtifactStep, Runner, StepContext
from rlaunch.skyrl import HfModel, ModelFacts, PreflightError, skyrl_step
from rlaunch.skyrl.plan.stored_facts import stored_model
from tests.support.specs import (
    BASE_RECIPE,
    DAY,
    REVISION,
    WANDB_RECIPE,
    assert_useful,
    codes,
    iris,
    local,
    only,
    planned,
    recipe,
    seed_topology,
    spec,
    violations,
    without,
)


def test_wandb_logger_needs_an_explicit_project() -> None:
    found = violations(seed_topology(), recipe(trainer={"logger": "wandb"}))
    v = only(found, "explicit.wandb_project")
    assert v.fields == ("config_yaml.trainer.project_name",)
    assert_useful(v, "does not name trainer.project_name")
    assert violations(seed_topology(), WANDB_RECIPE) == []
    explicit_default = recipe(trainer={"logger": "wandb", "project_name": "skyrl"})
    assert "explicit.wandb_project" not in [x.code for x in violations(seed_topology(), explicit_default)]


def test_wandb_logger_needs_an_entity_on_the_execution() -> None:
    s = spec(tree=WANDB_RECIPE)
    with pytest.raises(PreflightError) as info:
        planned(s, iris(wandb_entity=None))
    assert info.value.code == "explicit.wandb_entity"
    assert info.value.fields == ("execution.wandb_entity",)
    assert "IrisSkyRLExecution(wandb_entity=...)" in info.value.fix
    with pytest.raises(PreflightError, match="explicit.wandb_entity"):
        planned(s, local())
    assert planned(s, iris(wandb_entity="my-lab")).name == s.name
    # The console logger needs no W&B identity at all.
    assert planned(spec(), local()).name == s.name


@pytest.mark.parametrize(
    ("key", "code", "what"),
    [
        ("trainer.ckpt_interval", "explicit.checkpoint_interval", "resumable checkpoint"),
        ("trainer.resume_mode", "explicit.resume_mode", "resumes"),
        ("trainer.hf_save_interval", "explicit.export_policy", "export policy"),
        ("trainer.max_prompt_length", "explicit.token_budget", "token budget"),
        ("generator.sampling_params.max_generate_length", "explicit.token_budget", "token budget"),
    ],
)
def test_policy_settings_must_be_explicit(key: str, code: str, what: str) -> None:
    found = violations(seed_topology(), without(BASE_RECIPE, key))
    assert codes(found) == [code]
    assert found[0].fields == (f"config_yaml.{key}",)
    assert_useful(found[0], f"{key} is not set explicitly", what)
    assert f"set {key}" in found[0].fix


def test_token_budget_within_the_model_context_length() -> None:
    # 1024 prompt + 3072 response = 4096 tokens for a 4000-token model.
    v = only(violations(seed_topology(), model=ModelFacts(context_length=4000)), "model.context_budget")
    assert v.fields == (
        "config_yaml.trainer.max_prompt_length",
        "config_yaml.generator.sampling_params.max_generate_length",
    )
    assert_useful(v, "= 4096 exceeds the model's context length 4000")
    assert "at most 4000" in v.fix
    assert violations(seed_topology(), model=ModelFacts(context_length=4096)) == []
    assert violations(seed_topology(), model=ModelFacts()) == []  # unknown: nothing to check


def test_inference_tp_divides_the_attention_heads() -> None:
    topo = seed_topology(inference_engine_tensor_parallel_size=8, inference_engine_data_parallel_size=1)
    v = only(violations(topo, model=ModelFacts(num_attention_heads=12)), "model.tp_heads")
    assert v.fields == ("role_plan.inference_engine_tensor_parallel_size",)
    assert_useful(v, "TP=8", "12 attention heads")
    assert v.fix.endswith(": [1, 2, 4]")  # 3, 6 and 12 divide the heads, but no 8-GPU node
    assert violations(topo, model=ModelFacts(num_attention_heads=32)) == []


def _built_model(prefix: str, *, context_length: int, heads: int) -> ArtifactStep[HfModel]:
    """A model step actually run into `prefix`, so its record carries the architecture facts."""

    def build(ctx: StepContext) -> dict:
        return {"output_path": ctx.output_path, "heads": heads, "context_length": context_length}

    def run(config: dict) -> HfModel:
        return HfModel(
            path=config["output_path"],
            num_attention_heads=config["heads"],
            context_length=config["context_length"],
            files={"config.json": "0" * 64},
        )

    step = ArtifactStep(name="models/tiny", version=DAY, artifact_type=HfModel, run=run, build_config=build)
    Runner(prefix, report=lambda _: None).run([step])
    return step


def test_spec_reads_the_model_record_for_context_length_and_heads(prefix: str) -> None:
    model = _built_model(prefix, context_length=2048, heads=12)
    topo = seed_topology(inference_engine_tensor_parallel_size=8, inference_engine_data_parallel_size=1)
    with pytest.raises(PreflightError) as info:
        planned(spec(model=model, topo=topo))
    assert sorted(info.value.codes) == ["model.context_budget", "model.tp_heads"]
    budget = [v for v in info.value.violations if v.code == "model.context_budget"][0]
    assert "4096 exceeds the model's context length 2048" in budget.message
    # A budget inside the recorded context and a TP dividing the heads pass.
    ok = recipe(trainer={"max_prompt_length": 512}, generator={"sampling_params": {"max_generate_length": 1536}})
    assert stored_model(spec(model=model, tree=ok, topo=seed_topology()).model).facts == ModelFacts(
        num_attention_heads=12, context_length=2048, tokenizer_revision=REVISION
    )


def test_an_unbuilt_model_has_no_facts_to_check() -> None:
    s = spec(
        model=ArtifactStep(
            name="models/unbuilt", version=DAY, artifact_type=HfModel, run=lambda c: None, build_config=lambda ctx: {}
        )
    )
    assert stored_model(s.model).facts == ModelFacts(tokenizer_revision=REVISION)


def test_model_facts_reach_the_launch_document(prefix: str) -> None:
    model = _built_model(prefix, context_length=8192, heads=32)
    step = skyrl_step(spec(model=model), iris())
    document = step.build_config(StepContext.for_run(step, prefix))["launch_document"]
    assert document["inputs"]["model"]["context_length"] == 8192
    assert document["inputs"]["model"]["num_attention_heads"] == 32
    # ... but never its identity: the fingerprint document holds placeholders for them.
    assert step.fingerprint_config["launch_document"]["inputs"]["model"]["context_length"] is None
