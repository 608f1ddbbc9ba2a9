"""`rlaunch jobs`: list, inspect, follow and cancel cluster jobs from any shell.

Every subcommand goes through the `Backend` protocol, so the same commands work for any backend;
with `local` (the default) they read the job root on disk, which is why they work after the
submitting process has exited.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from rlaunch.cluster.protocol import Backend, JobStatus, get_backend
from rlaunch.errors import UserError
from rlaunch.processes import interrupt_exit, interruptible


@contextmanager
def _clear_errors() -> Iterator[None]:
    """Unknown ids and bad arguments are user errors: one line, no traceback (exit 2 for a `UserError`
    such as an unknown job id, through the boundary; 1 for other refusals)."""
    try:
        yield
    except UserError:
        raise
    except (ValueError, ImportError, ConnectionError) as exc:
        raise click.ClickException(str(exc)) from None


def _backend(ctx: click.Context) -> Backend:
    name, root, controller = ctx.obj["backend"], ctx.obj["root"], ctx.obj["controller_url"]
    if root is not None and name not in ("local", "slurm"):
        raise click.UsageError("--root only applies to the local and slurm backends")
    if controller is not None and name != "iris":
        raise click.UsageError("--controller-url only applies to the iris backend")
    options = {"root": root} if root is not None else {"controller_url": controller} if controller else {}
    with _clear_errors():
        return get_backend(name, **options)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def _status_text(status: JobStatus, child_state: Callable[[str], str]) -> str:
    fields = [
        ("job", status.job_id),
        ("name", status.name),
        ("backend", status.backend),
        ("state", status.state.value),
        ("message", status.message or "-"),
        ("parent", status.parent or "-"),
        ("children", ", ".join(f"{c} ({child_state(c)})" for c in status.children) or "-"),
        ("submitted", status.submitted_at or "-"),
        ("started", status.started_at or "-"),
        ("finished", status.finished_at or "-"),
        ("labels", ", ".join(f"{k}={v}" for k, v in sorted(status.labels.items())) or "-"),
    ]
    head = "\n".join(f"{key:<10} {value}" for key, value in fields)
    rows = [["RANK", "STATE", "ATTEMPTS", "EXIT"]] + [
        [str(r.rank), r.state.value, str(r.attempts), "-" if r.exit_code is None else str(r.exit_code)]
        for r in status.replicas
    ]
    return head + "\n\n" + _table(rows)


@click.group(invoke_without_command=True)
@click.option("--backend", "backend_name", default="local", show_default=True, help="Cluster backend holding the jobs.")
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    default=None,
    help="Local and slurm backends: the job state directory (default $RLAUNCH_LOCAL_ROOT or $RLAUNCH_SLURM_ROOT, "
    "else <prefix>/.jobs or <prefix>/.slurm-jobs).",
)
@click.option(
    "--controller-url",
    default=None,
    help="Iris backend only: the controller (default $IRIS_CONTROLLER_URL).",
)
@click.pass_context
def jobs(ctx: click.Context, backend_name: str, root: str | None, controller_url: str | None) -> None:
    """List, inspect, follow and cancel cluster jobs (no command: list them)."""
    ctx.obj = {"backend": backend_name, "root": root, "controller_url": controller_url}
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_jobs, as_json=False)


@jobs.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of job statuses.")
@click.pass_context
def list_jobs(ctx: click.Context, as_json: bool) -> None:
    """Every job the backend knows, oldest first."""
    with _clear_errors():
        backend = _backend(ctx)
        listing = getattr(backend, "listing", None)  # a backend that can report damaged jobs apart
        statuses, damaged = listing() if listing is not None else (backend.list_jobs(), [])
    if as_json:
        click.echo(json.dumps([s.to_json() for s in statuses], indent=2))
    elif not statuses:
        click.echo("no jobs")
    else:
        rows = [["JOB", "STATE", "REPLICAS", "SUBMITTED", "PARENT", "MESSAGE"]] + [
            [
                s.job_id,
                s.state.value,
                str(len(s.replicas)),
                s.submitted_at or "-",
                s.parent or "-",
                (s.message or "")[:60],
            ]
            for s in statuses
        ]
        click.echo(_table(rows))
    for problem in damaged:  # one damaged job is reported; the others are still listed
        click.echo(f"error: {problem}", err=True)
    if damaged:
        sys.exit(1)


@jobs.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_context
def status(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """One job: state, message, parent and children, and each replica's attempts and exit code."""
    backend = _backend(ctx)
    with _clear_errors():
        job = backend.status(job_id)
        if as_json:
            click.echo(json.dumps(job.to_json(), indent=2))
            return
        click.echo(_status_text(job, lambda child: backend.status(child).state.value))


@jobs.command()
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@click.option("--replica", type=int, default=None, help="Only this replica's output (no `[rank N]` prefix).")
@click.option("--tail", type=click.IntRange(min=0, max=10**9), default=None, help="Start with the last N lines.")
@click.pass_context
def logs(ctx: click.Context, job_id: str, follow: bool, replica: int | None, tail: int | None) -> None:
    """Job output: all replicas interleaved with a `[rank N]` prefix, or one replica."""
    backend = _backend(ctx)
    with _clear_errors():
        try:
            with interruptible():
                for line in backend.logs(job_id, replica=replica, follow=follow, tail=tail):
                    click.echo(line)
        except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM stops following, never the job
            sys.exit(interrupt_exit(interrupt))


@jobs.command()
@click.argument("job_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--reason", default=None, help="Why; recorded with who cancelled and when.")
@click.pass_context
def cancel(ctx: click.Context, job_id: str, yes: bool, reason: str | None) -> None:
    """Stop a job and, recursively, its child jobs."""
    backend = _backend(ctx)
    with _clear_errors():
        job = backend.status(job_id)
        if not job.state.terminal and not yes:
            children = f" and its {len(job.children)} child job(s)" if job.children else ""
            click.confirm(f"Cancel {job.job_id} ({job.state.value}){children}?", abort=True)
        result = backend.cancel(job_id, reason=reason)
    prefix = "already ended: " if job.state.terminal else ""
    click.echo(f"{result.job_id}: {prefix}{result.state.value}" + (f" ({result.message})" if result.message else ""))
