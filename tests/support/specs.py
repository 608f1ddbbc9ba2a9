"""Builders for role plans, topologies, recipes and specs used across the RL configuration tests.

Every builder starts from a shape that passes the preflight and takes keyword overrides, so a test
changes exactly the number its rule is about.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import yaml

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, Directory
from rlaunch.dotted import set_path
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.skyrl import (
    ArtifactDataSource,
    ArtifactHfModel,
    HfModel,
    IrisSkyRLExecution,
    LocalSkyRLExecution,
    PreflightError,
    SkyRLRetentionPolicy,
    SkyRLRolePlan,
    SkyRLRuntime,
    SkyRLSpec,
    SkyRLTopology,
    check_plan,
    skyrl_step,
)
from rlaunch.skyrl.plan import planning
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
from rlaunch.skyrl.plan.stored_facts import StoredFacts
from rlaunch.skyrl.values.execution import SkyRLExecution

DAY = "2026.11.30"
REVISION = "9c925d64d72725edaf899c6cb9c377fd0709d9c5"

# The explicit settings a reviewer expects in every GPU recipe (console logging: no W&B needed).
BASE_RECIPE: dict[str, Any] = {
    "trainer": {
        "algorithm": {"advantage_estimator": "grpo", "use_kl_loss": True},
        "max_prompt_length": 1024,
        "ckpt_interval": 20,
        "hf_save_interval": -1,
        "resume_mode": "latest",
        "logger": "console",
    },
    "generator": {"sampling_params": {"max_generate_length": 3072}},
}

WANDB_RECIPE: dict[str, Any] = {
    **BASE_RECIPE,
    "trainer": {**BASE_RECIPE["trainer"], "logger": "wandb", "project_name": "gsm8k-grpo"},
}


def merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """`overlay` laid over a copy of `base`, mapping by mapping (a `None` value removes the key)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in overlay.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def recipe(**sections: Any) -> dict[str, Any]:
    """BASE_RECIPE with `sections` merged in (e.g. recipe(trainer={"strategy": "megatron"}))."""
    return merge(BASE_RECIPE, sections)


def without(tree: dict[str, Any], dotted: str) -> dict[str, Any]:
    """A copy of `tree` without the key at `dotted`."""
    head, _, rest = dotted.partition(".")
    out = dict(tree)
    if not rest:
        out.pop(head, None)
    else:
        out[head] = without(out[head], rest)
    return out


def to_yaml(tree: dict[str, Any]) -> str:
    return yaml.safe_dump(tree, sort_keys=False)


# Role plans, each a few changes away from one small valid GPU plan (1 node x 8 GPUs, colocated,
# 8 engines TP1): the seed's 64-GPU plan, the CPU smoke's one slot and the 2-GPU contract smoke.
GPU_PLAN: dict[str, Any] = dict(
    colocate_all=True, policy_num_nodes=1, policy_num_gpus_per_node=8, num_inference_engines=8,
    inference_engine_tensor_parallel_size=1, inference_engine_pipeline_parallel_size=1,
    inference_engine_data_parallel_size=1, inference_engine_expert_parallel_size=1,
    train_batch_size=64, policy_mini_batch_size=32, micro_train_batch_size_per_gpu=2, n_samples_per_prompt=8,
)  # fmt: skip
SEED_PLAN = GPU_PLAN | dict(
    colocate_all=False, policy_num_nodes=4, num_inference_engines=4, inference_engine_data_parallel_size=8,
    train_batch_size=256, policy_mini_batch_size=64,
)  # fmt: skip
CPU_PLAN = GPU_PLAN | dict(
    policy_num_gpus_per_node=1, num_inference_engines=1,
    train_batch_size=4, policy_mini_batch_size=4, micro_train_batch_size_per_gpu=4, n_samples_per_prompt=4,
)  # fmt: skip
SMOKE_PLAN = GPU_PLAN | dict(
    policy_num_gpus_per_node=2,
    num_inference_engines=2,
    train_batch_size=8,
    policy_mini_batch_size=8,
    n_samples_per_prompt=4,
)


def plan(**overrides: Any) -> SkyRLRolePlan:
    """1 node x 8 GPUs, colocated, 8 engines TP1: a valid small GPU plan."""
    return SkyRLRolePlan(**(GPU_PLAN | overrides))


def seed_plan(**overrides: Any) -> SkyRLRolePlan:
    """The seed's 64-GPU plan: policy 4x8, 4 disaggregated engines TP1 DP8."""
    return SkyRLRolePlan(**(SEED_PLAN | overrides))


def cpu_plan(**overrides: Any) -> SkyRLRolePlan:
    """The CPU smoke's plan: one slot, colocated, 4 prompts x 4 samples."""
    return SkyRLRolePlan(**(CPU_PLAN | overrides))


def topology(
    role_plan: SkyRLRolePlan | None = None, *, num_nodes: int = 1, gpus_per_node: int = 8, gpu_variant: str = "H100"
) -> SkyRLTopology:
    return SkyRLTopology(
        num_nodes=num_nodes, gpus_per_node=gpus_per_node, gpu_variant=gpu_variant, role_plan=role_plan or plan()
    )


def seed_topology(**plan_overrides: Any) -> SkyRLTopology:
    return topology(seed_plan(**plan_overrides), num_nodes=8)


def cpu_topology(role_plan: SkyRLRolePlan | None = None, **shape: Any) -> SkyRLTopology:
    return topology(role_plan or cpu_plan(), **({"gpus_per_node": 1, "gpu_variant": "cpu"} | shape))


def violations(
    topo: SkyRLTopology, tree: dict[str, Any] | None = None, profile: str = "fsdp", **kwargs: Any
) -> list[PreflightError]:
    return check_plan(topo, BASE_RECIPE if tree is None else tree, profile, **kwargs)


def codes(found: list[PreflightError]) -> list[str]:
    return [v.code for v in found]


def only(found: list[PreflightError], code: str) -> PreflightError:
    """The single violation with `code` (fails listing everything found otherwise)."""
    hits = [v for v in found if v.code == code]
    assert len(hits) == 1, f"expected exactly one {code}, got {[v.line() for v in found]}"
    return hits[0]


def assert_useful(v: PreflightError, *fragments: str) -> None:
    """The message names the numbers, and there is a fix that says what to do."""
    for fragment in fragments:
        assert fragment in v.message, f"{fragment!r} not in {v.message!r}"
    assert v.fix and len(v.fix) > 10, v.fix
    assert v.code in str(v) and v.fix in str(v)


# --- artifact steps and specs -------------------------------------------------------------------


def _never(config: Any) -> None:
    raise AssertionError("these tests never execute this step")


def input_step(name: str, artifact_type: type[Any], version: str = DAY) -> ArtifactStep[Any]:
    """A built-elsewhere input (a model, a data set) that these tests never execute."""
    return ArtifactStep(
        name=name,
        version=version,
        artifact_type=artifact_type,
        run=_never,
        build_config=lambda ctx: {"source": f"hf://{name}"},
    )


def model_step(name: str = "models/qwen3-8b", version: str = DAY) -> ArtifactStep[HfModel]:
    return input_step(name, HfModel, version)


def data_step(name: str = "data/gsm8k", version: str = DAY) -> ArtifactStep[Directory]:
    return input_step(name, Directory, version)


def spec(
    *,
    topo: SkyRLTopology | None = None,
    tree: dict[str, Any] | None = None,
    profile: str = "fsdp",
    model: ArtifactStep[Any] | None = None,
    data: ArtifactStep[Any] | None = None,
    validation: ArtifactStep[Any] | None = None,
    tokenizer_revision: str = REVISION,
    **overrides: Any,
) -> SkyRLSpec:
    """The seed's 64-GPU plan as a spec (the builders are new objects every call)."""
    model = model or model_step()
    data = data or data_step()
    values: dict[str, Any] = dict(
        name="checkpoints/gsm8k-grpo",
        version=DAY,
        config_yaml=to_yaml(BASE_RECIPE if tree is None else tree),
        runtime=SkyRLRuntime(profile),
        model=ArtifactHfModel(model, tokenizer_revision=tokenizer_revision),
        train_data=(ArtifactDataSource(data, "train.parquet"),),
        validation_data=(ArtifactDataSource(validation or data, "test.parquet"),),
        topology=topo or seed_topology(),
        retention=SkyRLRetentionPolicy(resume_checkpoint_count=2),
        seed=17,
    )
    values.update(overrides)
    return SkyRLSpec(**values)


def iris(**overrides: Any) -> IrisSkyRLExecution:
    values: dict[str, Any] = dict(
        cluster="cw-example",
        cluster_config="lib/iris/config/cw-example.yaml",
        cpu=96,
        memory="1600GB",
        disk="4TB",
        priority="interactive",
        max_retries=2,
        coordinator_timeout_hours=48,
        job_timeout_seconds=36 * 3600,
        wandb_entity="my-lab",
    )
    values.update(overrides)
    return IrisSkyRLExecution(**values)


def local(**overrides: Any) -> LocalSkyRLExecution:
    return LocalSkyRLExecution(**overrides)


def replace_plan(p: SkyRLRolePlan, **changes: Any) -> SkyRLRolePlan:
    return dataclasses.replace(p, **changes)


# Published config.json values (Hugging Face model cards) the memory tests size against.
LLAMA_31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
LLAMA_31_70B = {
    **LLAMA_31_8B,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
}
LLAMA_31_405B = {
    **LLAMA_31_8B,
    "hidden_size": 16384,
    "intermediate_size": 53248,
    "num_hidden_layers": 126,
    "num_attention_heads": 128,
}


def planned(s: SkyRLSpec, execution: SkyRLExecution | None = None) -> SkyRLArtifactStep:
    """`s` as an RL step, planned under RLAUNCH_PREFIX: the preflight that `--run` and the dry run
    run when the graph is planned (a PreflightError listing every violation), else the step."""
    step = skyrl_step(s, execution or iris(), export_hf=True)
    planning.plan([step], storage.default_prefix())
    return step


def planned_view(
    s: SkyRLSpec,
    execution: SkyRLExecution | None = None,
    *,
    export_hf: bool = True,
    smoke: SkyRLArtifactStep | None = None,
    prefix: str | None = None,
) -> tuple[SkyRLLaunchConfig, StoredFacts]:
    """What the plan's views read for `s` under `prefix` (default RLAUNCH_PREFIX): the launch
    document `--run` would launch, and the step's stored facts."""
    step = skyrl_step(s, execution or iris(), export_hf=export_hf, smoke=smoke)
    run = planning.planned_run(step, prefix or storage.default_prefix())
    assert run.launch is not None, f"{step.identity}: its recipe does not render"
    return run.launch.document, run.facts


def planned_view_of(step: SkyRLArtifactStep, prefix: str | None = None) -> tuple[PlannedLaunch, StoredFacts]:
    """What readiness and the plan view read of `step` under `prefix`: its planned launch and stored facts."""
    run = planning.planned_run(step, prefix or storage.default_prefix())
    assert run.launch is not None, f"{step.identity}: its recipe does not render"
    return run.launch, run.facts


def launch_of(step: SkyRLArtifactStep, prefix: str | None = None) -> PlannedLaunch:
    """What `step` would launch under `prefix` (default RLAUNCH_PREFIX), planned as the dry run plans it."""
    launch = planning.planned_run(step, prefix or storage.default_prefix()).launch
    assert launch is not None, f"{step.identity}: its recipe does not render"
    return launch


def planned_launch_view(s: SkyRLSpec, *, prefix: str | None = None) -> tuple[PlannedLaunch, StoredFacts]:
    """What the plan view reads for `s`: the planned launch (composed once) and the stored facts."""
    return planned_view_of(skyrl_step(s, iris(), export_hf=True), prefix)


def applied(topo: SkyRLTopology, written: dict[str, Any], changes: list[str]) -> tuple[SkyRLTopology, dict[str, Any]]:
    """`topo` and `written` with each printed change (`field=value`) pasted in, as a user would."""
    plan_changes: dict[str, Any] = {}
    tree = copy.deepcopy(written)
    for change in changes:
        field, _, text = change.partition("=")
        value: Any = {"true": True, "false": False}.get(text, int(text) if text.lstrip("-").isdigit() else text)
        section, _, name = field.partition(".")
        if section == "role_plan":
            plan_changes[name] = value
        elif section == "topology":
            topo = dataclasses.replace(topo, **{name: value})
        else:
            assert section == "config_yaml", change
            set_path(tree, name, value)
    return dataclasses.replace(topo, role_plan=dataclasses.replace(topo.role_plan, **plan_changes)), tree
