"""The recipe keys module against the runtimes' base configs, and no recipe key path outside it."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from rlaunch.dotted import set_path
from rlaunch.launch_config import recipe_keys
from rlaunch.launch_config.recipe_keys import ROLE, TRAINER, namespace_keys, role_key
from rlaunch.runtimes.registry import RuntimeProfile, get_profile, profile_names

SRC = Path(recipe_keys.__file__).parents[1]
ADAPTERS = SRC / "runtimes" / "adapters"
# A recipe key path written as a string: a top-level section of the recipe, then dotted names
# (`{}` stands for an f-string's placeholder).
KEY_PATH = re.compile(r"(trainer|generator|environment|data)(\.(\w+|\{\}))+")
SECTIONS = frozenset({"trainer", "generator", "environment", "data"})
# Strings shaped like a key path that are not one.
NOT_KEYS = {
    "data.missing_field": "a violation code (rules/data_rules.py)",
    "environment.json": "a file name (runtimes/environment.py)",
}


def every_key() -> dict[str, str]:
    """Every key the module names, by where it is named: `TRAINER.RESUME_MODE`, and each role leaf
    under the policy (the one role that has them all; the ref and the critic lack some, and their
    readers pass a default)."""
    keys = {f"{ns.__name__}.{name}": key for ns in recipe_keys.NAMESPACES for name, key in namespace_keys(ns).items()}
    keys.update({f"ROLE.{name}": role_key("policy", leaf) for name, leaf in namespace_keys(ROLE).items()})
    return keys


def knows(profile: RuntimeProfile, key: str) -> bool:
    """Whether `profile`'s base config has `key`: a recipe setting it is not refused as unknown
    (a key under a free-form mapping, such as vLLM's engine_init_kwargs, is known)."""
    recipe: dict[str, object] = {}
    set_path(recipe, key, None)
    _, problems = profile.compose(recipe)
    return not any(p.code == "recipe.unknown_key" for p in problems)


def absent(keys: Mapping[str, str], profiles: list[RuntimeProfile]) -> list[str]:
    """Each key some runtime's base config lacks, naming the runtimes that lack it."""
    out = []
    for name, key in keys.items():
        lacking = [p.name for p in profiles if not knows(p, key)]
        if lacking:
            out.append(f"{name} = {key!r} is not in the base config of {', '.join(lacking)}")
    return out


@pytest.fixture(scope="module")
def profiles() -> list[RuntimeProfile]:
    return [get_profile(name) for name in profile_names()]


def test_every_key_is_in_every_runtimes_base_config(profiles: list[RuntimeProfile]) -> None:
    assert len(profiles) >= 4
    assert absent(every_key(), profiles) == []


def test_a_key_missing_from_a_base_config_is_named_with_its_runtimes(profiles: list[RuntimeProfile]) -> None:
    names = ", ".join(p.name for p in profiles)
    bogus = {"TRAINER.RESUME_MOD": "trainer.resume_mod", "ROLE.X": role_key("policy", "model.pathh")}
    assert absent(bogus, profiles) == [
        f"TRAINER.RESUME_MOD = 'trainer.resume_mod' is not in the base config of {names}",
        f"ROLE.X = 'trainer.policy.model.pathh' is not in the base config of {names}",
    ]


def test_a_role_leaf_only_some_roles_have_is_absent_for_the_others(profiles: list[RuntimeProfile]) -> None:
    """Role keys are checked under the policy; the critic has no Megatron section of its own."""
    fsdp = get_profile("fsdp")
    assert knows(fsdp, role_key("policy", ROLE.MEGATRON_CONFIG))
    assert not knows(fsdp, role_key("critic", ROLE.MEGATRON_CONFIG))
    assert [role_key(role, ROLE.MODEL_PATH) for role in ("policy", "ref", "critic")] == [
        "trainer.policy.model.path",
        "trainer.ref.model.path",
        "trainer.critic.model.path",
    ]


def test_a_key_under_a_free_form_mapping_is_known() -> None:
    fsdp = get_profile("fsdp")
    assert knows(fsdp, recipe_keys.ENGINE.KV_CACHE_DTYPE)
    assert not knows(fsdp, TRAINER.RESUME_MODE + "_x")


def _string_text(node: ast.AST) -> str | None:
    """A string literal's text, with `{}` for each placeholder of an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def key_paths_in(source: str) -> list[tuple[int, str]]:
    """(line, text) of each recipe key path written as a string: a whole string literal shaped like
    a key path (an f-string's placeholders included), or a key of the base config split into a
    tuple or list of names (`("trainer", "algorithm")`; `("environment", "numerical", "gate")` is
    three names). Docstrings and `NOT_KEYS` aside."""
    tree = ast.parse(source)
    # Docstrings, and the pieces of an f-string (read whole as the f-string), are not literals of their own.
    skipped = _docstrings(tree) | {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        text = _string_text(node)
        names = [_string_text(p) for p in node.elts] if isinstance(node, ast.Tuple | ast.List) else []
        joined = ".".join(n or "" for n in names)
        if len(names) >= 2 and names[0] in SECTIONS and all(names) and knows(get_profile("fsdp"), joined):
            found.append((node.lineno, joined))
        elif text is not None and KEY_PATH.fullmatch(text) and text not in NOT_KEYS:
            found.append((getattr(node, "lineno", 0), text))
    return sorted(found)


def test_the_scan_finds_each_way_of_writing_a_key_path() -> None:
    source = (
        '"""A docstring naming trainer.resume_mode."""\n'
        'a = get(t, "trainer.resume_mode")\n'
        "b = 'generator.sampling_params.max_generate_length'\n"
        'c = f"trainer.{role}.fsdp_config.cpu_offload"\n'
        'd = ("trainer", "algorithm")\n'
        'e = f"trainer.resume_mode={mode!r} is not supported"\n'
        'f = "config_yaml.trainer.seed"\n'
        'g = "data.missing_field"\n'
        'h = ("environment", "numerical", "gate")\n'
    )
    assert key_paths_in(source) == [
        (2, "trainer.resume_mode"),
        (3, "generator.sampling_params.max_generate_length"),
        (4, "trainer.{}.fsdp_config.cpu_offload"),
        (5, "trainer.algorithm"),
    ]


def test_no_recipe_key_path_outside_the_keys_module() -> None:
    """The acceptance's grep: rlaunch names a recipe key through `recipe_keys` only (the adapters
    cannot import rlaunch and keep their own)."""
    found = [
        f"{path.relative_to(SRC.parent)}:{line}: {text!r}"
        for path in sorted(SRC.rglob("*.py"))
        if ADAPTERS not in path.parents and path != Path(recipe_keys.__file__)
        for line, text in key_paths_in(path.read_text(encoding="utf-8"))
    ]
    assert found == []
