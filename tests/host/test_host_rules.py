"""`rlaunch launch --config` applies every rule the preflight applies, before anything is submitted.

For every code of the rule registry (`rlaunch.rules.CODES`) a launch document exhibits it: a
valid document rendered by the experiment side, edited the way a hand-written document would
be. The host must refuse it with that code, naming the document's own field path, and leave no
job, no resolved document and no terminal manifest behind. A rule added without a document case
here fails `test_every_registered_code_has_a_document_case`.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlaunch import rules
from rlaunch.artifacts import StepContext
from rlaunch.cli.admin import main as rlaunch_main
from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.host.compose import compose_document
from rlaunch.host.validate import DocumentRefused, validate_document
from rlaunch.launch_config import schema
from rlaunch.launch_config.geometry import CRITIC_FROM_POLICY
from rlaunch.launch_config.typed import DocumentError
from rlaunch.rules.document_subject import memory_table
from rlaunch.rules.recipe_rules import EXPLICIT_KEYS
from rlaunch.runtimes.defects import KnownDefect
from rlaunch.runtimes.registry import get_profile, register_profile
from rlaunch.skyrl import skyrl_step
from tests.support.specs import (
    BASE_RECIPE,
    LLAMA_31_8B,
    LLAMA_31_70B,
    LLAMA_31_405B,
    cpu_topology,
    local,
    recipe,
    spec,
    topology,
)
from tests.support.violation_codes import EXPERIMENT_SIDE_CODES, RECIPE_TEXT_CODES

pytestmark = pytest.mark.usefixtures("signal_handlers")  # the host installs its own SIGTERM handler
Doc = dict[str, Any]
Edit = Callable[[Doc], None]
SRC = Path(__file__).resolve().parents[2] / "src" / "rlaunch"
# The fsdp runtime with an open upstream defect that a tail-stride geometry triggers (same files,
# so the same source digest): what `defect.open` refuses.
OPEN_DEFECT_PROFILE = "fsdp-with-an-open-defect"
register_profile(
    dataclasses.replace(
        get_profile("fsdp"),
        name=OPEN_DEFECT_PROFILE,
        known_defects=(KnownDefect("TEST#1", "skyrl", "tail batches crash", trigger="tail_stride"),),
    )
)


@pytest.fixture(scope="module")
def bases(module_prefix: str) -> dict[str, Doc]:
    """Valid launch documents rendered by the experiment side, one per runtime shape (once per module)."""
    jobs = f"{module_prefix}/.jobs"
    shapes = {
        "fsdp": spec(),
        "megatron": spec(profile="megatron"),
        "cpu": spec(profile="trl-cpu", topo=cpu_topology()),
        "colocated": spec(topo=topology()),
    }
    out = {}
    for shape, s in shapes.items():
        step = skyrl_step(s, local(jobs_root=jobs))
        out[shape] = step.build_config(StepContext.for_run(step, module_prefix))["launch_document"]
    return out


def trainer(d: Doc) -> Doc:
    return d["skyrl"]["trainer"]


def engine(d: Doc) -> Doc:
    return d["skyrl"]["generator"]["inference_engine"]


def alloc(d: Doc) -> Doc:
    return d["cluster"]["allocation"]


def megatron(d: Doc) -> Doc:
    return policy(d).setdefault("megatron_config", {})


def policy(d: Doc) -> Doc:
    return trainer(d).setdefault("policy", {})


def sets(getter: Callable[[Doc], Doc], **values: Any) -> Edit:
    return lambda d: getter(d).update(values)


def drops(key: str) -> Edit:
    return lambda d: trainer(d).pop(key)


def both(*edits: Edit) -> Edit:
    def edit(d: Doc) -> None:
        for e in edits:
            e(d)

    return edit


def critic(num_nodes: int, num_gpus_per_node: int, mini_batch_size: int) -> Edit:
    """GAE with a critic as the role plan renders one (the host fills its model path)."""

    def edit(d: Doc) -> None:
        t = trainer(d)
        t["algorithm"].update(advantage_estimator="gae", use_kl_loss=False)
        t["critic"] = {"model": {"path": CRITIC_FROM_POLICY}}
        t["placement"].update(critic_num_nodes=num_nodes, critic_num_gpus_per_node=num_gpus_per_node)
        t["critic_mini_batch_size"] = mini_batch_size

    return edit


def fully_async(d: Doc) -> None:
    d["runtime"]["entrypoint"] = "fully_async"
    trainer(d).setdefault("fully_async", {})["enabled"] = True


def wider_nodes(d: Doc) -> None:
    """Nodes of 6 GPUs: a 4 x 6 policy and six 4-GPU engines, which cannot pack 6 to a node."""
    alloc(d)["gpus_per_node"] = 6
    trainer(d)["placement"].update(policy_num_gpus_per_node=6, ref_num_gpus_per_node=6)
    engine(d).update(num_engines=6, data_parallel_size=4)


# code -> (base shape, the edit that makes the document exhibit it)
CASES: dict[str, tuple[str, Edit]] = {
    "topology.non_positive": ("fsdp", sets(alloc, num_nodes=0)),
    "topology.too_large": ("fsdp", sets(alloc, gpus_per_node=2**63)),
    "role_plan.non_positive": ("fsdp", sets(engine, tensor_parallel_size=0)),  # was a ZeroDivisionError
    "role_plan.too_large": ("fsdp", sets(trainer, train_batch_size=2**70)),
    "role_plan.policy_nodes_exceed_topology": ("fsdp", lambda d: trainer(d)["placement"].update(policy_num_nodes=9)),
    "role_plan.policy_gpus_exceed_node": (
        "fsdp",
        lambda d: trainer(d)["placement"].update(policy_num_gpus_per_node=16),
    ),
    "role_plan.policy_width_mismatch": ("fsdp", lambda d: trainer(d)["placement"].update(policy_num_gpus_per_node=4)),
    "engine.colocated_slice": ("colocated", sets(engine, tensor_parallel_size=3)),
    "engine.colocated_gpu_mismatch": ("colocated", sets(engine, num_engines=2)),
    "engine.exceeds_node": ("fsdp", sets(engine, data_parallel_size=16)),
    "engine.rollout_packing": ("fsdp", wider_nodes),
    "engine.expert_parallel": ("fsdp", sets(engine, expert_parallel_size=3)),
    "engine.expert_parallel_skyrl": ("fsdp", sets(engine, expert_parallel_size=2)),
    "topology.gpu_budget": ("fsdp", sets(engine, num_engines=3)),
    "topology.gpu_variant_ambiguous": ("fsdp", sets(alloc, gpu_variant="A100")),
    "batch.train_mini": ("fsdp", sets(trainer, train_batch_size=250)),
    "batch.micro_forward": ("fsdp", sets(trainer, micro_forward_batch_size_per_gpu=0)),
    "batch.per_gpu_mini_zero": ("fsdp", sets(trainer, policy_mini_batch_size=2)),
    "batch.per_gpu_mini_micro": ("fsdp", sets(trainer, micro_train_batch_size_per_gpu=32)),
    "batch.per_gpu_train_mini": ("fsdp", sets(trainer, train_batch_size=96)),
    "batch.reference_lcm": ("fsdp", sets(trainer, train_batch_size=2, policy_mini_batch_size=2)),
    "batch.tail_stride": ("fsdp", sets(trainer, train_batch_size=250)),
    "strategy.megatron_non_positive": ("megatron", sets(megatron, tensor_model_parallel_size=0)),
    "strategy.megatron_world": ("megatron", sets(megatron, tensor_model_parallel_size=3)),
    "strategy.megatron_expert": ("megatron", sets(megatron, expert_model_parallel_size=3)),
    "strategy.megatron_sequence_parallel": (
        "megatron",
        sets(policy, sequence_parallel_size=2),
    ),
    "strategy.megatron_context_parallel": (
        "megatron",
        both(sets(megatron, context_parallel_size=2), sets(trainer, remove_microbatch_padding=False)),
    ),
    "strategy.megatron_routing_replay": (
        "megatron",
        sets(megatron, moe_enable_routing_replay=True, transformer_config_kwargs={"moe_router_fusion": True}),
    ),
    "strategy.megatron_fp8": ("megatron", sets(megatron, fp8_param=True, fp8_recipe="mxfp8")),
    "strategy.sequence_parallel": (
        "fsdp",
        sets(policy, sequence_parallel_size=3),
    ),
    "runtime.source_digest": ("fsdp", lambda d: d["runtime"].update(source_digest="0" * 64)),
    "entrypoint.unknown": ("fsdp", lambda d: d["runtime"].update(entrypoint="nope")),
    "entrypoint.fully_async_enabled": ("fsdp", lambda d: trainer(d).update(fully_async={"enabled": True})),
    "entrypoint.fully_async_batch": ("fsdp", fully_async),
    "entrypoint.fully_async_colocated": ("colocated", fully_async),
    "entrypoint.fully_async_workers": ("fsdp", fully_async),
    "entrypoint.fully_async_policy_loss": ("fsdp", fully_async),
    "entrypoint.fully_async_batched": (
        "fsdp",
        both(fully_async, lambda d: d["skyrl"]["generator"].update(batched=True)),
    ),
    "runtime.strategy_mismatch": ("fsdp", sets(trainer, strategy="megatron")),
    "runtime.accelerator": ("fsdp", sets(alloc, gpu_variant="cpu")),
    "runtime.capability": ("cpu", sets(alloc, num_nodes=2)),
    "runtime.unsupported_setting": ("cpu", lambda d: trainer(d)["algorithm"].update(advantage_estimator="rloo")),
    "recipe.unknown_key": ("fsdp", sets(trainer, no_such_key=1)),
    "recipe.type_mismatch": ("fsdp", sets(trainer, train_batch_size="2")),
    "recipe.disagrees_with_plan": ("fsdp", lambda d: trainer(d)["placement"].update(ref_num_nodes=1)),
    "recipe.launcher_owned": ("fsdp", sets(trainer, ckpt_path="/somewhere/else")),
    "explicit.checkpoint_interval": ("fsdp", drops("ckpt_interval")),
    "explicit.resume_mode": ("fsdp", drops("resume_mode")),
    "explicit.export_policy": ("fsdp", drops("hf_save_interval")),
    "explicit.token_budget": ("fsdp", drops("max_prompt_length")),
    "explicit.wandb_project": ("fsdp", sets(trainer, logger="wandb")),
    "explicit.wandb_entity": (
        "fsdp",
        both(sets(trainer, logger="wandb", project_name="p"), lambda d: d["cluster"].update(wandb_entity=None)),
    ),
    "recipe.critic": ("fsdp", sets(trainer, critic={"model": {"path": "/models/critic"}})),
    "recipe.kl_exclusive": ("fsdp", lambda d: trainer(d)["algorithm"].update(use_kl_in_reward=True)),
    "recipe.gae_needs_critic": ("fsdp", lambda d: trainer(d)["algorithm"].update(advantage_estimator="gae")),
    "recipe.critic_sequence_parallel": ("fsdp", sets(trainer, critic={"sequence_parallel_size": 0})),
    "role_plan.critic_placement": ("colocated", critic(1, 4, 32)),  # a colocated critic on half the policy's GPUs
    "batch.critic": ("colocated", critic(1, 8, 48)),  # 64 prompts are not a multiple of 48
    "recipe.language_model_only": ("fsdp", sets(policy, language_model_only=True)),
    "recipe.max_training_steps": ("fsdp", sets(trainer, max_training_steps=0)),
    "recipe.resume_mode": ("fsdp", sets(trainer, resume_mode="from_path")),
    "recipe.input_length": ("fsdp", lambda d: d["skyrl"]["generator"].update(max_input_length=7)),
    "recipe.prefill_decode": ("fsdp", sets(engine, enable_pd=True, num_prefill=0)),
    "recipe.external_engines": ("fsdp", sets(engine, external_server_urls=["http://10.0.0.1:8000"])),
    "recipe.executor_backend": ("fsdp", sets(engine, distributed_executor_backend="threads")),
    "model.tp_heads": (
        "fsdp",
        both(
            sets(engine, tensor_parallel_size=8, data_parallel_size=1),
            lambda d: d["inputs"]["model"].update(num_attention_heads=12),
        ),
    ),
    "model.context_budget": ("fsdp", lambda d: d["inputs"]["model"].update(context_length=100)),
    "model.revision_mismatch": ("fsdp", lambda d: d["inputs"]["model"].update(revision="1" * 40)),
    # 405B parameters x 12 bytes over the 32 policy GPUs: 142 GiB per H100 before anything runs.
    "memory.model_states": ("fsdp", lambda d: d["inputs"]["model"].update(hf_config=LLAMA_31_405B)),
    # 70B parameters in bf16 on one TP1 engine GPU: 131 GiB against 0.8 x 79.22 GiB.
    "memory.engine_weights": ("fsdp", lambda d: d["inputs"]["model"].update(hf_config=LLAMA_31_70B)),
    # 8B weights (15 GiB) leave 0.9 GiB of a 0.2 x 79.22 GiB budget: under 8k tokens of KV.
    "memory.kv_one_sequence": (
        "fsdp",
        both(
            lambda d: d["inputs"]["model"].update(hf_config=LLAMA_31_8B),
            sets(engine, gpu_memory_utilization=0.2),
            lambda d: d["skyrl"]["generator"].setdefault("sampling_params", {}).update(max_generate_length=16384),
        ),
    ),
    "defect.open": (
        "fsdp",
        both(
            lambda d: d["runtime"].update(profile=OPEN_DEFECT_PROFILE),
            sets(trainer, train_batch_size=250, policy_mini_batch_size=50),
        ),
    ),
}


def host_launch(prefix: str, doc: Doc, name: str) -> dict[str, Any]:
    """Write `doc` as a fresh attempt and run `rlaunch launch --config` on it; the one JSON result."""
    root = Path(prefix)
    doc["run"]["attempt_id"] = name
    doc["cluster"]["job_name"] = f"rules-{name}"
    doc["artifacts"]["terminal_manifest_uri"] = str(root / "terminal" / f"{name}.json")
    path = root / "docs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    done = CliRunner().invoke(rlaunch_main, ["launch", "--config", str(path)])
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout must be one JSON result, got {done.stdout!r}"
    result = json.loads(lines[0])
    assert done.exit_code == (0 if result["state"] in ("prepared", "submitted", "succeeded") else 2), done.output
    return result


def nothing_submitted(prefix: str, doc: Doc, result: dict[str, Any]) -> None:
    assert result["child_job_id"] is None and result["resolved_config_uri"] is None
    assert LocalBackend(root=f"{prefix}/.jobs").list_jobs() == []
    attempt = Path(doc["artifacts"]["attempts_root"]) / doc["run"]["attempt_id"]
    assert not (attempt / "resolved-launch.yaml").exists()
    assert not Path(doc["artifacts"]["terminal_manifest_uri"]).exists()


def test_every_registered_code_has_a_document_case() -> None:
    assert sorted(CASES) == sorted(rules.CODES)


def test_every_code_a_rule_or_the_preflight_writes_is_registered() -> None:
    """No violation escapes the registry: every literal code in the rules and the experiment side."""
    found: dict[str, set[str]] = {}
    for path in [*(SRC / "rules").glob("*.py"), *(SRC / "skyrl").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                "violation",
                "PreflightError",
            ):
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.setdefault(first.value, set()).add(path.name)
    assert found, "the scan must see the rules' codes"
    for code, _ in EXPLICIT_KEYS.values():  # codes chosen from a table rather than written at the call
        found.setdefault(code, set()).add("rules/recipe_rules.py")
    unregistered = set(found) - set(rules.CODES) - RECIPE_TEXT_CODES - EXPERIMENT_SIDE_CODES - {"preflight.violations"}
    assert not unregistered, {code: found[code] for code in unregistered}


def test_the_base_documents_are_accepted(module_prefix: str, bases: dict[str, Doc]) -> None:
    for base in bases.values():
        validate_document(schema.from_dict(copy.deepcopy(base)))
    result = host_launch(
        module_prefix, copy.deepcopy(bases["cpu"]) | {"run": {**bases["cpu"]["run"], "submission": "prepare"}}, "ok"
    )
    assert result["state"] == "prepared" and result["violations"] == []


def test_the_host_accepts_a_critic_and_gives_it_the_policys_model(bases: dict[str, Doc]) -> None:
    doc = copy.deepcopy(bases["colocated"])
    critic(1, 8, 32)(doc)
    loaded = schema.from_dict(doc)
    composed = compose_document(loaded, validate_document(loaded)).skyrl
    model = loaded.inputs.model.local_path
    assert composed["trainer"]["critic"]["model"]["path"] == model == composed["trainer"]["policy"]["model"]["path"]
    plain = schema.from_dict(copy.deepcopy(bases["colocated"]))
    assert compose_document(plain, validate_document(plain)).skyrl["trainer"]["critic"]["model"]["path"] is None


def test_the_repository_experiments_render_documents_the_host_accepts(module_prefix: str) -> None:
    from experiments import rl_plan_example, smoke
    from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context

    with build_context(BuildContext(VersionCodex("2026.11.30"))):
        model, data = smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step()
        steps = [smoke.rl_step(model, data, slots, 4) for slots in (1, 2)] + [rl_plan_example.rl_step(False)]
        for step in steps:
            doc = step.build_config(StepContext.for_run(step, module_prefix))["launch_document"]
            validate_document(schema.from_dict(doc))


@pytest.mark.parametrize("code", sorted(CASES))
def test_the_host_refuses_a_document_with_the_preflight_code(
    module_prefix: str, bases: dict[str, Doc], code: str
) -> None:
    shape, edit = CASES[code]
    doc = copy.deepcopy(bases[shape])
    edit(doc)
    result = host_launch(module_prefix, doc, code.replace(".", "-"))
    assert result["state"] == "failed", result
    hits = [v for v in result["violations"] if v["code"] == code]
    assert hits, f"{code} not among {[v['code'] for v in result['violations']]}"
    assert f"[{code}]" in result["failure"]
    for v in hits:
        assert v["fix"] and v["message"]
        assert all(f.split(".")[0] in ("skyrl", "cluster", "runtime", "run", "inputs") for f in v["fields"]), v
    nothing_submitted(module_prefix, doc, result)


@pytest.mark.parametrize(("shape", "refused"), [("fsdp", True), ("cpu", False)])
def test_a_shipped_reward_on_a_runtime_that_calls_none_is_refused_by_the_host(
    module_prefix: str, bases: dict[str, Doc], shape: str, refused: bool
) -> None:
    """`SkyRLSpec` refuses `reward=` on a SkyRL runtime when it is built; a hand-written document
    naming `code.reward` for one is refused by the host in the same words (its trainer would ignore
    it and score with `environment.env_class`), and accepted for trl-cpu, whose trainer calls it."""
    doc = copy.deepcopy(bases[shape])
    doc["code"] = {
        "uri": f"{module_prefix}/.code/{'0' * 64}",
        "digest": "0" * 64,
        "modules": ["exp"],
        "reward": "exp:score",
    }
    try:
        validate_document(schema.from_dict(doc))
    except DocumentRefused as exc:
        found = [v for v in exc.violations if v.fields == ("code.reward",)]
    else:
        found = []
    assert bool(found) is refused, found
    if refused:
        (v,) = found
        assert v.code == "runtime.capability"
        assert v.message == (
            "code.reward='exp:score': runtime 'fsdp' does not call a reward function of the shipped code "
            "(capabilities.shipped_reward); its trainer would score with environment.env_class"
        )


def test_the_run_record_keeps_the_memory_table_of_a_refused_document(module_prefix: str, bases: dict[str, Doc]) -> None:
    doc = copy.deepcopy(bases["fsdp"])
    CASES["memory.model_states"][1](doc)
    result = host_launch(module_prefix, doc, "memory-record")
    assert result["state"] == "failed"
    record = json.loads((Path(doc["artifacts"]["output_path"]) / "run_record.json").read_text())
    (entry,) = [a for a in record["attempts"] if a["attempt_id"] == "memory-record"]
    table = entry["memory"]
    assert table["device"] == {"name": "H100", "capacity_gib": 79.22}
    states = [r for r in table["rows"] if (r["role"], r["phase"]) == ("policy", "model states")][0]
    assert states["status"] == "REFUSED" and states["certain_gib"] > states["capacity_gib"]


def test_document_memory_sizes_what_the_document_says(bases: dict[str, Doc]) -> None:
    doc = copy.deepcopy(bases["fsdp"])
    assert memory_table(schema.from_dict(copy.deepcopy(doc))).as_dict()["unsized"] == [
        "cannot size the model: the model's architecture is not known (no config.json facts recorded)"
    ]
    doc["inputs"]["model"]["hf_config"] = LLAMA_31_8B
    table = memory_table(schema.from_dict(doc)).as_dict()
    assert table["unsized"] == [] and {r["status"] for r in table["rows"]} == {"ok"}
    assert table["kv_cache"]["max_model_len"] == 4096


def test_the_zero_tensor_parallel_reproducer_names_the_document_field(
    module_prefix: str, bases: dict[str, Doc]
) -> None:
    doc = copy.deepcopy(bases["fsdp"])
    engine(doc)["tensor_parallel_size"] = 0
    result = host_launch(module_prefix, doc, "tp0")
    (v,) = [v for v in result["violations"] if v["code"] == "role_plan.non_positive"]
    assert v["fields"] == ["skyrl.generator.inference_engine.tensor_parallel_size"] and v["values"] == {"value": 0}


def test_the_reproducer_through_the_real_command(module_prefix: str, bases: dict[str, Doc]) -> None:
    """`python -m rlaunch launch --config` in its own process: one JSON result, exit 1, no traceback."""
    doc = copy.deepcopy(bases["fsdp"])
    engine(doc)["tensor_parallel_size"] = 0
    doc["run"]["attempt_id"] = "tp0-process"
    doc["artifacts"]["terminal_manifest_uri"] = f"{module_prefix}/terminal/tp0-process.json"
    path = Path(module_prefix) / "docs" / "tp0-process.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")} | {"RLAUNCH_PREFIX": module_prefix}
    done = subprocess.run(
        [sys.executable, "-m", "rlaunch", "launch", "--config", str(path)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stdout.strip().splitlines()
    result = json.loads(line)
    assert [v["code"] for v in result["violations"]] == ["role_plan.non_positive"]
    nothing_submitted(module_prefix, doc, result)


def test_an_unknown_runtime_profile_is_a_document_error(module_prefix: str, bases: dict[str, Doc]) -> None:
    doc = copy.deepcopy(bases["fsdp"])
    doc["runtime"]["profile"] = "no-such-runtime"
    result = host_launch(module_prefix, doc, "unknown-profile")
    assert result["state"] == "failed" and "runtime.profile: runtime profile 'no-such-runtime'" in result["failure"]


def test_a_document_runs_its_base_defaults_so_a_missing_seed_disagrees(
    module_prefix: str, bases: dict[str, Doc]
) -> None:
    doc = copy.deepcopy(bases["fsdp"])
    del trainer(doc)["seed"]
    result = host_launch(module_prefix, doc, "no-seed")
    (v,) = [v for v in result["violations"] if v["code"] == "recipe.disagrees_with_plan"]
    assert v["fields"] == ["skyrl.trainer.seed"] and v["values"]["plan"] == 17


def test_the_preflight_and_the_host_agree_on_a_broken_plan(module_prefix: str, bases: dict[str, Doc]) -> None:
    """The same mistakes, made once through the experiment side and once by hand, get the same codes."""
    from rlaunch.skyrl import check_plan
    from tests.support.specs import seed_topology

    broken = seed_topology(train_batch_size=250, inference_engine_data_parallel_size=1)
    preflight = sorted(v.code for v in check_plan(broken, recipe(trainer={"max_training_steps": 0}), "fsdp", seed=17))
    doc = copy.deepcopy(bases["fsdp"])
    trainer(doc).update(train_batch_size=250, max_training_steps=0)
    engine(doc).update(data_parallel_size=1)
    result = host_launch(module_prefix, doc, "broken")
    assert sorted(v["code"] for v in result["violations"]) == preflight
    assert BASE_RECIPE["trainer"]["ckpt_interval"] == 20  # the builders were not mutated


DOCUMENT_SIZES = st.one_of(
    st.integers(min_value=-3, max_value=40),
    st.sampled_from([2**40, 5 * 10**7, 2**61 - 1, 2**62, 2**63, -(2**64)]),
)
DOCUMENT_KEYS = (
    ("cluster.allocation.num_nodes", DOCUMENT_SIZES),
    ("cluster.allocation.gpus_per_node", DOCUMENT_SIZES),
    ("skyrl.trainer.placement.policy_num_nodes", DOCUMENT_SIZES),
    ("skyrl.trainer.placement.ref_num_gpus_per_node", DOCUMENT_SIZES),
    ("skyrl.generator.inference_engine.num_engines", DOCUMENT_SIZES),
    ("skyrl.generator.inference_engine.tensor_parallel_size", DOCUMENT_SIZES),
    ("skyrl.generator.inference_engine.data_parallel_size", DOCUMENT_SIZES),
    ("skyrl.generator.inference_engine.expert_parallel_size", DOCUMENT_SIZES),
    ("skyrl.trainer.train_batch_size", DOCUMENT_SIZES | st.just("64")),
    ("skyrl.trainer.policy_mini_batch_size", DOCUMENT_SIZES),
    ("skyrl.trainer.micro_train_batch_size_per_gpu", DOCUMENT_SIZES),
    ("skyrl.generator.n_samples_per_prompt", DOCUMENT_SIZES | st.none()),
    ("skyrl.trainer.policy.sequence_parallel_size", DOCUMENT_SIZES),
    ("skyrl.trainer.placement.colocate_all", st.booleans() | st.just(1)),
    ("inputs.model.num_attention_heads", DOCUMENT_SIZES | st.none()),
    ("runtime.entrypoint", st.sampled_from(["standard", "fully_async", ""])),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), shape=st.sampled_from(["fsdp", "megatron", "cpu", "colocated"]))
def test_any_document_ends_in_acceptance_or_a_document_error(
    bases: dict[str, Doc], data: st.DataObject, shape: str
) -> None:
    """Hand-written numbers anywhere in a document: the host's validation accepts or refuses, never crashes."""
    doc = copy.deepcopy(bases[shape])
    for dotted, values in data.draw(st.lists(st.sampled_from(DOCUMENT_KEYS), max_size=5)):
        *parents, leaf = dotted.split(".")
        node = doc
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = data.draw(values)
    try:
        validate_document(schema.from_dict(doc))
    except DocumentRefused as exc:
        assert exc.violations and set(v.code for v in exc.violations) <= set(rules.CODES)
        json.dumps(exc.to_json())
    except DocumentError as exc:
        assert str(exc)
