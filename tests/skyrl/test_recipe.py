"""The recipe: role-plan values are rendered in, repeated only with the identical typed value;
launcher-owned keys, unknown keys and type mismatches are refused by path."""

from __future__ import annotations

import pytest

from rlaunch.launch_config.composition import get_path
from rlaunch.skyrl import PreflightError
from rlaunch.skyrl.values.config_yaml import PLAN_KEYS
from tests.support.specs import (
    BASE_RECIPE,
    assert_useful,
    codes,
    only,
    plan,
    recipe,
    seed_topology,
    spec,
    to_yaml,
    topology,
    violations,
)

# Every geometry and batch key and where its value comes from in the 64-GPU seed plan.
SEED_RENDERED = {
    "trainer.placement.colocate_all": False,
    "trainer.placement.colocate_policy_ref": True,
    "trainer.placement.policy_num_nodes": 4,
    "trainer.placement.policy_num_gpus_per_node": 8,
    "trainer.placement.ref_num_nodes": 4,
    "trainer.placement.ref_num_gpus_per_node": 8,
    "generator.inference_engine.num_engines": 4,
    "generator.inference_engine.tensor_parallel_size": 1,
    "generator.inference_engine.pipeline_parallel_size": 1,
    "generator.inference_engine.data_parallel_size": 8,
    "generator.inference_engine.expert_parallel_size": 1,
    "generator.inference_engine.run_engines_locally": True,
    "trainer.train_batch_size": 256,
    "trainer.policy_mini_batch_size": 64,
    "trainer.micro_train_batch_size_per_gpu": 2,
    "generator.n_samples_per_prompt": 8,
    "trainer.strategy": "fsdp",
    "trainer.seed": 17,
}


def test_geometry_and_batch_keys_are_always_rendered_explicitly() -> None:
    rendered = spec().rendered_recipe()
    for key, value in SEED_RENDERED.items():
        got = get_path(rendered, key)
        assert got == value and type(got) is type(value), (key, got)
    assert set(PLAN_KEYS) <= set(SEED_RENDERED)
    # The recipe as written stays sparse; the rendered recipe keeps what it said.
    assert get_path(rendered, "trainer.ckpt_interval") == 20
    assert "entrypoint" not in rendered


def test_rendering_does_not_mutate_the_recipe() -> None:
    s = spec()
    before = to_yaml(s.recipe)
    s.rendered_recipe()
    assert to_yaml(s.recipe) == before
    assert "placement" not in s.recipe["trainer"]


def test_recipe_may_repeat_a_plan_value_with_the_identical_typed_value() -> None:
    tree = recipe(
        trainer={"train_batch_size": 256, "placement": {"colocate_all": False}},
        generator={"inference_engine": {"data_parallel_size": 8}},
    )
    s = spec(tree=tree)
    assert get_path(s.rendered_recipe(), "trainer.train_batch_size") == 256


@pytest.mark.parametrize(
    ("tree", "key", "got", "want"),
    [
        (
            recipe(trainer={"placement": {"colocate_all": 0}}),
            "trainer.placement.colocate_all",
            "0",
            "False",
        ),  # 0 is not false
        (recipe(trainer={"train_batch_size": 256.0}), "trainer.train_batch_size", "256.0", "256"),  # 256.0 is not 256
        (
            recipe(generator={"inference_engine": {"num_engines": 2}}),
            "generator.inference_engine.num_engines",
            "2",
            "4",
        ),
        (recipe(generator={"n_samples_per_prompt": 5}), "generator.n_samples_per_prompt", "5", "8"),
        (recipe(trainer={"placement": {"ref_num_nodes": 1}}), "trainer.placement.ref_num_nodes", "1", "4"),
        (
            recipe(trainer={"placement": {"colocate_policy_ref": False}}),
            "trainer.placement.colocate_policy_ref",
            "False",
            "True",
        ),
        (
            recipe(generator={"inference_engine": {"run_engines_locally": False}}),
            "generator.inference_engine.run_engines_locally",
            "False",
            "True",
        ),
    ],
)
def test_recipe_repeating_a_plan_value_differently_is_refused(tree: dict, key: str, got: str, want: str) -> None:
    v = only(violations(seed_topology(), tree), "recipe.disagrees_with_plan")
    assert v.fields == (f"config_yaml.{key}",)
    assert_useful(v, f"{key}={got}", f"role plan value {want}")
    assert f"remove {key}" in v.fix


def test_one_is_not_true_and_sixteen_point_zero_is_not_sixteen() -> None:
    p = plan(train_batch_size=16, policy_mini_batch_size=16, micro_train_batch_size_per_gpu=1, n_samples_per_prompt=8)
    found = violations(topology(p), recipe(trainer={"train_batch_size": 16.0, "placement": {"colocate_all": 1}}))
    assert sorted(v.fields[0] for v in found if v.code == "recipe.disagrees_with_plan") == [
        "config_yaml.trainer.placement.colocate_all",
        "config_yaml.trainer.train_batch_size",
    ]
    assert violations(topology(p), recipe(trainer={"train_batch_size": 16, "placement": {"colocate_all": True}})) == []


def test_recipe_seed_must_equal_the_spec_seed() -> None:
    v = only(violations(seed_topology(), recipe(trainer={"seed": 3}), seed=17), "recipe.disagrees_with_plan")
    assert v.fields == ("config_yaml.trainer.seed",)
    assert_useful(v, "trainer.seed=3", "SkyRLSpec.seed value 17")
    assert spec(tree=recipe(trainer={"seed": 17})).rendered_recipe()["trainer"]["seed"] == 17


@pytest.mark.parametrize(
    "key",
    [
        "trainer.ckpt_path",
        "trainer.export_path",
        "trainer.resume_path",
        "trainer.max_ckpts_to_keep",
        "trainer.run_name",
        "trainer.log_path",
        "trainer.policy.model.path",
        "trainer.ref.model.path",
        "data.train_data",
        "data.val_data",
    ],
)
def test_launcher_owned_keys_are_refused(key: str) -> None:
    head, *rest = key.split(".")
    value: object = (
        ["/ambient"]
        if key.startswith("data.")
        else (3 if key == "trainer.max_ckpts_to_keep" else (True if key.endswith("artifact") else "/ambient/path"))
    )
    for part in reversed(rest):
        value = {part: value}
    v = only(violations(seed_topology(), recipe(**{head: value})), "recipe.launcher_owned")
    assert v.fields == (f"config_yaml.{key}",)
    assert_useful(v, key, "set by rlaunch")
    assert f"remove {key}" in v.fix


def test_unknown_recipe_keys_are_refused_by_path_with_a_suggestion() -> None:
    found = violations(
        seed_topology(), recipe(trainer={"ckpt_intervall": 3, "placement": {"colocate": True}}, nonsense={"a": 1})
    )
    unknown = {v.fields: v for v in found if v.code == "recipe.unknown_key"}
    assert set(unknown) == {
        ("config_yaml.trainer.ckpt_intervall",),
        ("config_yaml.trainer.placement.colocate",),
        ("config_yaml.nonsense",),
    }
    assert "did you mean trainer.ckpt_interval?" in unknown[("config_yaml.trainer.ckpt_intervall",)].fix
    assert "did you mean trainer.placement.colocate_all?" in unknown[("config_yaml.trainer.placement.colocate",)].fix
    assert_useful(unknown[("config_yaml.nonsense",)], "nonsense is not a key")
    assert "data, environment, generator, trainer" in unknown[("config_yaml.nonsense",)].fix


def test_fork_era_inference_keys_are_unknown_on_skyrl_040() -> None:
    v = only(violations(seed_topology(), recipe(generator={"num_inference_engines": 4})), "recipe.unknown_key")
    assert v.fields == ("config_yaml.generator.num_inference_engines",)


@pytest.mark.parametrize(
    ("section", "path", "fragment"),
    [
        ({"trainer": {"ckpt_interval": "20"}}, "trainer.ckpt_interval", "must be an integer"),
        ({"trainer": {"ckpt_interval": True}}, "trainer.ckpt_interval", "must be an integer"),
        (
            {"trainer": {"policy": {"optimizer_config": {"lr": "1e-6"}}}},
            "trainer.policy.optimizer_config.lr",
            "must be a number",
        ),
        ({"trainer": {"algorithm": {"use_kl_loss": 1}}}, "trainer.algorithm.use_kl_loss", "must be true or false"),
        ({"trainer": {"logger": 5}}, "trainer.logger", "must be a string"),
        ({"trainer": {"algorithm": "grpo"}}, "trainer.algorithm", "must be a mapping"),
        ({"trainer": {"placement": 3}}, "trainer.placement", "must be a mapping"),
    ],
)
def test_type_mismatches_are_refused_naming_the_path(section: dict, path: str, fragment: str) -> None:
    found = violations(seed_topology(), recipe(**section))
    v = only(found, "recipe.type_mismatch")
    assert v.fields == (f"config_yaml.{path}",)
    assert_useful(v, path, fragment)


def test_a_non_mapping_section_still_reports_every_other_problem() -> None:
    found = violations(seed_topology(), recipe(trainer={"placement": 3, "ckpt_interval": "20", "ckpt_path": "/x"}))
    assert sorted(v.fields[0] for v in found) == [
        "config_yaml.trainer.ckpt_interval",
        "config_yaml.trainer.ckpt_path",
        "config_yaml.trainer.placement",
    ]


def test_lr_written_as_bare_exponent_is_a_number() -> None:
    """YAML 1.2 core scalars: `1e-6` is a float (YAML 1.1 read it as a string)."""
    text = BASE_RECIPE | {"trainer": {**BASE_RECIPE["trainer"], "policy": {"optimizer_config": {"lr": "1e-6"}}}}
    built = spec(tree=text)  # dumped by YAML 1.1 as a bare `1e-6`, read back as a float
    assert built.recipe["trainer"]["policy"]["optimizer_config"]["lr"] == 1e-6


@pytest.mark.parametrize(
    ("text", "code"), [("trainer: [1, 2", "recipe.invalid_yaml"), ("- a\n- b\n", "recipe.not_mapping")]
)
def test_config_yaml_must_be_a_yaml_mapping(text: str, code: str) -> None:
    with pytest.raises(PreflightError) as info:
        spec(config_yaml=text)
    assert info.value.code == code
    assert info.value.fields == ("config_yaml",)


def test_recipe_rules_beyond_geometry() -> None:
    cases = {
        "recipe.critic": recipe(trainer={"critic": {"model": {"path": "/critic"}}}),
        "recipe.kl_exclusive": recipe(trainer={"algorithm": {"use_kl_in_reward": True}}),
        "recipe.gae_needs_critic": recipe(trainer={"algorithm": {"advantage_estimator": "gae"}}),
        "recipe.max_training_steps": recipe(trainer={"max_training_steps": 0}),
        "recipe.resume_mode": recipe(trainer={"resume_mode": "from_path"}),
        "recipe.input_length": recipe(generator={"max_input_length": 2048}),
        "recipe.prefill_decode": recipe(generator={"inference_engine": {"enable_pd": True, "num_prefill": 4}}),
        "recipe.external_engines": recipe(generator={"inference_engine": {"external_server_urls": ["http://x"]}}),
        "recipe.executor_backend": recipe(generator={"inference_engine": {"distributed_executor_backend": "slurm"}}),
    }
    for code, tree in cases.items():
        assert code in codes(violations(seed_topology(), tree)), code
    # gae with a critic named is SkyRL's to accept; rlaunch refuses the critic (no critic role), once.
    with_critic = recipe(trainer={"algorithm": {"advantage_estimator": "gae"}, "critic": {"model": {"path": "/c"}}})
    assert codes(violations(seed_topology(), with_critic)) == ["recipe.critic"]
