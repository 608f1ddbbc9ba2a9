"""`--sweep KEY=V1,V2,...`: every variant planned in one dry run, each its own artifact named by its
label, the steps no variant changes shared, one table judging the whole sweep, one smoke for the
variants that differ only in what parity does not compare (end to end: tests/launch/test_sweep_run.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from experiments import smoke
from rlaunch.artifacts import ArtifactStep, variants
from rlaunch.cli import rl_build_options

DAY = "2026.12.07"
LR = "trainer.policy.optimizer_config.lr"
GEN = "generator.sampling_params.max_generate_length"


def _smoke(*args: str) -> Any:
    return CliRunner().invoke(smoke.main, ["--version", DAY, "--stage", "rl", *args])


def _plan(main: click.Command, *args: str) -> dict[str, Any]:
    done = CliRunner().invoke(main, ["--version", DAY, "--plan-format", "json", *args])
    assert done.exit_code == 0, done.output
    plan: dict[str, Any] = json.loads(done.stdout)
    return plan


@click.command()
@rl_build_options
def smoked_main() -> ArtifactStep[Any]:
    """The smoke's RL step at a larger batch, gated by the smoke itself declared a smoke."""
    model, data = smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step()
    rehearsal = smoke.rl_step(model, data, 1, 1, name="smoke/rehearsal", is_smoke=True)
    return smoke.rl_step(model, data, 1, 4, name="smoke/rl", train_batch=8, smoke=rehearsal)


def test_every_variant_is_its_own_artifact_and_the_unchanged_steps_are_shared(prefix: str) -> None:
    plan = _plan(smoke.main, "--stage", "rl", "--sweep", f"{LR}=1e-3,2e-3,3e-3")
    identities = [s["identity"] for s in plan["steps"]]
    assert identities == [
        f"smoke/tokenizer@{DAY}",
        f"smoke/model@{DAY}",
        f"smoke/arithmetic@{DAY}",
        f"smoke/rl.lr-1e-3@{DAY}",
        f"smoke/rl.lr-2e-3@{DAY}",
        f"smoke/rl.lr-3e-3@{DAY}",
    ]
    assert len({s["fingerprint"] for s in plan["steps"]}) == 6
    assert {s["path"] for s in plan["steps"]} == {f"{prefix}/{i.replace('@', '/')}" for i in identities}
    assert plan["facts"][f"smoke/rl.lr-2e-3@{DAY}"]["recipe_overrides"] == {LR: 2e-3}
    assert plan["terminal"] == identities[3:]


def test_the_sweep_is_one_table_judged_as_a_whole(prefix: str) -> None:
    plan = _plan(smoke.main, "--stage", "rl", "--sweep", f"{LR}=1e-3,2e-3")
    sweep = plan["sweep"]
    assert sweep["name"].startswith(f"smoke/rl@{DAY}~sweep-") and len(sweep["name"].rsplit("-", 1)[1]) == 8
    rows = {row["variant"]: row for row in sweep["variants"]}
    assert list(rows) == ["lr-1e-3", "lr-2e-3"]
    fingerprints = {s["identity"]: s["fingerprint"] for s in plan["steps"]}
    assert rows["lr-1e-3"]["fingerprint"] == [fingerprints[f"smoke/rl.lr-1e-3@{DAY}"]]
    assert rows["lr-1e-3"] | {"fingerprint": None} == {
        "variant": "lr-1e-3",
        "settings": {LR: 1e-3},
        "steps": [f"smoke/rl.lr-1e-3@{DAY}"],
        "fingerprint": None,
        "gpus": 1,
        "gpu_hours": 0,
        "verdict": "may launch",
        "smoke": {f"smoke/rl.lr-1e-3@{DAY}": None},
    }
    text = _smoke("--sweep", f"{LR}=1e-3,2e-3").output
    assert f"Sweep {sweep['name']} (2 variants, one submission; at most " in text
    assert "  variant  fingerprint   GPUs  GPU-hours  verdict     gated by smoke" in text
    assert (
        f"  lr-2e-3  {fingerprints[f'smoke/rl.lr-2e-3@{DAY}'][:12]}  1     0          may launch  none declared" in text
    )


def test_the_sweep_name_is_the_same_for_one_grid_and_another_for_another(prefix: str) -> None:
    one = _plan(smoke.main, "--stage", "rl", "--sweep", f"{LR}=1e-3,2e-3")["sweep"]
    again = _plan(smoke.main, "--stage", "rl", "--sweep", f"{LR}=1e-3,2e-3")["sweep"]
    other = _plan(smoke.main, "--stage", "rl", "--sweep", f"{LR}=1e-3,3e-3")["sweep"]
    assert one["name"] == again["name"] != other["name"]
    # the sweep is not part of a variant's identity: lr-1e-3 is the same artifact in both grids
    assert one["variants"][0]["fingerprint"] == other["variants"][0]["fingerprint"]
    assert one["variants"][1]["fingerprint"] != other["variants"][1]["fingerprint"]


def test_a_downstream_step_of_a_variant_is_the_variants_own(prefix: str) -> None:
    plan = _plan(smoke.main, "--stage", "evaluation", "--sweep", f"{LR}=1e-3,2e-3")
    identities = {s["identity"] for s in plan["steps"]}
    assert {f"smoke/eval.lr-1e-3@{DAY}", f"smoke/eval.lr-2e-3@{DAY}", f"smoke/arithmetic@{DAY}"} <= identities
    assert plan["sweep"]["name"].startswith(f"smoke/eval@{DAY}~sweep-")


def test_set_applies_to_every_variant(prefix: str) -> None:
    plan = _plan(
        smoke.main, "--stage", "rl", "--set", "trainer.algorithm.kl_loss_coef=0.1", "--sweep", f"{LR}=1e-3,2e-3"
    )
    for label, rate in (("lr-1e-3", 1e-3), ("lr-2e-3", 2e-3)):
        facts = plan["facts"][f"smoke/rl.{label}@{DAY}"]["recipe_overrides"]
        assert facts == {"trainer.algorithm.kl_loss_coef": 0.1, LR: rate}


def test_a_grid_of_two_keys_is_every_combination(prefix: str) -> None:
    plan = _plan(
        smoke.main, "--stage", "rl", "--sweep", f"{LR}=1e-3,2e-3", "--sweep", "trainer.algorithm.kl_loss_coef=0,0.1"
    )
    assert [r["variant"] for r in plan["sweep"]["variants"]] == [
        "lr-1e-3.kl_loss_coef-0",
        "lr-1e-3.kl_loss_coef-0.1",
        "lr-2e-3.kl_loss_coef-0",
        "lr-2e-3.kl_loss_coef-0.1",
    ]
    assert plan["sweep"]["variants"][1]["settings"] == {LR: 1e-3, "trainer.algorithm.kl_loss_coef": 0.1}


# --- one smoke for many -------------------------------------------------------------------------


def test_values_parity_does_not_compare_share_one_smoke(prefix: str) -> None:
    plan = _plan(smoked_main, "--sweep", f"{LR}=1e-3,2e-3,3e-3")
    gates = [row["smoke"] for row in plan["sweep"]["variants"]]
    assert gates == [
        {f"smoke/rl.{label}@{DAY}": f"smoke/rehearsal@{DAY}"} for label in ("lr-1e-3", "lr-2e-3", "lr-3e-3")
    ]


def test_a_generation_length_needs_each_variant_its_own_smoke(prefix: str) -> None:
    plan = _plan(smoked_main, "--sweep", f"{GEN}=16,32")
    gates = [row["smoke"] for row in plan["sweep"]["variants"]]
    # 16 is the recipe's own length: the smoke as declared rehearses it; 32 needs a smoke at 32
    assert gates == [
        {f"smoke/rl.max_generate_length-16@{DAY}": f"smoke/rehearsal@{DAY}"},
        {f"smoke/rl.max_generate_length-32@{DAY}": f"smoke/rehearsal.max_generate_length-32@{DAY}"},
    ]
    text = CliRunner().invoke(smoked_main, ["--version", DAY, "--sweep", f"{GEN}=16,32"]).output
    assert f"smoke/rehearsal.max_generate_length-32@{DAY}" in text.split("Sweep ", 1)[1].split("\n\n", 1)[0]


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ("--set", f"{LR}=1e-3", "--sweep", f"{LR}=1e-3,2e-3"),
            f"{LR} is both set (--set) and swept (--sweep); keep one",
        ),
        (  # the other order: the refusal does not depend on which option click parses first
            ("--sweep", f"{LR}=1e-3,2e-3", "--set", f"{LR}=1e-3"),
            f"{LR} is both set (--set) and swept (--sweep); keep one",
        ),
        (("--sweep", f"{LR}=1e-3"), f"--sweep {LR}=1e-3 needs at least two distinct values"),
        (("--sweep", f"{LR}=1e-3,1e-3"), "needs at least two distinct values"),
        (("--sweep", f"{LR}=1e-3", "--sweep", f"{LR}=2e-3,3e-3"), f"{LR} is swept twice"),
        (("--sweep", LR), "is not KEY=V1,V2,..."),
        (("--sweep", f"{LR}=1e-3,"), f"{LR} has no value"),
        (
            ("--sweep", "trainer.micro_train_batch_size_per_gpu=2,4"),
            "is not a knob: rlaunch renders it from SkyRLRolePlan",
        ),
        (
            ("--sweep", "trainer.policy.optimizer_config.lrr=1,2"),
            "nearest known keys: trainer.policy.optimizer_config.lr",
        ),
        (("--sweep", "trainer.project_name=a b,a?b"), "two variants would both be labelled 'project_name-a_b'"),
    ],
)
def test_a_bad_sweep_is_refused_before_anything_is_written(prefix: str, args: tuple[str, ...], words: str) -> None:
    for run in ((), ("--run",)):
        done = _smoke(*args, *run)
        assert done.exit_code == 2, done.output
        assert words in " ".join(done.output.split()), done.output
    assert not Path(prefix).exists() or not any(Path(prefix).rglob("*.json"))


# --- --retry on a sweep -------------------------------------------------------------------------


def test_retry_on_a_sweep_relaunches_the_failed_variants_only(prefix: str) -> None:
    from rlaunch.artifacts import records
    from rlaunch.runs.run_record import update_attempt

    done, failed = (f"{prefix}/smoke/rl.{label}/{DAY}" for label in ("lr-1e-3", "lr-2e-3"))
    records.write_record(done, {"name": "smoke/rl.lr-1e-3", "version": DAY})
    records.write_status(done, "succeeded")
    update_attempt(failed, "smoke-rl", "earlier", {"state": "failed", "failure": "trainer exited 1"})
    grid = ("--stage", "rl", "--sweep", f"{LR}=1e-3,2e-3,3e-3")

    refused = _plan(smoke.main, *grid)
    assert [r["verdict"] for r in refused["sweep"]["variants"]] == ["served from storage", "refused", "may launch"]
    (finding,) = refused["judgement"][f"smoke/rl.lr-2e-3@{DAY}"]["findings"]
    assert finding["gate"] == "retry" and "relaunching it is a retry" in finding["message"]

    retried = _plan(smoke.main, *grid, "--retry", "the trainer was killed")
    assert [r["verdict"] for r in retried["sweep"]["variants"]] == ["served from storage", "may launch", "may launch"]
    actions = {s["identity"]: s["action"] for s in retried["steps"]}
    assert actions[f"smoke/rl.lr-1e-3@{DAY}"] == "serve" and actions[f"smoke/rl.lr-2e-3@{DAY}"] == "run"


# --- a sweep declared in Python -----------------------------------------------------------------


@click.command()
@rl_build_options
def batches_main() -> list[ArtifactStep[Any]]:
    """A grid over the role plan, which recipe values cannot say: one RL step per train batch."""
    model, data = smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step()
    return [
        smoke.rl_step(model, data, 1, 1, train_batch=batch)
        for batch in variants("train_batch", {"batch-4": 4, "batch-8": 8})
    ]


def test_a_sweep_declared_in_python_is_one_table_each_variant_its_own(prefix: str) -> None:
    plan = _plan(batches_main)
    sweep = plan["sweep"]
    assert sweep["name"].startswith(f"train_batch@{DAY}~sweep-")
    assert [(r["variant"], r["settings"], r["steps"]) for r in sweep["variants"]] == [
        ("batch-4", {"train_batch": "batch-4"}, [f"smoke/rl.batch-4@{DAY}"]),
        ("batch-8", {"train_batch": "batch-8"}, [f"smoke/rl.batch-8@{DAY}"]),
    ]
    identities = [s["identity"] for s in plan["steps"]]
    assert identities[:3] == [f"smoke/tokenizer@{DAY}", f"smoke/model@{DAY}", f"smoke/arithmetic@{DAY}"]
    assert plan["facts"][f"smoke/rl.batch-8@{DAY}"]["recipe_overrides"] == {}  # a choice sets no recipe key


def test_a_sweep_in_code_and_on_the_command_line_is_refused(prefix: str) -> None:
    done = CliRunner().invoke(batches_main, ["--version", DAY, "--sweep", f"{LR}=1e-3,2e-3"])
    assert done.exit_code == 2, done.output
    assert "declares the sweep train_batch@" in done.output and "drop --sweep, or sweep in code" in done.output
