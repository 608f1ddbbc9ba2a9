"""The launch host's own steps, one at a time and in-process: the document paths a rule's fields are
translated to, the verdict `validate_document` returns at each arithmetic edge (the largest document
accepted, the smallest refused, with the numbers that decided it), the values `compose_document`
injects, and the child job `allocate` asks the backend for. No launch, no backend."""

from __future__ import annotations

import copy
import dataclasses
import sys
from typing import Any

import pytest

from rlaunch import rules, storage
from rlaunch.cluster.job_environment import job_environment
from rlaunch.cluster.protocol import Resources
from rlaunch.host.allocate import (
    DRIVER_CPU,
    TASK_MODULE,
    child_job_spec,
    child_resources,
    driver_job_spec,
    drives_existing_cluster,
)
from rlaunch.host.compose import compose_document, injected_values
from rlaunch.host.validate import DocumentRefused, document_fields, document_path, validate_document
from rlaunch.launch_config import schema
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import CRITIC_KEYS, ROLE_PLAN_KEYS
from rlaunch.launch_config.typed import DocumentError
from rlaunch.runs.resume import run_fingerprint
from rlaunch.runtimes.registry import RAY_DRIVER, get_profile, register_profile
from tests.host.test_host_rules import Doc, Edit, alloc, both, engine, sets, trainer

# The fsdp runtime (a Ray driver) started by torchrun instead: its child job stays the whole gang on Ray.
TORCHRUN_PROFILE = "fsdp-under-torchrun"
register_profile(dataclasses.replace(get_profile("fsdp"), name=TORCHRUN_PROFILE, launcher="torchrun"))


def refusal(d: Doc) -> DocumentRefused:
    with pytest.raises(DocumentRefused) as info:
        validate_document(schema.from_dict(d))
    return info.value


def only(d: Doc, code: str) -> rules.Violation:
    found = refusal(d).violations
    hits = [v for v in found if v.code == code]
    assert len(hits) == 1, [v.code for v in found]
    return hits[0]


# --- document paths ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "path"),
    [
        *((f"role_plan.{name}", f"skyrl.{key}") for name, key in ROLE_PLAN_KEYS.items()),
        # the critic's plan fields: only under role_plan.critic, and only the ones it renders
        *((f"role_plan.critic.{name}", f"skyrl.{key}") for name, key in CRITIC_KEYS.items()),
        ("role_plan.critic.something_else", "skyrl.critic.something_else"),
        ("role_plan.critic", "skyrl.critic"),
        ("role_plan.mini_batch_size", "skyrl.mini_batch_size"),
        ("config_yaml.critic.num_nodes", "skyrl.critic.num_nodes"),
        ("role_plan.something_else", "skyrl.something_else"),
        ("role_plan", "skyrl"),
        ("topology.num_nodes", "cluster.allocation.num_nodes"),
        ("config_yaml.trainer.seed", "skyrl.trainer.seed"),
        ("runtime.profile", "runtime.profile"),
        ("config_yaml.entrypoint", "runtime.entrypoint"),
        ("config_yaml.entrypoints", "skyrl.entrypoints"),
        ("config_yaml.trainer.placement", "skyrl.trainer.placement"),
        ("config_yaml", "skyrl"),
        ("model.tokenizer_revision", "inputs.model.tokenizer_revision"),
        ("model.tokenizer_revision.x", "inputs.model.tokenizer_revision.x"),
        ("model.revision", "model.revision"),
        ("execution.wandb_entity", "cluster.wandb_entity"),
        ("topology", "cluster.allocation"),
        ("topology.gpus_per_node", "cluster.allocation.gpus_per_node"),
        ("topologyx.gpus_per_node", "topologyx.gpus_per_node"),
        ("runtime.source_digest", "runtime.source_digest"),
        ("", ""),
    ],
)
def test_every_rule_field_has_its_document_path(field: str, path: str) -> None:
    assert document_path(field) == path


def test_a_refusal_names_document_paths_in_its_lines_and_its_json() -> None:
    v = rules.violation(
        "batch.train_mini",
        ["role_plan.train_batch_size", "topology.num_nodes"],
        "train_batch_size=250 must be divisible",
        "make it divisible",
        train=250,
    )
    fields = ("skyrl.trainer.train_batch_size", "cluster.allocation.num_nodes")
    assert document_fields(v) == fields
    refused = DocumentRefused([v, dataclasses.replace(v, code="batch.tail_stride", values={})])
    assert refused.problems == [v.line(fields), v.line(fields).replace("batch.train_mini", "batch.tail_stride")]
    assert str(refused).startswith("launch document is invalid (2 problem(s)):\n  - [batch.train_mini] ")
    assert "(field: skyrl.trainer.train_batch_size, cluster.allocation.num_nodes)" in str(refused)
    assert refused.to_json()[0] == {
        "code": "batch.train_mini",
        "fields": list(fields),
        "values": {"train": 250},
        "message": "train_batch_size=250 must be divisible",
        "fix": "make it divisible",
    }
    assert refused.to_json()[1]["code"] == "batch.tail_stride" and refused.to_json()[1]["values"] == {}
    assert str(DocumentRefused([v])) == f"launch document is invalid: {v.line(fields)}"


# --- validation: the verdict and the composed recipe -------------------------------------------


def test_an_accepted_document_returns_its_recipe_composed_onto_the_base_config(document: Doc) -> None:
    composed = validate_document(schema.from_dict(document))
    base = get_profile("fsdp").base_config()
    assert composed["trainer"]["train_batch_size"] == 256 and composed["trainer"]["seed"] == 17
    assert composed["trainer"]["epochs"] == base["trainer"]["epochs"]  # not in the document: the base default
    assert set(composed) == set(base)


def test_an_unknown_runtime_profile_is_one_document_error(document: Doc) -> None:
    document["runtime"]["profile"] = "fsdp9"
    with pytest.raises(DocumentError) as info:
        validate_document(schema.from_dict(document))
    assert not isinstance(info.value, DocumentRefused)
    (problem,) = info.value.problems
    assert problem.startswith("runtime.profile: runtime profile 'fsdp9' is not registered")


def six_gpu_nodes(engines: int, width: int) -> Edit:
    """Nodes of 6 GPUs: policy 4 x 6 and `engines` engines of `width` GPUs on the other four nodes."""
    return both(
        sets(alloc, gpus_per_node=6),
        lambda d: trainer(d)["placement"].update(policy_num_gpus_per_node=6, ref_num_gpus_per_node=6),
        sets(engine, num_engines=engines, data_parallel_size=width),
        sets(trainer, train_batch_size=240, policy_mini_batch_size=60),
    )


# (code, the largest document the host accepts, the smallest it refuses, values of the refusal, its fields)
EDGES: list[tuple[str, Edit, Edit, dict[str, Any], list[str]]] = [
    (
        "engine.rollout_packing",  # 3-GPU engines pack two to a 6-GPU node; 4-GPU ones one, 2 GPUs idle
        six_gpu_nodes(8, 3),
        six_gpu_nodes(6, 4),
        {"needed_nodes": 6, "free_nodes": 4},
        ["skyrl.generator.inference_engine.num_engines"],
    ),
    (
        "topology.gpu_budget",
        lambda d: None,
        sets(alloc, num_nodes=9),
        {"planned": 64, "allocated": 72},
        ["skyrl", "cluster.allocation.num_nodes", "cluster.allocation.gpus_per_node"],
    ),
    (
        "engine.exceeds_node",
        lambda d: None,  # engines of 8 GPUs on 8-GPU nodes
        sets(engine, data_parallel_size=9),
        {"engine_gpus": 9, "gpus_per_node": 8},
        [
            "skyrl.generator.inference_engine.tensor_parallel_size",
            "skyrl.generator.inference_engine.pipeline_parallel_size",
            "skyrl.generator.inference_engine.data_parallel_size",
        ],
    ),
    (
        "role_plan.policy_nodes_exceed_topology",
        lambda d: None,
        lambda d: trainer(d)["placement"].update(policy_num_nodes=9, ref_num_nodes=9),
        {"policy_num_nodes": 9, "num_nodes": 8},
        ["skyrl.trainer.placement.policy_num_nodes", "cluster.allocation.num_nodes"],
    ),
    (
        "role_plan.policy_width_mismatch",
        lambda d: None,
        lambda d: trainer(d)["placement"].update(policy_num_gpus_per_node=7, ref_num_gpus_per_node=7),
        {"policy_num_gpus_per_node": 7, "gpus_per_node": 8},
        ["skyrl.trainer.placement.policy_num_gpus_per_node", "cluster.allocation.gpus_per_node"],
    ),
    (
        "batch.per_gpu_mini_micro",
        sets(trainer, micro_train_batch_size_per_gpu=16),  # 64 x 8 / 32 = 16 sequences a rank
        sets(trainer, micro_train_batch_size_per_gpu=17),
        {"per_gpu_mini": 16, "micro": 17},
        ["skyrl.trainer.micro_train_batch_size_per_gpu"],
    ),
]


@pytest.mark.parametrize(
    ("code", "accepted", "refused", "values", "fields"),
    EDGES,
    ids=[f"{e[0]}-{i}" for i, e in enumerate(EDGES)],
)
def test_each_arithmetic_check_at_its_edge(
    document: Doc, code: str, accepted: Edit, refused: Edit, values: dict[str, Any], fields: list[str]
) -> None:
    ok = copy.deepcopy(document)
    accepted(ok)
    validate_document(schema.from_dict(ok))
    bad = copy.deepcopy(document)
    refused(bad)
    v = only(bad, code)
    assert {k: v.values[k] for k in values} == values
    assert list(document_fields(v)) == fields


def test_the_seed_is_checked_against_run_seed(document: Doc) -> None:
    trainer(document)["seed"] = 18
    v = only(document, "recipe.disagrees_with_plan")
    assert list(document_fields(v)) == ["skyrl.trainer.seed"] and dict(v.values) == {"recipe": 18, "plan": 17}
    assert "disagrees with run.seed value 17" in v.message


def test_the_recipe_states_the_role_plan_so_only_what_follows_from_it_can_disagree(document: Doc) -> None:
    trainer(document)["placement"]["ref_num_nodes"] = 3
    v = only(document, "recipe.disagrees_with_plan")
    assert list(document_fields(v)) == ["skyrl.trainer.placement.ref_num_nodes"]
    assert dict(v.values) == {"recipe": 3, "plan": 4}


def test_the_source_digest_and_the_model_facts_are_checked(document: Doc) -> None:
    document["runtime"]["source_digest"] = "0" * 64
    document["inputs"]["model"].update(num_attention_heads=12, context_length=100, revision="1" * 40)
    engine(document).update(tensor_parallel_size=8, data_parallel_size=1)
    found = {v.code: v for v in refusal(document).violations}
    assert {"runtime.source_digest", "model.tp_heads", "model.context_budget", "model.revision_mismatch"} <= set(found)
    assert list(document_fields(found["model.revision_mismatch"])) == ["inputs.model.tokenizer_revision"]


def test_a_source_digest_differing_only_past_its_printed_part_is_refused(document: Doc) -> None:
    """The digest is compared in full, not by the 16 characters a plan prints."""
    installed = get_profile(document["runtime"]["profile"]).source_digest
    assert document["runtime"]["source_digest"] == installed
    document["runtime"]["source_digest"] = installed[:-1] + ("0" if installed[-1] != "0" else "1")
    assert only(document, "runtime.source_digest").code == "runtime.source_digest"


def test_the_gpu_variant_reaches_the_runtime_check(document: Doc) -> None:
    alloc(document)["gpu_variant"] = "cpu"
    assert only(document, "runtime.accelerator")


def test_the_entrypoint_is_the_documents(document: Doc) -> None:
    document["runtime"]["entrypoint"] = "nope"
    v = only(document, "entrypoint.unknown")
    assert list(document_fields(v)) == ["runtime.entrypoint"]


def test_a_wandb_logger_needs_the_documents_entity(document: Doc) -> None:
    trainer(document).update(logger="wandb", project_name="p")
    document["cluster"]["wandb_entity"] = None
    v = only(document, "explicit.wandb_entity")
    assert list(document_fields(v)) == ["cluster.wandb_entity"]
    assert v.fix == "set cluster.wandb_entity in the document or use logger: console"
    document["cluster"]["wandb_entity"] = "lab"
    validate_document(schema.from_dict(document))


# --- compose -----------------------------------------------------------------------------------


def test_compose_injects_the_values_rlaunch_owns(document: Doc) -> None:
    doc = schema.from_dict(document)
    values = injected_values(doc)
    model = doc.inputs.model.local_path
    art = doc.artifacts
    assert values == {
        "trainer.policy.model.path": model,
        "trainer.ref.model.path": model,
        "data.train_data": [storage.join(doc.inputs.train_data[0].local_path, "train.parquet")],
        "data.val_data": [storage.join(doc.inputs.validation_data[0].local_path, "test.parquet")],
        "trainer.ckpt_path": art.checkpoint_root,
        "trainer.export_path": art.export_root,
        "trainer.log_path": storage.join(art.attempts_root, doc.run.attempt_id),
        "trainer.max_ckpts_to_keep": 3,
        "trainer.run_name": doc.run.artifact,
        "trainer.resume_path": None,
    }
    assert doc.run.artifact and values["data.train_data"][0].endswith("/train.parquet")
    unnamed = dataclasses.replace(doc, run=dataclasses.replace(doc.run, artifact=None))
    assert injected_values(unnamed)["trainer.run_name"] == doc.run.id


def test_the_resolved_document_carries_the_composition_and_its_fingerprint(document: Doc) -> None:
    doc = schema.from_dict(document)
    composed = validate_document(doc)
    resolved = compose_document(doc, composed)
    for key, value in injected_values(doc).items():
        assert get_path(resolved.skyrl, key) == value
    assert resolved.skyrl["trainer"]["epochs"] == composed["trainer"]["epochs"]
    assert resolved.run.fingerprint == run_fingerprint(doc.to_dict()) and len(resolved.run.fingerprint) == 64
    assert composed["trainer"]["ckpt_path"] != doc.artifacts.checkpoint_root  # compose works on a copy
    assert dataclasses.replace(resolved, skyrl=doc.skyrl, run=doc.run) == doc


# --- allocate ----------------------------------------------------------------------------------


def test_a_gpu_replica_asks_for_the_allocation_and_its_accelerators(document: Doc) -> None:
    a = schema.from_dict(document).cluster.allocation
    assert child_resources(a) == Resources(
        cpu=96.0, memory_bytes=1600 * 10**9, disk_bytes=4 * 10**12, accelerators=8, accelerator_type="H100"
    )


@pytest.mark.parametrize(("variant", "cpu", "slots", "expected"), [("cpu", 2.0, 4, 4.0), ("CPU", 8.0, 4, 8.0)])
def test_a_cpu_replica_asks_for_a_core_per_slot_and_no_accelerator(
    document: Doc, variant: str, cpu: float, slots: int, expected: float
) -> None:
    alloc(document).update(gpu_variant=variant, cpu=cpu, gpus_per_node=slots)
    a = schema.from_dict(document).cluster.allocation
    assert child_resources(a) == Resources(cpu=expected, memory_bytes=1600 * 10**9, disk_bytes=4 * 10**12)


def test_the_child_job_runs_the_task_once_per_node_with_the_document_url(document: Doc, prefix: str) -> None:
    document["cluster"]["task_env"] = {"EXTRA": "1"}
    doc = schema.from_dict(document)
    spec = child_job_spec(doc, "file:///resolved.yaml", working_dir="/work")
    assert spec.name == doc.cluster.job_name
    assert spec.argv == (sys.executable, "-m", TASK_MODULE, "--config", "file:///resolved.yaml")
    assert TASK_MODULE == "rlaunch.task"
    assert dict(spec.env) == job_environment() | {"EXTRA": "1"} and spec.env["RLAUNCH_PREFIX"] == prefix
    assert spec.working_dir == "/work" and spec.replicas == 8 and spec.max_retries == 2
    assert spec.timeout_seconds == 3600.0 and isinstance(spec.timeout_seconds, float)
    assert spec.resources == child_resources(doc.cluster.allocation)
    assert dict(spec.labels) == {
        "rlaunch.kind": "child",
        "rlaunch.run": doc.run.id,
        "rlaunch.attempt": doc.run.attempt_id,
    }
    document["cluster"]["timeout_seconds"] = 0
    assert child_job_spec(schema.from_dict(document), "u", None).timeout_seconds is None
    document["cluster"]["timeout_seconds"] = 1
    assert child_job_spec(schema.from_dict(document), "u", None).timeout_seconds == 1.0


def test_the_task_environment_overrides_the_inherited_one(document: Doc) -> None:
    document["cluster"]["task_env"] = {"RLAUNCH_PREFIX": "/elsewhere"}
    assert child_job_spec(schema.from_dict(document), "u", None).env["RLAUNCH_PREFIX"] == "/elsewhere"


@pytest.mark.parametrize(
    ("backend", "profile", "expected"),
    [("ray", "fsdp", True), ("local", "fsdp", False), ("iris", "fsdp", False), ("ray", TORCHRUN_PROFILE, False)],
)
def test_only_a_ray_driver_runtime_on_ray_drives_the_existing_cluster(
    document: Doc, backend: str, profile: str, expected: bool
) -> None:
    assert get_profile("fsdp").launcher == RAY_DRIVER
    document["cluster"].update(backend=backend, placement={})
    document["runtime"]["profile"] = profile
    assert drives_existing_cluster(schema.from_dict(document)) is expected


def test_the_driver_job_is_the_gang_reduced_to_one_cpu_replica(document: Doc) -> None:
    gang = child_job_spec(schema.from_dict(document), "u", "/work")
    driver = driver_job_spec(gang)
    assert driver.replicas == 1 and driver.resources == Resources(cpu=1.0) and DRIVER_CPU == 1.0
    assert driver.resources.accelerators == 0 and driver.resources.memory_bytes is None
    assert dict(driver.labels) == {**gang.labels, "rlaunch.gang": "ray-driver-in-cluster"}
    assert (driver.name, driver.argv, driver.env, driver.working_dir) == (
        gang.name,
        gang.argv,
        gang.env,
        gang.working_dir,
    )
    assert gang.replicas == 8 and "rlaunch.gang" not in gang.labels
