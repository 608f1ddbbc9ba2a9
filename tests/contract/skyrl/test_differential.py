"""Differential test: rlaunch's `check_plan` against SkyRL 0.4.0's real `validate_cfg`.

Plans are drawn at random (hypothesis, derandomized: the same 3,000 plans every run) over the
topology, the role plan (with or without a critic role) and recipe knobs: the policy's, the
reference model's and the critic's own parallel settings (sizes SkyRL refuses included), KL in the loss, in the reward or nowhere
(so with and without a reference model), strategy, entrypoint, estimator, loss. For each, the
recipe is rendered and composed as rlaunch would launch it, turned into the adapter's dotlist,
parsed by `SkyRLTrainConfig.from_cli_overrides` and validated by `validate_cfg`:

* whenever SkyRL refuses a plan, `check_plan` refuses it too (zero misses);
* where `check_plan` refuses a plan SkyRL accepts, every violation's code is a named launcher rule
  listed in `src/rlaunch/skyrl/preflight/LAUNCHER_RULES.md` (with its reason and source), and none
  is a false alarm: a setting of a reference that is never built, a tail stride under fully_async.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlaunch.launch_config.composition import get_path, set_path
from rlaunch.launch_config.geometry import CRITIC_FROM_POLICY, CRITIC_MODEL_KEY
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl.preflight import check_plan
from rlaunch.skyrl.values.config_yaml import render_recipe
from rlaunch.skyrl.values.preflight_error import PreflightError
from rlaunch.skyrl.values.role_plan import SkyRLCriticPlan, SkyRLRolePlan, SkyRLTopology

pytestmark = pytest.mark.skyrl
RULES_DOC = Path(__file__).resolve().parents[3] / "src" / "rlaunch" / "skyrl" / "preflight" / "LAUNCHER_RULES.md"
EXAMPLES = 3000
SEEN: dict[str, int] = {"skyrl_refused": 0, "both_accept": 0, "launcher_only": 0, "plans": 0}
OUTCOMES: Counter[str] = Counter()  # outcome and what the plan drew -> plans


@functools.cache
def launcher_rules() -> frozenset[str]:
    """The rule codes the preflight docs name as launcher rules (first column of the table)."""
    return frozenset(re.findall(r"^\|\s*`([a-z_]+\.[a-z_0-9]+)`", RULES_DOC.read_text(encoding="utf-8"), re.M))


def test_every_launcher_rule_names_its_reason_and_source() -> None:
    rows = [line for line in RULES_DOC.read_text(encoding="utf-8").splitlines() if re.match(r"^\|\s*`", line)]
    assert len(rows) == len(launcher_rules()) > 0
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        assert len(cells) == 3 and all(cells), f"a launcher rule needs its reason and its source: {row}"


small = st.sampled_from([1, 2, 4])
KL = st.sampled_from([(True, False)] * 3 + [(False, True), (False, False), (False, False)])  # loss, reward


@st.composite
def batches(draw: st.DrawFn, policy_dp: int) -> dict[str, int]:
    """Batch sizes: mostly ones the policy's data-parallel size splits evenly (so the rules after
    SkyRL's batch checks are reached), else any."""
    n = draw(st.sampled_from([1, 2, 4, 5, 8]))
    if policy_dp > 0 and draw(st.sampled_from([True, True, True, False])):
        mini = policy_dp // math.gcd(policy_dp, n) * draw(st.sampled_from([1, 1, 2]))
        train = mini * draw(st.sampled_from([1, 1, 2, 4]))
        per_gpu = mini * n // policy_dp
        micro = draw(st.sampled_from([d for d in (1, 2, 3, 4) if per_gpu % d == 0]))
    else:
        train = draw(st.sampled_from([1, 2, 4, 6, 8, 16, 32, 64]))
        mini = draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32) if train % d == 0] + [3, 16, train]))
        micro = draw(st.sampled_from([1, 2, 3, 4]))
    return dict(train_batch_size=train, policy_mini_batch_size=mini, micro_train_batch_size_per_gpu=micro,
                n_samples_per_prompt=n)  # fmt: skip


def role_settings(draw: st.DrawFn, strategy: str) -> dict[str, Any]:
    """The policy's and the reference model's own parallel settings (sizes SkyRL may refuse included)."""
    if strategy == "fsdp":
        sizes = {"policy": [1, 1, 2, 3], "ref": [1, 1, 2, 3, 4, 8, 0, -1]}
        return {role: {"sequence_parallel_size": draw(st.sampled_from(sizes[role]))} for role in sizes}
    tp = {"policy": small, "ref": st.sampled_from([0, 1, 2, 3, 4, 8])}
    return {
        role: {
            "megatron_config": {
                "tensor_model_parallel_size": draw(tp[role]),
                "pipeline_model_parallel_size": draw(st.sampled_from([1, 1, 2, 3])),
                "context_parallel_size": draw(st.sampled_from([1, 1, 2])),
            },
            "sequence_parallel_size": draw(st.sampled_from([1] * 6 + [2])),
        }
        for role in tp
    }


def megatron_features(draw: st.DrawFn, trainer: dict[str, Any], generator: dict[str, Any]) -> None:
    """Megatron settings SkyRL checks in each role (built or not): routing replay, FP8 recipes."""
    config = trainer.setdefault(draw(st.sampled_from(["policy", "ref"])), {}).setdefault("megatron_config", {})
    config["moe_enable_routing_replay"] = draw(st.booleans())
    kwargs = {"moe_router_fusion": draw(st.booleans())}
    if draw(st.booleans()):
        kwargs["virtual_pipeline_model_parallel_size"] = draw(st.sampled_from([1, 2]))
    if draw(st.booleans()):
        kwargs["fp8_recipe"] = draw(st.sampled_from(["mxfp8", "blockwise"]))
    config["transformer_config_kwargs"] = kwargs
    config["fp8_param"] = draw(st.sampled_from([None, True, False, "off"]))
    config["fp8_recipe"] = draw(st.sampled_from([None, "mxfp8", "MXFP8 ", "blockwise"]))
    if draw(st.booleans()):
        config["ddp_config"] = {"fp8_param_gather": True}
    if draw(st.booleans()):
        engine = generator.setdefault("inference_engine", {})
        engine["enable_return_routed_experts"] = True
        engine["distributed_executor_backend"] = draw(st.sampled_from(["mp", "mp", "ray"]))


def policy_dp(trainer: dict[str, Any], strategy: str, world: int) -> int:
    policy = trainer.get("policy", {})
    sizes = [policy.get("sequence_parallel_size", 1)]
    if strategy == "megatron":
        config = policy.get("megatron_config", {})
        sizes = [config.get(f"{kind}_parallel_size", 1) for kind in ("tensor_model", "pipeline_model", "context")]
    model_parallel = math.prod(sizes)
    return world // model_parallel if model_parallel > 0 and world % model_parallel == 0 else 0


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    colocate = draw(st.booleans())
    tp, pp, dp = draw(small), draw(st.sampled_from([1, 2])), draw(small)
    policy_nodes = draw(st.integers(1, 3))
    engine_gpus = tp * pp * dp
    engines = (
        max(1, policy_nodes * gpus // engine_gpus) if colocate and draw(st.booleans()) else draw(st.integers(1, 8))
    )
    strategy = draw(st.sampled_from(["fsdp", "megatron"]))
    use_kl_loss, use_kl_in_reward = draw(KL)
    trainer: dict[str, Any] = {
        "logger": "console",
        "project_name": "diff",
        "max_prompt_length": 512,
        "ckpt_interval": 10,
        "hf_save_interval": -1,
        "resume_mode": "latest",
        "algorithm": {
            "advantage_estimator": draw(st.sampled_from(["grpo"] * 10 + ["rloo", "gae"])),
            "use_kl_loss": use_kl_loss,
            "use_kl_in_reward": use_kl_in_reward,
            "policy_loss_type": draw(st.sampled_from(["regular", "regular", "dual_clip", "rollout_is"])),
        },
        "micro_forward_batch_size_per_gpu": draw(st.sampled_from([1, 2, 4])),
        "remove_microbatch_padding": draw(st.booleans()),
    }
    recipe: dict[str, Any] = {"trainer": trainer, "generator": {"sampling_params": {"max_generate_length": 1024}}}
    if draw(st.booleans()):
        trainer.update(role_settings(draw, strategy))
    sizes = draw(batches(policy_dp(trainer, strategy, policy_nodes * gpus)))
    plan = dict(
        colocate_all=colocate,
        policy_num_nodes=policy_nodes,
        policy_num_gpus_per_node=gpus,
        num_inference_engines=engines,
        inference_engine_tensor_parallel_size=tp,
        inference_engine_pipeline_parallel_size=pp,
        inference_engine_data_parallel_size=dp,
        inference_engine_expert_parallel_size=draw(st.sampled_from([1] * 6 + [tp * dp, 2])),
        **sizes,
    )
    if draw(st.sampled_from([False] * 4 + [True])):  # the role plan's critic, its sizes SkyRL refuses included
        critic_nodes = draw(st.sampled_from([1, 1, 2]))
        plan["critic"] = SkyRLCriticPlan(
            num_nodes=policy_nodes if colocate and draw(st.booleans()) else critic_nodes,
            num_gpus_per_node=gpus if draw(st.booleans()) else draw(st.sampled_from([1, 2, 8])),
            mini_batch_size=draw(st.sampled_from([sizes["policy_mini_batch_size"], sizes["train_batch_size"], 3, 1])),
        )
    elif draw(st.sampled_from([False] * 4 + [True])):  # critic settings in the recipe, no critic role
        trainer["critic"] = {"sequence_parallel_size": draw(st.sampled_from([1, 2, 0, -1]))}
        if draw(st.booleans()):
            trainer["placement"] = {
                "critic_num_nodes": draw(st.sampled_from([0, 1, 2])),
                "critic_num_gpus_per_node": draw(st.sampled_from([1, 3, 8])),
            }
        if draw(st.sampled_from([False] * 3 + [True])):
            trainer["critic"]["model"] = {"path": "/models/critic"}
            trainer["critic_mini_batch_size"] = sizes["policy_mini_batch_size"]
    if draw(st.sampled_from([False] * 7 + [True])):  # MoE routing replay and FP8, in either role
        megatron_features(draw, trainer, recipe["generator"])
    if draw(st.sampled_from([False] * 9 + [True])):  # the language model alone, in each role
        trainer.setdefault("policy", {})["language_model_only"] = True
        trainer.setdefault("ref", {})["language_model_only"] = draw(st.booleans())
        recipe["generator"].setdefault("inference_engine", {})["language_model_only"] = draw(st.booleans())
    if draw(st.booleans()):
        recipe["entrypoint"] = "fully_async"
        if draw(st.booleans()):  # what the fully-async trainer asserts, so its other rules are reached
            plan["policy_mini_batch_size"] = plan["train_batch_size"]
            trainer["algorithm"]["policy_loss_type"] = "rollout_is"
        workers = draw(st.sampled_from([8, 32, 128, plan["policy_mini_batch_size"]]))
        trainer["fully_async"] = {"num_parallel_generation_workers": workers}
    rollout_nodes = 0 if colocate else -(-engines * engine_gpus // gpus)
    rollout_nodes += 0 if colocate or "critic" not in plan else plan["critic"].num_nodes
    nodes = policy_nodes + rollout_nodes if draw(st.sampled_from([True] * 3 + [False])) else draw(st.integers(1, 6))
    return {"plan": plan, "recipe": recipe, "strategy": strategy, "nodes": nodes, "gpus": gpus}


def rlaunch_verdict(case: dict[str, Any]) -> tuple[list[tuple[str, tuple[str, ...]]], dict[str, Any] | None]:
    """((code, fields) of each violation, the composed recipe rlaunch would launch, or None if it
    cannot render one)."""
    profile = get_profile(case["strategy"])
    try:
        plan = SkyRLRolePlan(**case["plan"])
        topology = SkyRLTopology(
            num_nodes=case["nodes"], gpus_per_node=case["gpus"], gpu_variant="H100", role_plan=plan
        )
    except (PreflightError, ValueError, TypeError) as exc:
        return [(getattr(exc, "code", "construction"), ())], None
    found = [(v.code, v.fields) for v in check_plan(topology, case["recipe"], profile, seed=3)]
    composed, problems = profile.compose(render_recipe(case["recipe"], plan, profile, 3))
    return found, (None if problems else composed)


def changed(tree: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The part of `tree` that differs from `base`: SkyRL gets the rest from the same defaults
    (test_base_config proves the base config is SkyRL's own), and its OmegaConf parse of a full
    400-leaf dotlist costs about a second, too slow for hundreds of plans."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        default = base.get(key, object())
        if isinstance(value, dict) and isinstance(default, dict) and value:
            sub = changed(value, default)
            if sub:
                out[key] = sub
        elif value != default or type(value) is not type(default):
            out[key] = value
    return out


def skyrl_refusal(composed: dict[str, Any], strategy: str) -> str | None:
    from rlaunch_skyrl.driver import config

    # Through JSON, as through the YAML document the task hands the adapter: plain data only.
    tree = changed(json.loads(json.dumps(composed)), get_profile(strategy).base_config())
    for key, value in (("trainer.policy.model.path", "/models/m"), ("trainer.ref.model.path", "/models/m"),
                       ("data.train_data", ["/data/train.parquet"]), ("data.val_data", [])):  # fmt: skip
        set_path(tree, key, value)
    if get_path(tree, CRITIC_MODEL_KEY, None) == CRITIC_FROM_POLICY:  # as the host injects it
        set_path(tree, CRITIC_MODEL_KEY, "/models/m")
    try:
        config({"skyrl": tree, "run": {"export_hf": False}})
    except Exception as exc:  # noqa: BLE001 - any failure of parse or validate_cfg is a refusal (even ZeroDivisionError)
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


def tags(case: dict[str, Any]) -> list[str]:
    """What a plan draws beyond the policy: the reference (built or not) and its settings, the critic."""
    trainer, algorithm = case["recipe"]["trainer"], case["recipe"]["trainer"]["algorithm"]
    built = "reference built" if algorithm["use_kl_loss"] or algorithm["use_kl_in_reward"] else "no reference"
    out = [built]
    if "ref" in trainer:
        out.append(f"{built}, reference settings ({case['strategy']})")
    if "critic" in trainer:
        out.append("critic settings")
    if "critic" in case["plan"]:
        out.append("critic role")
    if case["recipe"].get("entrypoint") == "fully_async":
        out.append("fully_async")
    return out


# SkyRL's refusals the draw must reach: the reference geometry under Megatron (issue 22) and the
# Megatron settings SkyRL checks in each role.
REFERENCE_REFUSALS = {
    "reference world vs TP*PP*CP": "ref_world_size",
    "Ulysses on the reference under Megatron": "found ref.sequence_parallel_size",
    "context parallel without remove_microbatch_padding (policy or reference)": "context parallel is only supported",
    "routing replay with the fused router (policy or reference)": "moe_router_fusion=True",
    "routing replay with interleaved pipelines (policy or reference)": "virtual_pipeline_model_parallel_size",
    "rollout router replay": "rollout router replay",
    "mxfp8 with fp8_param (policy or reference)": "not supported with fp8_recipe=mxfp8",
    "policy fp8_param without fp8_param_gather": "fp8_param_gather=true",
}


def record(outcome: str, case: dict[str, Any], detail: str = "") -> None:
    SEEN[outcome] += 1
    for tag in tags(case):
        OUTCOMES[f"{outcome}: {tag}"] += 1
    for name, needle in REFERENCE_REFUSALS.items():
        if needle in detail:
            OUTCOMES[f"SkyRL refuses: {name}"] += 1


def false_alarms(case: dict[str, Any], found: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Refusals of a plan SkyRL accepts that no late failure backs: a setting of a reference model
    that is never built, a tail stride under the fully-async trainer (which trims nothing)."""
    tags_ = tags(case)
    out = []
    if "no reference" in tags_:
        out += [
            f"{code} {fields}"
            for code, fields in found
            if any(f.startswith("config_yaml.trainer.ref.") for f in fields)
        ]
    if "fully_async" in tags_:
        out += [code for code, _ in found if code == "batch.tail_stride"]
    return out


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=plans())
def test_skyrl_never_refuses_what_check_plan_accepts(case: dict[str, Any]) -> None:
    found, composed = rlaunch_verdict(case)
    codes = sorted({code for code, _ in found})
    SEEN["plans"] += 1
    if composed is None:
        assert codes, f"rlaunch could not compose the recipe yet reported nothing: {case}"
        return
    refusal = skyrl_refusal(composed, case["strategy"])
    if refusal is not None:
        record("skyrl_refused", case, refusal)
        assert codes, f"MISS: SkyRL's validate_cfg refuses ({refusal}) a plan check_plan accepts: {case}"
        return
    if codes:
        record("launcher_only", case)
        OUTCOMES.update(f"launcher only: {code}" for code in codes)
        unnamed = sorted(set(codes) - launcher_rules())
        assert not unnamed, (
            f"check_plan refuses a plan SkyRL accepts with rule(s) {unnamed} that LAUNCHER_RULES.md does not list: {case}"
        )
        assert not false_alarms(case, found), f"check_plan raises false alarms {false_alarms(case, found)}: {case}"
    else:
        record("both_accept", case)


def test_the_differential_run_covered_every_outcome() -> None:
    """Runs after the property (file order): the draw reached refusals, acceptances and launcher-only
    rules, with and without a reference model, and SkyRL's refusals of the reference's geometry."""
    if SEEN["plans"] == 0:
        pytest.skip("run together with test_skyrl_never_refuses_what_check_plan_accepts")
    summary = "\n".join(f"{key}: {count}" for key, count in sorted({**SEEN, **OUTCOMES}.items()))
    print(f"\ndifferential outcomes:\n{summary}")
    assert SEEN["plans"] >= EXAMPLES, summary
    for outcome in ("skyrl_refused", "both_accept", "launcher_only"):
        for built in ("reference built", "no reference"):
            for strategy in ("fsdp", "megatron"):
                key = f"{outcome}: {built}, reference settings ({strategy})"
                assert OUTCOMES[key] > 0, f"the draw never reached {key!r}:\n{summary}"
        assert OUTCOMES[f"{outcome}: critic settings"] > 0 and OUTCOMES[f"{outcome}: fully_async"] > 0, summary
        assert OUTCOMES[f"{outcome}: critic role"] > 0, summary
    for name in REFERENCE_REFUSALS:
        assert OUTCOMES[f"SkyRL refuses: {name}"] > 0, f"the draw never reached SkyRL refusing {name}:\n{summary}"
