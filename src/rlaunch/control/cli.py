"""`rlaunch status | cancel`: the commands that may change a run's records.

`status` shows a run (`rlaunch.observe`'s reading) and closes an attempt whose jobs all ended
without an outcome (`finalise`); `cancel` stops a run's jobs and records who cancelled it, when and why.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from rlaunch.observe.cli import attempt_option, json_option, prefix_option, resolve_run, run_argument
from rlaunch.processes import interrupt_exit, interruptible
from rlaunch.runs.sweep import MARK
from rlaunch.waiting import wait_until


@click.command()
@run_argument
@prefix_option
@attempt_option
@json_option
@click.option("--watch", is_flag=True, help="Refresh until the run ends (Ctrl-C stops watching, not the run).")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    help="Seconds between --watch refreshes.",
)
def status(run: str, prefix: str | None, attempt_id: str | None, as_json: bool, watch: bool, interval: float) -> None:
    """Show a run's jobs, model, steps and outputs.

    Job states (coordinator and child, per replica), when each phase of the launch happened,
    which replicas and trainer processes joined and when, the model the trainer loaded versus the
    configured one, optimizer steps (latest, last metrics; while the run trains, the recent rate
    and the ETA of the final step), checkpoints, the export, the W&B run's page and the terminal
    manifest.

    RUN is name@version, the RL artifact's path, a coordinator or child job id, or a sweep's name
    (NAME@VERSION~sweep-DIGEST: each variant's state, as `rlaunch runs --sweep` lists them; with
    --watch until every variant has ended).
    """
    if MARK in run:
        _sweep_status(run.strip(), prefix, attempt_id, as_json, watch, interval)
        return
    from rlaunch.control.finalise import finalise_snapshot
    from rlaunch.observe.collect import collect
    from rlaunch.observe.render import dumps, status_text
    from rlaunch.observe.verdict import smoke_verdict

    damage: list[str] = []

    def show() -> bool:
        snapshot = collect(resolve_run(run, prefix, attempt_id), run)
        if snapshot.damage:
            damage[:] = [snapshot.damage]
        finalise_snapshot(snapshot)  # an open record whose jobs all ended is closed with the reason
        if as_json:
            data = snapshot.to_json()
            data["smoke"] = smoke_verdict(snapshot).to_json()
            click.echo(dumps(data) if not watch else dumps(data).replace("\n", " "))
        else:
            if watch and sys.stdout.isatty():
                click.clear()
            click.echo(status_text(snapshot))
        return snapshot.is_terminal or bool(snapshot.damage)  # a damaged record ends --watch: it will not heal

    _shown(show, watch, interval, "the run ends", quiet=as_json)
    if damage:
        click.echo(f"error: {damage[0]}", err=True)
        sys.exit(1)


def _shown(show: Callable[[], bool], watch: bool, interval: float, until: str, *, quiet: bool) -> None:
    """`show()` once, or with --watch again every `interval` until it says the end was shown.
    Ctrl-C or SIGTERM stops watching, never what is watched."""

    def shown_ended() -> bool:
        ended = show()
        if not ended and not quiet:
            click.echo(f"\n(refreshing every {interval:g}s until {until}; Ctrl-C stops watching)")
        return ended

    try:
        with interruptible():
            if watch:
                wait_until(shown_ended, None, until, interval)
            else:
                show()
    except KeyboardInterrupt as interrupt:
        sys.exit(interrupt_exit(interrupt))


def _sweep_status(
    name: str, prefix: str | None, attempt_id: str | None, as_json: bool, watch: bool, interval: float
) -> None:
    """`rlaunch status <sweep name>`: the sweep's line and its variants, each with its state."""
    from rlaunch.observe.render import dumps, runs_rows
    from rlaunch.observe.resolve import RunNotFoundError, default_prefix
    from rlaunch.observe.run_list import list_runs
    from rlaunch.observe.run_status import TERMINAL_STATES
    from rlaunch.statefiles import CorruptStateError

    if attempt_id is not None:
        raise click.UsageError(
            f"--attempt {attempt_id}: each variant of sweep {name} has its own attempts; "
            "give the variant's name@version instead of the sweep's name"
        )
    base = default_prefix(prefix)
    damaged: list[CorruptStateError] = []

    def show() -> bool:
        damaged.clear()
        rows = list_runs(base, None, damaged, sweep=name)
        if not rows:
            raise RunNotFoundError(
                f"no variant of sweep {name} has a run record under {base} "
                "(a sweep's coordinator records each variant as it starts it: `rlaunch jobs list` shows the coordinator)"
            )
        ended = all(row["state"] in TERMINAL_STATES for row in rows)
        if as_json:
            data = dumps({"sweep": name, "is_terminal": ended, "variants": rows})
            click.echo(data.replace("\n", " ") if watch else data)
        else:
            if watch and sys.stdout.isatty():
                click.clear()
            click.echo(runs_rows(rows))
        return ended or bool(damaged)  # a damaged record ends --watch: it will not heal

    _shown(show, watch, interval, "every variant has ended", quiet=as_json)
    for problem in damaged:  # the others are shown; each damaged record is named with its fix
        click.echo(f"error: {problem}", err=True)
    if damaged:
        sys.exit(1)


def _cancel_sweep(name: str, prefix: str | None, yes: bool, reason: str | None) -> None:
    """`rlaunch cancel <sweep name>`: every running variant and the sweep's coordinator."""
    from rlaunch.control.cancel import cancel_sweep, run_jobs_of, sweep_runs
    from rlaunch.observe.resolve import default_prefix

    base = default_prefix(prefix)
    running = [r.artifact or r.output_path for r in sweep_runs(name, base) if run_jobs_of(r, whole_sweep=True).live]
    if not yes:
        click.confirm(
            f"Cancel sweep {name}: its coordinator and {len(running)} running variant(s) {running}?", abort=True
        )
    done = cancel_sweep(name, base, reason)
    for artifact, outcome in done.variants:
        states = ", ".join(f"{job} {state}" for job, state in outcome.states.items()) or "-"
        click.echo(f"{artifact} attempt {outcome.attempt_id or '(none recorded yet)'}: cancelled ({states})")
    for job_id in done.coordinators:
        click.echo(f"sweep {name}: coordinator {job_id} cancelled")
    if not done.variants and not done.coordinators:
        click.echo(f"sweep {name}: nothing to cancel (no variant or coordinator of it running under {base})")


@click.command()
@run_argument
@prefix_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--reason", default=None, help="Why; recorded with who cancelled and when.")
def cancel(run: str, prefix: str | None, yes: bool, reason: str | None) -> None:
    """Cancel a run's jobs; records who and when.

    Cancels the latest attempt's coordinator and child jobs (asking first unless --yes) and
    records who cancelled, when and why beside the run.

    RUN is name@version, the RL artifact's path, a coordinator or child job id, or a sweep's name
    (NAME@VERSION~sweep-DIGEST: every running variant is cancelled, each recorded in its own run record).
    """
    from rlaunch.control.cancel import cancel_run, run_jobs_of

    if MARK in run:
        _cancel_sweep(run.strip(), prefix, yes, reason)
        return
    ref = resolve_run(run, prefix)
    found = run_jobs_of(ref)
    attempt, live = found.attempt, found.live
    name = ref.artifact or ref.output_path
    problem = found.cannot_act()
    if problem:  # the attempt may still run: never "nothing to cancel" with success
        click.echo(
            f"error: cannot cancel {name} attempt {attempt.get('attempt_id')} ({attempt.get('state')}): {problem}; "
            f"find its jobs with `rlaunch jobs list` and cancel them there",
            err=True,
        )
        sys.exit(1)
    if not live:
        state = attempt.get("state") or "no attempt recorded"
        click.echo(f"{name}: nothing to cancel (attempt {attempt.get('attempt_id') or '-'}: {state}, no job running)")
        return
    if not yes:
        jobs = ", ".join(f"{j.role} {j.job_id} ({j.state})" for j in live)
        click.confirm(
            f"Cancel {name} attempt {attempt.get('attempt_id') or '(none recorded yet)'}: {jobs}?", abort=True
        )
    outcome = cancel_run(ref, reason)
    states = ", ".join(f"{job} {state}" for job, state in outcome.states.items()) or "-"
    click.echo(f"{name} attempt {outcome.attempt_id or '(none recorded yet)'}: cancelled ({states})")
    if outcome.record_url:
        click.echo(f"recorded in {outcome.record_url}")
