"""The grid on which PyTorch's own accounting checks the training and reference rows.

Each case is a real model config (published widths, truncated in layers so a step under
`FakeTensorMode` takes seconds), a number of FSDP ranks, a micro batch, a sequence length and
gradient checkpointing on or off. `measure` runs tests/runtimes/tracked_step.py in a Python that
has torch and transformers (the trl-cpu runtime's venv), `measure_once` keeps what it measured for
those inputs (the tier's 37 cases take minutes of CPU); `rows` are rlaunch's rows for the same
plan: the policy's training step (the colocated training bar: the step alone) and the reference
forward. Used by tests/runtimes/test_memtracker.py and benchmarks/memory_tracker.py.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import memory
from rlaunch.rules.devices import GIB, Device
from rlaunch.rules.model_shape import Architecture, from_hf_config
from tests.support.kept_measurements import keep, kept

SCRIPT = Path(__file__).with_name("tracked_step.py")
TOLERANCE = 0.10  # every row within 10 % of the tracker's peak

# Published config.json widths (Hugging Face model cards), truncated to a few layers.
FAMILIES: dict[str, dict[str, Any]] = {
    "llama-3.2-1b": {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
    },
    "llama-3.1-8b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
    },
    "qwen2.5-1.5b": {
        "model_type": "qwen2",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "qwen3-8b": {
        "model_type": "qwen3",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
    "qwen3-30b-a3b": {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
    "mixtral-8x7b": {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "sliding_window": None,
    },
    "mistral-7b": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32768,
        "sliding_window": None,
    },
    "gemma-2b": {
        "model_type": "gemma",
        "hidden_size": 2048,
        "intermediate_size": 16384,
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "vocab_size": 256000,
    },
    "gemma-2-2b": {
        "model_type": "gemma2",
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 256000,
        "sliding_window": 4096,
        "final_logit_softcapping": 30.0,
        "attn_logit_softcapping": 50.0,
    },
    "gemma-3-1b": {
        "model_type": "gemma3_text",
        "hidden_size": 1152,
        "intermediate_size": 6912,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "vocab_size": 262144,
        "sliding_window": 512,
        "sliding_window_pattern": 6,
    },
    "qwen1.5-moe-a2.7b": {
        "model_type": "qwen2_moe",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "vocab_size": 151936,
    },
    "gpt-oss-20b": {
        "model_type": "gpt_oss",
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 201088,
        "sliding_window": 128,
    },
    # MLA at the published latent ranks and head dims, shrunk in width and experts (a full DeepSeek-V3
    # layer is 11B parameters: the states alone would decide every row).
    "deepseek-v2-lite": {
        "model_type": "deepseek_v2",
        "hidden_size": 2048,
        "intermediate_size": 10944,
        "moe_intermediate_size": 1408,
        "n_routed_experts": 64,
        "n_shared_experts": 2,
        "num_experts_per_tok": 6,
        "first_k_dense_replace": 1,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "kv_lora_rank": 512,
        "q_lora_rank": None,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "topk_method": "greedy",
        "vocab_size": 102400,
    },
    "deepseek-v3-small": {
        "model_type": "deepseek_v3",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 512,
        "n_routed_experts": 64,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "n_group": 8,
        "topk_group": 4,
        "first_k_dense_replace": 1,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "topk_method": "noaux_tc",
        "vocab_size": 129280,
    },
    # Built with transformers' DeepSeek-V3 class (tracked_step.BUILT_AS): Kimi-K2 is its architecture.
    "kimi-k2-small": {
        "model_type": "kimi_k2",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 512,
        "n_routed_experts": 96,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "n_group": 1,
        "topk_group": 1,
        "first_k_dense_replace": 1,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "topk_method": "noaux_tc",
        "vocab_size": 163840,
    },
    # Vision-language: the whole model (its vision tower truncated to two blocks) steps on text tokens.
    "qwen2-vl-2b": {
        "model_type": "qwen2_vl",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "vision_config": {
            "depth": 2,
            "embed_dim": 1280,
            "hidden_size": 1536,
            "mlp_ratio": 4,
            "num_heads": 16,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
    },
    "qwen2.5-vl-3b": {
        "model_type": "qwen2_5_vl",
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "vision_config": {
            "depth": 2,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 2048,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [1],
        },
    },
}


@dataclass(frozen=True)
class Case:
    family: str
    layers: int
    world: int  # FSDP ranks
    micro: int
    seq: int
    checkpointing: bool

    @property
    def config(self) -> dict[str, Any]:
        return {**FAMILIES[self.family], "num_hidden_layers": self.layers}

    @property
    def name(self) -> str:
        ckpt = "ckpt" if self.checkpointing else "no-ckpt"
        return f"{self.family} L{self.layers} N{self.world} micro{self.micro} seq{self.seq} {ckpt}"

    def as_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "world": self.world,
            "micro": self.micro,
            "seq": self.seq,
            "checkpointing": self.checkpointing,
        }


LAYERS = {
    "llama-3.2-1b": 4,
    "llama-3.1-8b": 2,
    "qwen2.5-1.5b": 4,
    "qwen3-8b": 2,
    "qwen3-30b-a3b": 2,
    "mixtral-8x7b": 1,
    "mistral-7b": 2,
    "gemma-2b": 2,
    "gemma-2-2b": 2,
    "gemma-3-1b": 6,
    "qwen1.5-moe-a2.7b": 2,
    "gpt-oss-20b": 2,
    "deepseek-v2-lite": 2,
    "deepseek-v3-small": 2,
    "kimi-k2-small": 2,
    "qwen2-vl-2b": 2,
    "qwen2.5-vl-3b": 2,
}
# Every family unsharded with checkpointing and sharded over 4 without; long sequences (where the
# logits decide the peak) sharded with checkpointing for one family of each vocabulary size.
GRID: tuple[Case, ...] = (
    *(Case(family, layers, 1, 1, 4096, True) for family, layers in LAYERS.items()),
    *(Case(family, layers, 4, 2, 2048, False) for family, layers in LAYERS.items()),
    *(Case(family, LAYERS[family], 4, 1, 8192, True) for family in ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-2b")),
)

# Rows not yet within the tolerance, by case name, with what the tracker shows (strict xfails in the tier:
# one that comes within the tolerance fails until it is taken off this list). None at present.
REFERENCE_GAPS: dict[str, str] = {}


def measure(python: str, cases: tuple[Case, ...] = GRID) -> dict[Case, dict[str, Any]]:
    """The tracker's peaks for `cases`, one process per FSDP world size (a fake process group)."""
    out: dict[Case, dict[str, Any]] = {}
    for world in sorted({c.world for c in cases}):
        batch = [c for c in cases if c.world == world]
        proc = subprocess.run(
            [python, str(SCRIPT)],
            input=json.dumps([c.as_json() for c in batch]),
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"tracked_step.py failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        out.update(zip(batch, json.loads(proc.stdout)))
    return out


def measure_once(python: str, cases: tuple[Case, ...] = GRID) -> dict[Case, dict[str, Any]]:
    """`measure`, each case's peaks kept for the script and venv that measured them
    (tests/support/kept_measurements.py): only the cases not measured before run.
    benchmarks/memory_tracker.py always measures."""
    found = {c: kept(SCRIPT, python, c.as_json()) for c in cases}
    fresh = measure(python, tuple(c for c, peaks in found.items() if peaks is None))
    for case, peaks in fresh.items():
        keep(SCRIPT, python, case.as_json(), peaks)
    return {c: peaks if peaks is not None else fresh[c] for c, peaks in found.items()}


def rows(case: Case) -> tuple[memory.Row, memory.Row]:
    """rlaunch's training step and reference forward for the case's plan on one large device."""
    arch = from_hf_config(case.config)
    assert isinstance(arch, Architecture), arch
    geo = Geometry(
        strategy="fsdp2",
        colocate_all=True,
        policy_nodes=1,
        policy_gpus_per_node=case.world,
        ref_nodes=1,
        ref_gpus_per_node=case.world,
        engines=case.world,
        tp=1,
        pp=1,
        dp=1,
        ep=1,
        train_batch=case.world * case.micro * 2,
        mini_batch=case.world * case.micro * 2,
        micro_batch=case.micro,
        n_samples=1,
        use_reference=True,
        policy_sp=1,
        ref_sp=1,
        megatron_policy=(1, 1, 1),
        megatron_ref=(1, 1, 1),
    )
    composed = {
        "trainer": {
            "strategy": "fsdp2",
            "micro_train_batch_size_per_gpu": case.micro,
            "micro_forward_batch_size_per_gpu": case.micro,
            "gradient_checkpointing": case.checkpointing,
            "max_prompt_length": case.seq,
        },
        "generator": {"sampling_params": {"max_generate_length": 0}},
    }
    table = memory.estimate(arch, geo, composed, Device("tracker", 10_000 * GIB, "test"))
    (train,) = [r for r in table.rows if r.phase == "training bar"]
    (ref,) = [r for r in table.rows if r.role == "reference"]
    return train, ref


def error(ours: int, theirs: int) -> float:
    return (ours - theirs) / theirs
