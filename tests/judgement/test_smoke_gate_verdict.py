"""The plan's smoke gate and the judgement read the same evidence and say the same of parity: the
document the declared smoke's latest attempt stored, not the smoke as the code declares it now;
before the smoke has run, that it has not (never "parity holds")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.cli.plan_text import step_lines
from rlaunch.launch_config import schema
from rlaunch.runs.run_record import update_attempt
from rlaunch.skyrl import skyrl_step
from rlaunch.skyrl.plan import planning
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
from tests.support import specs as h
from tests.support.refusals import run_refusals

pytestmark = pytest.mark.parity

SMOKE = "checkpoints/gsm8k-grpo-smoke"


def _steps() -> tuple[SkyRLArtifactStep, SkyRLArtifactStep]:
    """A smoke declared with the launch's shape (one node of it), and the 64-GPU launch it rehearses."""
    smoke = skyrl_step(h.spec(name=SMOKE, topo=h.topology(h.seed_plan(), num_nodes=1)), h.iris(), export_hf=True)
    return smoke, skyrl_step(h.spec(), h.iris(), export_hf=True, smoke=smoke)


def _ran(edit: Callable[[dict[str, Any]], None] | None) -> Callable[[SkyRLArtifactStep, str], None]:
    """A succeeded smoke attempt in storage with the document it ran, edited (None: no document at all)."""

    def store(smoke: SkyRLArtifactStep, prefix: str) -> None:
        document = h.launch_of(smoke, prefix).document.to_dict()
        fields: dict[str, Any] = {"state": "succeeded", "runtime_digest": document["runtime"]["source_digest"]}
        if edit is not None:
            edit(document)
            fields["launch_document_uri"] = url = storage.join(prefix, "smoke-ran.yaml")
            storage.write_text_atomic(url, schema.dumps(schema.from_dict(document)))
        update_attempt(document["artifacts"]["output_path"], document["run"]["id"], "smoke-1", fields)

    return store


def _no_export(document: dict[str, Any]) -> None:
    document["run"]["export_hf"] = False


def _judged_and_shown(prefix: str, setup: Callable[[SkyRLArtifactStep, str], None]) -> tuple[list[str], list[str]]:
    """The judgement's smoke words (without "smoke: ") and the plan's smoke gate lines, storage set up by `setup`."""
    smoke, large = _steps()
    setup(smoke, prefix)
    judged = [line.removeprefix("smoke: ") for line in run_refusals(h.launch_of(large, prefix).document, "smoke")]
    lines = step_lines(planning.plan([large], prefix), large)
    return judged, lines[next(i for i, line in enumerate(lines) if line.startswith("smoke gate: ")) :]


def test_a_stored_run_of_another_shape_fails_the_plan_as_it_fails_the_judgement(prefix: str) -> None:
    """The smoke as declared has the launch's shape; the run it stored did not export: that run decides."""
    judged, shown = _judged_and_shown(prefix, _ran(_no_export))
    parity = [w for w in judged if w.startswith("parity with smoke")]
    assert parity == [f"parity with smoke {SMOKE}@{h.DAY}: [export] export_hf: smoke False, large True"]
    assert shown[:2] == [
        f"smoke gate: {SMOKE}@{h.DAY}; parity FAILS with the run it stored, 1 difference(s):",
        "  [export] export_hf: smoke False, large True",
    ]


def test_a_stored_run_of_the_launchs_shape_holds_in_both(prefix: str) -> None:
    judged, shown = _judged_and_shown(prefix, _ran(lambda d: None))
    assert not [w for w in judged if "parity" in w]
    assert (
        shown[0]
        == f"smoke gate: {SMOKE}@{h.DAY}; parity holds with the run it stored (--run also needs its verify-smoke PASS)"
    )


def test_a_smoke_that_has_not_run_is_said_so_in_both_and_parity_is_not_claimed(prefix: str) -> None:
    judged, shown = _judged_and_shown(prefix, lambda smoke, prefix: None)
    not_run = f"the declared smoke {SMOKE}@{h.DAY} has not run; launch it and check it with rlaunch verify-smoke"
    assert judged == [not_run]
    assert shown == [f"smoke gate: {SMOKE}@{h.DAY}; {not_run}", "  as declared, it has this launch's shape"]
    assert "parity holds" not in "\n".join(shown)


def test_a_stored_run_whose_document_cannot_be_read_refuses_and_the_plan_says_why(prefix: str) -> None:
    judged, shown = _judged_and_shown(prefix, _ran(None))
    cannot = (
        f"parity with smoke {SMOKE}@{h.DAY} cannot be judged: no launch document of its latest attempt can be read "
        "(the run record's resolved_config_uri or launch_document_uri, or its artifact record); rerun the smoke"
    )
    assert cannot in judged
    assert shown[0] == f"smoke gate: {SMOKE}@{h.DAY}; {cannot}"
