"""`rlaunch cancel`: stop a run's jobs and record who cancelled it, when and why."""

from __future__ import annotations

import sys

import click

from rlaunch.observe.cli import prefix_option, resolve_run, run_argument


@click.command()
@run_argument
@prefix_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--reason", default=None, help="Why; recorded with who cancelled and when.")
def cancel(run: str, prefix: str | None, yes: bool, reason: str | None) -> None:
    """Cancel a run's jobs; records who and when.

    Cancels the latest attempt's coordinator and child jobs (asking first unless --yes) and
    records who cancelled, when and why beside the run.

    RUN is name@version, the RL artifact's path, or a coordinator or child job id.
    """
    from rlaunch.control.cancel import cancel_run, run_jobs_of

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
