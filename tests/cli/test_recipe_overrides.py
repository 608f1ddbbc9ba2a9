"""`--set dotted.key=value`: recipe overrides from the shell, refused before anything is built
unless they are knobs of the runtime's base config; kept in the fingerprint, the plan, the launch
document and (end to end: tests/launch/test_smoke.py) the run record and the trainer's log."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from experiments import smoke
from rlaunch.artifacts import ArtifactStep
from rlaunch.artifacts.judged import judged, replay_check
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.cli import build_options
from rlaunch.dotted import set_path
from rlaunch.launch_config.schema import from_dict
from rlaunch.launch_config.typed import DocumentError
from rlaunch.skyrl.values.overrides import RecipeOverride, RecipeOverrideError, parse
from tests.support.written_files import written

DAY = "2026.12.07"
LR = "trainer.policy.optimizer_config.lr"


def _smoke(*args: str) -> Any:
    return CliRunner().invoke(smoke.main, ["--version", DAY, *args])


def _rl_fingerprint(*args: str) -> str:
    done = _smoke("--plan-format", "json", *args)
    assert done.exit_code == 0, done.output
    (step,) = [s for s in json.loads(done.stdout)["steps"] if s["identity"] == f"smoke/rl@{DAY}"]
    return str(step["fingerprint"])


# --- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (f"{LR}=2e-6", 2e-6),
        ("trainer.use_sample_packing=true", True),
        ("trainer.eval_interval=8", 8),
        ("trainer.policy.optimizer_config.scheduler=constant", "constant"),
        ("trainer.eval_interval='8'", "8"),  # quoted: the string
        ("trainer.project_name=yes", "yes"),  # YAML 1.2: not a bool
        ("trainer.project_name=2026-12-07", "2026-12-07"),  # not a date
        ("trainer.critic.model.path=null", None),
        ("generator.sampling_params.stop=[a, b]", "[a, b]"),  # not a scalar: its text
        ("a.b=x=y", "x=y"),  # the first = splits
    ],
)
def test_a_value_is_read_as_one_yaml_scalar(raw: str, value: Any) -> None:
    override = parse(raw)
    assert override.key == raw.partition("=")[0]
    assert override.value == value and type(override.value) is type(value)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("trainer.policy.optimizer_config.lr", "is not KEY=VALUE"),
        ("=2e-6", "is not KEY=VALUE"),
        ("trainer..lr=1", "is not a dotted recipe key"),
        ("trainer.lr.=1", "is not a dotted recipe key"),
        (f"{LR}=", f"{LR} has no value"),
        (f"{LR}= ", f"{LR} has no value"),
        ("trainer.eval_interval=010", "leading zero"),
        (f"{LR}=.nan", "NaN and infinity are not allowed"),
    ],
)
def test_a_malformed_setting_is_refused_saying_why(raw: str, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse(raw)
    assert words in str(caught.value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_any_finite_float_written_by_python_reads_back_as_that_float(x: float) -> None:
    value = parse(f"{LR}={x!r}").value
    assert isinstance(value, float) and (value == x or (math.isclose(value, x) and x == 0))


@given(st.integers(min_value=-(10**18), max_value=10**18))
def test_any_integer_reads_back_as_that_integer(n: int) -> None:
    value = parse(f"trainer.eval_interval={n}").value
    assert type(value) is int and value == n


def test_help_says_how_a_value_is_read() -> None:
    text = " ".join(_smoke("--help").output.split())
    assert "--set KEY=VALUE" in text
    assert (
        "VALUE is read as a YAML scalar: 2e-6 a float, true a bool, 8 an int, null none, anything else a string" in text
    )


# --- refusals, before anything is built, the same in the plan and at --run ----------------------


@pytest.mark.parametrize("run", [False, True], ids=["plan", "run"])
def test_a_key_the_role_plan_renders_is_refused_naming_the_role_plan_field(prefix: str, run: bool) -> None:
    done = _smoke("--set", "trainer.micro_train_batch_size_per_gpu=4", *(["--run"] if run else []))
    assert done.exit_code == 2, done.output
    assert (
        "Invalid value for '--set': trainer.micro_train_batch_size_per_gpu=4: trainer.micro_train_batch_size_per_gpu "
        "is not a knob: rlaunch renders it from SkyRLRolePlan.micro_train_batch_size_per_gpu; change that instead"
    ) in done.output
    assert written(Path(prefix)) == []


def test_the_refusal_is_word_for_word_the_same_in_the_plan_and_at_run(prefix: str) -> None:
    args = ("--set", "generator.inference_engine.num_engines=2")
    assert _smoke(*args).output == _smoke(*args, "--run").output


@pytest.mark.parametrize(
    ("key", "source"),
    [
        ("trainer.placement.ref_num_nodes", "SkyRLRolePlan.policy_num_nodes"),  # derived from a plan field
        ("trainer.critic_mini_batch_size", "SkyRLRolePlan.critic.mini_batch_size"),
        ("trainer.seed", "SkyRLSpec.seed"),
        ("trainer.ckpt_path", "the RL artifact's checkpoint root"),
        ("trainer.fully_async.enabled", "the recipe's entrypoint"),
    ],
)
def test_every_key_rlaunch_sets_is_refused_naming_what_sets_it(prefix: str, key: str, source: str) -> None:
    done = _smoke("--set", f"{key}=1")
    assert done.exit_code == 2, done.output
    assert f"{key} is not a knob: rlaunch renders it from {source}" in done.output


@pytest.mark.parametrize(
    ("setting", "refusal"),
    [
        (
            "trainer.policy.optimizer_config.lrr=2e-6",
            "trainer.policy.optimizer_config.lrr=2e-06: trainer.policy.optimizer_config.lrr is not a key of the "
            "trl-cpu runtime's base config; nearest known keys: trainer.policy.optimizer_config.lr, ",
        ),
        ("trainer.logger=wandb", "trainer.logger=wandb: runtime 'trl-cpu' accepts only ['console']"),
    ],
    ids=["an-unknown-key-with-the-nearest-known-keys", "a-key-the-runtime-does-not-honour"],
)
def test_a_key_the_runtime_does_not_take_is_refused_at_the_command_line(
    prefix: str, setting: str, refusal: str
) -> None:
    done = _smoke("--set", setting)
    assert done.exit_code == 2, done.output
    assert refusal in done.output


def test_a_value_of_the_wrong_type_is_refused_naming_the_key(prefix: str) -> None:
    done = _smoke("--set", f"{LR}=fast")
    assert done.exit_code == 2, done.output
    assert f"{LR}=fast: {LR}='fast' must be a number" in done.output


def test_a_key_set_twice_is_refused(prefix: str) -> None:
    done = _smoke("--set", f"{LR}=2e-6", "--set", f"{LR}=3e-6")
    assert done.exit_code == 2, done.output
    assert f"{LR} is set twice; keep one --set {LR}=..." in done.output


@pytest.mark.parametrize(("option", "value"), [("--set", "{token}"), ("--sweep", "x,{token}")], ids=["set", "sweep"])
def test_a_credential_in_a_value_is_refused_and_never_echoed(prefix: str, option: str, value: str) -> None:
    token = "hf_" + "Ab1" * 12
    done = _smoke(option, "trainer.project_name=" + value.format(token=token))
    assert done.exit_code == 2, done.output
    assert "a Hugging Face token" in done.output and token not in done.output


@click.command()
@build_options
def no_rl_main() -> ArtifactStep[Any]:
    return smoke.tokenizer_step()


@pytest.mark.parametrize(
    ("option", "value", "told"), [("--set", "2e-6", "2e-06"), ("--sweep", "1e-3,2e-3", "0.001")], ids=["set", "sweep"]
)
def test_a_main_without_an_rl_step_refuses_set_and_sweep(prefix: str, option: str, value: str, told: str) -> None:
    done = CliRunner().invoke(no_rl_main, ["--version", DAY, option, f"{LR}={value}"])
    assert done.exit_code == 2, done.output
    assert f"{LR}={told}: no RL step reads it" in done.output
    assert written(Path(prefix)) == []


# --- what an override changes: the fingerprint, the plan, the document --------------------------


def test_an_override_changes_the_rl_fingerprint_and_one_equal_to_the_recipe_does_not(prefix: str) -> None:
    without = _rl_fingerprint()
    assert _rl_fingerprint("--set", f"{LR}=2e-6") != without
    # the smoke's recipe says lr 1.0e-3: set from the shell it is the same run (provenance is not identity)
    assert _rl_fingerprint("--set", f"{LR}=1.0e-3") == without


def test_the_plan_shows_each_override_and_the_json_plan_carries_them(prefix: str) -> None:
    args = ("--set", f"{LR}=2e-6", "--set", "trainer.policy.optimizer_config.weight_decay=0.01")
    text = _smoke(*args).output
    (row,) = [line for line in text.splitlines() if line.startswith("overrides ")]
    assert row.split(None, 1)[1] == f"--set {LR}=2e-06  --set trainer.policy.optimizer_config.weight_decay=0.01"
    assert not [line for line in _smoke().output.splitlines() if line.startswith("overrides ")]
    facts = json.loads(_smoke("--plan-format", "json", *args).stdout)["facts"][f"smoke/rl@{DAY}"]
    assert facts["recipe_overrides"] == {LR: 2e-6, "trainer.policy.optimizer_config.weight_decay": 0.01}


def _rl_document(overrides: dict[str, Any]) -> dict[str, Any]:
    """The RL step's launch document as its fingerprint reads it."""
    with build_context(BuildContext(VersionCodex(DAY), overrides)):
        step = smoke.rl_step(smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step(), 1, steps=4)
    document: dict[str, Any] = step.fingerprint_config["launch_document"]
    return document


def test_the_fingerprinted_document_runs_the_override_without_its_provenance(prefix: str) -> None:
    document = _rl_document({LR: 2e-6})
    assert document["skyrl"]["trainer"]["policy"]["optimizer_config"]["lr"] == 2e-6
    assert "recipe_overrides" not in document["run"]


def test_a_document_keeps_the_overrides_it_runs(document: dict[str, Any]) -> None:
    document["run"]["recipe_overrides"] = {LR: 2e-6}
    set_path(document["skyrl"], LR, 2e-6)
    assert from_dict(document).run.recipe_overrides == {LR: 2e-6}


@pytest.mark.parametrize(("ran", "said"), [(1e-3, "0.001"), (None, "absent"), (2, "2")])
def test_a_document_whose_provenance_is_not_what_it_runs_is_refused(
    document: dict[str, Any], ran: float | None, said: str
) -> None:
    document["run"]["recipe_overrides"] = {LR: 2.0}
    set_path(document["skyrl"], LR, ran)
    if ran is None:
        del document["skyrl"]["trainer"]["policy"]["optimizer_config"]["lr"]
    with pytest.raises(DocumentError) as caught:
        from_dict(document)
    assert f"run.recipe_overrides.{LR}=2.0 but skyrl.{LR} is {said}; set skyrl.{LR} to 2.0" in str(caught.value)


def test_a_spec_built_outside_a_main_has_no_overrides_and_one_built_inside_takes_them(prefix: str) -> None:
    with build_context(BuildContext(VersionCodex(DAY))):
        plain = smoke.rl_step(smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step(), 1, steps=4).spec
    assert plain.recipe_overrides == ()
    with build_context(BuildContext(VersionCodex(DAY), {LR: 2e-6})):
        set_ = smoke.rl_step(smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step(), 1, steps=4).spec
    assert set_.recipe_overrides == (RecipeOverride(LR, 2e-6),)
    assert set_.composed_recipe["trainer"]["policy"]["optimizer_config"]["lr"] == 2e-6


def test_a_spec_refuses_an_override_its_runtime_does_not_know(prefix: str) -> None:
    with (
        build_context(BuildContext(VersionCodex(DAY), {"trainer.policy.optimizer_config.lrr": 1.0})),
        pytest.raises(RecipeOverrideError, match=r"^trainer.policy.optimizer_config.lrr=1.0: "),
    ):
        smoke.rl_step(smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step(), 1, steps=4)


def _judged(overrides: dict[str, Any]) -> Any:
    with build_context(BuildContext(VersionCodex(DAY), overrides)):
        step = smoke.rl_step(smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step(), 1, steps=4)
        return judged([step], {})


def test_the_coordinator_replay_with_the_same_set_is_the_judged_graph_and_without_it_is_not(prefix: str) -> None:
    submitted = _judged({LR: 2e-6})
    assert replay_check(submitted, _judged({LR: 2e-6}), {}).problems() == []
    problems = replay_check(submitted, _judged({}), {}).problems()
    assert (
        f"the first field that differs is config.launch_document.skyrl.{LR} (2e-06 judged, 0.001 replayed)"
        in (problems[0])
    )
