"""After rendering, the launch document is the truth: planning reads storage once per RL step, and
the plan's views (plan view, readiness, parity, the resume check, the gates' rows) read only the
document `--run` would launch and those stored facts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from experiments import rl_plan_example
from rlaunch import storage
from rlaunch.artifacts import records
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.cli.plan_text import step_lines
from rlaunch.judgement.judge import SmokeEvidence
from rlaunch.judgement.parity import differences, shape_of_document
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config import schema
from rlaunch.skyrl import skyrl_step
from rlaunch.skyrl.plan import planning, stored_facts
from rlaunch.skyrl.views.plan_view import describe_step
from rlaunch.skyrl.views.readiness import DEFAULT, MISSING, readiness
from tests.support.compositions import counted_compositions
from tests.support.specs import DAY, iris, launch_of, planned_view, spec

DIRECTORY = "rlaunch.artifacts.artifact.Directory"


def _example(prefix: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv(storage.PREFIX_ENV, prefix)
    with build_context(BuildContext(VersionCodex(DAY))):
        return rl_plan_example.rl_step(broken=False)


def test_planning_gathers_each_rl_steps_stored_facts_once(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    step = _example(prefix, monkeypatch)
    gathered: list[str] = []
    real = planning.gather

    def counting(model: Any, *args: Any, **kwargs: Any) -> Any:
        gathered.append(model.step.identity)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(planning, "gather", counting)
    planned = planning.plan([step], prefix)  # the step and the smoke it declares
    for each in (step, step.smoke):
        assert step_lines(planned, each) and planned.numbers(each)["memory"]["rows"]
        assert planned.launch(each).document.run.artifact == each.identity
    assert len(gathered) == 2, gathered  # one per RL step, whatever reads it


@pytest.mark.parametrize("how", [("--plan-format", "text"), ("--plan-format", "json"), ("--run",)])
def test_a_dry_run_composes_each_rl_steps_launch_once(
    prefix: str, monkeypatch: pytest.MonkeyPatch, how: tuple[str, ...]
) -> None:
    """The whole dry run (the preflight, the plan view, readiness, the memory table, parity and the
    judgement), and `--run` up to its refusal, read one `PlannedLaunch` per RL step: one
    composition, one geometry."""
    from click.testing import CliRunner

    monkeypatch.setenv(storage.PREFIX_ENV, prefix)
    composed, geometries = counted_compositions(monkeypatch)
    done = CliRunner().invoke(rl_plan_example.main, ["--version", DAY, "--stage", "evaluation", *how])
    if how == ("--run",):  # its declared smoke has not run: refused by the judgement, after every reading
        assert done.exit_code == 2 and "smoke: the declared smoke" in done.stderr, done.output
    else:
        assert done.exit_code == 0, done.output
        assert "as declared, it has this launch's shape" in done.stdout and "judgement" in done.stdout
    assert composed == ["fsdp", "fsdp"], composed  # the RL step and its declared smoke, once each
    assert len(geometries) == 2, geometries


def test_the_views_read_no_storage(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    step = _example(prefix, monkeypatch)
    planned = planning.plan([step], prefix)
    launch, facts, smoke = planned.launch(step), planned.facts(step), planned.launch(step.smoke)
    smoke_run = SmokeEvidence(step.smoke.identity)  # what storage holds of it, read by the caller: no run
    expected = describe_step(launch, facts, smoke, smoke_run)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a view read storage: {args[:1]}")

    with monkeypatch.context() as guard:
        for name in ("_route", "filesystem", "exists", "read_json", "read_text", "list_names"):
            guard.setattr(storage, name, refuse)
        guard.setattr(records, "read_record", refuse)
        assert describe_step(launch, facts, smoke, smoke_run) == expected
    assert "  as declared, it has this launch's shape" in expected


def test_the_document_carries_what_the_views_need(prefix: str) -> None:
    document, _ = planned_view(spec(), iris(), prefix=prefix)
    cluster = document.cluster
    assert cluster.execution == "IrisSkyRLExecution"
    assert cluster.coordinator is not None and cluster.coordinator.timeout_hours == 48.0
    assert set(cluster.defaults) == {"coordinator_cpu", "coordinator_memory", "coordinator_disk"}
    assert document.artifacts.temporary_storage_ttl_days == 14
    assert document.inputs.model.artifact_type == "rlaunch.sources.inputs.HfModel"
    assert [d.artifact_type for d in document.inputs.train_data] == [DIRECTORY]
    assert document.inputs.graph == (f"{DIRECTORY}()", "rlaunch.sources.inputs.HfModel()")


def test_what_identity_already_decides_stays_out_of_the_fingerprint(prefix: str) -> None:
    """Types, graph and TTL follow from the input identities and the retention: adding them to the
    document left every artifact fingerprint as it was."""
    step = skyrl_step(spec(), iris(), export_hf=True)
    fingerprinted = step.fingerprint_config["launch_document"]
    assert "graph" not in fingerprinted["inputs"] and "artifact_type" not in fingerprinted["inputs"]["model"]
    assert "temporary_storage_ttl_days" not in fingerprinted["artifacts"]
    assert launch_of(step, prefix).document.inputs.graph  # the planned and launched documents carry them


def test_parity_compares_two_documents_even_hand_edited_ones(prefix: str) -> None:
    smoke, _ = planned_view(spec(), prefix=prefix)
    large = schema.loads(schema.dumps(planned_view(spec(), prefix=prefix)[0]))  # through YAML, as stored
    assert differences(shape_of_document(smoke), shape_of_document(large)) == []
    edited = schema.dumps(large).replace(f"artifact_type: {DIRECTORY}", "artifact_type: my.Parquet")
    found = differences(shape_of_document(smoke), shape_of_document(schema.loads(edited)))
    assert {(d.kind, d.field) for d in found} == {("handoffs", "train data"), ("handoffs", "validation data")}
    edited = schema.dumps(large).replace("artifact_type: rlaunch.sources.inputs.HfModel", "artifact_type: my.Gguf")
    found = differences(shape_of_document(smoke), shape_of_document(schema.loads(edited)))
    assert [(d.kind, d.field, d.large) for d in found] == [("handoffs", "model", "my.Gguf")]


def test_readiness_of_a_document_without_an_experiment_names_what_it_lacks(prefix: str) -> None:
    document, facts = planned_view(spec(), iris(), prefix=prefix)
    items = {i.label: i for i in readiness(PlannedLaunch.of(document), facts)}
    assert items["coordinator"].state == DEFAULT
    bare = schema.from_dict(
        {
            **document.to_dict(),
            "cluster": {**document.to_dict()["cluster"], "coordinator": None, "execution": None, "defaults": []},
        }
    )
    items = {i.label: i for i in readiness(PlannedLaunch.of(bare), stored_facts.StoredFacts())}
    assert items["coordinator"].state == MISSING and "no cluster.coordinator" in items["coordinator"].source
    assert items["policy hosts"].source == "the launch document(cpu, memory, disk)"


def test_run_reads_the_record_again_after_closing_a_dead_attempt(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--run` closes attempts whose jobs are gone before its gates run: they read the closed state."""
    from rlaunch.cli import rl_options
    from rlaunch.control import finalise
    from rlaunch.judgement.judge import Authorisations, refusals
    from rlaunch.runs.run_record import close_attempt, update_attempt
    from rlaunch.skyrl.plan.launch_document import live_run_paths
    from rlaunch.submission.submission import judged_launch

    step = skyrl_step(spec(), iris(), export_hf=True)
    output = live_run_paths(step.spec, prefix).output_path
    update_attempt(output, "run", "a1", {"state": "running", "runtime_digest": step.spec.runtime.source_digest})
    assert [a["state"] for a in planning.planned_run(step, prefix).facts.attempts] == ["running"]

    def jobs_gone(output_path: str, where: str | None, by: str) -> list[str]:  # what finalise does, minus the backend
        close_attempt(output_path, "a1", {"state": "failed", "failure": "its jobs were gone", "closed_by": by})
        return ["a1"]

    monkeypatch.setattr(finalise, "finalise_open_attempts", jobs_gone)
    assert rl_options._finalise_dead_attempts([step], prefix)  # storage changed: --run plans again
    replanned = planning.plan([step], prefix)
    assert [a["state"] for a in replanned.facts(step).attempts] == ["failed"]
    found = refusals(judged_launch(replanned.launch(step), Authorisations()))
    retry = [p for p in found if p.startswith("retry: ")]
    assert len(retry) == 1 and "the latest attempt a1 failed" in retry[0] and "--retry" in retry[0]


def test_a_model_trained_by_an_rl_step_is_read_from_its_export(prefix: str) -> None:
    """What the model's record says reaches the document: its export, its facts, its revision."""
    from rlaunch.skyrl import ArtifactHfModel

    trained = spec()
    export = f"{prefix}/checkpoints/base/{DAY}/exports/global_step_4/policy"
    result = {"hf_model_uri": export, "num_attention_heads": 16, "context_length": 8192, "revision": "a" * 40}
    records.write_record(trained.model.step.path(prefix), {"result": result})
    document, facts = planned_view(trained, prefix=prefix)
    model = document.inputs.model
    assert (model.uri, model.num_attention_heads, model.context_length, model.revision) == (export, 16, 8192, "a" * 40)
    assert facts.model.recorded_revision == "a" * 40
    subdir = ArtifactHfModel(
        trained.model.step, tokenizer_revision=trained.model.tokenizer_revision, relative_path="hf"
    )
    document, _ = planned_view(dataclasses.replace(trained, model=subdir), prefix=prefix)
    assert document.inputs.model.uri == f"{trained.model.step.path(prefix)}/hf"  # a named directory, not the export
