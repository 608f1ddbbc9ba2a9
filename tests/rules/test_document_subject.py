"""A launch document as the rules read it (`rlaunch.rules.document_subject`): the allocation's host
memory and the seed's field, and the document's memory table and plans that fit, each answer
with its reason where a part cannot be sized (an unknown runtime, a recipe that does not compose,
sizes a refused document's arithmetic cannot take)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from experiments import rl_plan_example as example
from rlaunch.artifacts import StepContext
from rlaunch.launch_config import schema
from rlaunch.rules import document_subject as ds
from rlaunch.rules.devices import GIB
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import skyrl_step
from rlaunch.skyrl.values.config_yaml import parse_config_yaml
from tests.support.specs import LLAMA_31_8B, cpu_topology, local, spec, to_yaml

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def docs(module_prefix: str) -> dict[str, Doc]:
    """Launch documents the experiment side renders: the seed plan, a CPU plan, and the one-node 24 GB
    example (refused on memory) with its model's config.json."""
    written = parse_config_yaml(example.recipe("one-node-24gb"))
    written["trainer"]["logger"] = "console"
    specs = {
        "fsdp": spec(),
        "cpu": spec(profile="trl-cpu", topo=cpu_topology()),
        "24gb": spec(topo=example.topology(False, "one-node-24gb"), config_yaml=to_yaml(written)),
    }
    out = {}
    for name, s in specs.items():
        step = skyrl_step(s, local(jobs_root=f"{module_prefix}/.jobs"))
        out[name] = step.build_config(StepContext.for_run(step, module_prefix))["launch_document"]
    out["24gb"]["inputs"]["model"]["hf_config"] = example.QWEN3_8B_CONFIG
    return out


def read(doc: Doc) -> tuple[schema.SkyRLLaunchConfig, Any, dict[str, Any]]:
    typed = schema.from_dict(copy.deepcopy(doc))
    profile = get_profile(typed.runtime.profile)
    composed, problems = profile.compose(typed.skyrl)
    assert not problems
    return typed, profile, composed


def test_the_subject_reads_the_allocation_the_seed_and_the_plan_in_the_recipe(docs: dict[str, Doc]) -> None:
    subject = ds.document_subject(*read(docs["cpu"]))
    assert docs["cpu"]["cluster"]["allocation"]["memory"] == "4GB"
    assert subject.host_memory_bytes == 4 * 10**9
    assert (subject.seed, subject.seed_source, subject.plan_in_recipe) == (17, "run.seed", True)
    assert subject.gpu_variant == "cpu" and subject.architecture is None


@pytest.mark.parametrize(("size", "expected"), [("2GiB", 2 * GIB), ("512MB", 512 * 10**6), ("lots", None), ("", None)])
def test_a_malformed_host_memory_leaves_a_cpu_slot_unsized(size: str, expected: int | None) -> None:
    assert ds._host_memory(size) == expected


def test_an_unknown_runtime_is_why_the_table_is_unsized(docs: dict[str, Doc]) -> None:
    doc = copy.deepcopy(docs["fsdp"])
    doc["runtime"]["profile"] = "no-such-runtime"
    table = ds.memory_table(schema.from_dict(doc))
    assert table.device is None and table.rows == ()
    (reason,) = table.unsized
    assert reason.startswith("runtime profile 'no-such-runtime' is not registered; choose one of ['fsdp', ")


def test_a_recipe_that_does_not_compose_is_why_the_table_is_unsized(docs: dict[str, Doc]) -> None:
    doc = copy.deepcopy(docs["fsdp"])
    doc["skyrl"]["trainer"]["no_such_key"] = 1
    table = ds.memory_table(schema.from_dict(doc))
    assert (table.device, table.unsized) == (None, ("the recipe does not compose",))


def test_sizes_the_arithmetic_cannot_take_are_named_not_raised(docs: dict[str, Doc]) -> None:
    doc = copy.deepcopy(docs["fsdp"])
    doc["inputs"]["model"]["hf_config"] = LLAMA_31_8B
    doc["skyrl"]["generator"]["inference_engine"]["tensor_parallel_size"] = 0
    table = ds.memory_table(schema.from_dict(doc))
    assert (table.device, table.unsized) == (None, ("cannot size this plan: ZeroDivisionError: division by zero",))
    typed, profile, composed = read(doc)
    assert ds.nearest_fits(typed, profile, composed) == []


def test_a_document_refused_on_memory_is_offered_plans_where_every_row_is_ok(docs: dict[str, Doc]) -> None:
    typed, profile, composed = read(docs["24gb"])
    assert "REFUSED" in {row.status for row in ds.memory_table(typed).rows}
    # the local allocation asks 4 GB of host memory a node: no offload of the policy's 122 GiB is offered
    fits = ds.nearest_fits(typed, profile, composed)
    assert [f.label for f in fits] == ["fewest nodes, with wider engines"]
    roomy = copy.deepcopy(docs["24gb"])
    roomy["cluster"]["allocation"]["memory"] = "1600GB"
    fits = ds.nearest_fits(*read(roomy))
    # no "longest generation" 16 tokens shorter beside the same offload: the offload is the plan
    assert [f.label for f in fits] == ["offload, with wider engines", "fewest nodes, with wider engines"]
    assert all(f.line().startswith(f"{f.label}: ") for f in fits)
    assert fits[0].host_bytes and not fits[1].host_bytes
    # a document that fits, or one without a model to size, is offered nothing
    assert ds.nearest_fits(*read(docs["fsdp"])) == []
