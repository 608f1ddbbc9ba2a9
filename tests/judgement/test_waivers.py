"""Waivers are recorded, never silent: a launch declared small (a smoke, or thresholds raised) that
the default thresholds call large, and a large launch whose memory is estimated over its device,
refuse until a reason lets them go (`--waive GATE=REASON`, or `skyrl_step(waivers=...)`); the plan
says "waived" with the reason, the document carries it to the host, the run record keeps it and
`rlaunch status` shows it. The cross-caller words are in tests/judgement/test_one_judgement.py."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rlaunch.cli.rl_options import _waivers
from rlaunch.control.cli import status
from rlaunch.judgement.gates import AUTHORISED_ENV, authorisations
from rlaunch.judgement.judge import NOTE, REFUSED, WAIVED, Authorisations, Evidence, declared_small, judge
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config import schema
from rlaunch.rules.devices import GIB
from rlaunch.rules.memory import MemoryTable, Row
from rlaunch.runs.run_record import update_attempt
from rlaunch.skyrl import skyrl_step
from rlaunch.skyrl.plan.launch_document import gates_section
from rlaunch.submission import Given
from tests.support import specs as h


def _planned(document: dict[str, Any], **gates: Any) -> PlannedLaunch:
    data = copy.deepcopy(document)
    data["gates"] = {**data.get("gates", {}), **gates}
    return PlannedLaunch.of(schema.from_dict(data))


def test_a_launch_declared_small_is_told_by_what_and_against_the_default_thresholds(document: dict[str, Any]) -> None:
    """The seed's 8 x 8 document: declared a smoke, raising the thresholds, or both; at its own size
    it is not small by declaration, and one node of it is small by default."""
    smoke = _planned(document, is_smoke=True)
    assert declared_small(smoke) == (
        "it is declared a smoke (is_smoke=True), yet it allocates 8 nodes (more than the default threshold of 1)"
    )
    raised = _planned(document, smoke_gate_nodes=8, smoke_gate_gpus=64)  # exactly its size: small by declaration
    assert declared_small(raised) == (
        "its execution raises the smoke gate's thresholds (smoke_gate_nodes=8, smoke_gate_gpus=64), yet it "
        "allocates 8 nodes (more than the default threshold of 1)"
    )
    gpus_only = _planned(document, smoke_gate_nodes=8)  # large anyway: 64 GPUs over the GPU threshold
    assert declared_small(gpus_only) is None
    assert declared_small(_planned(document, smoke_gate_nodes=8, smoke_gate_gpus=63)) is None  # one GPU short: large


def test_a_declared_small_launch_refuses_until_a_reason_lets_it_go(document: dict[str, Any]) -> None:
    smoke = _planned(document, is_smoke=True)
    (refused,) = [f for f in judge(smoke, Evidence(), Authorisations()) if f.gate == "large"]
    assert refused.status == REFUSED and refused.message.endswith(
        'a launch declared small must say why: pass --waive large="<reason>" (kept in the run record), or shrink it '
        "to the default thresholds"
    )
    (waived,) = [
        f for f in judge(smoke, Evidence(), Authorisations(waivers={"large": "pod test"})) if f.gate == "large"
    ]
    assert waived.status == WAIVED and waived.message.endswith("(waived: pod test)")
    assert "--waive" not in waived.message  # a waived finding states the reason, not the remedy
    other = judge(smoke, Evidence(), Authorisations(waivers={"memory": "pod test"}))  # another gate's waiver
    assert [f.status for f in other if f.gate == "large"] == [REFUSED]


def _over(planned: PlannedLaunch, estimate: int, capacity: int = 80 * GIB, certain: int = 0) -> PlannedLaunch:
    row = Row("policy", "training step", estimate, capacity, certain, detail="FSDP 64")
    return dataclasses.replace(planned, memory=MemoryTable(None, rows=(row,)))


@pytest.mark.parametrize(
    ("estimate", "status"),
    [(80 * GIB, None), (80 * GIB + 1, REFUSED)],  # at the capacity: tight, a note of the plan; one byte over: refused
    ids=["at-capacity", "one-byte-over"],
)
def test_a_large_launch_estimated_over_its_device_refuses(document: dict[str, Any], estimate: int, status: str) -> None:
    large = _over(_planned(document), estimate)
    found = [f for f in judge(large, Evidence(), Authorisations(skip_smoke_gate=True)) if f.gate == "memory"]
    assert [f.status for f in found] == ([status] if status else [])
    if status:
        assert found[0].message.startswith(
            "this is a large launch (it allocates 8 nodes (more than the smoke gate's threshold of 1)) and policy "
            "training step is estimated at 80.0 GiB per device, over the device's 80.0 GiB (FSDP 64): shrink what"
        )
        waived = judge(large, Evidence(), Authorisations(skip_smoke_gate=True, waivers={"memory": "measured: fits"}))
        assert [(f.status, f.message.endswith("(waived: measured: fits)")) for f in waived if f.gate == "memory"] == [
            (WAIVED, True)
        ]


def test_a_small_launch_estimated_over_its_device_gets_a_note(document: dict[str, Any]) -> None:
    small = _over(_planned(document, smoke_gate_nodes=8, smoke_gate_gpus=64), 90 * GIB)
    found = [f for f in judge(small, Evidence(), Authorisations(waivers={"large": "x"})) if f.gate == "memory"]
    assert [f.status for f in found] == [NOTE] and found[0].message.endswith("watch it for OOM")


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (("large=",), "large needs a reason"),
        (("large=  ",), "large needs a reason"),
        (("smoke=why",), "'smoke' is not GATE=REASON with GATE one of large, memory"),
        (("large",), "'large' is not GATE=REASON"),
        (("large=a", "large=b"), "large is waived twice"),
    ],
)
def test_a_waiver_needs_a_known_gate_and_a_reason(raw: tuple[str, ...], error: str) -> None:
    with pytest.raises(Exception, match=error):
        _waivers(None, None, raw)  # type: ignore[arg-type]


def test_a_waiver_reaches_the_document_the_record_and_status(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the command line (stamped once for the coordinator) and from the step's code, into the
    document's gates, the attempt's run-record entry, and `rlaunch status` (text and JSON)."""
    monkeypatch.setenv(AUTHORISED_ENV, Given(waivers={"memory": "measured on one node"}).environment()[AUTHORISED_ENV])
    gates = gates_section(None, h.iris(), prefix, is_smoke=True, waivers={"large": "the smallest shape"})
    assert {g: w.reason for g, w in gates.waivers.items()} == {
        "large": "the smallest shape",
        "memory": "measured on one node",
    }
    assert gates.waivers["memory"].by and gates.waivers["memory"].at  # who and when, stamped at submission
    output = str(Path(prefix) / "checkpoints" / "run")
    update_attempt(output, "run", "a1", {"state": "succeeded", **authorisations(gates)})
    record = json.loads((Path(output) / "run_record.json").read_text())
    assert record["attempts"][0]["waivers"]["large"]["by"] == {"declared": "skyrl_step(waivers=...)"}
    shown = CliRunner().invoke(status, [output])
    assert shown.exit_code == 0, shown.output
    assert "large: the smallest shape (declared in skyrl_step(waivers=...))" in shown.stdout
    assert "memory: measured on one node (" in shown.stdout
    data = json.loads(CliRunner().invoke(status, [output, "--json"]).stdout)
    assert data["waivers"]["memory"]["reason"] == "measured on one node"


def test_a_step_declares_only_waivable_gates_each_with_a_reason() -> None:
    for waivers in ({"smoke": "x"}, {"large": " "}):
        with pytest.raises(ValueError, match="skyrl_step\\(waivers=...\\) takes gate -> reason"):
            skyrl_step(h.spec(), h.iris(), export_hf=True, is_smoke=True, waivers=waivers)
