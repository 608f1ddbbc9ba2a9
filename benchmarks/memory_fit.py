"""One training step of a small model on a GPU: `torch.cuda.max_memory_allocated` vs the memory model.

    PYTHONPATH=src <python with torch (CUDA) and transformers> benchmarks/memory_fit.py [--seq 2048 --micro 2]

Builds a Qwen2-style model from a config written here (no download), in fp32 with bf16 autocast,
gradient checkpointing and AdamW (what SkyRL's FSDP policy holds on one GPU), runs one forward,
backward and optimizer step on `micro` random sequences of `seq` tokens, and prints the peak
beside `rlaunch.rules.memory`'s estimate of the same plan on one GPU (model states + activations
+ fp32 logits; the gathered-layer term is FSDP's and is left out on one unsharded GPU), with the
relative error. Without a CUDA device it says so and exits 0 (record that in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import sys

CONFIG = {
    "model_type": "qwen2",
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 12,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
}


def estimate(seq: int, micro: int) -> tuple[int, str]:
    from rlaunch.rules.memory import gib
    from rlaunch.skyrl import ModelFacts, SkyRLRolePlan, SkyRLTopology, memory_report

    plan = SkyRLRolePlan(
        colocate_all=True,
        policy_num_nodes=1,
        policy_num_gpus_per_node=1,
        num_inference_engines=1,
        inference_engine_tensor_parallel_size=1,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1,
        inference_engine_expert_parallel_size=1,
        train_batch_size=micro,
        policy_mini_batch_size=micro,
        micro_train_batch_size_per_gpu=micro,
        n_samples_per_prompt=1,
    )
    recipe = {
        "trainer": {"max_prompt_length": seq // 2, "algorithm": {"use_kl_loss": False}},
        "generator": {"sampling_params": {"max_generate_length": seq - seq // 2}},
    }
    facts = ModelFacts.from_hf_config(CONFIG)
    report = memory_report(SkyRLTopology(1, 1, "H100", plan), recipe, "fsdp", facts)
    (step,) = [r for r in report.table.rows if r.phase == "training bar"]
    arch = facts.architecture
    gathered = 2 * max(arch.layer_params(), arch.vocab * arch.hidden)
    return step.estimate - gathered, f"{step.detail}; less the gathered layer {gib(gathered)} GiB"


def measure(seq: int, micro: int) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**CONFIG), torch_dtype=torch.float32).cuda()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(0, CONFIG["vocab_size"], (micro, seq), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(input_ids=ids).logits
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids.unsqueeze(-1)).mean()
    (-logp).backward()
    optimizer.step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--micro", type=int, default=2)
    args = parser.parse_args()
    ours, detail = estimate(args.seq, args.micro)
    try:
        import torch
    except ImportError:
        print("torch is not installed here: run this with a CUDA-enabled torch and transformers")
        return 0
    if not torch.cuda.is_available():
        print(f"no CUDA device: nothing measured (estimate {ours / 2**30:.2f} GiB: {detail})")
        return 0
    peak = measure(args.seq, args.micro)
    print(f"device          {torch.cuda.get_device_name()}")
    print(f"measured peak   {peak / 2**30:.2f} GiB (torch.cuda.max_memory_allocated)")
    print(f"estimate        {ours / 2**30:.2f} GiB ({detail})")
    print(f"relative error  {(ours - peak) / peak:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
