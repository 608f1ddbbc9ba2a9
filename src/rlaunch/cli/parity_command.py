"""`rlaunch parity SMOKE LARGE`: does a smoke rehearse a large run? Exit 0 when parity holds.

Both runs are read from storage (name@version, the artifact's path, or a job id): parity compares
their launch documents, nothing else (`rlaunch.judgement.parity`: the fields and why). A large run that has not been launched yet is compared in
its own plan instead (the dry run prints the smoke gate section).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from rlaunch.observe.cli import prefix_option
from rlaunch.observe.resolve import RunNotFoundError, RunRef, default_prefix, resolve

if TYPE_CHECKING:
    from rlaunch.launch_config.schema import SkyRLLaunchConfig


@click.command("parity")
@click.argument("smoke")
@click.argument("large")
@prefix_option
def parity(smoke: str, large: str, prefix: str | None) -> None:
    """Compare SMOKE with LARGE: runtime, model architecture, accelerator, strategy, entrypoint,
    algorithm, token lengths, artifact hand-offs, role geometry, checkpoint, export and memory
    placement. Scale (nodes, batch sizes, steps) may differ. Exit 1 on a difference, 2 when a run
    is not found."""
    from rlaunch.judgement.parity import differences, shape_of_document
    from rlaunch.rules.document_subject import memory_table

    loaded = [_load(reference, default_prefix(prefix)) for reference in (smoke, large)]
    shapes = [shape_of_document(document, identity) for document, identity in loaded]
    found = differences(*shapes)
    click.echo("memory per device (smoke | large): estimate / capacity GiB, status")
    for line in memory_lines(*(memory_table(document).as_dict() for document, _ in loaded)):
        click.echo(f"  {line}")
    if not found:
        click.echo(f"parity holds: {shapes[0].identity} rehearses {shapes[1].identity}")
        return
    click.echo(f"parity fails: {len(found)} difference(s) between {shapes[0].identity} and {shapes[1].identity}")
    for difference in found:
        click.echo(f"  {difference.line()}")
    raise SystemExit(1)


def memory_lines(smoke: dict[str, Any], large: dict[str, Any]) -> list[str]:
    """Both runs' per-GPU rows beside each other (scale differs by design: shown, not compared)."""

    def rows(table: dict[str, Any]) -> dict[tuple[str, str], str]:
        return {
            (r["role"], r["phase"]): f"{r['estimate_gib']:.2f} / {r['capacity_gib']:.2f} {r['status']}"
            for r in table["rows"]
        }

    mine, theirs = rows(smoke), rows(large)
    lines = [
        f"{role} {phase}: {mine.get((role, phase), '-')} | {theirs.get((role, phase), '-')}"
        for role, phase in dict.fromkeys([*mine, *theirs])
    ]
    for label, table in (("smoke", smoke), ("large", large)):
        lines += [f"{label}: {reason}" for reason in table["unsized"]]
    return lines


def _load(reference: str, prefix: str) -> tuple[SkyRLLaunchConfig, str]:
    """The run's launch document and its identity (name@version, or the reference as given)."""
    from rlaunch.observe.collect import launch_document

    try:
        ref: RunRef = resolve(reference, prefix)
    except RunNotFoundError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from exc
    attempt = ref.attempt()
    document, _ = launch_document(attempt, ref.output_path) if attempt else (None, None)
    if document is None:
        click.echo(
            f"error: {reference} has no launch document under {prefix}; launch it (or dry-run it) first", err=True
        )
        raise SystemExit(2)
    return document, ref.artifact or reference
