"""Recipe overrides: `--set dotted.key=value` from the shell, laid over a spec's `config_yaml`.

The seed draws the line: geometry (parallelism, engine count, placement, batch sizes) is rendered
from the role plan and is never an override; keys rlaunch owns (paths, seed, retention) are set
from the spec; every other key of the runtime's base config is a researcher's knob. A spec built
inside a main's build context takes the context's overrides (`from_build_context`) and checks
them against its runtime when it is constructed (`refusals`), so a refused override stops the main
before anything is built. The overrides enter the rendered recipe, and so the fingerprint; the
launch document keeps them as provenance (`run.recipe_overrides`), which the run record copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlaunch.launch_config.recipe_keys import TRAINER

if TYPE_CHECKING:
    from rlaunch.runtimes.registry import RuntimeProfile


@dataclass(frozen=True)
class RecipeOverride:
    """One recipe key set from the shell to a YAML scalar (`2e-6` a float, `true` a bool, `8` an int)."""

    key: str
    value: Any

    def __str__(self) -> str:
        return f"{self.key}={scalar_text(self.value)}"


class RecipeOverrideError(ValueError):
    """An override the spec's runtime refuses; the CLI reports it as a bad `--set` value."""


def scalar_text(value: Any) -> str:
    """A scalar as YAML writes it (`true`, `null`, `2e-06`): how an override is shown back."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def from_build_context() -> tuple[RecipeOverride, ...]:
    """The active build context's overrides, a `--sweep` variant's settings after them (none outside
    one; a variant declared in Python sets no recipe key): a spec's default."""
    from rlaunch.artifacts.versions import current_build_context

    ctx = current_build_context()
    if ctx is None:
        return ()
    swept = ctx.variant.settings if ctx.variant is not None and not ctx.in_code else {}
    return tuple(RecipeOverride(k, v) for k, v in {**ctx.recipe_overrides, **swept}.items())


def rendered_keys() -> dict[str, str]:
    """Every recipe key rlaunch renders or owns -> what sets it, i.e. what to change instead."""
    from rlaunch.launch_config.geometry import CRITIC_KEYS, FULLY_ASYNC_ENABLED_KEY, ROLE_PLAN_KEYS, rendered_plan
    from rlaunch.rules.recipe_rules import LAUNCHER_OWNED

    # a role plan whose every field holds its own name says which field each rendered key comes from
    fields = {*ROLE_PLAN_KEYS, *(f"critic.{name}" for name in CRITIC_KEYS)}
    by_field = rendered_plan({**{f: f for f in ROLE_PLAN_KEYS}, "critic": {f: f"critic.{f}" for f in CRITIC_KEYS}})
    out = {
        key: f"SkyRLRolePlan.{source}" if source in fields else "the role plan (SkyRLRolePlan), always"
        for key, source in by_field.items()
    }
    out[TRAINER.SEED] = "SkyRLSpec.seed"
    out[FULLY_ASYNC_ENABLED_KEY] = "the recipe's entrypoint (entrypoint: fully_async in config_yaml)"
    out.update(LAUNCHER_OWNED)
    return out


def refusals(overrides: tuple[RecipeOverride, ...], profile: RuntimeProfile) -> list[str]:
    """Why each override cannot be laid over a recipe for `profile`, one line each naming the
    override, the key and the fix (empty: every override is a knob this runtime takes)."""
    if not overrides:
        return []  # a spec without overrides pays nothing for them
    rendered = rendered_keys()
    return [
        f"{override}: {problem}"
        for override in overrides
        if (problem := _problem(override, profile, rendered)) is not None
    ]


def _problem(override: RecipeOverride, profile: RuntimeProfile, rendered: Mapping[str, str]) -> str | None:
    from rlaunch.dotted import leaves, set_path
    from rlaunch.runtimes.registry import unsupported_settings

    key = override.key
    if key in rendered:
        return (
            f"{key} is not a knob: rlaunch renders it from {rendered[key]}; change that instead "
            "(geometry, batch sizes, paths and the seed are never overrides)"
        )
    recipe: dict[str, Any] = {}
    set_path(recipe, key, override.value)
    composed, problems = profile.compose(recipe)
    for problem in problems:
        if problem.code == "recipe.unknown_key":
            known = [path for path, _ in leaves(profile.base_config(), stop=profile.base_shape.stops)]
            return f"{key} is not a key of the {profile.name} runtime's base config; {_nearest(key, known)}"
        return f"{problem.message}; {problem.fix}"
    for unsupported, _, reason in unsupported_settings(profile, composed):
        if unsupported == key:
            return f"{reason}; choose a runtime that honours {key}, or leave it out"
    return None


def _nearest(key: str, known: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    if close:
        return f"nearest known keys: {', '.join(close)}"
    section = key.split(".", 1)[0]
    under = sorted(k for k in known if k.startswith(f"{section}."))
    return (
        f"keys under {section}: {', '.join(under[:8])}{', ...' if len(under) > 8 else ''}"
        if under
        else (f"top-level sections: {', '.join(sorted({k.split('.', 1)[0] for k in known}))}")
    )


def apply(recipe: Mapping[str, Any], overrides: tuple[RecipeOverride, ...]) -> dict[str, Any]:
    """`recipe` with each override set at its dotted key (an override wins over the recipe)."""
    import copy

    from rlaunch.dotted import set_path

    out = copy.deepcopy(dict(recipe))
    for override in overrides:
        set_path(out, override.key, override.value)
    return out


def parse(raw: str) -> RecipeOverride:
    """`dotted.key=value` with the value read as one YAML scalar (`2e-6` a float, `true` a bool,
    `8` an int, `null` none; anything else, a list or mapping included, is its text); a ValueError
    saying what is wrong otherwise."""
    from rlaunch.launch_config.loader import load_yaml
    from rlaunch.launch_config.typed import DocumentError

    key, sep, text = raw.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{raw!r} is not KEY=VALUE (e.g. --set trainer.policy.optimizer_config.lr=2e-6)")
    if any(not part or part != part.strip() for part in key.split(".")):
        raise ValueError(f"{key!r} is not a dotted recipe key (e.g. trainer.policy.optimizer_config.lr)")
    if not text.strip():
        raise ValueError(f"{key} has no value; write {key}=VALUE (null for none, '' quoted for an empty string)")
    try:
        value = load_yaml(text, source=f"--set {key}", what="override value")
    except DocumentError as exc:
        raise ValueError("; ".join(exc.problems)) from None
    return RecipeOverride(key, text.strip() if isinstance(value, (list, dict)) else value)
