"""How the rule set is applied: what stops derived rules, what only a launch document states, and
the verdict on a recipe that cannot be rendered.

A size beyond MAX_SIZE is reported alone; a non-positive size keeps the rules that need no
arithmetic; a recipe that does not compose is judged on its composition problems. The launch host
builds a `Subject` whose recipe carries the role plan itself and names the runtime digest it was
rendered against: those rules are exercised here on the `Subject` directly.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import yaml

from rlaunch import rules
from rlaunch.rules import MAX_SIZE
from rlaunch.runtimes.registry import Capabilities
from rlaunch.skyrl import ModelFacts
from tests.support.specs import WANDB_RECIPE, plan, recipe, seed_topology, topology

from .helpers import FSDP, SEED, Case, colocated, fully_async, rendered, seed, subject, verdict


def codes(found: list[rules.Violation]) -> list[str]:
    return [v.code for v in found]


# --- what stops the derived rules ----------------------------------------------------------------


def test_a_size_beyond_max_size_is_reported_alone() -> None:
    """Nothing else is judged: not the recipe as written, not what would be derived from it."""
    noisy = recipe(trainer={"ckpt_path": "/elsewhere", "critic": {"model": {"path": "/m"}}, "ckpt_interval": None})
    for case in (
        Case(topology(num_nodes=MAX_SIZE + 1), noisy),
        Case(seed_topology(train_batch_size=MAX_SIZE + 1, policy_mini_batch_size=3), noisy),
    ):
        found = verdict(case)
        assert codes(found) in (["topology.too_large"], ["role_plan.too_large"]), codes(found)
        assert rules.check_written(subject(case)) == found
    at_most = verdict(Case(seed_topology(train_batch_size=MAX_SIZE, policy_mini_batch_size=2**61), noisy))
    assert "role_plan.too_large" not in codes(at_most) and "recipe.launcher_owned" in codes(at_most)


def test_a_non_positive_size_keeps_the_rules_that_need_no_arithmetic() -> None:
    case = Case(
        topology(plan(train_batch_size=0, num_inference_engines=1, inference_engine_tensor_parallel_size=2)),
        fully_async(algorithm={"policy_loss_type": "regular"}, critic={"model": {"path": "/m"}}, strategy="megatron"),
        model=ModelFacts(num_attention_heads=3, context_length=16),
    )
    assert codes(verdict(case)) == [
        "role_plan.non_positive",
        "entrypoint.fully_async_batch",
        "entrypoint.fully_async_colocated",
        "entrypoint.fully_async_policy_loss",
        "runtime.strategy_mismatch",
        "recipe.critic",
    ]  # no engine, batch, strategy, defect or model rule: each needs every size positive


def test_the_same_plan_with_positive_sizes_gets_every_rule() -> None:
    case = Case(
        topology(plan(num_inference_engines=1, inference_engine_tensor_parallel_size=2)),
        fully_async(algorithm={"policy_loss_type": "regular"}, critic={"model": {"path": "/m"}}),
        profile="fsdp",
        model=ModelFacts(num_attention_heads=3, context_length=16),
    )
    assert set(codes(verdict(case))) >= {"engine.colocated_gpu_mismatch", "model.tp_heads", "model.context_budget"}


def test_a_recipe_that_does_not_compose_is_judged_on_its_problems() -> None:
    found = verdict(seed(recipe(trainer={"bogus": 1}), train_batch_size=324, micro_train_batch_size_per_gpu=3))
    assert codes(found) == ["recipe.unknown_key"]  # the batch rules would read a recipe that is not one
    assert found[0].fields == ("config_yaml.trainer.bogus",) and found[0].values == {"value": 1}
    written = verdict(seed({"trainer": {"bogus": 1, "logger": "console"}}))
    assert codes(written) == [*(code for code, _ in EXPLICIT), "recipe.unknown_key"]


EXPLICIT = [
    ("explicit.checkpoint_interval", "trainer.ckpt_interval"),
    ("explicit.resume_mode", "trainer.resume_mode"),
    ("explicit.export_policy", "trainer.hf_save_interval"),
    ("explicit.token_budget", "trainer.max_prompt_length"),
    ("explicit.token_budget", "generator.sampling_params.max_generate_length"),
]


def test_an_unrenderable_recipe_gets_every_problem_as_written(tmp_path: Path) -> None:
    """A section the role plan renders into is not a mapping. With a base config that leaves it
    free (null), composition accepts it and rendering cannot: `recipe.not_mapping`, beside the
    rules over what was written."""
    base = FSDP.base_config()
    base["trainer"]["placement"] = None
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    loose = dataclasses.replace(FSDP, name="fsdp-loose-placement", base_config_file=str(tmp_path / "base.yaml"))
    tree = recipe(trainer={"placement": 3, "run_name": "mine"})
    found = verdict(seed(tree, loose, train_batch_size=0))
    assert [(v.code, v.fields, dict(v.values)) for v in found] == [
        ("role_plan.non_positive", ("role_plan.train_batch_size",), {"value": 0}),
        ("recipe.launcher_owned", ("config_yaml.trainer.run_name",), {"recipe": "mine"}),
        ("recipe.not_mapping", ("config_yaml",), {}),
    ]
    assert found[-1].message == "trainer.placement must be a mapping to hold trainer.placement.colocate_all; got 3"
    assert found[-1].fix == "make every section of the recipe a mapping"
    # With a composition problem as well, the problems are the verdict's end
    found = verdict(seed(recipe(trainer={"placement": 3, "bogus": 2}), loose))
    assert [(v.code, v.fields) for v in found] == [("recipe.unknown_key", ("config_yaml.trainer.bogus",))]


# --- what only a launch document states -----------------------------------------------------------


def test_a_document_rendered_against_another_runtime_digest_is_refused() -> None:
    installed = FSDP.source_digest
    assert rules.check_written(subject(SEED, source_digest=installed)) == []
    (v,) = rules.check_written(subject(SEED, source_digest="0" * 64))
    assert (v.code, v.fields, dict(v.values)) == (
        "runtime.source_digest",
        ("runtime.source_digest",),
        {"document": "0" * 64, "installed": installed},
    )
    assert v.message == (
        f"runtime.source_digest={'0' * 16} does not match runtime 'fsdp' installed here ({installed[:16]})"
    )
    assert v.fix == "render the document with this rlaunch (a fresh RL version)"


def document_subject(**edits: object) -> rules.Subject:
    """The host's `Subject`: the recipe is the rendered document section, role plan included."""
    doc = rendered(SEED)
    for key, value in edits.items():
        head, *rest = key.split(".")
        node = doc[head]
        for part in rest[:-1]:
            node = node[part]
        if value is None:
            del node[rest[-1]]
        else:
            node[rest[-1]] = value
    return subject(SEED, plan_in_recipe=True, recipe=doc, seed_source="run.seed")


def test_a_document_states_the_role_plan_and_only_what_follows_from_it_can_disagree() -> None:
    s = document_subject()
    assert rules.check(s, s.recipe) == []
    # the role plan's own keys are the plan at the host: a different train batch is a different plan
    assert rules.check_written(document_subject(**{"trainer.train_batch_size": 128})) == []
    found = rules.check_written(document_subject(**{"trainer.placement.ref_num_gpus_per_node": 4}))
    assert [(v.code, v.fields, dict(v.values)) for v in found] == [
        (
            "recipe.disagrees_with_plan",
            ("config_yaml.trainer.placement.ref_num_gpus_per_node",),
            {"recipe": 4, "plan": 8},
        )
    ]


def test_a_document_without_a_derived_key_runs_the_base_config_default() -> None:
    """The base config's ref_num_nodes is 1; the role plan's policy spans 4 nodes."""
    assert FSDP.base_config()["trainer"]["placement"]["ref_num_nodes"] == 1
    found = rules.check_written(document_subject(**{"trainer.placement.ref_num_nodes": None, "trainer.seed": 5}))
    assert [(v.fields, dict(v.values)) for v in found] == [
        (("config_yaml.trainer.placement.ref_num_nodes",), {"recipe": 1, "plan": 4}),
        (("config_yaml.trainer.seed",), {"recipe": 5, "plan": 17}),
    ]
    assert found[1].message == "SkyRL config trainer.seed=5 disagrees with run.seed value 17"
    assert found[1].fix == "remove trainer.seed from config_yaml (it is rendered from run.seed) or make it exactly 17"
    # A default that agrees (run_engines_locally: true) is no disagreement
    assert rules.check_written(document_subject(**{"generator.inference_engine.run_engines_locally": None})) == []


def test_a_sparse_recipe_is_compared_only_where_it_repeats_the_plan() -> None:
    assert rules.check_written(subject(SEED)) == []
    assert rules.check_written(subject(SEED, seed=None, recipe=recipe(trainer={"seed": 3}))) == []
    found = rules.check_written(subject(SEED, recipe=recipe(trainer={"placement": {"colocate_all": 0}})))
    assert [(v.fields, dict(v.values)) for v in found] == [
        (("config_yaml.trainer.placement.colocate_all",), {"recipe": 0, "plan": False})
    ]


# --- W&B identity --------------------------------------------------------------------------------


def test_wandb_logging_names_its_entity() -> None:
    composed = FSDP.compose(rendered(seed(WANDB_RECIPE)))[0]
    assert rules.wandb_entity(composed, "my-lab", "X(wandb_entity=...)") == []
    (v,) = rules.wandb_entity(composed, None, "LocalSkyRLExecution(wandb_entity=...)")
    assert (v.code, v.fields, dict(v.values)) == ("explicit.wandb_entity", ("execution.wandb_entity",), {})
    assert v.message == "trainer.logger is wandb but the execution names no W&B entity"
    assert v.fix == "set LocalSkyRLExecution(wandb_entity=...) or use logger: console"
    assert rules.wandb_entity(composed, "", "X") != []
    console = FSDP.compose(rendered(SEED))[0]
    assert rules.wandb_entity(console, None, "X") == []


def test_a_wandb_project_named_in_the_recipe_is_enough() -> None:
    assert verdict(seed(WANDB_RECIPE)) == []
    unnamed = copy.deepcopy(WANDB_RECIPE)
    del unnamed["trainer"]["project_name"]
    assert codes(verdict(seed(unnamed))) == ["explicit.wandb_project"]
    assert verdict(seed(recipe(trainer={"project_name": "p"}))) == []  # console logging needs none
    assert codes(verdict(colocated())) == []


def test_a_violation_reads_with_its_own_fields_or_the_document_paths_it_is_shown_under() -> None:
    v = rules.violation(
        "batch.train_mini", ["role_plan.train_batch_size", "role_plan.policy_mini_batch_size"], "m", "f"
    )
    assert (
        v.line() == "[batch.train_mini] m (field: role_plan.train_batch_size, role_plan.policy_mini_batch_size). Fix: f"
    )
    paths = ("skyrl.trainer.train_batch_size", "skyrl.trainer.policy_mini_batch_size")
    assert v.line(paths) == f"[batch.train_mini] m (field: {', '.join(paths)}). Fix: f"


def test_every_accepted_value_of_an_enumerated_setting_passes() -> None:
    for tree in (
        recipe(trainer={"resume_mode": "none"}),
        recipe(trainer={"resume_mode": "latest"}),
        recipe(generator={"inference_engine": {"distributed_executor_backend": "mp"}}),
        recipe(generator={"inference_engine": {"distributed_executor_backend": "ray"}}),
        recipe(trainer={"fully_async": {"enabled": False}}),
        *(fully_async(algorithm={"policy_loss_type": loss}) for loss in ("rollout_is", "dppo", "cispo")),
    ):
        case = seed(tree, train_batch_size=64)
        assert verdict(case) == [], (tree, [v.line() for v in verdict(case)])


def test_a_runtime_restricted_only_by_values_or_only_by_keys_refuses_what_it_cannot_honour() -> None:
    by_value = Capabilities(accelerator="gpu", allowed_values={"trainer.algorithm.kl_estimator_type": ("k3",)})
    by_key = Capabilities(accelerator="gpu", honoured_keys=("trainer.*", "generator.*", "data.*"))
    k1 = recipe(trainer={"algorithm": {"kl_estimator_type": "k1"}})
    for caps, tree, key in (
        (by_value, k1, "trainer.algorithm.kl_estimator_type"),
        (by_key, recipe(environment={"env_class": "arithmetic"}), "environment.env_class"),
    ):
        prof = dataclasses.replace(FSDP, name="fsdp-restricted", capabilities=caps)
        assert verdict(seed(profile=prof)) == []
        found = [(v.code, v.fields) for v in verdict(seed(tree, prof))]
        assert found == [("runtime.unsupported_setting", (f"config_yaml.{key}",))]
