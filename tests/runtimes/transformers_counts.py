"""Run in the trl-cpu runtime's venv (it has transformers; the launcher side must not import it).

Reads a JSON list of config.json dicts on stdin, builds each model on the meta device (no weights,
no download; a vision-language config as an image-text-to-text model) and prints, per config, the
parameter count by component, the K/V projection widths and the sliding layers of the config's
`layer_types` transformers built, as JSON on stdout.
"""

from __future__ import annotations

import json
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText


def component(name: str) -> str:
    if "embed_tokens" in name:
        return "embeddings"
    if name.startswith("lm_head"):
        return "lm_head"
    if "norm" in name:
        return "norms"
    if ".self_attn." in name:
        return "attention"
    if ".experts." in name or name.endswith(".experts.gate_up_proj") or name.endswith(".experts.down_proj"):
        return "experts"
    if ".mlp.gate." in name or ".block_sparse_moe.gate." in name or name.endswith(".mlp.gate.weight"):
        return "router"
    return "mlp"


def count(config: dict) -> dict:
    cfg = AutoConfig.for_model(**config)
    text = cfg.get_text_config()
    with torch.device("meta"):
        auto = AutoModelForImageTextToText if text is not cfg else AutoModelForCausalLM
        model = auto.from_config(cfg)
    by: dict[str, int] = {}
    for name, param in model.named_parameters():
        key = component(name)
        by[key] = by.get(key, 0) + param.numel()
    kv_width = sum(
        m.k_proj.out_features + m.v_proj.out_features
        for n, m in model.named_modules()
        if n.endswith("self_attn") and hasattr(m, "k_proj")  # MLA has none
    )
    types = getattr(text, "layer_types", None)
    return {
        "by_component": by,
        "total": sum(p.numel() for p in model.parameters()),
        "kv_width": kv_width,
        "sliding_layers": None if types is None else sum(1 for t in types if t == "sliding_attention"),
    }


if __name__ == "__main__":
    print(json.dumps([count(c) for c in json.load(sys.stdin)]))
