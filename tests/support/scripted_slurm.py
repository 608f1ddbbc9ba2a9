"""A Slurm scripted in process, below the `Backend` protocol: the answers of squeue, sacct, scancel,
scontrol, sinfo and sbatch as a cluster gives them, so the Slurm backend, its queue check and what
reads its jobs (status, cancel) run unchanged without a slurmctld. The Slurm tier (tests/slurm's
other modules) runs the same paths against a real one.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from rlaunch.cluster.gang.state import JobDir
from rlaunch.cluster.protocol import JobSpec
from rlaunch.cluster.slurm import backend as slurm_backend
from rlaunch.cluster.slurm import commands, queue_check
from rlaunch.cluster.slurm.backend import SlurmBackend
from rlaunch.cluster.slurm.commands import SlurmError

INVALID = "squeue -h failed (exit 1): slurm_load_jobs error: Invalid job id specified"


class FakeSlurm:
    """squeue, sacct and scancel as a cluster answers them: `queue` is what slurmctld still lists,
    `accounting` what slurmdbd recorded (None: no accounting storage), `nodes` each job's node list;
    `partitions` and `partition_nodes` what `scontrol show partition -o` and `sinfo -N` print; sbatch
    queues each job held, with the next id of `job_ids`."""

    def __init__(self) -> None:
        self.queue: dict[str, tuple[str, str]] = {}
        self.accounting: dict[str, tuple[str, str]] | None = {}
        self.nodes: dict[str, str] = {}
        self.squeue_nodes: dict[str, str] = {}
        self.calls: list[list[str]] = []
        self.shielded: list[str] = []  # the commands asked to ignore SIGTERM
        self.timeouts: list[tuple[str, float | None]] = []  # each command and its time limit
        self.down = False  # slurmctld does not answer
        self.node_lines: list[str] = []  # `scontrol show node -o` of a job's nodes
        self.partitions: list[str] = []  # `scontrol show partition -o`, one line each
        self.partition_nodes: dict[str, list[str]] = {}  # partition -> `sinfo -N` rows (%N|%c|%m|%G|%f)
        self.job_ids = itertools.count(100)
        self.release_refused: str | None = None  # `scontrol release` fails with this
        self.completing: set[str] = set()  # jobs scancel leaves COMPLETING (their nodes slow to let go)

    def run(self, argv: list[str], *, shielded: bool = False, timeout: float | None = None, **_: object) -> str:
        self.calls.append(list(argv))
        self.timeouts.append((argv[0], timeout))
        if shielded:
            self.shielded.append(argv[0])
        if self.down:
            raise SlurmError(f"{argv[0]} did not answer within 30s")
        command, job_id = argv[0], argv[argv.index("-j") + 1] if "-j" in argv else None
        if argv[:3] == ["scontrol", "show", "partition"]:
            return "".join(f"{line}\n" for line in self.partitions)
        if argv[:2] == ["scontrol", "release"]:
            if self.release_refused:
                raise SlurmError(f"scontrol release failed (exit 1): {self.release_refused}")
            self.queue[argv[2]] = ("PENDING", "None")
            return ""
        if command == "scontrol":
            return "".join(f"{line}\n" for line in self.node_lines)
        if command == "sinfo":
            return "".join(f"{row}\n" for row in self.partition_nodes.get(argv[argv.index("-p") + 1], []))
        if command == "sbatch":
            submitted = str(next(self.job_ids))
            self.queue[submitted] = ("PENDING", "JobHeldUser")
            return f"{submitted};cluster\n"
        if command == "scancel":
            for cancelled in argv[1:]:
                self.queue[cancelled] = (
                    ("COMPLETING", "None") if cancelled in self.completing else ("CANCELLED", "None")
                )
            return ""
        if command == "squeue" and argv[-1] == "%i":
            return "".join(f"{j}\n" for j in self.queue)
        if command == "squeue" and argv[-1] == "%N":
            return self.squeue_nodes.get(job_id or "", "") + "\n"
        if command == "squeue":
            if job_id not in self.queue:
                raise SlurmError(INVALID)
            return "{}|{}\n".format(*self.queue[job_id])
        if self.accounting is None:
            raise SlurmError("sacct failed (exit 1): Slurm accounting storage is disabled")
        if argv[-1] == "NodeList":
            return self.nodes.get(job_id or "", "") + "\n"
        entry = self.accounting.get(job_id or "")
        return "{} by 0|{}\n".format(*entry) if entry else ""

    def scancelled(self) -> list[list[str]]:
        return [c for c in self.calls if c[0] == "scancel"]


def scripted(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """A `FakeSlurm` answering every Slurm command rlaunch runs (the queue check imports `run` by name)."""
    fake = FakeSlurm()
    monkeypatch.setattr(commands, "run", fake.run)
    monkeypatch.setattr(queue_check, "run", fake.run)
    return fake


def fresh_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every look at the queue is a fresh one: the backend's once-a-second cache never answers."""
    ticks = itertools.count(100, 5)
    monkeypatch.setattr(slurm_backend, "time", SimpleNamespace(monotonic=lambda: float(next(ticks))))


def pending_job(backend: SlurmBackend, job_id: str, spec: JobSpec | None = None) -> JobDir:
    """A job as `submit` leaves it once sbatch took it: pending, its driver not yet started."""
    job = JobDir(backend.root, job_id)
    job.path.mkdir(parents=True)
    job.logs_dir.mkdir()
    backend._write_records(job, spec or JobSpec(name=f"job-{job_id}", argv=["true"]), None, str(backend.root))
    return job
