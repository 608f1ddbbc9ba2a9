"""`ModelFacts`: the architecture facts of a model that the preflight checks a plan against.

Its own module, free of the artifact graph, so the preflight can take it without importing
`skyrl.sources` (and through it the artifact package and storage).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelFacts:
    """Attention heads (inference TP must divide them) and context length (the token budget's cap)."""

    num_attention_heads: int | None = None
    context_length: int | None = None
    revision: str | None = None  # the source commit the model artifact recorded (or its step pins)
    tokenizer_revision: str | None = None  # the tokenizer revision the spec pins against it
