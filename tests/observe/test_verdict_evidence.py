"""The verdict's evidence, word for word: what `verify-smoke` tells a person for each state.

Each case changes one thing of a passing snapshot and names every criterion whose verdict or
evidence changes, with the exact text; the other criteria must stay as they pass. The boundary
cases of the criteria are here too: the latest step one short of the final step, a final step
known only from the checkpoint, a single recorded weights digest, an export that is not wanted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlaunch.observe.run_jobs import JobView, ReplicaView
from rlaunch.observe.run_status import RunStatus, Steps
from rlaunch.observe.verdict import (
    MODEL_PATH_ACTIVE,
    RUN_SUCCEEDED,
    STEPS_ADVANCE,
    TASKS_JOINED,
    TERMINAL_METADATA,
    same_path,
    smoke_verdict,
)

from .test_verdict_rules import DIGEST, STAGED, passing

LOADED = f"loaded {STAGED} = attempt a1b2c3's staged copy of models/model"
IDENTITY = "identity x/model@1:ff matches the document"
WEIGHTS = "weights sha256 ab match the model artifact record (1 file(s))"
SPAN = "3 steps recorded, 1 -> 3 strictly increasing"
CHECKPOINT = "checkpoint step 3 (latest) carries runtime digest dddddddddddd = the run's"
TWO_WEIGHT_FILES = {"model.safetensors": "ab", "model-2.safetensors": "cd"}
NOT_ENDED = ": a run that has not ended is not a success"
MANIFEST = "terminal manifest /p/terminal.json succeeded"
EXPORT = "export /p/e (config.json, model.safetensors)"

PASSING = {
    RUN_SUCCEEDED: (True, "state succeeded (run record: succeeded; terminal manifest succeeded)"),
    TASKS_JOINED: (
        True,
        "1/1 replicas joined (rank 0 on h at ?); 2/2 trainer processes joined (rank 0 on ? at ?, rank 1 on ? at ?)",
    ),
    MODEL_PATH_ACTIVE: (True, f"{LOADED}; {IDENTITY}; {WEIGHTS}"),
    STEPS_ADVANCE: (True, f"{SPAN}; reached the configured final step 3 (trainer.max_training_steps)"),
    TERMINAL_METADATA: (True, f"{CHECKPOINT}; {MANIFEST}; {EXPORT}"),
}


def change(**fields: Any) -> Callable[[RunStatus], None]:
    """Set `part__field=value` (or a top-level `field=value`) on the snapshot."""

    def apply(s: RunStatus) -> None:
        for key, value in fields.items():
            part, _, name = key.partition("__")
            setattr(getattr(s, part) if name else s, name or part, value)

    return apply


CASES: dict[str, tuple[Callable[[RunStatus], None], dict[str, tuple[bool, str]]]] = {
    "running": (
        change(state="running"),
        {RUN_SUCCEEDED: (False, "state running: a run that has not ended is not a success")},
    ),
    **{
        state: (change(state=state), {RUN_SUCCEEDED: (False, f"state {state}{NOT_ENDED}")})
        for state in ("launching", "pending", "submitted")
    },
    "failed with its reason": (
        change(state="failed", failure="trainer exited 1", state_reason="child job failed"),
        {RUN_SUCCEEDED: (False, "state failed: trainer exited 1 (child job failed)")},
    ),
    "failed without a reason": (change(state="failed"), {RUN_SUCCEEDED: (False, "state failed")}),
    "no terminal manifest": (
        change(terminal__exists=False),
        {
            RUN_SUCCEEDED: (True, "state succeeded (run record: succeeded; no terminal manifest)"),
            TERMINAL_METADATA: (False, "no terminal manifest at /p/terminal.json"),
        },
    ),
    "no allocation": (
        change(tasks__expected_replicas=0),
        {TASKS_JOINED: (False, "the launch document gives no allocation: cannot tell which replicas to expect")},
    ),
    "a replica never joined": (
        change(tasks__expected_replicas=2),
        {TASKS_JOINED: (False, "1/2 replicas joined; never joined: replica 1")},
    ),
    "replicas and trainers never joined, with the child job's word on each": (
        change(
            tasks__expected_replicas=3,
            tasks__expected_trainer_processes=4,
            child=JobView(
                "child",
                "j1",
                replicas=[ReplicaView(0, "succeeded", exit_code=0), ReplicaView(1, "failed", exit_code=1)],
            ),
        ),
        {
            TASKS_JOINED: (
                False,
                "1/3 replicas joined; never joined: replica 1 (child job: failed, exit 1), replica 2; "
                "2/4 trainer processes joined; never joined: trainer rank 2, trainer rank 3",
            )
        },
    ),
    "trainer count unknown": (
        change(tasks__expected_trainer_processes=None),
        {TASKS_JOINED: (False, "no trainer process joined (and the runtime profile is unknown here)")},
    ),
    "no model_load.json": (
        change(model__recorded=False),
        {MODEL_PATH_ACTIVE: (False, "the trainer wrote no model_load.json: it never loaded a model")},
    ),
    "loaded another path": (
        change(model__loaded_path="/elsewhere/model"),
        {MODEL_PATH_ACTIVE: (False, f"it loaded '/elsewhere/model' instead of the configured '{STAGED}'")},
    ),
    "loaded nothing, and another identity": (
        change(model__loaded_path=None, model__identity="x/other@1:ee"),
        {
            MODEL_PATH_ACTIVE: (
                False,
                f"it loaded None instead of the configured '{STAGED}'; "
                "it loaded identity 'x/other@1:ee' but the document names 'x/model@1:ff'",
            )
        },
    ),
    "a URL model path, loaded with a trailing slash": (
        change(model__configured="s3://b/m", model__configured_path="s3://b/m", model__loaded_path="s3://b/m/"),
        {
            MODEL_PATH_ACTIVE: (
                True,
                f"loaded s3://b/m/ = attempt a1b2c3's staged copy of s3://b/m; {IDENTITY}; {WEIGHTS}",
            )
        },
    ),
    "the document names no model path": (
        change(model__configured=None),
        {MODEL_PATH_ACTIVE: (False, f"the trainer was handed '{STAGED}', not attempt a1b2c3's staged copy of None")},
    ),
    "no identity on either side": (
        change(model__identity=None, model__expected_identity=None),
        {MODEL_PATH_ACTIVE: (True, f"{LOADED}; identity :- matches the document; {WEIGHTS}")},
    ),
    "an identity with two colons": (
        change(model__identity="x/model@1:ff:ee", model__expected_identity="x/model@1:ff:ee"),
        {MODEL_PATH_ACTIVE: (True, f"{LOADED}; identity x/model@1:ff:ee matches the document; {WEIGHTS}")},
    ),
    "no weights digest recorded": (
        change(model__weight_files={}, model__weights_sha256=None),
        {MODEL_PATH_ACTIVE: (True, f"{LOADED}; {IDENTITY}")},
    ),
    "one digest but two expected files": (
        change(model__weight_files={}, model__expected_weight_files=TWO_WEIGHT_FILES),
        {MODEL_PATH_ACTIVE: (True, f"{LOADED}; {IDENTITY}")},
    ),
    "one of two expected files recorded": (change(model__expected_weight_files=TWO_WEIGHT_FILES), {}),
    "an absolute configured path": (
        change(model__configured=STAGED),
        {
            MODEL_PATH_ACTIVE: (
                True,
                f"loaded {STAGED} = attempt a1b2c3's staged copy of {STAGED}; {IDENTITY}; {WEIGHTS}",
            )
        },
    ),
    "resumed": (
        change(model__resumed_from_step=2),
        {MODEL_PATH_ACTIVE: (True, f"{LOADED} (resumed from step 2); {IDENTITY}; {WEIGHTS}")},
    ),
    "no weights to compare": (
        change(model__weight_files={}, model__expected_weight_files={}),
        {MODEL_PATH_ACTIVE: (True, f"{LOADED}; {IDENTITY}")},
    ),
    "one weights digest recorded for one file": (change(model__weight_files={}, model__weights_sha256="ab"), {}),
    "no steps although loaded": (
        change(steps=Steps(count=0)),
        {STEPS_ADVANCE: (False, "no optimizer step recorded in metrics.jsonl although the model was loaded")},
    ),
    "no steps and no model": (
        change(steps=Steps(count=0, url="/a/metrics.jsonl"), model__recorded=False),
        {
            MODEL_PATH_ACTIVE: (False, "the trainer wrote no model_load.json: it never loaded a model"),
            STEPS_ADVANCE: (False, "no optimizer step recorded in /a/metrics.jsonl"),
        },
    ),
    "two steps are an advance": (
        change(steps=Steps(count=2, first_step=2, latest_step=3, latest_training_step=3, final_step=3)),
        {
            STEPS_ADVANCE: (
                True,
                "2 steps recorded, 2 -> 3 strictly increasing; reached the configured final step 3 "
                "(trainer.max_training_steps)",
            )
        },
    ),
    "one step is not": (
        change(steps=Steps(count=1, first_step=3, latest_step=3, latest_training_step=3, final_step=3)),
        {STEPS_ADVANCE: (False, "only one optimizer step recorded (step 3): steps have not advanced")},
    ),
    "steps out of order": (
        change(steps__increasing=False, steps__url="/a/metrics.jsonl"),
        {STEPS_ADVANCE: (False, "steps in /a/metrics.jsonl are not strictly increasing")},
    ),
    "latest step one short of the final step": (
        change(steps__latest_training_step=2, steps__latest_step=2),
        {
            STEPS_ADVANCE: (
                False,
                "3 steps recorded, 1 -> 2 strictly increasing, but reached step 2 of the configured final step 3",
            ),
            TERMINAL_METADATA: (
                False,
                "the latest checkpoint is step 3 but training reached step 2: no terminal checkpoint",
            ),
        },
    ),
    "no final step configured": (
        change(steps__final_step=None),
        {STEPS_ADVANCE: (True, f"{SPAN} (no final step configured)")},
    ),
    "final step from the checkpoint, reached": (
        change(steps__final_step=None, checkpoints__latest_meta={"runtime_digest": DIGEST, "max_steps": 3}),
        {},
    ),
    "final step from the checkpoint, one short": (
        change(steps__final_step=None, checkpoints__latest_meta={"runtime_digest": DIGEST, "max_steps": 4}),
        {STEPS_ADVANCE: (False, f"{SPAN}, but reached step 3 of the configured final step 4")},
    ),
    "a step rate": (
        change(steps__steps_per_minute=12.34),
        {
            STEPS_ADVANCE: (
                True,
                f"{SPAN}, 12.3 steps/min; reached the configured final step 3 (trainer.max_training_steps)",
            )
        },
    ),
    "a corrupt latest marker": (
        change(checkpoints__marker_error="checkpoint marker /t/ckpt/latest holds 'x', not a step number"),
        {TERMINAL_METADATA: (False, "checkpoint marker /t/ckpt/latest holds 'x', not a step number")},
    ),
    "no latest marker": (
        change(checkpoints__latest_step=None),
        {TERMINAL_METADATA: (False, "no checkpoint `latest` marker under /t/ckpt")},
    ),
    "no checkpoint metadata": (
        change(checkpoints__latest_meta=None, checkpoints__latest_path="/t/ckpt/global_step_3"),
        {TERMINAL_METADATA: (False, "`latest` names step 3 but /t/ckpt/global_step_3 has no rlaunch_checkpoint.json")},
    ),
    "a checkpoint without a runtime digest": (
        change(checkpoints__latest_meta={}),
        {TERMINAL_METADATA: (False, "checkpoint step 3 was written by runtime digest -, not the run's dddddddddddd")},
    ),
    "a failed terminal manifest": (
        change(terminal__state="failed"),
        {
            RUN_SUCCEEDED: (True, "state succeeded (run record: succeeded; terminal manifest failed)"),
            TERMINAL_METADATA: (False, "the terminal manifest says failed"),
        },
    ),
    "another attempt's terminal manifest": (
        change(terminal__attempt_id="zzz"),
        {TERMINAL_METADATA: (False, "the terminal manifest belongs to attempt zzz, not a1b2c3")},
    ),
    "no export location": (
        change(export__uri=None, export__files=[]),
        {TERMINAL_METADATA: (False, "export_hf is set but there is no export")},
    ),
    "an empty export": (
        change(export__files=[]),
        {TERMINAL_METADATA: (False, "export_hf is set but /p/e holds no HF model (files: none)")},
    ),
    "no terminal manifest and an export without weights": (
        change(terminal__exists=False, export__files=["config.json", "notes.txt"]),
        {
            RUN_SUCCEEDED: (True, "state succeeded (run record: succeeded; no terminal manifest)"),
            TERMINAL_METADATA: (
                False,
                "no terminal manifest at /p/terminal.json; "
                "export_hf is set but /p/e holds no HF model (files: config.json, notes.txt)",
            ),
        },
    ),
    "no export wanted": (change(export__wanted=False), {TERMINAL_METADATA: (True, f"{CHECKPOINT}; {MANIFEST}")}),
}


def test_a_passing_snapshot_says_why_each_criterion_holds() -> None:
    verdict = smoke_verdict(passing())
    assert {c.name: (c.ok, c.evidence) for c in verdict.criteria} == PASSING
    assert verdict.ok and verdict.failed == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_state_has_its_exact_evidence(case: str) -> None:
    apply, changed = CASES[case]
    status = passing()
    apply(status)
    verdict = smoke_verdict(status)
    got = {c.name: (c.ok, c.evidence) for c in verdict.criteria}
    assert got == {**PASSING, **changed}
    assert verdict.ok == all(ok for ok, _ in got.values())
    assert [c.name for c in verdict.failed] == [name for name, (ok, _) in got.items() if not ok]
    assert verdict.to_json() == {
        "ok": verdict.ok,
        "criteria": [{"name": n, "ok": ok, "evidence": e} for n, (ok, e) in got.items()],
    }


def test_same_path_compares_local_paths_by_their_real_location_and_urls_only_as_written(tmp_path: Path) -> None:
    target = tmp_path / "model"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert same_path(str(tmp_path / "link"), str(target)) and same_path(str(target), str(tmp_path / "link"))
    assert same_path("s3://b/m/", "s3://b/m") and same_path(str(target) + "/", str(target))
    assert not same_path(None, str(target)) and not same_path(str(target), None) and not same_path(None, None)
    # a URL is never resolved against the working directory, though os.path would find the same place
    local_twin = os.path.abspath("s3:/b/m")
    assert not same_path("s3://b/m", local_twin) and not same_path(local_twin, "s3://b/m")
