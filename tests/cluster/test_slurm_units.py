"""The slurm backend's rules without a Slurm: placement validation, the queue check's reading
of Slurm's answers and its checks, and what sbatch is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlaunch.cluster.protocol import JobSpec, Resources
from rlaunch.cluster.slurm.queue_check import Node, Partition, minutes, violations
from rlaunch.placement import SlurmPlacement
from rlaunch.skyrl import SlurmSkyRLExecution

SIZES = {"cpu": 4, "memory": "8GB", "disk": "10GB"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("UNLIMITED", None), ("5", 5), ("5:30", 6), ("01:00:00", 60), ("1-00:00:00", 1440), ("2-3", 2 * 1440 + 180)],
)
def test_slurm_durations_read_as_whole_minutes(text: str, expected: int | None) -> None:
    assert minutes(text) == expected


@pytest.mark.parametrize(
    ("gres", "asked", "count"),
    [
        ("gpu:2", "gpu", 2),
        ("gpu:a100:4(S:0-1)", "gpu", 4),
        ("gpu:a100:4(S:0-1),gpu:v100:2", "gpu:v100", 2),
        ("gpu:a100:4", "gpu:h100", 0),
        ("(null)", "gpu", 0),
        ("mps:100,gpu:1", "gpu", 1),
    ],
)
def test_a_nodes_gpus_are_counted_from_its_gres(gres: str, asked: str, count: int) -> None:
    assert Node("n", 8, 1000, gres, frozenset()).gpus(asked) == count


def _partition(**changes: object) -> Partition:
    values: dict = dict(
        name="gpu", state="UP", max_time_minutes=60, max_nodes=None, allow_accounts=None,
        deny_accounts=frozenset(), allow_qos=None,
        nodes=(Node("a", 8, 64000, "gpu:4", frozenset({"ib"})), Node("b", 8, 64000, "gpu:4", frozenset())),
    )  # fmt: skip
    values.update(changes)
    return Partition(**values)


def _spec(replicas: int = 1, **resources: object) -> JobSpec:
    return JobSpec(name="j", argv=("x",), replicas=replicas, resources=Resources(**resources))


@pytest.mark.parametrize(
    ("spec", "placement", "partition", "words"),
    [
        (_spec(), {}, {"state": "DOWN"}, "partition gpu is DOWN, not UP"),
        (
            _spec(),
            {},
            {"allow_accounts": frozenset({"lab"})},
            "account (none) may not use partition gpu (AllowAccounts=lab)",
        ),
        (_spec(), {"account": "x"}, {"deny_accounts": frozenset({"x"})}, "account x is denied partition gpu"),
        (_spec(), {"qos": "high"}, {"allow_qos": frozenset({"low"})}, "QOS high is not allowed in partition gpu"),
        (_spec(), {"time_limit_minutes": 61}, {}, "time limit 61 min exceeds partition gpu's MaxTime of 60 min"),
        (_spec(3), {}, {"max_nodes": 2}, "allows at most 2 per job (MaxNodes)"),
        (_spec(3), {}, {}, "needs 3 node(s) with 1 CPU(s) each but partition gpu has 2 such node(s)"),
        (_spec(accelerators=8), {}, {}, "needs 8 x gpu per node but no node of partition gpu has more than 4"),
        (_spec(cpu=16), {}, {}, "needs 1 node(s) with 16 CPU(s) each but partition gpu has 0"),
        (_spec(memory_bytes=100 * 2**30), {}, {}, "with 1 CPU(s), 102400 MB each"),
        (_spec(2), {"constraint": "ib"}, {}, "features ib each but partition gpu has 1 such node(s)"),
    ],
)
def test_the_queue_check_names_each_violation_and_its_fix(
    spec: JobSpec, placement: dict, partition: dict, words: str
) -> None:
    found = violations(spec, SlurmPlacement(**placement), _partition(**partition))
    assert len(found) == 1 and words in found[0], found
    assert ": " in found[0]  # every violation says what to do


def test_a_job_that_fits_has_no_violations() -> None:
    spec = _spec(2, cpu=8, memory_bytes=32 * 2**30, accelerators=4)
    placement = SlurmPlacement(account="lab", time_limit_minutes=60, constraint="ib|other")
    assert violations(spec, placement, _partition(allow_accounts=frozenset({"lab"}))) == []


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"sbatch_options": {"nodes": "3"}}, "--nodes is rlaunch's to write; rlaunch sets it from the job"),
        (
            {"sbatch_options": {"--time": "10"}},
            "--time is rlaunch's to write; set SlurmSkyRLExecution.time_limit_minutes",
        ),
        ({"sbatch_options": {"wrap": "rm -rf /"}}, "--wrap is rlaunch's to write"),
        ({"sbatch_options": {"mail-type": "END\n#SBATCH --nodes=9"}}, "must be a one-line non-empty string"),
        ({"sbatch_options": {"frobnicate": "1"}}, "not an option rlaunch passes"),
        ({"partition": "gpu; rm"}, "is not a Slurm name"),
        ({"gpu_gres": "gpu:a100:4"}, "must be a gres name, optionally with a type"),
        ({"constraint": "a100 && ib"}, "is not a Slurm feature expression"),
        ({"time_limit_minutes": 0}, "must be a positive number of minutes"),
    ],
)
def test_a_slurm_execution_refuses_what_sbatch_must_not_get(fields: dict, words: str) -> None:
    with pytest.raises((ValueError, TypeError)) as refused:
        SlurmSkyRLExecution(**SIZES, **fields)
    assert str(refused.value).startswith("SlurmSkyRLExecution.") and words in str(refused.value)


def test_the_execution_placement_builds_the_backend_and_its_sbatch_arguments(tmp_path: Path) -> None:
    from rlaunch.cluster.slurm.backend import SlurmBackend

    execution = SlurmSkyRLExecution(
        **SIZES, partition="gpu", account="lab", qos="high", time_limit_minutes=90, constraint="a100&ib",
        gpu_gres="gpu:a100", exclusive=True, sbatch_options={"reservation": "rl", "mail-type": "END"},
        jobs_root=str(tmp_path),
    )  # fmt: skip
    backend = SlurmBackend(**execution.placement())
    args = backend._sbatch_args(_spec(2, cpu=3.5, memory_bytes=2**30, accelerators=4))
    assert backend.root == tmp_path
    for expected in (
        "--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=4", "--mem=1024M", "--gres=gpu:a100:4",
        "--partition=gpu", "--account=lab", "--qos=high", "--time=90", "--constraint=a100&ib", "--exclusive",
        "--mail-type=END", "--reservation=rl", "--hold", "--no-requeue",
    ):  # fmt: skip
        assert expected in args, (expected, args)
    assert SlurmBackend.from_env(backend.environment()).placement == backend.placement


@pytest.mark.parametrize(
    ("out", "expected"),
    [
        ("PENDING|Resources\n", ("PENDING", "Resources")),
        ("CANCELLED by 0|None\n", ("CANCELLED", "None")),
        ("NODE_FAIL|NodeDown\nCOMPLETED|None\n", ("NODE_FAIL", "NodeDown")),
        ("", None),
    ],
)
def test_the_first_state_and_reason_row_of_squeue_or_sacct_is_read(out: str, expected: tuple | None) -> None:
    from rlaunch.cluster.slurm.commands import first_entry

    entry = first_entry(out)
    assert (entry.state, entry.reason) == expected if expected else entry is None


@pytest.mark.parametrize(
    ("state", "reason", "nodes", "cause"),
    [
        ("NODE_FAIL", "NodeDown", "node-2", "node failure"),
        ("CANCELLED", "None", "node-[1-2]", "cancelled by the scheduler"),
        ("OUT_OF_MEMORY", "OutOfMemory", "node-3", "killed for memory"),
    ],
)
def test_a_job_slurm_ended_under_its_driver_names_the_state_and_nodes_and_is_classed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str, reason: str, nodes: str, cause: str
) -> None:
    from rlaunch.cluster.gang.state import JobDir
    from rlaunch.cluster.slurm import commands
    from rlaunch.cluster.slurm.backend import SlurmBackend
    from rlaunch.launch_config.failures import OPERATIONAL, classify

    def slurm(argv: list[str], **_: object) -> str:  # slurmctld purged the job: accounting answers
        answers = {"squeue": "", "State,Reason": f"{state} by 0|{reason}\n", "NodeList": f"{nodes}\n"}
        return answers["squeue" if argv[0] == "squeue" else argv[-1]]

    monkeypatch.setattr(commands, "run", slurm)
    message = SlurmBackend(root=tmp_path)._lost_message(JobDir(tmp_path, "77"))
    assert f"({state}, reason {reason}) on node(s) {nodes} " in message, message
    found = classify(f"child job 77 reached failed: {message}")
    assert (found.kind, found.cause, found.where) == (OPERATIONAL, cause, nodes), found
