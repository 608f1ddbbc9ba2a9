"""When is a smoke successful: the run ended in success, and the four criteria hold.

1. all expected tasks joined        every replica of the child gang and every trainer process
2. model-loading path active        the trainer loaded this attempt's staged copy of the model
                                    input, with the identity the document names
3. optimizer steps advance          >= 2 strictly increasing steps, up to the configured final step
4. terminal metadata exists         `latest` -> a checkpoint carrying the run's runtime digest at
                                    the last step; the terminal manifest; the export when asked for

Every criterion carries its evidence, whether it holds or not, so a failure says what is wrong.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from rlaunch.observe.run_status import RunStatus

RUN_SUCCEEDED = "run succeeded"
TASKS_JOINED = "all expected tasks joined"
MODEL_PATH_ACTIVE = "configured model-loading path active"
STEPS_ADVANCE = "optimizer steps advance"
TERMINAL_METADATA = "terminal checkpoint/export metadata exists"


@dataclass(frozen=True)
class Criterion:
    name: str
    ok: bool
    evidence: str


@dataclass(frozen=True)
class Verdict:
    criteria: tuple[Criterion, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.criteria)

    @property
    def failed(self) -> list[Criterion]:
        return [c for c in self.criteria if not c.ok]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "criteria": [asdict(c) for c in self.criteria]}


def _short(digest: str | None, n: int = 12) -> str:
    return (digest or "-")[:n]


def _joined_list(joined: list[Any]) -> str:
    return ", ".join(f"rank {j.rank} on {j.host or '?'} at {j.time or '?'}" for j in joined)


def run_succeeded(s: RunStatus) -> Criterion:
    if s.damage:  # the attempt history is unreadable: whatever else says "succeeded" is not enough
        return Criterion(RUN_SUCCEEDED, False, f"the run record is damaged: {s.damage}")
    if s.state == "succeeded":
        terminal = f"terminal manifest {s.terminal.state}" if s.terminal.exists else "no terminal manifest"
        return Criterion(RUN_SUCCEEDED, True, f"state succeeded (run record: {s.record_state}; {terminal})")
    if s.state in ("running", "launching", "pending", "submitted"):
        why = f"state {s.state}: a run that has not ended is not a success"
    else:
        why = (
            f"state {s.state}"
            + (f": {s.failure}" if s.failure else "")
            + (f" ({s.state_reason})" if s.state_reason else "")
        )
    return Criterion(RUN_SUCCEEDED, False, why)


def tasks_joined(s: RunStatus) -> Criterion:
    t = s.tasks
    if not t.expected_replicas:
        return Criterion(
            TASKS_JOINED, False, "the launch document gives no allocation: cannot tell which replicas to expect"
        )
    problems = []
    if t.missing_replicas:
        replicas = {r.rank: r for r in (s.child.replicas if s.child else [])}
        detail = []
        for rank in t.missing_replicas:
            r = replicas.get(rank)
            detail.append(f"replica {rank}" + (f" (child job: {r.state}, exit {r.exit_code})" if r else ""))
        problems.append(f"{len(t.replicas)}/{t.expected_replicas} replicas joined; never joined: {', '.join(detail)}")
    if t.expected_trainer_processes is None:
        problems.append("no trainer process joined (and the runtime profile is unknown here)")
    elif t.missing_trainers:
        problems.append(
            f"{len(t.trainers)}/{t.expected_trainer_processes} trainer processes joined; never joined: "
            + ", ".join(f"trainer rank {r}" for r in t.missing_trainers)
        )
    if problems:
        return Criterion(TASKS_JOINED, False, "; ".join(problems))
    return Criterion(
        TASKS_JOINED,
        True,
        f"{len(t.replicas)}/{t.expected_replicas} replicas joined ({_joined_list(t.replicas)}); "
        f"{len(t.trainers)}/{t.expected_trainer_processes} trainer processes joined ({_joined_list(t.trainers)})",
    )


def same_path(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    if a == b or os.path.normpath(a) == os.path.normpath(b):
        return True
    return "://" not in a and "://" not in b and os.path.realpath(a) == os.path.realpath(b)


def is_staged_copy(path: str, configured: str | None, attempt_id: str | None) -> bool:
    """`path` is this attempt's task-local copy of the document's (task-relative) model path."""
    if not configured:
        return False
    if os.path.isabs(configured) or "://" in configured:
        return same_path(path, configured)
    parts = os.path.normpath(path).split(os.sep)
    rel = os.path.normpath(configured).split(os.sep)
    return (
        os.path.isabs(path) and parts[-len(rel) :] == rel and (attempt_id is None or attempt_id in parts[: -len(rel)])
    )


def model_path_active(s: RunStatus) -> Criterion:
    m = s.model
    if not m.recorded:
        return Criterion(MODEL_PATH_ACTIVE, False, "the trainer wrote no model_load.json: it never loaded a model")
    problems = []
    if not m.configured_path or not is_staged_copy(m.configured_path, m.configured, s.attempt_id):
        problems.append(
            f"the trainer was handed {m.configured_path!r}, not attempt {s.attempt_id}'s staged copy of {m.configured!r}"
        )
    if not same_path(m.loaded_path, m.configured_path):
        problems.append(f"it loaded {m.loaded_path!r} instead of the configured {m.configured_path!r}")
    if m.identity != m.expected_identity:
        problems.append(f"it loaded identity {m.identity!r} but the document names {m.expected_identity!r}")
    weights = ""
    if m.expected_weight_files:
        recorded = m.weight_files or (
            {next(iter(m.expected_weight_files)): m.weights_sha256}
            if len(m.expected_weight_files) == 1 and m.weights_sha256
            else {}
        )
        compared = sorted(set(recorded) & set(m.expected_weight_files))
        differ = [n for n in compared if recorded[n] != m.expected_weight_files[n]]
        if differ:
            problems.append(f"weights {differ} differ from the sha256 the model artifact record lists")
        elif compared:
            weights = (
                f"; weights sha256 {_short(m.weights_sha256)} match the model artifact record ({len(compared)} file(s))"
            )
    if problems:
        return Criterion(MODEL_PATH_ACTIVE, False, "; ".join(problems))
    resumed = f" (resumed from step {m.resumed_from_step})" if m.resumed_from_step is not None else ""
    identity = (m.identity or "").split(":")[0] + ":" + _short((m.identity or "").partition(":")[2])
    return Criterion(
        MODEL_PATH_ACTIVE,
        True,
        f"loaded {m.loaded_path} = attempt {s.attempt_id}'s staged copy of {m.configured}{resumed}; "
        f"identity {identity} matches the document{weights}",
    )


def steps_advance(s: RunStatus) -> Criterion:
    st = s.steps
    if st.count == 0:
        loaded = " although the model was loaded" if s.model.recorded else ""
        return Criterion(STEPS_ADVANCE, False, f"no optimizer step recorded in {st.url or 'metrics.jsonl'}{loaded}")
    if st.count < 2:
        return Criterion(
            STEPS_ADVANCE, False, f"only one optimizer step recorded (step {st.latest_step}): steps have not advanced"
        )
    if not st.increasing:
        return Criterion(STEPS_ADVANCE, False, f"steps in {st.url} are not strictly increasing")
    rate = f", {st.steps_per_minute:.1f} steps/min" if st.steps_per_minute else ""
    span = f"{st.count} steps recorded, {st.first_step} -> {st.latest_step} strictly increasing{rate}"
    final = st.final_step
    reached = st.latest_training_step
    if final is None:
        meta = s.checkpoints.latest_meta or {}
        if isinstance(meta.get("max_steps"), int):
            final, reached = meta["max_steps"], st.latest_step
    if final is None:
        return Criterion(STEPS_ADVANCE, True, f"{span} (no final step configured)")
    if reached is None or reached < final:
        return Criterion(
            STEPS_ADVANCE, False, f"{span}, but reached step {reached} of the configured final step {final}"
        )
    return Criterion(
        STEPS_ADVANCE, True, f"{span}; reached the configured final step {final} (trainer.max_training_steps)"
    )


def terminal_metadata(s: RunStatus) -> Criterion:
    c, problems, found = s.checkpoints, [], []
    if c.marker_error:
        problems.append(c.marker_error)
    elif c.latest_step is None:
        problems.append(f"no checkpoint `latest` marker under {c.root}")
    elif c.latest_meta is None:
        problems.append(f"`latest` names step {c.latest_step} but {c.latest_path} has no rlaunch_checkpoint.json")
    else:
        digest = c.latest_meta.get("runtime_digest")
        if digest != s.runtime_digest:
            problems.append(
                f"checkpoint step {c.latest_step} was written by runtime digest {_short(digest)}, not the run's {_short(s.runtime_digest)}"
            )
        elif s.steps.latest_step is not None and c.latest_step != s.steps.latest_step:
            problems.append(
                f"the latest checkpoint is step {c.latest_step} but training reached step {s.steps.latest_step}: no terminal checkpoint"
            )
        else:
            found.append(
                f"checkpoint step {c.latest_step} (latest) carries runtime digest {_short(digest)} = the run's"
            )
    t = s.terminal
    if not t.exists:
        problems.append(f"no terminal manifest at {t.uri}")
    elif t.state != "succeeded":
        problems.append(f"the terminal manifest says {t.state}")
    elif not t.attempt_id:
        problems.append(f"the terminal manifest names no attempt, so it is not attempt {s.attempt_id}'s")
    elif s.attempt_id and t.attempt_id != s.attempt_id:
        problems.append(f"the terminal manifest belongs to attempt {t.attempt_id}, not {s.attempt_id}")
    else:
        found.append(f"terminal manifest {t.uri} succeeded")
    e = s.export
    if e.wanted:
        if not e.present:
            problems.append(
                f"export_hf is set but {e.uri} holds no HF model (files: {', '.join(e.files) or 'none'})"
                if e.uri
                else "export_hf is set but there is no export"
            )
        else:
            found.append(f"export {e.uri} ({', '.join(e.files)})")
    if problems:
        return Criterion(TERMINAL_METADATA, False, "; ".join(problems))
    return Criterion(TERMINAL_METADATA, True, "; ".join(found))


def smoke_verdict(status: RunStatus) -> Verdict:
    checks = (run_succeeded, tasks_joined, model_path_active, steps_advance, terminal_metadata)
    return Verdict(tuple(check(status) for check in checks))
