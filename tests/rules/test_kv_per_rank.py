"""Each TP rank of an engine holds at least one KV head: vLLM never splits a head, so TP beyond the
KV heads replicates them, and heads that do not divide evenly leave some ranks one more (ceil, not
floor). Llama 3.1 8B: 32 layers, 8 KV heads of 128, bf16."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from rlaunch.rules import memory
from rlaunch.rules.model_shape import Architecture
from rlaunch.skyrl import ModelFacts
from tests.support.specs import LLAMA_31_8B

LLAMA = ModelFacts.from_hf_config(LLAMA_31_8B).architecture
assert isinstance(LLAMA, Architecture)
ONE_HEAD = 2 * 32 * 128 * 2  # K and V of one head over 32 layers, bf16


def test_tp_beyond_the_kv_heads_leaves_each_rank_one_head() -> None:
    assert memory.kv_bytes_per_token(LLAMA, tp=16) == ONE_HEAD
    assert memory.kv_bytes_per_token(LLAMA, tp=8) == ONE_HEAD


def test_kv_heads_that_tp_does_not_divide_round_up() -> None:
    assert memory.kv_bytes_per_token(LLAMA, tp=3) == 3 * ONE_HEAD  # 8 heads on 3 ranks: 3, 3 and 2


@given(kv_heads=st.integers(1, 128), tp=st.integers(1, 64))
def test_no_rank_holds_less_than_one_head_and_the_ranks_hold_every_head(kv_heads: int, tp: int) -> None:
    arch = dataclasses.replace(LLAMA, kv_heads=kv_heads)
    per_rank = memory.kv_bytes_per_token(arch, tp=tp)
    assert per_rank >= ONE_HEAD
    assert per_rank * tp >= memory.kv_bytes_per_token(arch)
