"""Where a launch writes: only into a location that is empty, absent, or laid out by rlaunch.

A launch document names the run's output roots (the output path, exports, checkpoints, attempts)
and the resolved document's file. A hand-written document can point one at an existing directory
of someone else's files, where the run would mix its files in or replace files of the same name.
So before anything is written or submitted, each root must be absent, empty, or hold only what
rlaunch writes there (this run's earlier attempts, the artifact runner's records); anything else
is refused with the path, what is in it and the fix. A root's entries are judged by name, the way
the run layout names them (`launch_config.layout`), plus the hidden temporaries of atomic writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rlaunch import storage
from rlaunch.errors import UserError
from rlaunch.launch_config.schema import ATTEMPT_ID, SkyRLLaunchConfig
from rlaunch.runs.layout import (
    CANCELLATIONS,
    CHECKPOINT_META,
    EXPORTS,
    LATEST_MARKER,
    RESOLVED_DOCUMENT,
    RUN_RECORD,
    RUNTIME_FILE,
    SKYRL_LATEST_MARKER,
    TERMINAL_MANIFEST,
)

_STEP = re.compile(r"global_step_\d+")
# the artifact runner's .status.json, .artifact.json, .lock.json (and a stale lock moved aside), the run
# record's .run_record.json.lock
_HIDDEN_RECORD = re.compile(r"\.[a-z_]+\.json(\.lock|\.stale-[0-9a-f]+)?")
_TEMPORARY = re.compile(r"\..+\.tmp(-[0-9a-f]+)?")  # atomic writes cut short
_ASIDE = re.compile(r"\.corrupt.*$")  # a damaged state file kept aside (by rlaunch, or as its fix says)

_OWN: dict[str, Callable[[str], bool]] = {
    "output_path": lambda n: (
        n in (RUN_RECORD, TERMINAL_MANIFEST, RESOLVED_DOCUMENT, EXPORTS, CANCELLATIONS)
        or bool(_HIDDEN_RECORD.fullmatch(n))
    ),
    "export_root": lambda n: bool(_STEP.fullmatch(n)),
    "checkpoint_root": lambda n: (
        n in (LATEST_MARKER, SKYRL_LATEST_MARKER, RUNTIME_FILE, CHECKPOINT_META) or bool(_STEP.fullmatch(n))
    ),
    "attempts_root": lambda n: bool(ATTEMPT_ID.fullmatch(n.removesuffix(".json"))),
}


class ForeignOutputError(UserError, ValueError):
    """An output root that holds files rlaunch did not write; nothing was written or submitted."""


def foreign_entries(field: str, url: str) -> list[str]:
    """Names under the output root `url` (the document's `artifacts.<field>`) that rlaunch does not write there."""
    own = _OWN[field]
    return [n for n in storage.list_names(url) if not (own(_ASIDE.sub("", n)) or _TEMPORARY.fullmatch(n))]


def output_problems(doc: SkyRLLaunchConfig) -> list[str]:
    """Every output root of `doc` that would mix the run into files it does not own (empty: none)."""
    problems = []
    art = doc.artifacts
    for field in _OWN:
        url = getattr(art, field)
        foreign = foreign_entries(field, url)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            problems.append(
                f"artifacts.{field}={url!r} is an existing directory holding files rlaunch did not write "
                f"({shown}); a run writes only into an empty or new directory, or one it laid out itself. "
                "Point it at a new directory (or the default the experiment renders), or move those files away"
            )
    derived = storage.join(art.output_path, RESOLVED_DOCUMENT)
    if art.resolved_config_uri != derived and storage.exists(art.resolved_config_uri):
        problems.append(
            f"artifacts.resolved_config_uri={art.resolved_config_uri!r} already exists and would be replaced; "
            f"point it at a new file (the default is {derived})"
        )
    return problems


def refuse_foreign_outputs(doc: SkyRLLaunchConfig) -> None:
    """ForeignOutputError naming every output root that holds files rlaunch did not write."""
    problems = output_problems(doc)
    if problems:
        raise ForeignOutputError(
            f"{len(problems)} output location(s) refused, nothing was written or submitted:\n  - "
            + "\n  - ".join(problems)
        )
