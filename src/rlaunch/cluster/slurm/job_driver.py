"""`python -m rlaunch.cluster.slurm.job_driver <root>`: the batch script of every rlaunch Slurm job.

It runs on the allocation's first node as the job's gang driver: the gang engine's supervisor
(`rlaunch.cluster.gang.supervisor`) with `SlurmBackend` as its transport (each replica attempt a job step on its node). The job's
argv and environment come in `$RLAUNCH_SLURM_JOB` (set at sbatch, never written
to a file); the job id is Slurm's. A SIGTERM (scancel, the time limit) is a cancel request: the
driver stops the steps, records the outcome and cancels the job's children within Slurm's KillWait.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rlaunch.cluster.gang.state import JobDir
from rlaunch.cluster.gang.supervisor import Supervisor
from rlaunch.cluster.protocol import JOB_ID_ENV
from rlaunch.cluster.slurm.backend import JOB_ENV, SlurmBackend


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job_id = os.environ.get("SLURM_JOB_ID")
    raw = os.environ.pop(JOB_ENV, None)
    if len(args) != 1 or not job_id or not raw:
        print(
            f"usage: sbatch runs this (python -m {__spec__.name} <root>, with $SLURM_JOB_ID and ${JOB_ENV})",
            file=sys.stderr,
        )
        return 2
    payload = json.loads(raw)
    job = JobDir(Path(args[0]), job_id)
    env = {**payload["env"], JOB_ID_ENV: job_id}
    backend = SlurmBackend.from_env(env)
    Supervisor(job, payload["argv"], env, backend=backend).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
