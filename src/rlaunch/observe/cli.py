"""`rlaunch runs | verify-smoke | logs | plot | compare`: read-only views of runs, sweeps and evaluations.

A RUN is `name@version` (under --prefix, else $RLAUNCH_PREFIX), the RL artifact's path, or a
coordinator or child job id. Everything here reads; `rlaunch status`, which closes an attempt whose
jobs all ended, and `rlaunch cancel` live in `rlaunch.control`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import TYPE_CHECKING

import click

from rlaunch.observe.resolve import RunRef, default_prefix, resolve
from rlaunch.processes import interrupt_exit, interruptible

if TYPE_CHECKING:
    from rlaunch.observe.sweep_compare import SweepComparison

TAIL = click.IntRange(min=0, max=10**9)  # a deque of the last N lines: bounded, so a huge N is a clear error

prefix_option = click.option(
    "--prefix",
    default=None,
    metavar="URL",
    help="Storage prefix the runs live under (default $RLAUNCH_PREFIX, else ./rlaunch-artifacts).",
)
attempt_option = click.option(
    "--attempt", "attempt_id", default=None, help="An attempt id of the run (default: the latest)."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for tools.")
run_argument = click.argument("run", metavar="RUN")


def writable_output(path: str) -> str:
    """A file path whose directory exists and can be written, checked before any work is done."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise click.BadParameter(f"{path}: directory {directory} does not exist; create it or pick another path")
    if not os.access(directory, os.W_OK):
        raise click.BadParameter(f"{path}: directory {directory} is not writable; pick another path")
    return path


def resolve_run(run: str, prefix: str | None, attempt_id: str | None = None) -> RunRef:
    """The run RUN names; a RunNotFoundError is a one-line error (exit 2) through the boundary."""
    return resolve(run, prefix, attempt_id)


@click.command()
@prefix_option
@click.option(
    "--name", "name_prefix", default=None, metavar="PREFIX", help="Only artifacts whose name starts with PREFIX."
)
@click.option("--sweep", "sweep", default=None, metavar="NAME", help="Only the variants of sweep NAME.")
@json_option
def runs(prefix: str | None, name_prefix: str | None, sweep: str | None, as_json: bool) -> None:
    """List RL runs under the prefix, newest first.

    One line per run: its latest attempt, state (reconciled with the jobs) and job ids. The variants
    of a sweep are listed together under one line for the sweep (its name, how many variants in
    which states), each indented, with its label and settings.
    """
    from rlaunch.observe.render import dumps, runs_rows
    from rlaunch.observe.run_list import list_runs
    from rlaunch.statefiles import CorruptStateError

    damaged: list[CorruptStateError] = []
    rows = list_runs(default_prefix(prefix), name_prefix, damaged, sweep=sweep)
    if as_json:
        click.echo(dumps(rows))
    elif not rows:
        of_sweep = f" of sweep {sweep}" if sweep is not None else ""
        click.echo(f"no runs{of_sweep} under {default_prefix(prefix)}")
    else:
        click.echo(runs_rows(rows))
    for row in rows:  # listed as a run of no sweep
        if row["sweep_problem"]:
            click.echo(f"warning: {row['sweep_problem']}", err=True)
    for problem in damaged:  # the others are listed; each damaged record is named with its fix
        click.echo(f"error: {problem}", err=True)
    if damaged:
        sys.exit(1)


@click.command("verify-smoke")
@run_argument
@prefix_option
@attempt_option
@json_option
def verify_smoke(run: str, prefix: str | None, attempt_id: str | None, as_json: bool) -> None:
    """Check the smoke criteria (exit 0: all hold).

    Each criterion is printed with its evidence. The run must have ended in success, every expected replica and trainer process joined, the
    trainer loaded the configured (staged) model, optimizer steps advanced to the final step, and
    the terminal checkpoint, manifest and export exist. Exit 1 when a criterion fails, 2 when RUN
    names no run.

    RUN is name@version, the RL artifact's path, or a coordinator or child job id.
    """
    from rlaunch.observe.collect import collect
    from rlaunch.observe.render import dumps, verdict_text
    from rlaunch.observe.verdict import smoke_verdict

    snapshot = collect(resolve_run(run, prefix, attempt_id), run)
    if snapshot.kind == "step":
        raise click.UsageError(
            f"{snapshot.artifact or run} is a step job, not an RL run: verify-smoke judges an RL smoke's training "
            f"(see its state with rlaunch status {snapshot.artifact or run})"
        )
    verdict = smoke_verdict(snapshot)
    if as_json:
        click.echo(
            dumps(
                {
                    "run": snapshot.artifact,
                    "attempt_id": snapshot.attempt_id,
                    "state": snapshot.state,
                    **verdict.to_json(),
                }
            )
        )
    else:
        click.echo(verdict_text(snapshot, verdict))
    sys.exit(0 if verdict.ok else 1)


@click.command()
@run_argument
@prefix_option
@attempt_option
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@click.option(
    "--replica", type=click.IntRange(min=0), default=None, help="Only this replica's output (no `[rank N]` prefix)."
)
@click.option("--tail", type=TAIL, default=None, help="Start with the last N lines.")
@click.option(
    "--coordinator", "of_coordinator", is_flag=True, help="The coordinator's log instead of the child gang's."
)
def logs(
    run: str,
    prefix: str | None,
    attempt_id: str | None,
    follow: bool,
    replica: int | None,
    tail: int | None,
    of_coordinator: bool,
) -> None:
    """Show a run's log (child gang or coordinator).

    The child gang's output (all replicas with a `[rank N]` prefix, or one with --replica); before
    the child exists, or with --coordinator, the coordinator's.

    RUN is name@version, the RL artifact's path, or a coordinator or child job id.
    """
    from rlaunch.cluster.protocol import JobNotFoundError
    from rlaunch.observe import run_jobs

    ref = resolve_run(run, prefix, attempt_id)
    attempt = ref.attempt() or {}
    job_id = (
        attempt.get("coordinator_job_id")
        if of_coordinator
        else attempt.get("child_job_id") or attempt.get("coordinator_job_id")
    )
    job_id = job_id or ref.job_id
    if not job_id:
        raise click.ClickException(f"{ref.artifact or ref.output_path} has no job yet")
    if not of_coordinator and not attempt.get("child_job_id"):
        click.echo(f"(no child job yet; showing the coordinator {job_id})", err=True)
    found = run_jobs.lookup(
        job_id, run_jobs.backends(attempt.get("backend") or "local", attempt.get("placement"), ref.prefix)
    )
    if found is None:
        raise click.ClickException(f"job {job_id} is not known to the {attempt.get('backend') or 'local'} backend")
    backend, _ = found
    try:
        with interruptible():
            for line in backend.logs(job_id, replica=replica, follow=follow, tail=tail):
                click.echo(line.rstrip("\n"))
    except (JobNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM stops following, never the job
        sys.exit(interrupt_exit(interrupt))


@click.command()
@run_argument
@prefix_option
@attempt_option
@click.option(
    "--output",
    "-o",
    "out_path",
    default="curves.png",
    show_default=True,
    type=click.Path(dir_okay=False),
    callback=lambda ctx, param, value: writable_output(value),
    help="PNG to write.",
)
def plot(run: str, prefix: str | None, attempt_id: str | None, out_path: str) -> None:
    """Plot reward, loss and KL per optimizer step.

    Every attempt's metrics in one trajectory (a later attempt wins at a step both recorded);
    dashed lines mark where a later attempt resumed.

    RUN is name@version, the RL artifact's path, or a coordinator or child job id.
    """
    try:
        from rlaunch.observe import plot as plotting
    except ImportError as exc:  # pragma: no cover - guarded below where matplotlib is imported
        raise click.ClickException(str(exc)) from None
    ref = resolve_run(run, prefix, attempt_id)
    series = plotting.attempt_series(ref, attempt_id)
    if not series:
        raise click.ClickException(
            f"{ref.artifact or ref.output_path} has no optimizer steps recorded yet: nothing to plot"
        )
    attempts = ", ".join(s.attempt_id for s in series)
    try:
        panels = plotting.draw(series, f"{ref.artifact or ref.output_path} (attempt {attempts})", out_path)
    except ModuleNotFoundError as exc:
        raise click.ClickException(f"{exc}; plotting needs matplotlib: pip install 'rlaunch[plot]'") from None
    except (ValueError, OSError) as exc:
        raise click.ClickException(f"cannot write the plot to {out_path}: {exc}") from None
    points = len(plotting.merged(series))
    click.echo(f"wrote {out_path}: {', '.join(panels)} over {points} optimizer steps")


@click.command()
@click.argument("a", metavar="[A]", required=False)
@click.argument("b", metavar="[B]", required=False)
@prefix_option
@click.option("--sweep", "sweep", default=None, metavar="NAME", help="The variants of sweep NAME, instead of A and B.")
@click.option(
    "--plot",
    "plot_path",
    default=None,
    metavar="PATH",
    type=click.Path(dir_okay=False),
    callback=lambda ctx, param, value: None if value is None else writable_output(value),
    help="With --sweep: the PNG of the variants' reward curves (default ./NAME-rewards.png).",
)
@json_option
def compare(
    a: str | None, b: str | None, prefix: str | None, sweep: str | None, plot_path: str | None, as_json: bool
) -> None:
    """Two evaluations side by side, and whether B - A exceeds the noise; or a sweep's variants.

    Accuracy with its 95% interval clustered by prompt, n, the scorer, the sampling, and the model
    and data each scored; then B - A with its 95% interval, paired by prompt when both scored the
    same data with as many completions per prompt (else unpaired), and the verdict: within noise, or
    exceeds the interval.

    A and B are evaluation steps (name@version or their paths), or RL versions (or any model
    artifact): each is replaced by the one evaluation step job under the prefix that scored it.

    With --sweep NAME (no A and B): one row per variant of the sweep: its label and settings, state,
    training steps done of planned, the reward last logged, the accuracy with its 95% interval of
    the one evaluation that scored it, and the GPU-hours its attempts held; and a PNG of the
    variants' reward curves (--plot).
    """
    if sweep is not None:
        if a is not None or b is not None:
            raise click.UsageError("give two evaluations A B, or --sweep NAME, not both")
        compare_sweep(sweep, prefix, plot_path, as_json)
        return
    if plot_path is not None:
        raise click.UsageError("--plot draws a sweep's reward curves: give it with --sweep NAME")
    if a is None or b is None:
        raise click.UsageError("give two evaluations A B (or two RL versions), or --sweep NAME")
    from rlaunch.observe.render import compare_text, dumps
    from rlaunch.observe.scores import compared, evaluation_of

    (name_a, score_a), (name_b, score_b) = (evaluation_of(resolve_run(r, prefix)) for r in (a, b))
    found = compared(score_a, score_b)
    if as_json:
        sides = {"a": (name_a, score_a), "b": (name_b, score_b)}
        data = {side: {"evaluation": name, **dataclasses.asdict(score)} for side, (name, score) in sides.items()}
        click.echo(dumps({**data, "difference": dataclasses.asdict(found), "verdict": found.verdict()}))
    else:
        click.echo(compare_text((name_a, score_a), (name_b, score_b), found))


def compare_sweep(name: str, prefix: str | None, plot_path: str | None, as_json: bool) -> None:
    """`rlaunch compare --sweep NAME`: the table (or its JSON) and the reward curves' PNG. Without
    matplotlib the table is still printed; a plot asked for by --plot is then an error, the default
    one a note."""
    from rlaunch.observe.render import dumps, sweep_compare_text
    from rlaunch.observe.sweep_compare import compare_sweep as compared_sweep

    found = compared_sweep(default_prefix(prefix), name)
    if not as_json:
        click.echo(sweep_compare_text(found))
    for problem in found.problems:  # a record that may be a variant and cannot be read as one
        click.echo(f"warning: {problem}", err=True)
    wrote, said = _reward_plot(found, plot_path)
    if as_json:
        click.echo(dumps({"sweep": name, "variants": [v.to_json() for v in found.variants], "plot": wrote}))
    click.echo(said, err=as_json)


def _reward_plot(found: SweepComparison, plot_path: str | None) -> tuple[str | None, str]:
    """(the PNG written, else None; what to say of it)."""
    from rlaunch.observe.plot import draw_rewards
    from rlaunch.observe.sweep_compare import default_plot_path

    out_path = plot_path or default_plot_path(found.name)
    curves = [(v.variant, v.rewards) for v in found.variants]
    if not any(points for _, points in curves):
        return None, f"no plot written: no variant of {found.name} has logged a reward yet"
    try:
        drawn = draw_rewards(curves, f"sweep {found.name}: reward per optimizer step", out_path)
    except ModuleNotFoundError as exc:
        if plot_path is not None:
            raise click.ClickException(f"{exc}; plotting needs matplotlib: pip install 'rlaunch[plot]'") from None
        return None, f"no plot written: {exc}; pip install 'rlaunch[plot]' for it"
    except (ValueError, OSError) as exc:
        raise click.ClickException(f"cannot write the plot to {out_path}: {exc}") from None
    return out_path, f"wrote {out_path}: {drawn} reward curve(s), one per variant that logged a reward"
