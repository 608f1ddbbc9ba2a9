"""`python -m rlaunch.cluster.local.job_driver <job_dir>`: starts the detached supervisor of a local job.

It reads `{"argv": [...], "env": {...}}` on stdin: the job's real argv and environment may hold
credentials, so they are never written to disk. It then forks: the parent records the child's pid
in supervisor.json and exits, so the submitter returns at once and never has to reap it; the child
runs the job's supervisor (`rlaunch.cluster.gang.supervisor`) with the local backend as its transport.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from rlaunch.cluster.gang.procs import process_identity
from rlaunch.cluster.gang.state import JobDir
from rlaunch.cluster.gang.supervisor import Supervisor
from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.storage import utc_now, write_json_atomic


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(
            f"usage: python -m {__spec__.name} <job_dir>  (job argv and env as JSON on stdin)",
            file=sys.stderr,
        )
        return 2
    path = Path(args[0])
    job = JobDir(path.parent, path.name)
    payload = json.loads(sys.stdin.read())
    pid = os.fork()
    if pid:
        write_json_atomic(
            job.supervisor_file,
            {"pid": pid, "identity": process_identity(pid), "host": socket.gethostname(), "started_at": utc_now()},
        )
        return 0
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    backend = LocalBackend(root=job.root, kill_grace=float(job.read_job()["kill_grace"]))
    Supervisor(job, payload["argv"], payload["env"], payload.get("scrub"), backend=backend).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
