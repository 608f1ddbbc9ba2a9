"""The verdict's evidence, word for word: what `verify-smoke` tells a person for each state.

Each case changes one thing of a passing snapshot and names every criterion whose verdict or
evidence changes, with the exact text; the other criteria must stay as they pass. The boundary
cases of the criteria are here too: the latest step one short of the final step, a final step
known only from the checkpoint, a single recorded weights digest, an export that is not wanted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlaunch.observe.collect import RunStatus, Steps
from rlaunch.observe.verdict import (
    MODEL_PATH_ACTIVE,
    RUN_SUCCEEDED,
    STEPS_ADVANCE,
    TASKS_JOINED,
    TERMINAL_METADATA,
    smoke_verdict,
)

from .test_verdict_rules import DIGEST, STAGED, passing

LOADED = f"loaded {STAGED} = attempt a1b2c3's staged copy of models/model"
IDENTITY = "identity x/model@1:ff matches the document"
WEIGHTS = "weights sha256 ab match the model artifact record (1 file(s))"
SPAN = "3 steps recorded, 1 -> 3 strictly increasing"
CHECKPOINT = "checkpoint step 3 (latest) carries runtime digest dddddddddddd = the run's"
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
