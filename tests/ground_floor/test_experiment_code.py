"""`ExperimentCode`: the experiment's own modules, found without importing them, identified by the
sha256 of the files shipped, published under the prefix by that digest and staged by it."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest

from rlaunch.artifacts import Artifact, ArtifactStep
from rlaunch.artifacts.judged import judged, replay_check
from rlaunch.experiment_code import (
    CODE_PATH_ENV,
    MANIFEST,
    ExperimentCode,
    ExperimentCodeError,
    code_uri,
    function_reference,
    publish,
    stage,
)
from tests.support.shipped_code import REWARDS, experiment_tree


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working tree holding the package `shipexp` (tests/support/shipped_code.py)."""
    yield from experiment_tree(tmp_path, monkeypatch)


def digest(*modules: str) -> str:
    return ExperimentCode(modules=modules).digest  # a new value: the files are read again


def test_a_module_ships_its_file_and_the_init_of_its_package_by_import_path(tree: Path) -> None:
    code = ExperimentCode(modules=("shipexp.rewards",))
    assert code.files == {
        "shipexp/__init__.py": str(tree / "shipexp/__init__.py"),
        "shipexp/rewards.py": str(tree / "shipexp/rewards.py"),
    }
    assert "shipexp" not in sys.modules  # found on the path, never imported: nothing of it runs in a dry run


def test_a_package_ships_every_python_file_under_it_and_nothing_else(tree: Path) -> None:
    assert sorted(ExperimentCode(modules=("shipexp",)).files) == [
        "shipexp/__init__.py",
        "shipexp/helpers/__init__.py",
        "shipexp/helpers/maths.py",
        "shipexp/rewards.py",
    ]


def test_the_digest_moves_with_a_shipped_file_and_with_nothing_else(tree: Path) -> None:
    before = digest("shipexp.rewards")
    (tree / "shipexp/rewards.py").write_text(REWARDS)  # rewritten, same bytes, new mtime
    (tree / "shipexp/helpers/maths.py").write_text("TWO = 3\n")  # not shipped with shipexp.rewards
    os.rename(tree, tree.parent / "elsewhere")  # the checkout moved: import paths, not places, are hashed
    os.chdir(tree.parent / "elsewhere")
    sys.path.insert(0, str(tree.parent / "elsewhere"))
    try:
        assert digest("shipexp.rewards") == before
        (tree.parent / "elsewhere/shipexp/rewards.py").write_text(REWARDS + " ")  # one byte more
        assert digest("shipexp.rewards") != before
    finally:
        sys.path.remove(str(tree.parent / "elsewhere"))


def test_a_file_added_to_a_shipped_package_moves_its_digest(tree: Path) -> None:
    before = digest("shipexp")
    (tree / "shipexp/helpers/extra.py").write_text("")
    assert digest("shipexp") != before


def test_a_module_that_is_not_found_is_refused_naming_it_and_the_fix(tree: Path) -> None:
    with pytest.raises(ExperimentCodeError) as refused:
        digest("shipexp.rewardz")
    message = str(refused.value)
    assert "module 'shipexp.rewardz' is not found" in message and "run the experiment from the directory" in message


def test_a_module_outside_the_working_tree_is_refused(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree / "inner").mkdir()
    monkeypatch.chdir(tree / "inner")  # the package is on the path, one level above the working tree
    with pytest.raises(ExperimentCodeError) as refused:
        digest("shipexp.rewards")
    message = str(refused.value)
    assert f"ships {tree / 'shipexp/__init__.py'}, outside the working tree {tree / 'inner'}" in message
    assert "move shipexp/__init__.py into the working tree" in message


def test_a_compiled_module_is_refused_as_not_source(tree: Path) -> None:
    compiled = tree / f"shipexp/fast{EXTENSION_SUFFIXES[0]}"
    compiled.write_bytes(b"\x7fELF")
    with pytest.raises(
        ExperimentCodeError, match=rf"module 'shipexp.fast' is {compiled}, not Python source; ship source"
    ):
        digest("shipexp.fast")


@pytest.mark.parametrize("modules", [(), ("shipexp/rewards",), ("shipexp.",), "shipexp.rewards"])
def test_a_declaration_that_names_no_module_is_refused_at_construction(modules: Any) -> None:
    with pytest.raises((ValueError, TypeError), match=r"ExperimentCode\.modules"):
        ExperimentCode(modules=modules)


def test_a_declared_package_covers_its_modules_and_not_a_sibling_with_its_name_as_prefix() -> None:
    code = ExperimentCode(modules=("shipexp",))
    assert code.covers("shipexp") and code.covers("shipexp.helpers.maths")
    assert not code.covers("shipexp2.rewards")


@pytest.mark.parametrize("path", ["shipexp.rewards", "shipexp.rewards:", ":exact", "shipexp.rewards:exact()"])
def test_a_reward_must_read_module_colon_function(path: str) -> None:
    with pytest.raises(
        ValueError, match="^" + re.escape(f"SkyRLSpec.reward={path!r} must name a function as 'module:")
    ):
        function_reference(path, "SkyRLSpec.reward")


def test_a_reward_the_shipped_module_does_not_define_is_named(tree: Path) -> None:
    code = ExperimentCode(modules=("shipexp",))
    assert code.function_problem("shipexp.rewards:exact", "reward") is None
    assert code.function_problem("shipexp.rewards:exac", "reward") == (
        f"reward='shipexp.rewards:exac': {tree / 'shipexp/rewards.py'} defines no top-level 'exac'; "
        "name a function defined in it"
    )
    assert "ExperimentCode(modules=('shipexp', 'other'))" in str(code.function_problem("other:f", "reward"))


def test_published_code_stages_by_its_digest_into_an_importable_tree(tree: Path, tmp_path: Path) -> None:
    code = ExperimentCode(modules=("shipexp",))
    uri = code_uri(str(tmp_path / "prefix"), code.digest)
    publish(code, uri, code.digest)
    root = tmp_path / "task"
    root.mkdir()
    staged = Path(stage(uri, code.digest, str(root / "code"), lambda _: None, root=str(root)))
    assert (staged / "shipexp/helpers/maths.py").read_text() == "TWO = 2\n"
    assert not (staged / "shipexp/README.md").exists() and [p.name for p in root.iterdir()] == ["code"]


def test_a_file_changed_since_the_plan_is_not_published(tree: Path, tmp_path: Path) -> None:
    code = ExperimentCode(modules=("shipexp.rewards",))
    planned = code.digest
    (tree / "shipexp/rewards.py").write_text(REWARDS + "# edited\n")
    with pytest.raises(ExperimentCodeError, match=r"shipexp/rewards.py changed since the plan fingerprinted it"):
        publish(code, str(tmp_path / "bundle"), planned)
    assert not (tmp_path / "bundle" / MANIFEST).exists()  # no manifest: the bundle is not whole
    with pytest.raises(ExperimentCodeError, match=r"was fingerprinted as"):
        publish(ExperimentCode(modules=("shipexp.rewards",)), str(tmp_path / "bundle"), planned)


def test_a_tampered_bundle_is_refused_and_nothing_is_left_staged(tree: Path, tmp_path: Path) -> None:
    code = ExperimentCode(modules=("shipexp.rewards",))
    uri = str(tmp_path / "bundle")
    publish(code, uri, code.digest)
    (tmp_path / "bundle/shipexp/rewards.py").write_text("def exact(c, t):\n    return 1.0\n")
    root = tmp_path / "task"
    root.mkdir()
    with pytest.raises(ExperimentCodeError, match=r"bundle/shipexp/rewards.py does not match the sha256"):
        stage(uri, code.digest, str(root / "code"), lambda _: None, root=str(root))
    assert list(root.iterdir()) == []
    with pytest.raises(ExperimentCodeError, match=r"holds the code .* not the code 000000000000 planned"):
        stage(uri, "0" * 64, str(root / "code"), lambda _: None, root=str(root))


# ---------------------------------------------------------------- the fingerprint of a step


class Scores(Artifact):
    pass


def score(config: Any) -> None:
    return None


def step(code: ExperimentCode | None) -> ArtifactStep[Scores]:
    return ArtifactStep(
        name="evals/score",
        version="2026.12.07",
        artifact_type=Scores,
        run=score,
        build_config=lambda ctx: {},
        code=code,
    )


def test_the_fingerprint_of_a_step_moves_with_its_shipped_code(tree: Path) -> None:
    before = step(ExperimentCode(modules=("shipexp.rewards",))).fingerprint
    assert step(ExperimentCode(modules=("shipexp.rewards",))).fingerprint == before
    (tree / "shipexp/rewards.py").write_text(REWARDS.replace("==", "!="))
    assert step(ExperimentCode(modules=("shipexp.rewards",))).fingerprint != before


def test_a_step_that_ships_no_code_keeps_the_fingerprint_it_had() -> None:
    assert '"code"' not in step(None).fingerprint_payload


def test_a_step_refuses_code_that_is_not_an_experiment_code() -> None:
    with pytest.raises(TypeError, match=r"evals/score: code must be an ExperimentCode"):
        step("shipexp.rewards")  # type: ignore[arg-type]


def test_the_code_path_env_is_rlaunchs_own() -> None:
    assert CODE_PATH_ENV.startswith("RLAUNCH_")  # task_env may not set it (launch_config.task_env)


def test_a_coordinator_replaying_over_edited_code_is_refused_naming_the_code(tree: Path) -> None:
    submitted = judged([step(ExperimentCode(modules=("shipexp.rewards",)))], {})
    (tree / "shipexp/rewards.py").write_text(REWARDS + "# edited after --run\n")
    replay = replay_check(submitted, judged([step(ExperimentCode(modules=("shipexp.rewards",)))], {}), {})
    (difference,) = replay.steps
    assert difference.field == "code" and difference.judged != difference.replayed
    assert replay_check(submitted, submitted, {}).problems() == []
