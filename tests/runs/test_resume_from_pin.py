"""Resume at a fresh root: a run may start from an explicit checkpoint (`ResumeFrom`: another
version's root, the step, the runtime digest it was written under). The pin is checked like the
run's own checkpoints, by the plan, `--run`, the host and both adapters: exactly the pinned step
(not a later one beside it), and only when its recorded digest is the pinned one. The run keeps
its own checkpoints under a root of its runtime, so the version gate lets it across a repin."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config import schema
from rlaunch.launch_config.typed import DocumentError
from rlaunch.runs import layout
from rlaunch.runs.resume import pinned_checkpoint_root, pinned_problem
from rlaunch.runs.run_record import update_attempt
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import ResumeFrom
from rlaunch.skyrl.views.gate_checks import plan_rows
from rlaunch.skyrl.views.plan_view import _resume_line
from rlaunch.skyrl.views.resume_check import resume_refusal
from tests.support.host_launches import launch_edited
from tests.support.refusals import run_refusals
from tests.support.specs import planned_view, spec

for _name in ("trl-cpu", "fsdp"):
    sys.path.insert(0, str(get_profile(_name).adapter_dir))

from rlaunch_skyrl import checkpoints as skyrl  # noqa: E402
from rlaunch_trl_cpu import checkpoints as trl  # noqa: E402

OLD, OTHER = "a" * 64, "b" * 64


def checkpoint(root: str, step: int, digest: str = OLD) -> None:
    """A finished checkpoint as both runtimes leave it (rlaunch's meta, then the latest marker)."""
    meta = {"global_step": step, "runtime_digest": digest, "run_fingerprint": "f" * 64}
    storage.write_json_atomic(storage.join(layout.checkpoint_dir(root, step), layout.CHECKPOINT_META), meta)
    storage.write_text_atomic(storage.join(root, layout.LATEST_MARKER), f"{step}\n")


def old_root(tmp_path: Path) -> str:
    """Another version's checkpoint root: steps 2 and 4 under the old runtime, `latest` at 4."""
    root = str(tmp_path / "old" / "checkpoints")
    checkpoint(root, 2)
    checkpoint(root, 4)
    return root


def test_the_pinned_step_is_resumed_not_a_later_one(tmp_path: Path) -> None:
    root = old_root(tmp_path)
    assert pinned_problem(root, 2, OLD) is None  # step 4 is latest there; the pin says 2
    assert skyrl.pinned_resume_path(root, 2, OLD) == f"{root}/global_step_2"
    assert trl.pinned(root, 2, OLD).step_dir(2) == f"{root}/global_step_2"


def test_a_digest_mismatch_in_the_pinned_root_is_refused_everywhere(tmp_path: Path) -> None:
    root = old_root(tmp_path)
    problem = pinned_problem(root, 2, OTHER)
    assert problem is not None and f"written by {OLD}" in problem and f"runtime digest {OTHER}" in problem
    with pytest.raises(skyrl.ForeignCheckpointError, match=f"runtime digest {OLD}, not the pinned {OTHER}"):
        skyrl.pinned_resume_path(root, 2, OTHER)
    with pytest.raises(trl.ResumeRefused, match=f"runtime digest {OLD}, not the pinned {OTHER}"):
        trl.pinned(root, 2, OTHER)


def test_a_pinned_step_that_is_not_there_is_refused(tmp_path: Path) -> None:
    root = old_root(tmp_path)
    problem = pinned_problem(root, 3, OLD)
    assert problem is not None and "global_step_3 holds no finished checkpoint" in problem
    with pytest.raises(skyrl.ForeignCheckpointError, match="global_step_3 is missing"):
        skyrl.pinned_resume_path(root, 3, OLD)
    with pytest.raises(trl.ResumeRefused, match="global_step_3"):
        trl.pinned(root, 3, OLD)


def test_the_skyrl_adapter_resumes_the_pin_only_while_its_own_root_is_empty(tmp_path: Path) -> None:
    root, own = old_root(tmp_path), str(tmp_path / "own")
    document = {"skyrl": {"trainer": {"ckpt_path": own, "resume_mode": "latest", "resume_path": None}}}
    pin = json.dumps({"checkpoint_root": root, "step": 2, "runtime_digest": OLD})
    start = skyrl.start_from_pin(document, pin)["skyrl"]["trainer"]
    assert (start["resume_mode"], start["resume_path"]) == ("from_path", f"{root}/global_step_2")
    assert document["skyrl"]["trainer"]["resume_mode"] == "latest"  # the caller's document is left alone
    Path(own).mkdir()
    (Path(own) / skyrl.SKYRL_LATEST).write_text("3")  # its own checkpoint since: resumed as usual
    assert skyrl.start_from_pin(document, pin)["skyrl"]["trainer"]["resume_mode"] == "latest"
    assert skyrl.start_from_pin(document, "")["skyrl"]["trainer"] == document["skyrl"]["trainer"]


def test_a_pin_is_validated_at_construction_and_in_a_document(prefix: str) -> None:
    with pytest.raises(ValueError, match=r"SkyRLSpec.resume_from.runtime_digest='abc' must be the full 64-hex"):
        spec(resume_from=ResumeFrom("/data/old/checkpoints", 2, "abc"))
    with pytest.raises(ValueError, match=r"SkyRLSpec.resume_from.step=0 must be"):
        spec(resume_from=ResumeFrom("/data/old/checkpoints", 0, OLD))
    with pytest.raises(ValueError, match="needs trainer.resume_mode: latest"):
        spec(resume_from=ResumeFrom("/data/old/checkpoints", 2, OLD), tree={"trainer": {"resume_mode": "none"}})
    document, _ = planned_view(spec(resume_from=ResumeFrom("/data/old/checkpoints", 2, OLD)), prefix=prefix)
    edited = document.to_dict()
    edited["runtime"]["resume_from"]["step"] = -1
    with pytest.raises(DocumentError, match=r"runtime.resume_from.step=-1"):
        schema.from_dict(edited)


def _pinned_view(tmp_path: Path, prefix: str, digest: str = OLD) -> tuple[Any, Any]:
    return planned_view(spec(resume_from=ResumeFrom(old_root(tmp_path), 2, digest)), prefix=prefix)


def test_the_plan_shows_the_pin_and_run_accepts_a_repin(tmp_path: Path, prefix: str) -> None:
    document, facts = _pinned_view(tmp_path, prefix)
    digest = document.runtime.source_digest
    assert document.artifacts.checkpoint_root == pinned_checkpoint_root(
        planned_view(spec(), prefix=prefix)[0].artifacts.checkpoint_root, digest
    )  # its own checkpoints: a root of this runtime
    root = document.runtime.resume_from.checkpoint_root
    assert _resume_line(PlannedLaunch.of(document), facts).startswith(
        f"would resume from {root} step 2, digest {OLD[:16]} (pinned)"
    )
    update_attempt(document.artifacts.output_path, document.run.id, "before-repin", {"runtime_digest": OTHER})
    document, facts = _pinned_view(tmp_path, prefix)
    assert run_refusals(document, "version", "retry") == []  # the version gate accepts the repin
    version = dict(plan_rows(document, facts))["version"]
    assert version.startswith(f"reused across a repin: earlier attempts ran under runtime digest {OTHER[:16]}")
    plain, plain_facts = planned_view(spec(), prefix=prefix)  # the same version without a pin: refused
    assert any("a version is one runtime" in p for p in run_refusals(plain, "version"))


def test_the_plan_and_run_refuse_a_pin_whose_digest_differs(tmp_path: Path, prefix: str) -> None:
    document, facts = _pinned_view(tmp_path, prefix, digest=OTHER)
    refused = resume_refusal(PlannedLaunch.of(document), facts)
    assert refused is not None and f"written by {OLD}" in refused
    assert _resume_line(PlannedLaunch.of(document), facts) == f"REFUSED: {refused}"


@pytest.mark.usefixtures("signal_handlers")
def test_the_host_refuses_a_pin_whose_digest_differs_and_accepts_the_right_one(prefix: str) -> None:
    root = str(Path(prefix).parent / "old" / "checkpoints")
    checkpoint(root, 2)
    checkpoint(root, 4)

    def pin(digest: str) -> Any:
        def edit(doc: dict[str, Any]) -> None:
            doc["runtime"]["resume_from"] = {"checkpoint_root": root, "step": 2, "runtime_digest": digest}
            doc["skyrl"]["trainer"]["resume_mode"] = "latest"
            update_attempt(doc["artifacts"]["output_path"], doc["run"]["id"], "old", {"runtime_digest": OTHER})

        return edit

    code, result, _ = launch_edited(prefix, pin(OTHER))
    assert code == 2 and f"was written by {OLD}" in result["failure"], result

    def ignored(doc: dict[str, Any]) -> None:
        pin(OLD)(doc)
        doc["skyrl"]["trainer"]["resume_mode"] = "none"

    code, result, _ = launch_edited(prefix, ignored)
    assert code == 2 and "trainer.resume_mode is not latest" in result["failure"], result
    code, result, _ = launch_edited(prefix, pin(OLD))  # the right pin: accepted across the repin
    assert code == 0 and result["state"] == "prepared", result


def test_a_pin_is_part_of_the_fingerprint() -> None:
    from rlaunch.skyrl import skyrl_step
    from tests.support.specs import iris

    plain = skyrl_step(spec(), iris()).fingerprint
    pinned = skyrl_step(spec(resume_from=ResumeFrom("/data/old/checkpoints", 2, OLD)), iris()).fingerprint
    assert pinned != plain  # it decides the starting weights


def test_a_pinned_runs_own_root_is_the_root_beside_it_named_by_16_digest_characters() -> None:
    digest = "0123456789abcdef" + "9" * 48
    assert pinned_checkpoint_root("/data/ckpt/", digest) == "/data/ckpt-0123456789abcdef"
    assert pinned_checkpoint_root("gs://b/runX", digest) == "gs://b/runX-0123456789abcdef"  # only '/' is trimmed


def test_a_pinned_checkpoint_without_a_recorded_digest_is_refused_word_for_word(tmp_path: Path) -> None:
    root = str(tmp_path / "old")
    path = layout.checkpoint_dir(root, 2)
    storage.write_json_atomic(storage.join(path, layout.CHECKPOINT_META), {"global_step": 2})
    assert pinned_problem(root, 2, OLD) == (
        f"resume_from pins {path} as written by runtime digest {OLD}, but it was written by an unknown runtime; "
        f"pin the digest its {layout.CHECKPOINT_META} records once its compatibility with this runtime is "
        "established, or start over"
    )
    with pytest.raises(trl.ResumeRefused) as refused:
        trl.pinned(root, 2, OLD)
    assert str(refused.value) == (
        f"refusing to resume the pinned checkpoint {path}: it was written by runtime digest unknown, not the pinned {OLD}"
    )
    with pytest.raises(skyrl.ForeignCheckpointError) as foreign:
        skyrl.pinned_resume_path(root, 2, OLD)
    assert (
        str(foreign.value)
        == f"the pinned checkpoint {path} was written by runtime digest unknown, not the pinned {OLD}"
    )


def test_skyrl_resumes_the_pin_by_its_step_directory_whatever_the_roots_trailing_slash(tmp_path: Path) -> None:
    root = str(tmp_path / "oldX")  # only '/' is trimmed: a root ending in X keeps it
    checkpoint(root, 2)
    assert skyrl.pinned_resume_path(f"{root}/", 2, OLD) == f"{root}/global_step_2"


def test_skyrl_starts_from_the_pin_only_when_the_run_resumes_at_all(tmp_path: Path) -> None:
    pin = json.dumps({"checkpoint_root": old_root(tmp_path), "step": 2, "runtime_digest": OLD})
    fresh = {"skyrl": {"trainer": {"ckpt_path": str(tmp_path / "own"), "resume_mode": "none", "resume_path": None}}}
    assert skyrl.start_from_pin(fresh, pin) == fresh
