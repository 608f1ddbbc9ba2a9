"""The one base class of expected errors: a mistake in what the user gave, not a bug.

Every entry point (experiment mains, `rlaunch` subcommands, the launch host, the task bootstrap)
wraps its work in one error boundary: a `UserError` prints one line that names the field or file,
the value and the fix, and exits 2; anything else is unexpected and is reported with the path of
its saved traceback. Expected error types elsewhere derive from `UserError` (alongside the builtin
they already extend, e.g. `class DocumentError(UserError, ValueError)`), so callers that catch the
builtin keep working.
"""

from __future__ import annotations


class UserError(Exception):
    """An expected, explainable error: its message is the whole story (field, value, fix)."""

    exit_code: int = 2
