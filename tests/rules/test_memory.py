"""The memory model against published numbers, and the memory rules through the public API.

Each evidence test names its source. Model configs are the published config.json values (Hugging
Face model cards) restated in tests/support/specs.py or here.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import memory
from rlaunch.rules.devices import GIB, device
from rlaunch.rules.model_shape import Architecture, Unsized
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import MemoryReport, ModelFacts, PreflightError, check_plan, memory_report
from rlaunch.skyrl.values.config_yaml import render_recipe
from tests.support.specs import LLAMA_31_8B, LLAMA_31_405B, merge, plan, recipe, replace_plan, topology

QWEN3_14B = {
    "model_type": "qwen3",
    "hidden_size": 5120,
    "intermediate_size": 17408,
    "num_hidden_layers": 40,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}
QWEN3_235B_A22B = {
    "model_type": "qwen3_moe",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 94,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}
QWEN25_32B = {
    "model_type": "qwen2",
    "hidden_size": 5120,
    "intermediate_size": 27648,
    "num_hidden_layers": 64,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
}
QWEN25_15B = {
    "model_type": "qwen2",
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
}
LLAMA_7B = {  # LLaMA-1 7B (decapoda/huggyllama config.json): MHA, 32 layers
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
}


def arch(config: dict) -> Architecture:
    found = ModelFacts.from_hf_config(config).architecture
    assert isinstance(found, Architecture), found
    return found


def report(config: dict, topo, tree: dict | None = None, profile: str = "fsdp") -> MemoryReport:
    return memory_report(topo, tree or recipe(), profile, ModelFacts.from_hf_config(config))


def row(rep: MemoryReport, role: str, phase: str) -> memory.Row:
    (found,) = [r for r in rep.table.rows if r.role == role and r.phase == phase]
    return found


def one_node(gpus: int, variant: str = "H100"):
    """One node of `gpus` GPUs, every role colocated, micro batches of one."""
    shape = plan(
        policy_num_gpus_per_node=gpus,
        num_inference_engines=gpus,
        train_batch_size=64,
        policy_mini_batch_size=64,
        micro_train_batch_size_per_gpu=1,
    )
    return topology(shape, gpus_per_node=gpus, gpu_variant=variant)


def composed_of(topo, tree: dict, profile: str = "fsdp") -> dict:
    prof = get_profile(profile)
    composed, problems = prof.compose(render_recipe(tree, topo.role_plan, prof, 0))
    assert not problems
    return composed


# --- model states per GPU: a hand-derived table and the ZeRO-3 formula ---------------------------


P8B = arch(LLAMA_31_8B).params.total


def test_llama_8b_has_its_published_parameter_count() -> None:
    # meta-llama/Llama-3.1-8B model card: 8.03B parameters.
    assert P8B == 8_030_261_248


@pytest.mark.parametrize(
    ("profile", "tree", "states", "certain"),
    [
        # FSDP over the 8 policy GPUs: fp32 params + fp32 grads + 2 fp32 Adam moments = 16 B, 12 certain.
        ("fsdp", recipe(), 16 * P8B // 8, 12 * P8B // 8),
        # fsdp_size=4: hybrid sharding, each parameter sharded over 4 GPUs only.
        ("fsdp", recipe(trainer={"policy": {"fsdp_config": {"fsdp_size": 4}}}), 16 * P8B // 4, 12 * P8B // 4),
        # CPU offload: parameters, gradients and optimizer live on the host.
        ("fsdp", recipe(trainer={"policy": {"fsdp_config": {"cpu_offload": True}}}), 0, 0),
        # LoRA: the frozen base in bf16, sharded; the adapters are negligible.
        ("fsdp", recipe(trainer={"policy": {"model": {"lora": {"rank": 8}}}}), 2 * P8B // 8, 2 * P8B // 8),
        # Megatron TP2 x PP2 (DP2): bf16 weights 2 B + fp32 grads 4 B over TP*PP, optimizer 12 B over TP*PP*DP.
        (
            "megatron",
            recipe(
                trainer={
                    "policy": {"megatron_config": {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2}}
                }
            ),
            int(6 * P8B / 4 + 12 * P8B / 8),
            int(2 * P8B / 4 + 12 * P8B / 8),
        ),
        # Megatron with the optimizer offloaded: weights and gradients stay, the 12 B go to the host.
        (
            "megatron",
            recipe(
                trainer={
                    "policy": {
                        "megatron_config": {
                            "tensor_model_parallel_size": 2,
                            "pipeline_model_parallel_size": 2,
                            "optimizer_config_kwargs": {"optimizer_cpu_offload": True},
                        }
                    }
                }
            ),
            int(6 * P8B / 4),
            int(2 * P8B / 4),
        ),
    ],
    ids=["fsdp", "fsdp_size", "cpu_offload", "lora", "megatron", "megatron_optimizer_offload"],
)
def test_model_state_bytes_per_gpu_equal_the_hand_derived_table(
    profile: str, tree: dict, states: int, certain: int
) -> None:
    r = row(report(LLAMA_31_8B, topology(), tree, profile), "policy", "model states")
    assert (r.estimate, r.certain) == (pytest.approx(states, abs=8), pytest.approx(certain, abs=8))


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_fsdp_model_states_equal_the_zero3_formula(gpus: int) -> None:
    """ZeRO-3 with mixed-precision Adam: (2 + 2 + K) x Psi / N_d bytes per GPU, K = 12 (Rajbhandari et
    al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC'20, Sec. 3 and 5)."""
    topo = one_node(gpus)
    zero3 = (2 + 2 + 12) * P8B // gpus
    assert row(report(LLAMA_31_8B, topo), "policy", "model states").estimate == zero3


# --- KV capacity: vLLM's start-up numbers from public issues (within 2 %) --------------------------


def within(ours: float, theirs: float, rel: float = 0.02) -> bool:
    return abs(ours - theirs) <= rel * theirs


@pytest.mark.parametrize(
    ("source", "config", "tp", "available_gib", "blocks_or_tokens", "max_len", "concurrency"),
    [
        # vllm-project/vllm#10517 (Llama-3.1-8B-Instruct, RTX 3090, --max-model-len 20000):
        # "kv_cache_size=3.81GiB", "# GPU blocks: 1952", "Maximum concurrency for 20000 tokens per request: 1.56x"
        ("vllm#10517 20k", LLAMA_31_8B, 1, 3.81, 1952 * 16, 20000, 1.56),
        # same issue, --max-model-len 29000: "kv_cache_size=2.89GiB", "# GPU blocks: 1478", "0.82x",
        # "the maximum number of tokens that can be stored in KV cache (23648)"
        ("vllm#10517 29k", LLAMA_31_8B, 1, 2.89, 23648, 29000, 0.82),
        # LMCache/LMCache#1739 (Qwen3-14B, one GPU): "Available KV cache memory: 6.51 GiB",
        # "GPU KV cache size: 42,656 tokens", "Maximum concurrency for 32,768 tokens per request: 1.30x"
        ("LMCache#1739", QWEN3_14B, 1, 6.51, 42656, 32768, 1.30),
        # vllm-project/vllm#21348 (Qwen3-235B-A22B-FP8, --tensor-parallel-size 4, KV in bf16):
        # "Available KV cache memory: 8.11 GiB", "GPU KV cache size: 178,880 tokens"
        ("vllm#21348", QWEN3_235B_A22B, 4, 8.11, 178880, None, None),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_kv_capacity_reproduces_vllm_start_up_logs(
    source: str, config: dict, tp: int, available_gib: float, blocks_or_tokens: int, max_len, concurrency
) -> None:
    per_token = memory.kv_bytes_per_token(arch(config), tp)
    tokens = memory.kv_tokens(int(available_gib * GIB), per_token)
    assert within(tokens, blocks_or_tokens), (source, tokens, blocks_or_tokens)
    if max_len:
        assert within(memory.max_concurrency(tokens, max_len), concurrency), source


@pytest.mark.parametrize(
    ("source", "blocks", "max_len", "concurrency", "tokens"),
    [
        # vllm-project/vllm#12569: "# GPU blocks: 1381", "Maximum concurrency for 2048 tokens per request: 10.79x"
        ("vllm#12569", 1381, 2048, 10.79, None),
        # vllm-project/vllm#13596: "# GPU blocks: 127626" = "GPU KV cache size: 2,042,016 tokens", "997.08x" at 2,048
        ("vllm#13596", 127626, 2048, 997.08, 2042016),
    ],
)
def test_blocks_tokens_and_concurrency_follow_vllms_arithmetic(
    source: str, blocks: int, max_len: int, concurrency: float, tokens
) -> None:
    held = memory.kv_tokens(blocks * 16 * 1000, 1000)  # 16-token blocks of 1000 bytes a token
    assert held == blocks * 16 and (tokens is None or held == tokens)
    assert round(memory.max_concurrency(held, max_len), 2) == concurrency, source


def test_engine_weights_equal_vllms_loaded_weights() -> None:
    # vllm-project/vllm#10517: "Loading model weights took 14.9888 GB" (GiB) for Llama-3.1-8B in bf16, TP1.
    topo = topology()
    kv = memory.engine_kv(
        arch(LLAMA_31_8B),
        Geometry.from_recipe(composed_of(topo, recipe())),
        composed_of(topo, recipe()),
        device("RTX3090"),
    )
    assert within(kv.weights / GIB, 14.9888, 0.005)


# --- published launches that ran are not refused; published failures are refused or tight ---------


def gsm8k_example(nodes: int, gpus: int, tp: int, micro: int):
    """The shape of SkyRL's gsm8k example scripts: colocated on `nodes` x `gpus`, 4 engines x TP `tp`,
    32 prompts x 4 samples in one mini batch, micro batches of `micro`."""
    shape = plan(
        policy_num_nodes=nodes, policy_num_gpus_per_node=gpus, num_inference_engines=4,
        inference_engine_tensor_parallel_size=tp, train_batch_size=32, policy_mini_batch_size=32,
        micro_train_batch_size_per_gpu=micro, n_samples_per_prompt=4,
    )  # fmt: skip
    return topology(shape, num_nodes=nodes, gpus_per_node=gpus)


# NovaSky-AI/SkyRL skyrl-train/examples/gsm8k, 512 + 1024 tokens, gpu_memory_utilization 0.8:
SKYRL_GSM8K_EXAMPLES = {
    # run_32b_gsm8k.sh: Qwen2.5-32B-Instruct, fsdp2, 2 nodes x 8 GPUs, TP4, micro batches of 8 (sized on 80 GB H100s)
    "run_32b_gsm8k.sh": (
        QWEN25_32B,
        gsm8k_example(nodes=2, gpus=8, tp=4, micro=8),
        {"micro_forward_batch_size_per_gpu": 8, "algorithm": {"use_kl_loss": False}},
        {"inference_engine": {"gpu_memory_utilization": 0.8}},
    ),
    # run_gsm8k.sh: Qwen2.5-1.5B-Instruct on 4 GPUs, TP1, micro batches of 4
    "run_gsm8k.sh": (QWEN25_15B, gsm8k_example(nodes=1, gpus=4, tp=1, micro=4), {}, {}),
}


@pytest.mark.parametrize("script", sorted(SKYRL_GSM8K_EXAMPLES))
def test_skyrl_gsm8k_examples_are_neither_refused_nor_tight(script: str) -> None:
    model, topo, trainer, generator = SKYRL_GSM8K_EXAMPLES[script]
    tree = recipe(
        trainer={"max_prompt_length": 512, **trainer},
        generator={"sampling_params": {"max_generate_length": 1024}, **generator},
    )
    rep = report(model, topo, tree)
    assert rep.violations == () and rep.warnings == (), rep.warnings
    assert {r.status for r in rep.table.rows} == {"ok"}


@pytest.mark.parametrize(
    ("source", "gpus", "variant"),
    [
        # tatsu-lab/stanford_alpaca#56: LLaMA-7B full fine-tuning OOMs on a single A100 80GB
        # (maintainers: parameters and optimizer states alone exceed it).
        ("stanford_alpaca#56", 1, "A100-80GB"),
        # tatsu-lab/stanford_alpaca#73: LLaMA-7B, FSDP full_shard over 4 RTX 3090s, batch 1: CUDA OOM
        # ("23.70 GiB total capacity; 22.21 GiB already allocated").
        ("stanford_alpaca#73", 4, "RTX3090"),
    ],
)
def test_published_training_ooms_are_refused_or_tight(source: str, gpus: int, variant: str) -> None:
    topo = one_node(gpus, variant)
    tree = recipe(trainer={"max_prompt_length": 256}, generator={"sampling_params": {"max_generate_length": 256}})
    rep = report(LLAMA_7B, topo, tree)
    states = row(rep, "policy", "model states")
    assert states.status in ("REFUSED", "over (estimate)", "tight"), (source, states)
    assert rep.violations or any("policy model states" in w for w in rep.warnings)


def test_a_published_kv_refusal_is_marked_tight_and_its_working_neighbour_is_not() -> None:
    """vllm-project/vllm#10517: Llama-3.1-8B on an RTX 3090 at utilization 0.9 started with
    --max-model-len 20000 and refused 29000 ("larger than the maximum number of tokens that can be
    stored in KV cache (23648)"); V0 profiled max_num_batched_tokens = max_model_len."""
    statuses = {}
    for max_len in (20000, 29000):
        topo = topology(
            plan(policy_num_gpus_per_node=1, num_inference_engines=1, policy_mini_batch_size=64),
            gpus_per_node=1,
            gpu_variant="RTX3090",
        )
        engine = {"gpu_memory_utilization": 0.9, "max_num_batched_tokens": max_len, "max_num_seqs": 256}
        tree = recipe(
            trainer={"max_prompt_length": 1000},
            generator={"sampling_params": {"max_generate_length": max_len - 1000}, "inference_engine": engine},
        )
        composed = composed_of(topo, tree)
        kv = memory.engine_kv(arch(LLAMA_31_8B), Geometry.from_recipe(composed), composed, device("RTX3090"))
        (one_sequence,) = [
            r for r in memory.rollout_rows(kv, Geometry.from_recipe(composed)) if r.phase == "KV of one sequence"
        ]
        statuses[max_len] = one_sequence.status
    assert statuses == {20000: "ok", 29000: "over (estimate)"}


# --- the rules through the public API ---------------------------------------------------------------


def test_check_plan_applies_the_memory_rules_only_given_the_model() -> None:
    topo = topology(replace_plan(plan(), micro_train_batch_size_per_gpu=1))
    facts = ModelFacts.from_hf_config(LLAMA_31_405B)
    found = check_plan(topo, recipe(), "fsdp", seed=17, model=facts)
    assert {"memory.model_states", "memory.engine_weights"} <= {v.code for v in found}
    assert not any(v.code.startswith("memory.") for v in check_plan(topo, recipe(), "fsdp", seed=17))
    rep = memory_report(topo, recipe(), "fsdp", facts, seed=17)
    assert all(isinstance(v, PreflightError) for v in rep.violations)
    assert sorted(v.code for v in rep.violations) == sorted(v.code for v in found if v.code.startswith("memory."))
    states = [v for v in rep.violations if v.code == "memory.model_states"][0]
    assert "GiB" in states.message and "cpu_offload" in states.fix


def test_a_model_or_device_it_cannot_size_is_said_and_refuses_nothing() -> None:
    unknown = ModelFacts.from_hf_config({"model_type": "rwkv", "hidden_size": 4096, "num_attention_heads": 64})
    assert isinstance(unknown.architecture, Unsized) and "rwkv" in unknown.architecture.reason
    rep = memory_report(topology(), recipe(), "fsdp", unknown)
    assert rep.violations == () and rep.table.rows == ()
    assert any("cannot size the model" in w and "rwkv" in w for w in rep.warnings)
    quantized = ModelFacts.from_hf_config({**LLAMA_31_8B, "quantization_config": {"quant_method": "bitsandbytes"}})
    assert isinstance(quantized.architecture, Unsized) and "bitsandbytes" in quantized.architecture.reason
    rep = memory_report(topology(gpu_variant="MI300X"), recipe(), "fsdp", ModelFacts.from_hf_config(LLAMA_31_8B))
    assert rep.violations == () and any("MI300X" in w for w in rep.warnings)


def test_more_shards_never_add_a_certain_failure() -> None:
    facts = ModelFacts.from_hf_config(LLAMA_31_8B)
    refused = []
    for gpus in (1, 2, 4, 8):
        refused.append(bool(memory_report(one_node(gpus, "L4"), recipe(), "fsdp", facts).violations))
    assert refused == sorted(refused, reverse=True) and refused[0] and not refused[-1]


def test_the_rule_registry_lists_the_memory_codes() -> None:
    from rlaunch import rules

    assert rules.MEMORY_CODES == memory.CODES and set(memory.CODES) <= set(rules.CODES)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "model_type",
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "head_dim",
                "intermediate_size",
                "moe_intermediate_size",
                "num_experts",
                "num_local_experts",
                "num_experts_per_tok",
                "decoder_sparse_step",
                "mlp_only_layers",
                "vocab_size",
                "tie_word_embeddings",
                "n_routed_experts",
                "first_k_dense_replace",
                "kv_lora_rank",
                "qk_rope_head_dim",
                "sliding_window",
                "layer_types",
                "quantization_config",
                "vision_config",
            ]
        ),
        st.one_of(
            st.sampled_from(
                ["qwen3_moe", "mixtral", "llama", "gemma", "bert", "deepseek_v3", "gpt_oss", "gemma3_text"]
            ),
            st.sampled_from([{"quant_method": "fp8", "weight_block_size": [0, 128]}, {"quant_method": "awq"}, {}]),
            st.integers(-3, 2**70),
            st.lists(st.integers(-5, 2**40), max_size=5),
            st.booleans(),
            st.none(),
        ),
    )
)
def test_any_config_is_sized_or_said_unsized_quickly(config: dict) -> None:
    """Pure and bounded: no config.json makes the facts raise or loop (a 2**70-layer config included)."""
    for written in (config, {**LLAMA_31_8B, **config}):  # alone, and over a config that sizes
        facts = ModelFacts.from_hf_config(written)
        assert isinstance(facts.architecture, (Architecture, Unsized))
        if isinstance(facts.architecture, Architecture):
            rep = memory_report(topology(), recipe(), "fsdp", facts)
            assert rep.table.rows and all(isinstance(v, PreflightError) for v in rep.violations)


def test_a_sliding_window_caps_the_kv_one_sequence_needs() -> None:
    """Mistral-7B-v0.1's config.json sets sliding_window 4096: vLLM keeps at most the window per
    sequence, so a long max_model_len is no certain KV failure there (a false alarm otherwise)."""
    mistral = {**LLAMA_31_8B, "model_type": "mistral", "vocab_size": 32000, "sliding_window": 4096}
    llama = {**LLAMA_31_8B, "vocab_size": 32000}
    topo = one_node(8, "L4")
    tree = recipe(trainer={"max_prompt_length": 1024}, generator={"sampling_params": {"max_generate_length": 39936}})
    codes = {
        name: {v.code for v in report(cfg, topo, tree).violations}
        for name, cfg in (("mistral", mistral), ("llama", llama))
    }
    assert "memory.kv_one_sequence" in codes["llama"] and "memory.kv_one_sequence" not in codes["mistral"]
    assert arch(mistral).sliding_window == 4096 and arch(llama).sliding_window is None


# --- Megatron: each parallel size divides what it shards, once ------------------------------------

SEQ = 1024 + 3072  # BASE_RECIPE's max_prompt_length + max_generate_length
MICRO = plan().micro_train_batch_size_per_gpu  # the forward micro batch follows it unless set


def megatron_tree(role: str = "policy", **config) -> dict:
    return recipe(trainer={role: {"megatron_config": config}})


def test_megatron_logits_hold_every_token_of_the_micro_batch_over_a_vocabulary_shard() -> None:
    """Vocabulary-parallel logits: the micro batch's tokens (over CP only) x vocab / TP, fp32. The
    sequence-parallel activations are the ones split over TP x CP."""
    vocab = arch(LLAMA_31_8B).vocab
    for tp, cp in [(1, 1), (2, 1), (4, 1), (2, 2)]:
        tree = megatron_tree(tensor_model_parallel_size=tp, context_parallel_size=cp)
        step = row(report(LLAMA_31_8B, topology(), tree, "megatron"), "colocated", "training bar")
        assert step.part("logits") == MICRO * SEQ // cp * (vocab // tp) * 4, (tp, cp)


def test_megatron_expert_optimizer_shards_over_the_expert_data_parallel_group() -> None:
    """The distributed optimizer shards dense states over world / (TP x PP x CP) and expert states
    over the expert data-parallel group, world / (EP x ETP x PP): 8 GPUs at EP8 leave no expert DP."""
    a = arch(QWEN3_235B_A22B)
    dense, experts = a.params.total - a.params.experts, a.params.experts
    tree = megatron_tree(expert_model_parallel_size=8)
    states = row(report(QWEN3_235B_A22B, topology(), tree, "megatron"), "policy", "model states")
    shard = dense + experts / 8  # TP1 x PP1: dense whole, experts over EP8
    optimizer = 12 * (dense / 8 + experts / 8 / 1)
    assert states.estimate == pytest.approx(6 * shard + optimizer, abs=8)
    assert states.certain == pytest.approx(2 * shard + optimizer, abs=8)


def test_megatron_reference_forward_shards_its_tokens_like_the_training_rows() -> None:
    """The reference's own TP and CP split its activations (TP x CP) and logits (CP tokens x vocab /
    TP); `max_tokens_per_microbatch` bounds its micro batch as it bounds the policy's."""
    a = arch(LLAMA_31_8B)

    def forward(**config) -> memory.Row:
        budget = config.pop("budget", None)
        tree = merge(megatron_tree("ref", **config), recipe(trainer={"max_tokens_per_microbatch": budget}))
        return row(report(LLAMA_31_8B, topology(), tree, "megatron"), "reference", "forward")

    whole, tp2, cp2 = forward(), forward(tensor_model_parallel_size=2), forward(context_parallel_size=2)
    assert whole.part("logits") == MICRO * SEQ * a.vocab * 4
    assert tp2.part("logits") == MICRO * SEQ * (a.vocab // 2) * 4
    assert cp2.part("logits") == MICRO * SEQ // 2 * a.vocab * 4
    assert tp2.part("activations") == pytest.approx(whole.part("activations") / 2, rel=1e-6)
    assert cp2.part("activations") == pytest.approx(whole.part("activations") / 2, rel=1e-6)
    budget = forward(budget=3 * SEQ)  # room for three whole sequences per micro batch
    assert budget.part("logits") == 3 * SEQ * a.vocab * 4


# --- FSDP step phases, token layout and the colocated wake-up ---------------------------------------


def test_the_training_step_is_the_larger_phase_not_their_sum() -> None:
    """Short sequences: the optimizer step (states + foreach AdamW's fp32 temporary, 4 B a parameter)
    is the peak; long ones: the forward/backward. The row is the larger, never the sum."""
    short = recipe(trainer={"max_prompt_length": 16}, generator={"sampling_params": {"max_generate_length": 16}})
    step = row(report(LLAMA_7B, topology(), short), "colocated", "training bar")
    assert step.estimate == step.part("states") + 4 * arch(LLAMA_7B).params.total // 8
    long = row(report(LLAMA_7B, topology()), "colocated", "training bar")
    assert long.estimate > long.part("states") + long.part("optimizer step")
    assert long.estimate < long.part("states") + long.part("optimizer step") + long.part("logits") + long.part(
        "gathered"
    ) + long.part("activations")


def test_max_tokens_per_microbatch_bounds_the_micro_batch_and_a_longer_sequence_runs_alone() -> None:
    vocab = arch(LLAMA_31_8B).vocab

    def logits(budget: int | None) -> int:
        tree = recipe(trainer={"max_tokens_per_microbatch": budget})
        return row(report(LLAMA_31_8B, topology(), tree), "colocated", "training bar").part("logits")

    assert logits(None) == MICRO * SEQ * vocab * 4  # two bf16 vocabulary-wide tensors
    assert logits(3 * SEQ) == 3 * SEQ * vocab * 4
    assert logits(SEQ // 2) == SEQ * vocab * 4  # one maximum-length sequence exceeds the budget alone


def test_the_plan_says_whether_micro_batches_are_packed_or_padded() -> None:
    packed = row(report(LLAMA_31_8B, topology()), "colocated", "training bar")
    padded = row(
        report(LLAMA_31_8B, topology(), recipe(trainer={"remove_microbatch_padding": False})),
        "colocated",
        "training bar",
    )
    assert "packed" in packed.detail and "padded" not in packed.detail
    assert f"padded: {MICRO} x {SEQ}, the worst case" in padded.detail
    assert padded.estimate == packed.estimate  # every sequence at the maximum length either way


def test_a_colocated_engine_wakes_beside_the_policys_resident_weights() -> None:
    """SkyRL's weight sync: the policy's weights back on the GPU (optimizer offloaded), the engine's
    weights woken, one gathered bf16 tensor broadcast; the KV pool wakes only after the policy is
    offloaded (the generation bar)."""
    a = arch(LLAMA_31_8B)
    engine = row(report(LLAMA_31_8B, topology()), "rollout", "engine weights").estimate
    largest = 2 * a.vocab * a.hidden
    cases = [
        (recipe(), 4 * P8B // 8),
        (recipe(trainer={"policy": {"model": {"lora": {"rank": 8}}}}), 2 * P8B // 8),
        (recipe(trainer={"policy": {"fsdp_config": {"cpu_offload": True}}}), 0),
    ]
    for tree, resident in cases:
        sync = row(report(LLAMA_31_8B, topology(), tree), "colocated", "weight sync")
        assert sync.estimate == engine + resident + largest
        assert sync.certain == 0  # an estimate: shown as tight, never refused


def test_a_lora_step_reduces_no_gradients_of_the_frozen_base() -> None:
    """Full fine-tuning on 8 GPUs ends its backward with the embeddings' and LM head's gradients
    (bf16, their fp32 copy, the reduced shard); LoRA's frozen base has none to reduce."""
    a = arch(LLAMA_31_8B)
    root = a.params.embeddings + a.params.lm_head
    full = row(report(LLAMA_31_8B, topology()), "colocated", "training bar")
    lora = row(
        report(LLAMA_31_8B, topology(), recipe(trainer={"policy": {"model": {"lora": {"rank": 8}}}})),
        "colocated",
        "training bar",
    )
    assert full.part("root backward") == 5 * root + 4 * root // 8
    assert lora.part("root backward") == 0


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=64, max_value=16384),
    st.integers(min_value=64, max_value=16384),
    st.sampled_from([True, False]),
    st.sampled_from([None, 2048, 20000]),
)
def test_more_tokens_never_shrink_the_training_step_or_the_reference_forward(
    short: int, extra: int, checkpointing: bool, budget
) -> None:
    def rows(generate: int) -> tuple[memory.Row, memory.Row]:
        tree = recipe(
            trainer={"gradient_checkpointing": checkpointing, "max_tokens_per_microbatch": budget},
            generator={"sampling_params": {"max_generate_length": generate}},
        )
        rep = report(QWEN3_14B, topology(), tree)
        return row(rep, "colocated", "training bar"), row(rep, "reference", "forward")

    (step, ref), (longer_step, longer_ref) = rows(short), rows(short + extra)
    assert step.estimate <= longer_step.estimate and ref.estimate <= longer_ref.estimate
    assert step.estimate >= step.part("states") >= step.certain
