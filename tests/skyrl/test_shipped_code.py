"""An RL run's shipped code: `SkyRLSpec(code=..., reward=...)` is checked where it is built, and the
launch document carries the code by digest (so the fingerprint moves with it) and the reward by name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from rlaunch.cli import rl_build_options
from rlaunch.experiment_code import ExperimentCode, ExperimentCodeError, code_uri
from rlaunch.launch_config import schema
from rlaunch.skyrl import skyrl_step
from rlaunch.skyrl.plan.launch_document import code_section
from rlaunch.skyrl.views.plan_view import describe_step
from tests.support.shipped_code import REWARDS, experiment_tree
from tests.support.specs import cpu_topology, local, planned_view_of, spec


def shipped() -> ExperimentCode:
    """The package `shipexp`, read afresh (a value caches the files it found)."""
    return ExperimentCode(modules=("shipexp",))


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from experiment_tree(tmp_path, monkeypatch)


def cpu_spec(**fields: object):  # noqa: ANN201 - a SkyRLSpec on trl-cpu, the runtime that calls a shipped reward
    return spec(profile="trl-cpu", topo=cpu_topology(), **fields)


def test_a_reward_whose_module_is_not_shipped_is_refused_naming_the_declaration_to_add() -> None:
    with pytest.raises(ValueError) as refused:
        cpu_spec(code=ExperimentCode(modules=("shipexp.helpers",)), reward="shipexp.rewards:exact")
    assert str(refused.value) == (
        "SkyRLSpec.reward='shipexp.rewards:exact': its module is not shipped with the run; declare "
        "code=ExperimentCode(modules=('shipexp.helpers', 'shipexp.rewards'))"
    )
    with pytest.raises(ValueError, match=r"declare code=ExperimentCode\(modules=\('shipexp.rewards',\)\)"):
        cpu_spec(reward="shipexp.rewards:exact")  # no code at all


def test_a_reward_on_a_runtime_that_calls_none_is_refused() -> None:
    with pytest.raises(ValueError, match=r"runtime 'fsdp' does not call a reward function of the shipped code"):
        spec(code=shipped(), reward="shipexp.rewards:exact")


def test_code_that_is_not_an_experiment_code_is_refused() -> None:
    with pytest.raises(TypeError, match=r"SkyRLSpec.code must be an ExperimentCode, got 'shipexp'"):
        cpu_spec(code="shipexp")


def fingerprint_document(s) -> dict:  # noqa: ANN001
    return skyrl_step(s, local()).fingerprint_config["launch_document"]


def test_the_document_carries_the_code_by_digest_and_the_reward_by_name(tree: Path) -> None:
    document = fingerprint_document(cpu_spec(code=shipped(), reward="shipexp.rewards:exact"))
    assert document["code"] == {
        "uri": code_uri("<prefix>", shipped().digest),
        "digest": shipped().digest,
        "modules": ["shipexp"],
        "reward": "shipexp.rewards:exact",
    }
    assert "code" not in fingerprint_document(cpu_spec())  # a run without it keeps the fingerprint it had


def test_the_fingerprint_of_the_rl_step_moves_with_its_reward_source(tree: Path) -> None:
    def fingerprint() -> str:
        code = ExperimentCode(modules=("shipexp",))
        return skyrl_step(cpu_spec(code=code, reward="shipexp.rewards:exact"), local()).fingerprint

    before = fingerprint()
    assert fingerprint() == before
    (tree / "shipexp/rewards.py").write_text(REWARDS.replace("==", "!="))
    assert fingerprint() != before


def test_a_reward_its_module_does_not_define_is_refused_when_the_document_is_rendered(tree: Path) -> None:
    with pytest.raises(ExperimentCodeError, match=r"shipexp/rewards.py defines no top-level 'exac'"):
        fingerprint_document(cpu_spec(code=shipped(), reward="shipexp.rewards:exac"))


def test_a_live_document_names_the_bundle_under_the_prefix(tree: Path, tmp_path: Path) -> None:
    section = code_section(cpu_spec(code=shipped(), reward="shipexp.rewards:exact"), str(tmp_path / "prefix"))
    assert (
        section.uri == f"{tmp_path / 'prefix'}/.code/{shipped().digest}" and section.reward == "shipexp.rewards:exact"
    )


@pytest.mark.parametrize(("uri", "refused"), [("/prefix/.code/d", False), ("prefix/.code/d", True)])
def test_a_document_whose_code_is_not_at_a_storage_location_is_refused(
    document: dict[str, Any], uri: str, refused: bool
) -> None:
    shipped = {**document, "code": {"uri": uri, "digest": "0" * 64, "modules": ["shipexp"]}}
    if not refused:
        assert schema.from_dict(shipped).code == schema.CodeSection(uri, "0" * 64, ("shipexp",))
        return
    with pytest.raises(ValueError, match=re.escape(f"code.uri={uri!r} ")):
        schema.from_dict(shipped)


@pytest.mark.parametrize("digest", ["0" * 63, "0" * 64 + "0", "G" * 64])
def test_a_document_whose_code_digest_is_not_a_sha256_is_refused(digest: str) -> None:
    with pytest.raises(ValueError, match=r"code.digest=.* must be the 64-hex sha256 of the shipped code"):
        schema.CodeSection(uri="/prefix/.code/x", digest=digest)


def test_the_plan_names_the_shipped_code_and_the_reward_and_a_run_without_code_no_row(prefix: str, tree: Path) -> None:
    digest = shipped().digest
    plan = describe_step(
        *planned_view_of(skyrl_step(cpu_spec(code=shipped(), reward="shipexp.rewards:exact"), local()))
    )
    (row,) = [line for line in plan if line.startswith("shipped code")]
    assert row.split(None, 2)[2] == (
        f"shipexp (sha256 {digest[:16]}) -> {prefix}/.code/{digest}; reward shipexp.rewards:exact"
    )
    plain = describe_step(*planned_view_of(skyrl_step(cpu_spec(), local())))
    assert not [line for line in plain if line.startswith("shipped code")]


@click.command()
@click.option("--module", default="shipexp.rewards")
@rl_build_options
def experiment(module: str) -> Any:
    return skyrl_step(cpu_spec(code=ExperimentCode(modules=(module,)), reward=f"{module}:exact"), local())


@pytest.mark.parametrize(("module", "refused"), [("shipexp.rewards", False), ("shipexp.rewardz", True)])
def test_the_dry_run_refuses_a_module_it_cannot_find_naming_it_and_the_fix(
    prefix: str, tree: Path, module: str, refused: bool
) -> None:
    result = CliRunner().invoke(experiment, ["--version", "2026.12.07", "--module", module])
    if not refused:
        assert result.exit_code == 0 and "shipped code       shipexp.rewards (sha256 " in result.output, result.output
        return
    assert result.exit_code != 0
    assert (
        "ExperimentCode: module 'shipexp.rewardz' is not found on the path of this process (from "
        f"{tree}); run the experiment from the directory that holds it"
    ) in result.output, result.output
    assert not Path(prefix).exists() or not any(Path(prefix).iterdir())  # a dry run writes nothing
