"""`ModelFacts`: the architecture facts of a model that the preflight checks a plan against;
`StoredModel`: those facts with what storage recorded of the model besides.

Its own module, free of the artifact graph, so the preflight can take it without importing
`sources.inputs` (and through it the artifact package and storage). `from_hf_config` reads them
from a model's own `config.json` (pure: no torch, no transformers); the architecture it carries
sizes the memory rules (`rlaunch.rules.memory`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rlaunch.rules.model_shape import Architecture, Unsized


@dataclass(frozen=True)
class ModelFacts:
    """Attention heads (inference TP must divide them), context length (the token budget's cap) and
    the architecture (the memory rules' input; `Unsized` says why a config cannot be sized)."""

    num_attention_heads: int | None = None
    context_length: int | None = None
    revision: str | None = None  # the source commit the model artifact recorded (or its step pins)
    tokenizer_revision: str | None = None  # the tokenizer revision the spec pins against it
    architecture: Architecture | Unsized | None = None

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> ModelFacts:
        """The facts of a Hugging Face `config.json` (as a dict)."""
        from rlaunch.rules.model_shape import from_hf_config  # only where a config is read: not on a cold verdict

        heads, context = config.get("num_attention_heads"), config.get("max_position_embeddings")
        return cls(
            num_attention_heads=heads if _count(heads) else None,
            context_length=context if _count(context) else None,
            architecture=from_hf_config(config),
        )

    def with_config(self, config: Mapping[str, Any] | None) -> ModelFacts:
        """These facts, with the architecture (and any missing heads or context) read from `config`."""
        if not config:
            return self
        read = ModelFacts.from_hf_config(config)
        return replace(
            self,
            num_attention_heads=self.num_attention_heads or read.num_attention_heads,
            context_length=self.context_length or read.context_length,
            architecture=read.architecture,
        )


@dataclass(frozen=True)
class StoredModel:
    """A model artifact as storage knows it (`rlaunch.skyrl.plan.stored_facts`); an unbuilt one: what
    its step pins and declares."""

    facts: ModelFacts = ModelFacts()  # revision: the recorded one, else the commit its step pins
    recorded_revision: str | None = None  # what the built artifact recorded (the document carries only this)
    config: Mapping[str, Any] | None = None  # the config.json it recorded, else the one its step declares
    exported_uri: str | None = None  # its own Hugging Face export (a model trained by an RL step)
    unsized_reason: str | None = None  # why no config.json is known before it is built (a derived model, undeclared)


def architecture_differences(declared: Mapping[str, Any], built: Mapping[str, Any]) -> list[str]:
    """How a built model's `config.json` contradicts the one declared for it, as `key: declared X, built
    Y` for each key whose built value alone changes the facts the rules read (heads, context, the
    architecture: dtype and quantization included); [] when the facts agree, whatever else differs
    (`_name_or_path`, `transformers_version`)."""
    expected = ModelFacts.from_hf_config(declared)
    if expected == ModelFacts.from_hf_config(built):
        return []
    differing = sorted(k for k in declared.keys() | built.keys() if declared.get(k) != built.get(k))
    bearing = [k for k in differing if ModelFacts.from_hf_config({**declared, k: built.get(k)}) != expected]
    return [f"{k}: declared {declared.get(k)!r}, built {built.get(k)!r}" for k in bearing or differing]


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
