"""The gates' comparisons in process, word for word: which attempts and digests refuse a version,
a retry, a smoke and a credential, at each edge (the latest attempt, not any; a digest compared
whole, shown by its first 16 characters; an absent digest), and the judgement's calendar-version
findings on a planned launch. The launch-level tests beside this one go through --run and the host.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

from rlaunch.judgement.gates import (
    credentials_problem,
    declared_compatible,
    retry_problem,
    smoke_problem,
    smoke_runtime_problem,
    version_problem,
)
from rlaunch.judgement.judge import (
    NOTE,
    REFUSED,
    Authorisations,
    Evidence,
    SmokeEvidence,
    credentials_present,
    judge,
    large,
    smoke_problems,
    version_name,
)
from rlaunch.judgement.parity import Difference, RunShape, differences
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config import schema

OURS, THEIRS = "a" * 16 + "1" * 48, "a" * 16 + "2" * 48  # equal in the 16 characters a message shows


def test_a_version_is_refused_under_a_digest_differing_past_its_shown_part() -> None:
    attempts = [{"attempt_id": "a1", "runtime_digest": THEIRS}, {"attempt_id": "a2", "runtime_digest": OURS}]
    assert version_problem(attempts, OURS) == (
        f"attempt a1 of this version ran under runtime source digest {THEIRS[:16]}, and this runtime is "
        f"{OURS[:16]}: a version is one runtime. Launch a new version (--version, or --override NAME=VERSION "
        f"for the RL artifact); or, once the old runtime's checkpoints are known to load, declare it with "
        f"SkyRLSpec(compatible_checkpoint_digests=({THEIRS!r},)), or start from one of them at a fresh checkpoint "
        "root: SkyRLSpec(resume_from=ResumeFrom(<checkpoint root>, <step>, <its runtime digest>))"
    )
    assert version_problem(attempts, OURS, pinned=True) is None  # a fresh checkpoint root of this runtime
    assert version_problem(attempts, OURS, (THEIRS,)) is None
    assert version_problem([{"attempt_id": "a1"}, *attempts[1:]], OURS) is None  # no digest recorded
    assert declared_compatible(attempts, OURS, (THEIRS, "other")) == [THEIRS]
    assert declared_compatible(attempts, OURS, ()) == []
    assert declared_compatible(attempts, OURS, (OURS, THEIRS)) == [THEIRS]  # this runtime is never "declared"


@pytest.mark.parametrize(
    ("failure", "why"),
    [
        (None, ""),
        ("", ""),
        ("node lost\nTraceback ...", " (node lost)"),
        ("x" * 200, f" ({'x' * 200})"),  # whole up to 200 characters
        ("x" * 201, f" ({'x' * 200} ...)"),  # one past: cut, and said so
        ("node lost " * 25, f" ({('node lost ' * 20).strip()} ...)"),  # cut at a word, never inside one
    ],
)
def test_a_retry_names_the_latest_attempt_and_the_first_line_of_its_failure(failure: str | None, why: str) -> None:
    attempts = [{"attempt_id": "a0", "state": "succeeded"}, {"attempt_id": "a1", "state": "failed", "failure": failure}]
    assert retry_problem(attempts, authorised=False) == (
        f"the latest attempt a1 failed{why}; relaunching it is a retry: "
        'pass --retry "<reason>" (who, when and why are kept in the run record), or launch a new version'
    )
    assert retry_problem(attempts, authorised=True) is None
    assert retry_problem([*attempts, {"attempt_id": "a2", "state": "succeeded"}], authorised=False) is None


def test_a_large_launch_without_a_smoke_is_told_how_to_declare_one() -> None:
    assert smoke_problem(None) is None
    assert smoke_problem("it allocates 9 nodes") == (
        "this is a large launch (it allocates 9 nodes) and it declares no smoke: declare the smoke that rehearses "
        "it (skyrl_step(..., smoke=<smoke step>): the same model architecture, accelerator, algorithm, "
        "token lengths, runtime, strategy, entrypoint and hand-offs, scaled down: the fields parity compares), "
        'or pass --skip-smoke-gate "<reason>" (kept in the run record)'
    )


def test_a_smoke_under_another_runtime_does_not_rehearse_this_one() -> None:
    assert smoke_runtime_problem({"runtime_digest": OURS}, "s@1", OURS) is None
    assert smoke_runtime_problem({}, "s@1", OURS) is None  # no digest recorded: nothing to compare
    assert smoke_runtime_problem({"runtime_digest": THEIRS}, "s@1", OURS) == (
        f"the declared smoke s@1 ran under runtime source digest {THEIRS[:16]}, not this runtime's {OURS[:16]}: "
        "rerun the smoke on this runtime"
    )


def test_which_credentials_are_set_is_told_without_their_values() -> None:
    env = {"HF_TOKEN": "hf_secret", "WANDB_API_KEY": "", "OTHER": "x"}
    assert credentials_present(["HF_TOKEN", "WANDB_API_KEY", "MISSING"], env) == {
        "HF_TOKEN": "set",
        "WANDB_API_KEY": "",
    }


def test_a_missing_or_empty_credential_is_named_with_the_fix() -> None:
    assert credentials_problem(["A", "B"], {"A": "x", "B": "y"}) is None
    assert credentials_problem(["A", "B", "C"], {"A": "x", "B": ""}) == (
        "the run declares credential(s) it needs that this environment lacks: B (set but empty), C (not set). Set "
        "each in the environment you launch from (it is forwarded into the jobs by name and never recorded), or "
        "drop it from SkyRLSpec(credentials=...)"
    )


def test_the_version_is_after_the_last_at_or_the_run_id_itself() -> None:
    def doc(artifact: str | None, run_id: str) -> Any:
        return SimpleNamespace(run=SimpleNamespace(artifact=artifact, id=run_id))

    assert version_name(doc("org/model@2026.12.01", "r")) == "2026.12.01"
    assert version_name(doc(None, "dev")) == "dev"


def test_parity_compares_every_key_either_run_has_and_the_entrypoint() -> None:
    def shape(entrypoint: str, **geometry: Any) -> RunShape:
        kinds = ("runtime", "model", "accelerator", "strategy", "algorithm", "lengths", "handoffs")
        empty: dict[str, Any] = dict.fromkeys((*kinds, "checkpoint", "export", "memory"), {})
        return RunShape(identity="s", entrypoint=entrypoint, geometry=geometry, **empty)

    found = differences(shape("a", tp=2), shape("b", pp=2))
    assert found == [
        Difference("geometry", "pp", None, 2),
        Difference("geometry", "tp", 2, None),
        Difference("entrypoint", "entrypoint", "a", "b"),
    ]


@pytest.fixture
def planned(document: dict[str, Any]) -> Any:
    def of(version: str, smoke: bool = False) -> PlannedLaunch:
        data = copy.deepcopy(document)
        data["run"]["artifact"] = f"checkpoints/gsm8k-grpo@{version}"
        if smoke:
            data["gates"]["smoke"] = {"identity": "checkpoints/gsm8k-grpo-smoke@2026.12.01", "output_path": "/s"}
        return PlannedLaunch.of(schema.from_dict(data))

    return of


def test_a_large_launch_under_a_mutable_version_is_refused_and_a_small_one_noted(planned: Any) -> None:
    large = planned("dev")
    why = "it allocates 8 nodes (more than the smoke gate's threshold of 1)"
    findings = judge(large, Evidence(), Authorisations(skip_smoke_gate=True))
    calendar = [f for f in findings if f.gate == "calendar version"]
    assert [(f.status, f.message) for f in calendar] == [
        (
            REFUSED,
            f"this is a large launch ({why}) under the mutable version 'dev', which is rebuilt on every run: give it "
            "a calendar version (--version YYYY.MM.DD)",
        )
    ]
    calendar_version = judge(planned("2026.12.01"), Evidence(), Authorisations(skip_smoke_gate=True))
    assert [f.gate for f in calendar_version] == ["smoke"]  # waived, and no calendar-version finding


@pytest.mark.parametrize(
    ("smoke_nodes", "smoke_gpus", "why"),
    [
        (8, 64, None),  # the smoke's own size: not bigger
        (7, 64, "it allocates 8 nodes (more than its smoke s@1: 7)"),
        (8, 63, "it allocates 64 GPUs (more than its smoke s@1: 63)"),
        (0, 0, None),  # a smoke whose size the document does not state is not compared
        (0, 63, "it allocates 64 GPUs (more than its smoke s@1: 63)"),
    ],
)
def test_a_launch_bigger_than_its_smoke_is_large_and_one_its_size_is_not(
    document: dict[str, Any], smoke_nodes: int, smoke_gpus: int, why: str | None
) -> None:
    data = copy.deepcopy(document)
    data["gates"] |= {"smoke_gate_nodes": 8, "smoke_gate_gpus": 64}  # the thresholds say small
    data["gates"]["smoke"] = {"identity": "s@1", "output_path": "/s", "num_nodes": smoke_nodes, "gpus": smoke_gpus}
    assert large(PlannedLaunch.of(schema.from_dict(data))) == why
    data["gates"]["is_smoke"] = True
    assert large(PlannedLaunch.of(schema.from_dict(data))) is None  # a smoke is never large


def test_a_declared_smoke_of_negative_size_is_refused_naming_the_field(document: dict[str, Any]) -> None:
    data = copy.deepcopy(document)
    data["gates"]["smoke"] = {"identity": "s@1", "output_path": "/s", "gpus": -1}
    with pytest.raises(Exception, match=r"gates\.smoke\.gpus=-1 cannot be negative"):
        schema.from_dict(data)


def test_every_gate_speaks_at_once(planned: Any) -> None:
    """A version, retry and smoke problem together: none hides another."""
    attempts = ({"attempt_id": "a1", "state": "failed", "runtime_digest": THEIRS},)
    launch = planned("2026.12.01", smoke=True)
    ran = ({"runtime_digest": THEIRS},)
    smoke = SmokeEvidence("checkpoints/gsm8k-grpo-smoke@2026.12.01", ran, launch.document)  # the launch's shape
    findings = judge(launch, Evidence(attempts=attempts, smoke=smoke), Authorisations())
    assert [f.gate for f in findings] == ["version", "retry", "smoke"]
    failed = SmokeEvidence(smoke.identity, ran, launch.document, failed=("joined: 1 of 8",))
    assert smoke_problems(launch, failed) == [
        f"the declared smoke {smoke.identity} ran under runtime source digest {THEIRS[:16]}, not this runtime's "
        f"{launch.document.runtime.source_digest[:16]}: rerun the smoke on this runtime",
        f"smoke {smoke.identity} does not pass verify-smoke: joined: 1 of 8",
    ]


def test_a_small_launch_under_a_mutable_version_is_a_note(planned: Any, document: dict[str, Any]) -> None:
    data = copy.deepcopy(document)
    data["run"]["artifact"] = "checkpoints/gsm8k-grpo@dev"
    data["gates"]["smoke_gate_nodes"], data["gates"]["smoke_gate_gpus"] = 100, 1000
    found = judge(PlannedLaunch.of(schema.from_dict(data)), Evidence(), Authorisations(waivers={"large": "a test"}))
    assert [(f.gate, f.status) for f in found] == [("large", "waived"), ("calendar version", NOTE)]
    note = found[1]
    assert (note.gate, note.status, note.message) == (
        "calendar version",
        NOTE,
        "the mutable version 'dev' is rebuilt on every run: fine for a smoke or a dev run; a real experiment uses a "
        "calendar version (--version YYYY.MM.DD)",
    )
