"""Text and JSON for runs, a run's status and the smoke verdict.

Plain text (aligned columns, no colour library): `rlaunch status` must render in well under a
second, and the same text goes to terminals, CI logs and the documentation.
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any

from rlaunch.intervals import Difference
from rlaunch.observe.pace import Pace
from rlaunch.observe.run_jobs import JobView
from rlaunch.observe.run_status import RunStatus
from rlaunch.observe.scores import Score
from rlaunch.observe.sweeps import SweepGroup, grouped, settings_text
from rlaunch.observe.verdict import Verdict
from rlaunch.runs.layout import CHECKPOINT_META
from rlaunch.runs.run_record import PHASES

if TYPE_CHECKING:
    from rlaunch.observe.sweep_compare import SweepComparison

LABEL_WIDTH = 12
MAX_FAILURE_LINES = 8


def short(value: str | None, n: int = 12) -> str:
    return (value or "-")[:n]


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _line(label: str, *values: str) -> list[str]:
    lines = [f"{label:<{LABEL_WIDTH}} {values[0]}" if values else label]
    lines += [f"{'':<{LABEL_WIDTH}} {v}" for v in values[1:]]
    return lines


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def _topology(topo: dict[str, Any]) -> str:
    nodes, slots, variant = topo.get("num_nodes"), topo.get("gpus_per_node"), topo.get("gpu_variant")
    text = f"{nodes} node(s) x {slots} {variant or 'device'} slot(s)"
    plan = topo.get("role_plan") or {}
    if plan:
        placement = "colocated" if plan.get("colocate_all") else "disaggregated"
        text += (
            f"; {placement}; policy {plan.get('policy_num_nodes')}x{plan.get('policy_num_gpus_per_node')}, "
            f"{plan.get('num_inference_engines')} engine(s) TP{plan.get('inference_engine_tensor_parallel_size')} "
            f"PP{plan.get('inference_engine_pipeline_parallel_size')}; batch {plan.get('train_batch_size')} prompts "
            f"x {plan.get('n_samples_per_prompt')} samples, mini-batch {plan.get('policy_mini_batch_size')}"
        )
    return text


def _job_lines(job: JobView | None, role: str, ended: bool) -> list[str]:
    if job is None:
        return [f"  {role:<12} -  ({'never submitted' if ended else 'not submitted yet'})"]
    if job.error:
        return [f"  {role:<12} {job.job_id}  {job.state}  ({job.error})"]
    head = f"  {role:<12} {job.job_id}  {job.state}"
    if job.message:
        head += f"  ({job.message})"
    lines = [head]
    for r in job.replicas:
        exit_code = "-" if r.exit_code is None else str(r.exit_code)
        lines.append(
            f"    replica {r.rank}  {r.state:<9} exit {exit_code:<3} attempts {r.attempts}  "
            f"started {r.started_at or '-'}  finished {r.finished_at or '-'}"
        )
    return lines


def _joined(s: RunStatus) -> list[str]:
    t = s.tasks
    replicas = ", ".join(f"{j.rank}@{j.host} {j.time}" for j in t.replicas) or "none"
    missing = f"; missing {t.missing_replicas}" if t.missing_replicas else ""
    trainers = ", ".join(f"{j.rank}@{j.host} {j.time}" for j in t.trainers) or "none"
    expected_trainers = "?" if t.expected_trainer_processes is None else str(t.expected_trainer_processes)
    launcher = f" ({t.trainer_launcher})" if t.trainer_launcher else ""
    missing_trainers = f"; missing {t.missing_trainers}" if t.missing_trainers else ""
    return _line(
        "joined",
        f"replicas {len(t.replicas)}/{t.expected_replicas or '?'}: {replicas}{missing}",
        f"trainer processes {len(t.trainers)}/{expected_trainers}{launcher}: {trainers}{missing_trainers}",
    )


def _model(s: RunStatus) -> list[str]:
    m = s.model
    configured = f"configured {m.configured or '-'}" + (f" -> {m.configured_path}" if m.configured_path else "")
    if not m.recorded:
        return _line(
            "model",
            configured,
            "loaded     - (no model_load.json)",
            f"identity   expected {m.expected_identity or '-'}",
        )
    loaded_ok = (
        "matches" if m.loaded_path and m.configured_path and _same(m.loaded_path, m.configured_path) else "DIFFERS"
    )
    identity_ok = (
        "matches the document"
        if m.identity == m.expected_identity
        else f"DIFFERS from the document's {m.expected_identity}"
    )
    lines = [configured, f"loaded     {m.loaded_path}  ({loaded_ok})", f"identity   {m.identity}  ({identity_ok})"]
    if m.weights_sha256:
        lines.append(
            f"weights    sha256 {short(m.weights_sha256)}"
            + (f"  {m.architecture}, {m.num_parameters} parameters" if m.architecture else "")
        )
    if m.resumed_from_step is not None:
        lines.append(f"resumed    from checkpoint step {m.resumed_from_step}")
    return _line("model", *lines)


def _same(a: str, b: str) -> bool:
    from rlaunch.observe.verdict import same_path

    return same_path(a, b)


def _steps(s: RunStatus) -> list[str]:
    st = s.steps
    final = "?" if st.final_step is None else str(st.final_step)
    if st.count == 0:
        return _line("steps", f"none yet (final step {final})", *(pace_lines(st.pace) if st.pace else []))
    rate = f", {st.steps_per_minute:.1f} steps/min" if st.steps_per_minute else ""
    training = f" (training step {st.latest_training_step})" if st.latest_training_step != st.latest_step else ""
    head = f"latest step {st.latest_step}{training} of {final}; {st.count} recorded{rate}"
    if not st.complete:
        head += " (long log: head and tail read)"
    last = st.last or {}
    keys = [k for k in ("loss", "reward_mean", "reward_std", "kl", "learning_rate") if k in last]
    lines = [head, "last       " + "  ".join(f"{k} {_number(last[k])}" for k in keys)]
    return _line("steps", *lines, *(pace_lines(st.pace) if st.pace else []))


def pace_lines(p: Pace) -> list[str]:
    """`rate` and `ETA` of a running attempt (training steps), or why there is no rate yet."""
    if p.waiting or p.seconds_per_step is None or p.steps_per_hour is None:
        return [f"rate       {p.waiting}"]
    rate = (
        f"rate       {_figure(p.steps_per_hour)} steps/h ({_figure(p.seconds_per_step)} s/step) "
        f"over the last {p.over_steps} step{'s' if p.over_steps != 1 else ''}"
    )
    if p.remaining_steps is None or p.eta_seconds is None:
        return [rate, "ETA        unknown: no final step configured (trainer.max_training_steps)"]
    if p.remaining_steps == 0:
        return [rate, "ETA        the final step is logged"]
    return [rate, f"ETA        {duration(p.eta_seconds)}, at {p.eta_at} ({p.remaining_steps} steps to go)"]


def _figure(value: float) -> str:
    """Three significant figures, never an exponent above 100 (`7200`, not `7.2e+03`)."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def duration(seconds: float) -> str:
    """`3d 4h`, `4h 05m`, `5m 07s`, `7s`: the two largest units."""
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _checkpoints(s: RunStatus) -> list[str]:
    c = s.checkpoints
    if c.marker_error:
        return _line("checkpoints", c.marker_error)
    kept = f"kept [{', '.join(map(str, c.steps)) or 'none'}]"
    if c.incomplete:  # a save cut short (a full disk, a kill): not a checkpoint a resume can use
        kept += f", incomplete [{', '.join(map(str, c.incomplete))}] (no {CHECKPOINT_META})"
    if c.latest_step is None:
        return _line("checkpoints", f"{kept}, no latest marker  ({c.root})")
    digest = (c.latest_meta or {}).get("runtime_digest")
    digest_note = (
        "missing rlaunch_checkpoint.json"
        if c.latest_meta is None
        else (
            "digest matches the runtime"
            if digest == s.runtime_digest
            else f"digest {short(digest)} DIFFERS from the runtime's"
        )
    )
    return _line("checkpoints", f"{kept}, latest {c.latest_step} ({digest_note})", c.root or "-")


def _export(s: RunStatus) -> list[str]:
    e = s.export
    if not e.wanted:
        return _line("export", "not requested (export_hf false)")
    if not e.uri:
        return _line("export", "none yet")
    files = ", ".join(e.files) if e.files else "no files yet"
    return _line("export", e.uri, f"({files})")


def _terminal(s: RunStatus) -> list[str]:
    t = s.terminal
    if not t.exists:
        return _line("terminal", f"none yet ({t.uri})")
    return _line("terminal", f"{t.state}  attempt {t.attempt_id}  step {t.global_step}  {t.uri}")


def status_text(s: RunStatus) -> str:
    attempt = f"attempt {s.attempt_id} ({s.attempt_number} of {s.attempts_total})" if s.attempt_id else "no attempt yet"
    state = s.state + (f"  ({s.state_reason})" if s.state_reason else "")
    lines = _line("run", f"{s.artifact or s.reference}  {attempt}")
    if s.damage:
        lines += _line(
            "DAMAGED", s.damage, "below: what the terminal manifest, attempt manifests, jobs and checkpoints say"
        )
    lines += _line("state", state)
    if s.failure and s.state != "succeeded":
        failure = [ln[:300] for ln in s.failure.strip().splitlines()]
        lines += _line("failure", *failure[:MAX_FAILURE_LINES], *(["..."] if len(failure) > MAX_FAILURE_LINES else []))
    if s.failure_class:
        c = s.failure_class
        rule = f" (rule {c.rule})" if c.rule else ""
        lines += _line("failed as", f"{c.kind}: {c.cause}{rule}; {c.advice}", f"evidence: {c.evidence or '-'}")
    if s.cancelled:
        lines += _line(
            "cancelled",
            f"by {s.cancelled.by} at {s.cancelled.at}" + (f": {s.cancelled.reason}" if s.cancelled.reason else ""),
        )
    if s.retry:
        lines += _line("retry", f"authorised by {s.retry.by} at {s.retry.at}: {s.retry.reason}")
    for gate, waiver in s.waivers.items():
        at = f" at {waiver.at}" if waiver.at else ""
        lines += _line("waived", f"{gate}: {waiver.reason} ({waiver.by}{at})")
    lines += _line("output", s.output_path)
    times = f"submitted {s.submitted_at or '-'}" + (f"  finished {s.finished_at}" if s.finished_at else "")
    lines += _line("times", times)
    if s.phases:
        lines += _line("phases", *format_phase_table(s.phases))
    lines += _line("fingerprint", short(s.fingerprint, 16))
    lines += _line("runtime", f"{s.runtime_profile or '-'}  source digest {short(s.runtime_digest, 16)}")
    if s.topology:
        lines += _line("topology", _topology(s.topology))
    lines += _line("jobs", f"backend {s.backend or '-'}")
    lines += _job_lines(s.coordinator, "coordinator", s.is_terminal)
    lines += _job_lines(s.child, "child", s.is_terminal)
    lines += _score(s)
    if s.kind == "step" or (s.score and not s.attempt_id):  # a step job, or an evaluation run in its coordinator
        return "\n".join(lines + (_step_job(s) if s.kind == "step" else []))
    lines += _joined(s)
    lines += _model(s)
    lines += _steps(s)
    lines += _checkpoints(s)
    lines += _export(s)
    lines += _wandb(s)
    lines += _terminal(s)
    return "\n".join(lines)


def _score(s: RunStatus) -> list[str]:
    """An evaluation's accuracy with its interval, what scored it, and the model and data it scored."""
    c = s.score
    if c is None:
        return []
    return _line(
        "score",
        c.headline(),
        f"scorer {c.scorer or '-'}; {c.sampling_text()}",
        f"model {c.model or '-'}",
        f"data {c.data or '-'}",
        c.report_uri,
    )


def _step_job(s: RunStatus) -> list[str]:
    r = s.resources
    devices = f"{r.get('accelerators')} x {r.get('accelerator_type')}" if r.get("accelerators") else "no accelerator"
    return _line(
        "step job",
        f"{r.get('nodes', 1)} node(s), each {devices}, {r.get('cpu')} CPU",
        f"attempt directory {s.attempt_dir}",
    )


def _wandb(s: RunStatus) -> list[str]:
    w = s.wandb
    if not w:
        return (
            _line("W&B", "logger wandb: no run recorded yet (the trainer records it as training starts)")
            if s.wandb_logger
            else []
        )
    where = s.wandb_url or (f"offline run directory {w['offline_dir']}" if w.get("offline_dir") else "-")
    return _line(
        "W&B",
        f"run {w.get('run_id') or w.get('id') or '-'}  project {w.get('project') or '-'}  entity {w.get('entity') or '-'}",
        where,
    )


def compare_text(a: tuple[str, Score], b: tuple[str, Score], found: Difference) -> str:
    """Two evaluations in columns, what differs between them besides the model, and the verdict."""

    def column(score: Score) -> list[str]:
        acc = score.accuracy
        assert acc is not None  # compared() refused a report without one
        return [
            f"{acc.accuracy:.3f} [{acc.low:.3f}, {acc.high:.3f}]",
            f"{acc.n} completions over {acc.n_prompts} prompts",
            score.scorer or "-",
            score.sampling_text(),
            score.model or "-",
            score.data or "-",
        ]

    labels = ["accuracy", "n", "scorer", "sampling", "model", "data"]
    rows = [["", "A", "B"], ["evaluation", a[0], b[0]]]
    rows += [[label, x, y] for label, x, y in zip(labels, column(a[1]), column(b[1]))]
    lines = [table(rows), ""]
    unlike = [label for label, x, y in rows if label in ("scorer", "sampling", "data") and x != y]
    if unlike:
        lines.append(f"note: A and B differ in {', '.join(unlike)}, not only in the model: the difference mixes them")
    how = "paired by prompt" if found.paired else "unpaired: not the same prompts with as many completions each"
    lines.append(f"{found.verdict()}  (95 %, clustered by prompt; {how})")
    return "\n".join(lines)


def sweep_compare_text(found: SweepComparison) -> str:
    """One row per variant: label, settings, state, training steps done of planned, the reward last
    logged, the evaluation's accuracy with its 95 % interval, GPU-hours used; then each variant's
    artifact and the evaluation read for it (or why none is)."""
    rows = [["VARIANT", "SETTINGS", "STATE", "STEPS", "REWARD", "EVALUATION", "GPU-HOURS"]]
    for v in found.variants:
        steps = f"{_number(v.steps_done)}/{'?' if v.steps_planned is None else v.steps_planned}"
        rows.append([
            v.variant, settings_text(v.settings), v.state, steps, _number(v.final_reward), _accuracy(v.score),
            f"{v.gpu_hours:.2f}",
        ])  # fmt: skip
    lines = [f"sweep {found.name}: {len(found.variants)} variant(s)", table(rows), ""]
    width = max(len(v.variant) for v in found.variants)
    for v in found.variants:
        evaluated = f"evaluated by {v.evaluation}" if v.evaluation else (v.evaluation_note or "no evaluation")
        lines.append(f"{v.variant:<{width}}  {v.artifact or v.output_path}  ({evaluated})")
    return "\n".join(lines)


def _accuracy(score: Score | None) -> str:
    """`0.412 [0.371, 0.453]`; an older report's accuracy without its interval; `-` for none."""
    if score is None:
        return "-"
    if score.accuracy is None:
        return "-" if score.reported_accuracy is None else f"{score.reported_accuracy:.3f} (no interval)"
    return f"{score.accuracy.accuracy:.3f} [{score.accuracy.low:.3f}, {score.accuracy.high:.3f}]"


def verdict_text(s: RunStatus, verdict: Verdict) -> str:
    head = f"smoke verdict for {s.artifact or s.reference} attempt {s.attempt_id or '-'}: {'PASS' if verdict.ok else 'FAIL'}"
    lines = [head]
    for c in verdict.criteria:
        lines.append(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}")
        lines.extend(f"         {line}" for line in c.evidence.splitlines())
    return "\n".join(lines)


def runs_rows(runs: list[dict[str, Any]]) -> str:
    """One line per run; a sweep's variants under one line for the sweep (its name, how many variants
    in which states), each indented, with its label and settings in a last column (only when a run
    listed is a sweep's: a list without sweeps reads as it always did)."""
    shown = grouped(runs)
    in_sweeps = any(isinstance(item, SweepGroup) for item in shown)
    rows = [["ARTIFACT", "STATE", "ATTEMPT", "SUBMITTED", "COORDINATOR", "CHILD"] + (["VARIANT"] if in_sweeps else [])]
    group_at: dict[int, SweepGroup] = {}  # the table row a group's line goes above
    for item in shown:
        if isinstance(item, SweepGroup):
            group_at[len(rows)] = item
        for r in item.rows if isinstance(item, SweepGroup) else (item,):
            member = r["sweep"] if isinstance(item, SweepGroup) else None
            variant = f"{member['variant']}  {settings_text(member['settings'])}" if member else ""
            rows.append([
                ("  " if member else "") + (r["artifact"] or r["output_path"]), r["state"],
                f"{r['attempt_id']} ({r['attempts']})", r["submitted_at"] or "-",
                r["coordinator_job_id"] or "-", r["child_job_id"] or "-",
            ] + ([variant] if in_sweeps else []))  # fmt: skip
    lines = table(rows).splitlines()
    for index in sorted(group_at, reverse=True):
        lines.insert(index, f"sweep {group_at[index].name}  {group_at[index].states_text()}")
    return "\n".join(lines)


def _order(name: str) -> int:
    if name.startswith("replica_") and name.endswith("_joined"):
        return PHASES.index("replica_joined")
    return PHASES.index(name) if name in PHASES else len(PHASES)


def _moment(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value)


def _parses(value: Any) -> bool:
    try:
        _moment(value)
    except (TypeError, ValueError):
        return False
    return True


def phase_table(phases: dict[str, str]) -> list[tuple[str, str, float, float]]:
    """(phase, time, seconds since the previous phase, seconds since the first), in launch order.

    Phases are ordered by the launch's sequence (then by time), so a clock skew between machines
    shows as a negative step instead of reordering the table."""
    known = [(name, at) for name, at in phases.items() if _parses(at)]  # a damaged time has no place in the table
    known.sort(key=lambda item: (_order(item[0]), _moment(item[1])))
    rows: list[tuple[str, str, float, float]] = []
    for index, (name, at) in enumerate(known):
        moment = _moment(at)
        since_previous = (moment - _moment(known[index - 1][1])).total_seconds() if index else 0.0
        rows.append((name, at, since_previous, (moment - _moment(known[0][1])).total_seconds()))
    return rows


def format_phase_table(phases: dict[str, str]) -> list[str]:
    """The phase table as text lines: `phase  +step  (total)`."""
    rows = phase_table(phases)
    width = max((len(name) for name, *_ in rows), default=0)
    return [f"{name:<{width}}  {step:+7.2f}s  (at {total:7.2f}s)" for name, _, step, total in rows]
