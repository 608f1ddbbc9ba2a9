"""The experiment side of the boundary: hand a launch document to the launch host and read its verdict.

The host runs as its own process (`python -m rlaunch.host --config URL`, which is `rlaunch launch`
without the admin command's imports) so that it never imports the experiment: the document is its only input. Its stderr is streamed live (runs take
hours); its stdout carries exactly one JSON result.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import deque
from typing import IO, Any

from rlaunch.errors import UserError

STDERR_TAIL = 30


class LaunchFailedError(UserError, RuntimeError):
    """The launch host ended without success: its result says why (a refused document, a failed
    run), so the reason is the whole story and no traceback of rlaunch's own is shown.
    `host_exit_code` is set when the host left no result (killed, crashed): it classified nothing."""

    def __init__(self, message: str, host_exit_code: int | None = None) -> None:
        super().__init__(message)
        self.host_exit_code = host_exit_code


def launch(document_url: str) -> dict[str, Any]:
    """Run the host on `document_url`; returns its JSON result (raises when it reports failure)."""
    command = [sys.executable, "-m", "rlaunch.host", "--config", document_url]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tail: deque[str] = deque(maxlen=STDERR_TAIL)
    pump = threading.Thread(target=_stream, args=(process.stderr, tail), daemon=True)
    pump.start()
    try:
        stdout = process.stdout.read() if process.stdout else b""
        code = process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise
    pump.join()
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        raise LaunchFailedError(
            f"launch host exited {code} without a result; last stderr lines:\n" + "".join(tail), host_exit_code=code
        )
    try:
        result: dict[str, Any] = json.loads(text.splitlines()[-1])
    except ValueError:
        raise LaunchFailedError(
            f"launch host exited {code} with an unreadable result {text.splitlines()[-1][:200]!r}; last stderr lines:\n"
            + "".join(tail),
            host_exit_code=code,
        ) from None
    if code != 0 or result.get("state") not in ("succeeded", "submitted", "prepared", "rehearsed"):
        raise LaunchFailedError(
            f"RL attempt {result.get('attempt_id')} ended {result.get('state')}: {result.get('failure') or f'host exited {code}'}"
        )
    return result


def _stream(pipe: IO[bytes], tail: deque[str]) -> None:
    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        tail.append(line)
        sys.stderr.write(line)
        sys.stderr.flush()
    pipe.close()
