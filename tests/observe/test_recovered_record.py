"""A damaged run record, rebuilt in process from what else the run left (`observe.recover`), and how
`resolve.at_path` shows it: the terminal manifest, the attempt manifests and the launch documents
handed to the host, laid out by hand under a temporary prefix (no launch: the launch tier's
tests/observe/test_damaged_record.py and tests/launch/test_kill9.py damage real runs).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlaunch.launch_config import schema
from rlaunch.observe.recover import recovered_record
from rlaunch.observe.resolve import RunNotFoundError, at_path
from rlaunch.observe.run_list import list_runs

ARTIFACT = "checkpoints/gsm8k-grpo@2026.11.30"
FINAL, EARLY, BARE = "ccc333", "aaa111", "bbb222"


def at(hour: int) -> str:
    return f"2026-12-04T{hour:02d}:00:00Z"


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def result(attempt_id: str, **fields: Any) -> dict[str, Any]:
    """The host's LaunchResult as an attempt or terminal manifest holds it."""
    return {
        "attempt_id": attempt_id, "state": "failed", "coordinator_job_id": f"co-{attempt_id}",
        "child_job_id": f"ch-{attempt_id}", "backend": "local", "runtime_profile": "fsdp", "runtime_digest": "d" * 64,
        "failure": None, "finished_at": "t9", "resolved_config_uri": f"/r/{attempt_id}.yaml", "started_at": at(5),
        "run_id": "from-the-result", **fields,
    }  # fmt: skip


@pytest.fixture
def run(document: dict[str, Any]) -> dict[str, Any]:
    """A run whose record is damaged: the terminal manifest's attempt, one earlier attempt with a
    manifest and a handed-over document, and one with only its directory (no manifest). The
    terminal manifest's document places its jobs elsewhere than the handed-over one."""
    document["cluster"]["placement"] = {"root": "/jobs/here"}
    final_document = copy.deepcopy(document)
    final_document["cluster"]["placement"] = {"root": "/jobs/final"}
    doc = schema.from_dict(document)
    out, attempts = Path(doc.artifacts.output_path), Path(doc.artifacts.attempts_root)
    write(out / "run_record.json", "{")
    write(
        out / "terminal.json", {"config": final_document, "result": result(FINAL, state="succeeded", started_at=at(0))}
    )
    write(attempts / f"{EARLY}.json", {"result": result(EARLY, failure="node lost", started_at=at(1))})
    write(attempts / EARLY / "launch.yaml", yaml.safe_dump(document))
    (attempts / BARE).mkdir()
    write(attempts / f"{FINAL}.json", {"result": result(FINAL, state="failed", started_at=at(7))})
    write(attempts / "not an attempt.json", {"result": result("x")})
    return {"doc": doc, "data": document, "out": out, "attempts": attempts}


def test_every_attempt_is_rebuilt_oldest_first_with_the_terminal_manifests_last(run: dict[str, Any]) -> None:
    prefix = str(Path(run["doc"].artifacts.output_path).parents[2])
    record = recovered_record(str(run["out"]), ARTIFACT, prefix)
    assert record is not None and record["run_id"] == run["doc"].run.id and record["recovered"] is True
    assert [a["attempt_id"] for a in record["attempts"]] == [BARE, EARLY, FINAL]
    bare, early, final = record["attempts"]
    # the first document's placement and backend (iris), unless the manifest's result says (local)
    where = {"artifact": ARTIFACT, "placement": {"root": "/jobs/final"}, "backend": "iris"}
    assert run["doc"].cluster.backend == "iris"
    assert bare == {"attempt_id": BARE, "state": "unknown", **where, "submitted_at": None}
    expected = {k: v for k, v in result(EARLY, failure="node lost").items() if k not in ("started_at", "run_id")}
    handed = str(run["attempts"] / EARLY / "launch.yaml")
    assert early == {**where, **expected, "submitted_at": at(1), "launch_document_uri": handed}
    # the terminal manifest's word on its attempt, not the attempt manifest's (state failed, t7)
    assert (final["state"], final["submitted_at"], final["backend"]) == ("succeeded", at(0), "local")
    assert "failure" not in final  # None in the result: left out, not recorded as None
    assert "launch_document_uri" not in final and final["placement"] == {"root": "/jobs/final"}
    assert final["artifact"] == ARTIFACT


def test_a_sweeps_variant_keeps_its_membership_from_its_documents(run: dict[str, Any]) -> None:
    record = recovered_record(str(run["out"]), ARTIFACT, None)
    assert record is not None and "sweep" not in record  # a run of no sweep: none invented
    member = {"name": f"{ARTIFACT}~sweep-0badcafe", "variant": "lr-1e-3", "settings": {"a.lr": 0.001}}
    terminal = json.loads((run["out"] / "terminal.json").read_text())
    terminal["config"]["run"]["sweep"] = member
    write(run["out"] / "terminal.json", terminal)
    record = recovered_record(str(run["out"]), ARTIFACT, None)
    assert record is not None and record["sweep"] == member
    prefix = str(Path(run["doc"].artifacts.output_path).parents[2])
    damaged: list[Any] = []
    rows = list_runs(prefix, damaged=damaged, sweep=member["name"])  # `rlaunch runs --sweep`, `status <sweep>`
    assert [(r["state"], r["sweep"]) for r in rows] == [("damaged", member)] and len(damaged) == 1


def test_the_terminal_manifests_document_alone_says_where_the_attempts_are(run: dict[str, Any]) -> None:
    (run["attempts"] / EARLY / "launch.yaml").unlink()
    record = recovered_record(str(run["out"]), ARTIFACT, None)
    assert record is not None and record["run_id"] == run["doc"].run.id
    assert [a["attempt_id"] for a in record["attempts"]] == [BARE, EARLY, FINAL]


def test_without_the_terminal_manifest_the_artifact_records_document_names_the_attempts(
    run: dict[str, Any],
) -> None:
    (run["out"] / "terminal.json").unlink()
    write(run["out"] / ".artifact.json", {"config": {"launch_document": run["data"]}})
    record = recovered_record(str(run["out"]), ARTIFACT, None)
    assert record is not None and record["run_id"] == run["doc"].run.id
    assert [(a["attempt_id"], a["state"]) for a in record["attempts"]] == [
        (BARE, "unknown"),
        (EARLY, "failed"),
        (FINAL, "failed"),
    ]


def test_only_the_documents_handed_over_under_a_ttl_root_of_this_artifact_are_read(run: dict[str, Any]) -> None:
    (run["out"] / "terminal.json").unlink()
    prefix = Path(run["doc"].artifacts.output_path).parents[2]
    assert recovered_record(str(run["out"]), ARTIFACT, None) is None  # no document: nothing says where
    assert recovered_record(str(run["out"]), "checkpoints/gsm8k-grpo", str(prefix)) is None  # no version
    assert recovered_record(str(run["out"]), "@2026.11.30", str(prefix)) is None  # no name
    record = recovered_record(str(run["out"]), ARTIFACT, str(prefix))
    assert record is not None and [a["attempt_id"] for a in record["attempts"]] == [BARE, EARLY, FINAL]
    # the same document under a directory that is not a ttl= root is not this run's
    handed = run["attempts"] / EARLY / "launch.yaml"
    elsewhere = prefix / ".tmp" / "kept=14d" / "checkpoints" / "gsm8k-grpo" / "2026.11.30" / "attempts" / EARLY
    elsewhere.mkdir(parents=True)
    handed.rename(elsewhere / "launch.yaml")
    assert recovered_record(str(run["out"]), ARTIFACT, str(prefix)) is None


def test_a_handed_over_document_that_does_not_parse_names_nothing(run: dict[str, Any]) -> None:
    (run["out"] / "terminal.json").unlink()
    prefix = Path(run["doc"].artifacts.output_path).parents[2]
    (run["attempts"] / EARLY / "launch.yaml").write_text("run: [")
    assert recovered_record(str(run["out"]), ARTIFACT, str(prefix)) is None


def test_the_terminal_manifest_alone_gives_its_attempt_and_run_id(tmp_path: Path) -> None:
    out = tmp_path / "out"
    final = result(FINAL, failure=None, coordinator_job_id=None)
    write(out / "terminal.json", {"result": final})
    record = recovered_record(str(out), None, None)
    assert record is not None and record["run_id"] == "from-the-result"
    expected = {k: v for k, v in final.items() if v is not None and k not in ("started_at", "run_id")}
    assert record["attempts"] == [{"artifact": None, **expected, "submitted_at": at(5)}]


def test_nothing_that_names_an_attempt_rebuilds_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write(out / "terminal.json", {"result": {"state": "succeeded"}})
    assert recovered_record(str(out), None, None) is None
    assert recovered_record(str(tmp_path / "absent"), ARTIFACT, str(tmp_path)) is None


def test_at_path_shows_the_damage_beside_the_rebuilt_record(run: dict[str, Any]) -> None:
    prefix = str(Path(run["doc"].artifacts.output_path).parents[2])
    write(run["out"] / ".status.json", {"identity": ARTIFACT})
    ref = at_path(str(run["out"]))  # the prefix is told from the artifact's identity
    assert ref.damage is not None and "run_record.json" in ref.damage
    assert (ref.prefix, ref.artifact, ref.output_path) == (prefix, ARTIFACT, str(run["out"]))
    assert ref.record == recovered_record(str(run["out"]), ARTIFACT, prefix)
    assert ref.attempt() is not None and ref.attempt()["attempt_id"] == FINAL  # type: ignore[index]
    assert at_path(str(run["out"]), attempt_id=EARLY).attempt()["failure"] == "node lost"  # type: ignore[index]
    with pytest.raises(RunNotFoundError) as refused:
        at_path(str(run["out"]), attempt_id="zzz999")
    assert str(refused.value) == f"{ARTIFACT} has no attempt 'zzz999'; its attempts: {[BARE, EARLY, FINAL]}"
    (run["out"] / "terminal.json").unlink()  # only the prefix's handed-over documents say where
    assert [a["attempt_id"] for a in at_path(str(run["out"])).record["attempts"]] == [BARE, EARLY, FINAL]  # type: ignore[index]


def test_at_path_with_a_damaged_record_and_nothing_else_is_damage_without_a_record(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write(out / "run_record.json", "{")
    ref = at_path(str(out), prefix="given", job_id="j1")
    assert (ref.record, ref.prefix, ref.artifact, ref.job_id) == (None, "given", None, "j1")
    assert ref.damage is not None and str(out / "run_record.json") in ref.damage
    with pytest.raises(RunNotFoundError) as refused:
        at_path(str(out), attempt_id="a1")
    assert str(refused.value) == f"{out} has no attempt 'a1'; its attempts: none yet"


@pytest.mark.parametrize("marker", [None, ".artifact.json", ".status.json"])
def test_at_path_without_a_record_needs_an_artifact_record(tmp_path: Path, marker: str | None) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if marker is None:
        with pytest.raises(RunNotFoundError) as refused:
            at_path(str(out))
        assert str(refused.value) == f"no RL run at {out}: it holds no run_record.json and no artifact record"
        return
    write(out / marker, {})
    ref = at_path(str(out))
    assert (ref.record, ref.damage, ref.attempt()) == (None, None, None)


def test_an_intact_record_is_read_as_it_is_not_rebuilt(run: dict[str, Any]) -> None:
    record = {"run_id": "r", "attempts": [{"attempt_id": EARLY, "artifact": ARTIFACT, "state": "running"}]}
    write(run["out"] / "run_record.json", record)
    ref = at_path(str(run["out"]), attempt_id=EARLY)
    assert (ref.record, ref.damage, ref.artifact) == (copy.deepcopy(record), None, ARTIFACT)
