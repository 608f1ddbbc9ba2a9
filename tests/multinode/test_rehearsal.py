"""The rehearsal's end, without Ray: the head's classification of a driver failure, the
placement-group check, the report, the host's `rehearsed` record, and the runtime profile.

The full rehearsal (real SkyRL 0.4.0 on a 2-node x 2-logical-GPU gang, ~7 minutes) is
`python -m experiments.rehearsal --version V --run` (docs/clusters/multinode.md, "Rehearsal")."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rlaunch import storage
from rlaunch.host.manifests import REHEARSED, SUCCEEDED, LaunchResult, write_manifests
from rlaunch.launch_config import schema
from rlaunch.runs.rehearsal_report import PlacedGroup, RehearsalReport, read_report, render
from rlaunch.runtimes.environment import venv_key
from rlaunch.runtimes.registry import get_profile
from rlaunch.task import ray_cluster, rehearsal
from rlaunch.task.ray_cluster import DriverResult
from tests.support.documents import rendered_document
from tests.support.launchers import Launcher

REPO = Path(__file__).resolve().parents[2]
FLASH_ATTN = "ModuleNotFoundError: No module named 'flash_attn'"
DRIVER_OUTPUT = [
    "2026-12-01 | INFO | Infrastructure logs will be written to: /tmp/skyrl-logs/infra.log",
    "2026-12-01 INFO worker.py:1683 -- Using address 127.0.0.1:6379 set in the environment variable RAY_ADDRESS",
    "2026-12-01 INFO worker.py:2024 -- Connected to Ray cluster.",
    "\x1b[36m(skyrl_entrypoint pid=1)\x1b[0m INFO | dataset.py:63 - Total dataset size: 16",
    "ray.exceptions.RayTaskError(ModuleNotFoundError): ray::skyrl_entrypoint() (pid=1, ip=127.0.0.1)",
    '  File "/venv/lib/python3.12/site-packages/skyrl/workers/model_wrapper.py", line 13, in <module>',
    "    from flash_attn.bert_padding import pad_input, unpad_input",
    f"{FLASH_ATTN}",
]


def entry(ranks: list[int | None], gpu: float = 1.0, state: str = "CREATED", created: bool = True) -> dict[str, object]:
    """A `ray_probe.py placement-groups` entry with one bundle per listed node rank."""
    bundles = [{"index": i, "rank": r, "resources": {"GPU": gpu, "CPU": 1.0}} for i, r in enumerate(ranks)]
    return {"id": "ab" * 14, "name": "", "strategy": "PACK", "state": state, "created": created, "bundles": bundles}


def test_a_missing_gpu_only_module_is_found_and_other_import_errors_are_not() -> None:
    where = "skyrl/workers/model_wrapper.py:13: from flash_attn.bert_padding import pad_input, unpad_input"
    assert rehearsal.missing_gpu_module(DRIVER_OUTPUT) == ("flash_attn", FLASH_ATTN, where)
    assert rehearsal.missing_gpu_module(["ImportError: No module named 'vllm.entrypoints'"])[0] == "vllm"  # type: ignore[index]
    assert rehearsal.missing_gpu_module(["ModuleNotFoundError: No module named 'pyarrow'"]) is None
    assert rehearsal.missing_gpu_module(["ValueError: Invalid fields {'async_engine'}"]) is None


def test_the_placement_group_must_hold_logical_gpus_on_every_node() -> None:
    spread = rehearsal.placed_group(entry([1, 1, 0, 0]))
    assert spread is not None and spread.gpus_by_rank == {0: 2.0, 1: 2.0} and spread.bundles == 4
    assert rehearsal.spans_gang(spread, world=2, gpus_per_node=2)
    one_node = rehearsal.placed_group(entry([0, 0]))
    assert one_node is not None and not rehearsal.spans_gang(one_node, world=2, gpus_per_node=2)
    assert not rehearsal.spans_gang(spread, world=2, gpus_per_node=1)  # more than a node declares
    assert rehearsal.placed_group(entry([0, None])) is None  # a bundle never placed
    assert rehearsal.placed_group(entry([0, 1], gpu=0.0)) is None  # a CPU-only group is not the trainer's
    removed = rehearsal.placed_group(entry([1, 1, 0, 0], state="REMOVED"))  # placed, then its driver exited
    assert removed is not None and rehearsal.spans_gang(removed, world=2, gpus_per_node=2)
    assert rehearsal.placed_group(entry([0, 1], state="REMOVED", created=False)) is None  # removed while pending


def test_the_widest_group_is_the_trainers_not_skyrls_peer_access_check() -> None:
    """SkyRL's driver on a CPU head first places one {CPU: 1, GPU: 2} bundle to check GPU peer
    access, then its colocated group; both are in the table when the driver has ended."""
    p2p = rehearsal.placed_group({**entry([1]), "bundles": [{"index": 0, "rank": 1, "resources": {"GPU": 2.0}}]})
    colocated = rehearsal.placed_group(entry([1, 1, 0, 0], state="REMOVED"))
    assert p2p is not None and colocated is not None
    assert rehearsal.widest([p2p, colocated]) == colocated == rehearsal.widest([colocated, p2p])
    assert rehearsal.widest([p2p]) == p2p and rehearsal.widest([]) is None


def test_conclude_reports_the_milestones_and_refuses_other_ends() -> None:
    group = rehearsal.placed_group(entry([1, 1, 0, 0]))
    tail = rehearsal.OutputTail()
    for line in DRIVER_OUTPUT:
        tail(line)
    report = rehearsal.conclude("fsdp-rehearsal", list(tail.lines), group, world=2, gpus_per_node=2, seconds=389.2)
    assert report is not None and report.missing_module == "flash_attn" and report.spans_nodes
    assert [m.reached for m in report.milestones] == [True, True, True, True]
    assert RehearsalReport.from_json(json.loads(json.dumps(report.to_json()))) == report
    text = render(report)
    assert "[ok] data loaded: (skyrl_entrypoint pid=1) INFO | dataset.py:63 - Total dataset size: 16" in text
    assert "rank 0: 2 GPU, rank 1: 2 GPU; spans every node" in text and "'flash_attn'" in text
    assert "at skyrl/workers/model_wrapper.py:13: from flash_attn.bert_padding" in text
    one_node = rehearsal.placed_group(entry([0, 0]))
    assert rehearsal.conclude("p", DRIVER_OUTPUT, one_node, world=2, gpus_per_node=2, seconds=1) is None
    assert rehearsal.conclude("p", DRIVER_OUTPUT[:4], group, world=2, gpus_per_node=2, seconds=1) is None
    assert rehearsal.conclude("p", DRIVER_OUTPUT, None, world=2, gpus_per_node=2, seconds=1) is None


def table(*groups: list[int | None]) -> Callable[[], list[PlacedGroup]]:
    """What `rehearsal.placed_groups` reads from Ray's table (its subprocess needs a Ray cluster)."""
    return lambda: [g for g in (rehearsal.placed_group(entry(ranks)) for ranks in groups) if g is not None]


def rehearsal_doc(tmp_path: Path) -> schema.SkyRLLaunchConfig:
    data = rendered_document(str(tmp_path))
    data["runtime"]["profile"] = "fsdp-rehearsal"
    data["cluster"]["allocation"].update(num_nodes=2, gpus_per_node=2)
    return schema.from_dict(data)


@pytest.mark.parametrize(
    ("groups", "output", "state"),
    [
        ([[1], [1, 1, 0, 0]], DRIVER_OUTPUT, REHEARSED),
        ([[0, 0]], DRIVER_OUTPUT, "failed"),  # the group never reached the second node
        ([], DRIVER_OUTPUT, "failed"),  # no group placed at all
        ([[1, 1, 0, 0]], DRIVER_OUTPUT[:4] + ["ValueError: boom"], "failed"),  # not a GPU-only import
    ],
)
def test_the_head_ends_a_rehearsal_only_at_its_expected_stop(
    tmp_path: Path, groups: list[list[int | None]], output: list[str], state: str
) -> None:
    doc = rehearsal_doc(tmp_path)
    tail = rehearsal.OutputTail()
    for line in output:
        tail(line)
    failed = DriverResult(1, "failed", "the trainer driver exited 1")
    logged: list[str] = []
    end = ray_cluster._rehearsal_end(doc, failed, tail, table(*groups), 2, 12.0, logged.append)
    report = read_report(doc.artifacts.attempts_root, doc.run.attempt_id)
    assert end.state == state
    if state == REHEARSED:
        assert end.exit_code == 0 and report is not None and report.missing_module == "flash_attn"
        assert any("spans every node" in line for line in logged)
    else:
        assert end.exit_code == 1 and report is None and "not a rehearsal's end" in (end.reason or "")


def test_an_unreadable_placement_table_is_a_failure_that_says_so(tmp_path: Path) -> None:
    doc = rehearsal_doc(tmp_path)
    tail = rehearsal.OutputTail()
    for line in DRIVER_OUTPUT:
        tail(line)

    def unreadable() -> list[PlacedGroup]:
        raise RuntimeError("cannot read Ray's placement-group table at 127.0.0.1:1 (exit 1): refused")

    failed = DriverResult(1, "failed", "the trainer driver exited 1")
    end = ray_cluster._rehearsal_end(doc, failed, tail, unreadable, 2, 12.0, lambda line: None)
    assert (end.state, end.exit_code) == ("failed", 1) and "cannot read Ray's placement-group table" in (
        end.reason or ""
    )
    assert read_report(doc.artifacts.attempts_root, doc.run.attempt_id) is None


def test_a_rehearsed_attempt_writes_no_terminal_manifest(tmp_path: Path) -> None:
    doc = rehearsal_doc(tmp_path)
    result = LaunchResult(
        run_id=doc.run.id, attempt_id=doc.run.attempt_id, state=REHEARSED, backend="local",
        runtime_profile="fsdp-rehearsal", runtime_digest="d",
    )  # fmt: skip
    write_manifests(doc, doc.to_dict(), result)
    assert result.ok and not storage.exists(doc.artifacts.terminal_manifest_uri)
    result.state = SUCCEEDED
    write_manifests(doc, doc.to_dict(), result)
    assert storage.exists(doc.artifacts.terminal_manifest_uri)


def test_the_rehearsal_runtime_is_the_fsdp_runtime_on_the_contract_lock() -> None:
    fsdp, rehearse = get_profile("fsdp"), get_profile("fsdp-rehearsal")
    assert rehearse.rehearsal and not fsdp.rehearsal
    assert (rehearse.launcher, rehearse.python, rehearse.strategy) == ("ray-driver", "3.12", fsdp.strategy)
    assert rehearse.adapter_dir == fsdp.adapter_dir and rehearse.base_config_file == fsdp.base_config_file
    contract = REPO / "tests" / "contract" / "skyrl" / "lock.txt"
    assert rehearse.lock_file.read_bytes() == contract.read_bytes()  # the builder reuses the contract venv
    assert venv_key(rehearse) == hashlib.sha256(contract.read_bytes()).hexdigest()[:16]


def test_the_rehearsal_experiment_plans_a_2_by_2_gpu_gang_that_the_preflight_accepts(tmp_path: Path) -> None:
    done = Launcher(tmp_path / "prefix", {}).run("-m", "experiments.rehearsal", "--version", "2026.11.30")
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    out = done.stdout + done.stderr
    assert "rehearsal/rl@2026.11.30" in out and "fsdp-rehearsal" in out
    assert "policy 4, rollout 4 (shared with policy)" in out  # colocated on both nodes' 2 logical GPUs
