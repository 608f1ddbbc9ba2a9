"""The memory rules' verdicts at their edges, on rows and tables built by hand: when a row is
refused, over, tight or ok (each boundary on both sides), what the plan warns, which certain
failures become violations (and which hide another), and when the fit search runs. The sizing
arithmetic behind the rows is tests/rules/test_memory.py's and test_memory_model.py's.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from rlaunch.rules.devices import Device
from rlaunch.rules.fit import fits, needs_search
from rlaunch.rules.memory import GIB, KvCapacity, MemoryTable, Row, kv_tokens, max_concurrency, violations

H100 = Device("H100", 80 * GIB, "spec")
CAP = 1000


def row(estimate: int, certain: int = 0, margin: float = 0.10, role: str = "policy", phase: str = "train") -> Row:
    return Row(role, phase, estimate, CAP, certain, "how", margin)


@pytest.mark.parametrize(
    ("estimate", "certain", "margin", "status"),
    [
        (CAP, CAP, 0.10, "tight"),  # certain exactly the capacity: not refused
        (CAP, CAP + 1, 0.10, "REFUSED"),
        (CAP + 1, CAP, 0.10, "over (estimate)"),
        (CAP + 1, 0, 0.10, "over (estimate)"),
        (900, 0, 0.10, "ok"),  # exactly 90 %: not yet tight
        (901, 0, 0.10, "tight"),
        (CAP, 0, 0.0, "ok"),  # a budget row: full is fine
        (CAP + 1, 0, 0.0, "over (estimate)"),
        (750, 0, 0.25, "ok"),
        (751, 0, 0.25, "tight"),
    ],
)
def test_a_rows_status_at_each_edge(estimate: int, certain: int, margin: float, status: str) -> None:
    assert row(estimate, certain, margin).status == status


def test_a_row_reads_its_headroom_terms_and_dict() -> None:
    r = Row("policy", "train", 3 * GIB, 5 * GIB, GIB, "fsdp", parts=(("states", GIB), ("acts", 2 * GIB), ("states", 1)))
    assert (r.headroom, r.part("states"), r.part("acts"), r.part("logits")) == (2 * GIB, GIB + 1, 2 * GIB, 0)
    assert r.as_dict() == {
        "role": "policy", "phase": "train", "estimate_gib": 3.0, "capacity_gib": 5.0, "headroom_gib": 2.0,
        "certain_gib": 1.0, "status": "ok", "detail": "fsdp",
    }  # fmt: skip


def test_the_plan_warns_of_tight_and_over_rows_and_what_was_not_sized() -> None:
    rows = (row(100), row(901, phase="tight one"), row(CAP + 1, phase="over one"), row(CAP, CAP + 1, phase="refused"))
    table = MemoryTable(H100, rows, unsized=("image tokens",))
    assert table.warnings() == [
        "memory: image tokens",
        "memory tight: policy tight one needs ~0.0 of 0.0 GiB per device (how); an estimate, not refused: watch for OOM",
        "memory over (estimate): policy over one needs ~0.0 of 0.0 GiB per device (how); an estimate, not refused: "
        "watch for OOM",
    ]
    assert MemoryTable(H100, (row(100),)).warnings() == []


def test_kv_tokens_are_whole_blocks_and_nothing_without_room() -> None:
    assert kv_tokens(0, 10) == 0 and kv_tokens(-5, 10) == 0 and kv_tokens(10**6, 0) == 0
    assert kv_tokens(10 * 16 * 3 - 1, 10) == 32 and kv_tokens(10 * 16 * 3, 10) == 48
    assert kv_tokens(10 * 64 * 2, 10, 64) == 128 and kv_tokens(10 * 64 * 2 - 1, 10, 64) == 64
    assert kv_tokens(1, 1) == 0 and kv_tokens(16, 1) == 16 and kv_tokens(1, 1, 1) == 1
    assert max_concurrency(100, 40) == 2.5


@pytest.mark.parametrize(
    ("table", "fit", "search"),
    [
        (MemoryTable(None, (row(100),)), False, False),  # no device: nothing sized
        (MemoryTable(None, (row(CAP + 1),)), False, False),
        (MemoryTable(H100, ()), False, False),
        (MemoryTable(H100, (row(100), row(900))), True, False),
        (MemoryTable(H100, (row(100), row(901))), False, True),
        (MemoryTable(H100, (row(CAP, CAP + 1),)), False, True),
    ],
)
def test_a_table_fits_when_every_sized_row_is_ok(table: MemoryTable, fit: bool, search: bool) -> None:
    assert (fits(table), needs_search(table)) == (fit, search)


SUBJECT: Any = SimpleNamespace(gpu_variant="A100-80GB", gpus_per_node=8, model=SimpleNamespace(num_attention_heads=64))
GEO: Any = SimpleNamespace(tp=2, pp=1, dp=1, colocate_all=True, rollout_gpus=8)


def kv(**fields: int) -> KvCapacity:
    values = {"device": 80 * GIB, "budget": 40 * GIB, "weights": 30 * GIB, "overhead": GIB}
    return KvCapacity(**{**values, **fields}, bytes_per_token=1024, max_model_len=32768)


def test_the_largest_certain_trainer_row_is_the_model_states_violation() -> None:
    rows = (
        Row("policy", "train", 9 * GIB, 8 * GIB, 8 * GIB + 1, "p"),
        Row("critic", "train", 9 * GIB, 8 * GIB, 10 * GIB, "c"),
        Row("reference", "forward", 9 * GIB, 8 * GIB, 9 * GIB, "r"),
        Row("rollout", "engine weights", 9 * GIB, 8 * GIB, 8 * GIB, "w"),  # certain == capacity: not refused
    )
    (found,) = violations(MemoryTable(H100, rows), SUBJECT, GEO)
    assert found.code == "memory.model_states"
    assert found.fields == ("role_plan.critic.num_nodes", "topology.gpu_variant", "config_yaml.trainer.critic.fsdp_config.cpu_offload")  # fmt: skip
    assert found.message == (
        "critic train: the model states alone need at least 10.0 GiB per device (c) but one H100 has 8.0 GiB"
    )
    assert found.fix == (
        "shard over more GPUs (more critic nodes), set trainer.critic.fsdp_config.cpu_offload=true, train LoRA "
        "adapters, or use a larger GPU"
    )
    assert found.values == {"need_gib": 10.0, "capacity_gib": 8.0}


@pytest.mark.parametrize(("role", "key"), [("reference", "ref"), ("policy", "policy"), ("actor", "policy")])
def test_a_trainer_roles_fix_names_its_own_section(role: str, key: str) -> None:
    rows = (Row(role, "train", GIB, GIB, 2 * GIB, "x"),)
    (found,) = violations(MemoryTable(None, rows), SUBJECT, GEO)
    assert found.fields == ("role_plan.policy_num_nodes", "topology.gpu_variant", f"config_yaml.trainer.{key}.fsdp_config.cpu_offload")  # fmt: skip
    assert "one A100-80GB has" in found.message  # no device sized: the subject's GPU is named
    assert "(more policy nodes)" in found.fix


def test_refused_engine_weights_name_the_tensor_parallel_size_that_fits_and_hide_the_kv_row() -> None:
    rows = (
        Row("rollout", "engine weights", 0, 10 * GIB, 25 * GIB, "w"),
        Row("rollout", "KV of one sequence", 0, GIB, 2 * GIB, "kv"),
    )
    table = MemoryTable(H100, rows, kv=kv())
    (found,) = violations(table, SUBJECT, GEO)
    assert found.code == "memory.engine_weights"
    assert found.message == (
        "a rollout engine's weights need 25.0 GiB per device (w) but its gpu_memory_utilization budget on one H100 "
        "is 10.0 GiB"
    )
    assert found.fields == (
        "role_plan.inference_engine_tensor_parallel_size",
        "config_yaml.generator.inference_engine.gpu_memory_utilization",
    )
    assert found.fix == (  # 25 GiB x TP 2 over 10 GiB: at least 5, and the 64 heads on 8-GPU nodes hold 8
        "set inference_engine_tensor_parallel_size=8 and num_inference_engines=1 (the smallest TP of at least 5 "
        "that divides the model's heads and fills a node), or raise generator.inference_engine.gpu_memory_utilization"
    )
    assert found.values == {"need_gib": 25.0, "budget_gib": 10.0}
    exact = (Row("rollout", "engine weights", 0, 10 * GIB, 20 * GIB + 1, "w"),)
    assert "of at least 5 " in violations(MemoryTable(H100, exact), SUBJECT, GEO)[0].fix  # rounded up
    no_budget = (Row("rollout", "engine weights", 0, 0, 3, "w"),)  # gpu_memory_utilization leaves nothing
    assert "of at least 6 " in violations(MemoryTable(H100, no_budget), SUBJECT, GEO)[0].fix  # 3 B x TP 2 over 1 B


def engine_weights_fix(need_tp: int, heads: int, gpus_per_node: int = 8) -> str:
    """The engine-weights fix of a TP 1 engine whose weights need `need_tp` shards, on colocated
    nodes of `gpus_per_node` GPUs, for a model of `heads` attention heads."""
    rows = (Row("rollout", "engine weights", 0, 10 * GIB, need_tp * 10 * GIB, "w"),)
    subject = SimpleNamespace(
        gpu_variant="H100", gpus_per_node=gpus_per_node, model=SimpleNamespace(num_attention_heads=heads)
    )
    geo = SimpleNamespace(tp=1, pp=1, dp=1, colocate_all=True, rollout_gpus=gpus_per_node)
    (found,) = violations(MemoryTable(H100, rows), subject, geo)
    return found.fix.split(", or raise ")[0]


@pytest.mark.parametrize(
    ("need_tp", "heads", "fix"),
    [
        (3, 64, "set inference_engine_tensor_parallel_size=4 and num_inference_engines=2"),  # never 3 on 8 GPUs
        (4, 64, "set inference_engine_tensor_parallel_size=4 and num_inference_engines=2"),
        (5, 64, "set inference_engine_tensor_parallel_size=8 and num_inference_engines=1"),
        (3, 28, "set inference_engine_tensor_parallel_size=4 and num_inference_engines=2"),
        (5, 28, "no engine TP of at least 5 divides the model's heads and fills a node: use a larger GPU"),  # not 7
        (9, 64, "no engine TP of at least 9 divides the model's heads and fills a node: use a larger GPU"),
    ],
)
def test_the_engine_weights_fix_offers_only_a_tp_the_heads_and_a_node_hold(need_tp: int, heads: int, fix: str) -> None:
    assert engine_weights_fix(need_tp, heads).startswith(fix)


def test_a_sequence_the_kv_budget_cannot_hold_is_refused_with_the_longest_that_fits() -> None:
    capacity = kv(block=64, weights=30 * GIB + 1000)
    rows = (Row("rollout", "KV of one sequence", 0, GIB, 2 * GIB, "kv"),)
    (found,) = violations(MemoryTable(H100, rows, kv=capacity), SUBJECT, GEO)
    assert found.code == "memory.kv_one_sequence"
    longest = kv_tokens(capacity.upper, 1024, 64)
    assert longest != kv_tokens(capacity.upper, 1024)  # whole pages of the engine's block size
    assert found.message == (
        "one 32768-token sequence needs 0.03 GiB of KV cache per device (1024 B/token) but the engine's budget "
        "of 40.0 GiB leaves at most 10.0 GiB after 30.0 GiB of weights: vLLM refuses to start"
    )
    assert found.fields == (
        "config_yaml.trainer.max_prompt_length",
        "config_yaml.generator.sampling_params.max_generate_length",
        "config_yaml.generator.inference_engine.gpu_memory_utilization",
    )
    assert found.fix == (
        f"shorten max_prompt_length + max_generate_length to at most {longest} tokens, raise "
        "gpu_memory_utilization, or raise the engine's tensor parallel size"
    )
    assert found.values == {"need_gib": 0.03, "available_gib": 10.0}
    assert violations(MemoryTable(H100, rows), SUBJECT, GEO) == []  # no engine sized: nothing to say
    ok = (Row("rollout", "KV of one sequence", 0, GIB, GIB, "kv"),)
    assert violations(MemoryTable(H100, ok, kv=capacity), SUBJECT, GEO) == []
