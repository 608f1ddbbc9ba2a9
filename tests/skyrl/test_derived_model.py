"""A model built inside the graph (SFT, a merge) carries its architecture: the dry run judges it.

An RL step that trains an SFT step's output reads the SFT model's facts from what its step declares
(`FromBase`: the base model's, `FromConfig`: a config.json), so every model rule refuses the same
mistakes it refuses without the SFT step; the built model's own config.json must then agree with
the declaration, or its step fails naming both; a derived model that declares nothing is said so.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, Directory, RunFailedError, Runner, StepContext, records
from rlaunch.judgement.judge import NOTE, REFUSED, WAIVED, Authorisations, Evidence, judge, large
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config import schema
from rlaunch.skyrl import ArtifactHfModel, HfModel, PreflightError, skyrl_step
from rlaunch.skyrl.plan.stored_facts import stored_model
from rlaunch.sources.inputs import FromBase, FromConfig
from rlaunch.sources.model_facts import ModelFacts, architecture_differences
from tests.support.specs import (
    DAY,
    LLAMA_31_8B,
    LLAMA_31_70B,
    REVISION,
    iris,
    launch_of,
    planned,
    seed_topology,
    spec,
    topology,
)

SMALL_CONTEXT = {**LLAMA_31_8B, "max_position_embeddings": 2048}
TWELVE_HEADS = {**LLAMA_31_8B, "num_attention_heads": 12, "num_key_value_heads": 4, "hidden_size": 3072}

# (the base model's config.json, the engines' TP, the code the dry run refuses with)
MISTAKES = {
    "a response beyond the context": (SMALL_CONTEXT, 1, "model.context_budget"),
    "an engine TP that does not divide the heads": (TWELVE_HEADS, 8, "model.tp_heads"),
    "a 70B model that cannot fit": (LLAMA_31_70B, 1, "memory.engine_weights"),
}


def base_step(config: dict[str, Any] | None, name: str = "models/base") -> ArtifactStep[HfModel]:
    """A pinned base model that declares its config.json (as `hf_model_source(config=...)` does)."""
    return ArtifactStep(
        name=name,
        version=DAY,
        artifact_type=HfModel,
        run=lambda c: HfModel(path=c["output_path"], hf_config=c.get("config")),
        build_config=lambda ctx: {"output_path": ctx.output_path, **({"config": config} if config else {})},
    )


def sft_step(
    base: ArtifactStep[HfModel], architecture: FromBase | FromConfig | None, built: dict[str, Any] | None = None
) -> ArtifactStep[HfModel]:
    """An SFT step of `base`; run, it writes `built` (else the declared config.json) as its config.json."""
    data = ArtifactStep(
        name="data/sft", version=DAY, artifact_type=Directory, run=lambda c: None, build_config=lambda ctx: {}
    )

    def build(ctx: StepContext) -> dict[str, Any]:
        declared = architecture.declaration(ctx) if architecture else {}
        return {"output_path": ctx.output_path, "base": ctx.artifact_path(base), "steps": 10, **declared}

    def run(config: dict[str, Any]) -> HfModel:
        own = built if built is not None else config.get("config")
        os.makedirs(config["output_path"], exist_ok=True)
        with open(os.path.join(config["output_path"], "config.json"), "w", encoding="utf-8") as handle:
            json.dump(own, handle)
        return HfModel(path=config["output_path"], hf_config=own)

    return ArtifactStep(
        name="models/sft", version=DAY, artifact_type=HfModel, run=run, build_config=build, deps=(base, data)
    )


def refused_codes(model: ArtifactStep[HfModel], tp: int) -> set[str]:
    topo = seed_topology(inference_engine_tensor_parallel_size=tp, inference_engine_data_parallel_size=8 // tp)
    with pytest.raises(PreflightError) as refused:
        planned(spec(model=model, topo=topo))
    return set(refused.value.codes)


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_an_sft_models_plan_is_refused_with_the_codes_of_its_base(mistake: str, prefix: str) -> None:
    config, tp, code = MISTAKES[mistake]
    base = base_step(config)
    without_sft = refused_codes(base, tp)
    assert code in without_sft
    assert refused_codes(sft_step(base, FromBase(base)), tp) == without_sft
    assert refused_codes(sft_step(base, FromConfig(config)), tp) == without_sft


def test_the_declared_base_is_read_as_built_once_it_is(prefix: str) -> None:
    """A base that declares nothing but has been built: the SFT model keeps the config.json it recorded."""
    base = base_step(None)
    sft = ArtifactHfModel(sft_step(base, FromBase(base)), tokenizer_revision=REVISION)
    assert stored_model(sft).config is None
    records.write_record(base.path(prefix), {"result": {"hf_config": LLAMA_31_8B}})
    assert stored_model(sft).config == LLAMA_31_8B
    assert stored_model(sft).facts.num_attention_heads == 32


def test_a_declaration_that_is_not_a_config_is_refused_naming_it() -> None:
    with pytest.raises(TypeError) as refused:
        FromConfig("config.json")  # type: ignore[arg-type]
    assert str(refused.value) == "FromConfig.config must be the config.json as a dict, got str"


def test_a_base_outside_the_steps_dependencies_is_refused() -> None:
    base, other = base_step(LLAMA_31_8B), base_step(LLAMA_31_8B, name="models/other")
    with pytest.raises(ValueError, match="models/other@2026.11.30 is not a declared dependency of models/sft"):
        _ = sft_step(base, FromBase(other)).fingerprint_config  # its identity: the declaration reads the base


def run_failure(step: ArtifactStep[HfModel], prefix: str) -> str:
    with pytest.raises(RunFailedError) as caught:
        Runner(prefix, report=lambda _: None).run([step])
    (outcome,) = [o for o in caught.value.failed if o.identity == step.identity]
    assert not records.is_succeeded(step.path(prefix))  # never served as built
    return str(outcome.error)


def test_a_built_model_whose_config_differs_from_its_declaration_fails_its_step(prefix: str) -> None:
    base = base_step(LLAMA_31_8B)
    error = run_failure(sft_step(base, FromBase(base), built={**LLAMA_31_8B, "num_hidden_layers": 16}), prefix)
    assert f"the model built at {storage.join(prefix, 'models/sft', DAY)} " in error
    assert (
        "than the architecture of its base models/base@2026.11.30 (FromBase) (num_hidden_layers: declared 32, built 16)"
        in error
    )
    error = run_failure(sft_step(base, FromConfig(LLAMA_31_70B), built=LLAMA_31_8B), prefix)
    assert "than the config.json its step declares (" in error
    assert "hidden_size: declared 8192, built 4096; intermediate_size: declared 28672, built 14336" in error


def test_what_the_rules_do_not_read_may_differ_and_the_step_is_built(prefix: str) -> None:
    base = base_step(LLAMA_31_8B)
    built = {**LLAMA_31_8B, "_name_or_path": "/tmp/sft", "transformers_version": "4.57.0", "use_cache": False}
    sft = sft_step(base, FromBase(base), built=built)
    Runner(prefix, report=lambda _: None).run([sft])
    assert records.is_succeeded(sft.path(prefix))


def test_a_changed_dtype_is_an_architecture_change(prefix: str) -> None:
    base = base_step(LLAMA_31_8B)
    error = run_failure(sft_step(base, FromBase(base), built={**LLAMA_31_8B, "torch_dtype": "float32"}), prefix)
    assert "(torch_dtype: declared 'bfloat16', built 'float32')" in error


def test_a_derived_model_that_declares_nothing_is_said_in_the_plan_and_refuses_a_large_launch(prefix: str) -> None:
    base = base_step(LLAMA_31_70B)
    sft = sft_step(base, None)
    # The 70B model that cannot fit is not seen: no model rule can judge what nothing declares.
    launch = launch_of(skyrl_step(spec(model=sft), iris(), export_hf=True))
    said = (
        "models/sft@2026.11.30 is a derived model (built from models/base@2026.11.30) whose "
        "step declares no architecture; declare it in the step's build config, FromBase(<the model it is built from>) "
        "or FromConfig(<its config.json>), so the context, heads and memory rules judge it before it is built"
    )
    assert launch.memory.unsized == (f"cannot size the model: {said}",)
    (finding,) = [f for f in judge(launch, Evidence(), Authorisations()) if f.gate == "memory"]
    assert finding.status == REFUSED and said in finding.message
    assert finding.message.startswith("this is a large launch (it allocates 8 nodes")
    # The host judges the document it is handed: the YAML carries the reason, and the same finding.
    handed = PlannedLaunch.of(schema.from_dict(yaml.safe_load(schema.dumps(launch.document))))
    assert handed.memory.unsized == launch.memory.unsized
    assert judge(handed, Evidence(), Authorisations()) == judge(launch, Evidence(), Authorisations())
    waived = judge(launch, Evidence(), Authorisations(waivers={"memory": "sized by hand"}))
    assert [f.status for f in waived if f.gate == "memory"] == [WAIVED]
    small = launch_of(skyrl_step(spec(model=sft, topo=topology()), iris(), export_hf=True))
    assert large(small) is None
    assert [f.status for f in judge(small, Evidence(), Authorisations()) if f.gate == "memory"] == [NOTE]


def test_a_declared_or_underived_model_is_not_said_undeclared(prefix: str) -> None:
    base = base_step(LLAMA_31_8B)
    tokenizer = ArtifactStep(name="tokenizers/t", version=DAY, artifact_type=Directory, run=lambda c: None,
                             build_config=lambda ctx: {})  # fmt: skip
    from_a_tokenizer = ArtifactStep(
        name="models/fresh",
        version=DAY,
        artifact_type=HfModel,
        run=lambda c: None,
        build_config=lambda ctx: {"tokenizer": ctx.artifact_path(tokenizer)},
        deps=(tokenizer,),
    )  # built from no model (the CPU smoke's fresh tiny model): not derived
    for model in (base, base_step(None, name="models/plain"), sft_step(base, FromBase(base)), from_a_tokenizer):
        launch = launch_of(skyrl_step(spec(model=model), iris(), export_hf=True))
        assert launch.document.inputs.model.unsized_reason is None
        assert not [f for f in judge(launch, Evidence(), Authorisations()) if f.gate == "memory"]
    rl_run = skyrl_step(spec(model=base), iris(), export_hf=True)  # an RL run's policy: not an HfModel step
    assert stored_model(ArtifactHfModel(rl_run, tokenizer_revision=REVISION)).unsized_reason is None


def sft_of_llama_70b() -> ArtifactStep[HfModel]:
    """A derived model step `rlaunch fit --model` names (`module:attr`)."""
    base = base_step(LLAMA_31_70B)
    return sft_step(base, FromBase(base))


def test_fit_sizes_a_derived_model_by_its_declaration() -> None:
    from rlaunch.cli.fit_command import _model_step

    assert _model_step(f"{__name__}:sft_of_llama_70b").config == LLAMA_31_70B


@given(
    key=st.sampled_from(sorted(LLAMA_31_8B)),
    value=st.one_of(st.integers(-2, 1 << 20), st.sampled_from(["float32", "qwen3", "mixtral"]), st.booleans()),
)
def test_a_difference_is_named_with_both_values_exactly_when_the_facts_differ(key: str, value: Any) -> None:
    built = {**LLAMA_31_8B, key: value}
    found = architecture_differences(LLAMA_31_8B, built)
    same = ModelFacts.from_hf_config(built) == ModelFacts.from_hf_config(LLAMA_31_8B)
    assert found == ([] if same else [f"{key}: declared {LLAMA_31_8B[key]!r}, built {value!r}"])


def test_the_learning_examples_rl_step_is_sized_before_its_warm_start_is_built(prefix: str) -> None:
    """The CPU `sft -> rl -> eval` example: its RL step trains the SFT step's output, which declares its
    base (`FromBase`), whose step declares the config.json it writes (`FromConfig`), so the dry run
    of an empty prefix has the RL step's memory rows although neither model exists yet."""
    from click.testing import CliRunner

    from experiments.learning import main

    done = CliRunner().invoke(main, ["--version", DAY, "--plan-format", "json"])
    assert done.exit_code == 0, done.output
    plan = json.loads(done.stdout)
    assert not any(step["action"] == "served" for step in plan["steps"])  # nothing is built yet
    memory = plan["facts"][f"learning/rl@{DAY}"]["memory"]
    assert {(row["role"], row["phase"]) for row in memory["rows"]} >= {
        ("policy", "model states"),
        ("policy", "training step"),
    }
    assert all(row["status"] == "ok" for row in memory["rows"])
