"""The one error boundary every entry point runs inside.

Entry points are the experiment mains (`build_options` / `rl_build_options`), every `rlaunch`
subcommand, the launch host and the task bootstrap. Inside the boundary:

* a `UserError` (an expected mistake: a bad field, file or reference) prints one line,
  `error: <what, the value, the fix>`, and exits with its `exit_code` (2);
* Click's own errors, `SystemExit` and Ctrl-C pass through unchanged;
* a full disk (ENOSPC, EDQUOT) prints one line naming the errno, the path and the next step, exit 1;
* anything else was not anticipated: the full traceback is saved to a file and
  one line names the exception and that file and says it is a bug, exit 1. A user never sees a
  bare traceback.

Tracebacks are saved under `$RLAUNCH_ERROR_DIR`, else `~/.cache/rlaunch/errors`, else (when
that cannot be written) the system temporary directory's `rlaunch-errors`. Every message and saved
traceback is scrubbed of credentials first.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

from rlaunch.errors import UserError

ERROR_DIR_ENV = "RLAUNCH_ERROR_DIR"
UNEXPECTED_EXIT = 1
_MAX_MESSAGE = 500


def error_dirs() -> list[Path]:
    """Where saved tracebacks go, most preferred first."""
    configured = os.environ.get(ERROR_DIR_ENV)
    if configured:
        return [Path(os.path.expanduser(configured))]
    return [Path.home() / ".cache" / "rlaunch" / "errors", Path(tempfile.gettempdir()) / "rlaunch-errors"]


def save_traceback(exc: BaseException, program: str) -> Path | None:
    """Write `exc`'s traceback (credentials scrubbed) to a new file; None when nowhere is writable."""
    from rlaunch.secrets import scrub

    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    text = "".join(traceback.format_exception(exc))
    header = f"{program} (pid {os.getpid()}), argv: {' '.join(sys.argv)}\n\n"
    for directory in error_dirs():
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{stamp}-{os.getpid()}-{_slug(program)}.txt"
            path.write_text(scrub(header + text), encoding="utf-8")
            return path
        except OSError:
            continue
    return None


def user_message(exc: BaseException) -> str:
    """The one line (or short block) shown for an expected error, credentials scrubbed."""
    from rlaunch.secrets import scrub

    return scrub(str(exc) or type(exc).__name__)


def unexpected_message(exc: BaseException, program: str) -> str:
    """One line for an unexpected error: what it was and where the traceback is."""
    from rlaunch.secrets import scrub

    saved = save_traceback(exc, program)
    detail = scrub(str(exc))
    if len(detail) > _MAX_MESSAGE:
        detail = detail[:_MAX_MESSAGE] + "…"
    where = f"the traceback is saved in {saved}" if saved else "the traceback could not be saved"
    return f"{program} failed unexpectedly: {type(exc).__name__}: {detail} ({where}; this is a bug, please report it)"


def classify(exc: BaseException, program: str) -> tuple[int, str]:
    """(exit code, message) for an exception that reached the boundary."""
    from rlaunch.storage import disk_full_message, is_disk_full

    if isinstance(exc, UserError):
        return exc.exit_code, user_message(exc)
    if is_disk_full(exc):  # the machine's fault, not a bug: named with its path and the next step
        assert isinstance(exc, OSError)
        return UNEXPECTED_EXIT, user_message(Exception(f"{program}: {disk_full_message(exc)}"))
    return UNEXPECTED_EXIT, unexpected_message(exc, program)


def _passes_through(exc: BaseException) -> bool:
    import click

    return isinstance(exc, (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit)) or (
        not isinstance(exc, Exception)  # SystemExit, KeyboardInterrupt, GeneratorExit
    )


@contextlib.contextmanager
def error_boundary(program: str) -> Iterator[None]:
    """Run an entry point's body: expected errors become one line and exit 2, the rest a saved traceback."""
    try:
        yield
    except BaseException as exc:
        if _passes_through(exc):
            raise
        code, message = classify(exc, program)
        sys.stderr.flush()
        print(f"error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(code) from None


def _slug(program: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in program).strip("-")[:40] or "rlaunch"
