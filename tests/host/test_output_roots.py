"""Outputs never overwrite what rlaunch does not own: each output root of a launch document must be
absent, empty, or laid out by rlaunch, or the host refuses the document before writing anything.

Each root is tried with a sentinel file in it; the sentinel must survive, and nothing of the run
may be written anywhere (no attempt manifest, no run record).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from rlaunch.host.launch import LaunchRefusedError, execute_launch
from rlaunch.host.outputs import ForeignOutputError, output_problems, refuse_foreign_outputs
from rlaunch.launch_config import schema

ROOTS = ("output_path", "export_root", "checkpoint_root", "attempts_root")
SENTINEL = "sentinel.txt"


def with_sentinel(tmp_path: Path, doc: dict[str, Any], field: str) -> Path:
    """`artifacts.<field>` pointed at an existing directory holding someone else's file."""
    foreign = tmp_path / f"someone-elses-{field}"
    foreign.mkdir()
    (foreign / SENTINEL).write_text("precious\n")
    doc["artifacts"][field] = str(foreign)
    return foreign


@pytest.mark.parametrize("field", ROOTS)
def test_each_root_holding_a_foreign_file_is_refused_with_the_path_and_the_fix(
    tmp_path: Path, document: dict[str, Any], field: str
) -> None:
    foreign = with_sentinel(tmp_path, document, field)
    with pytest.raises(ForeignOutputError) as refused:
        refuse_foreign_outputs(schema.from_dict(document))
    message = str(refused.value)
    assert f"artifacts.{field}={str(foreign)!r}" in message and SENTINEL in message
    assert "new directory" in message and "move those files away" in message
    assert message.count("\n  - ") == 1  # only that root
    assert (foreign / SENTINEL).read_text() == "precious\n"


@pytest.mark.parametrize("field", ROOTS)
def test_the_host_refuses_before_writing_anything(tmp_path: Path, document: dict[str, Any], field: str) -> None:
    """Through the launch host: no attempt manifest, no run record, the sentinel untouched."""
    foreign = with_sentinel(tmp_path, document, field)
    url = tmp_path / "doc.yaml"
    url.write_text(schema.dumps(schema.from_dict(document)))
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(LaunchRefusedError) as refused:
        execute_launch(str(url))
    assert refused.value.result.state == "failed" and SENTINEL in refused.value.result.failure
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written anywhere
    assert [p.name for p in foreign.iterdir()] == [SENTINEL]


def test_absent_empty_and_rlaunch_laid_out_roots_are_accepted(tmp_path: Path, document: dict[str, Any]) -> None:
    art = document["artifacts"]
    assert output_problems(schema.from_dict(document)) == []  # nothing exists yet
    for field in ROOTS:
        Path(art[field]).mkdir(parents=True, exist_ok=True)
    assert output_problems(schema.from_dict(document)) == []  # empty
    layout = {  # what rlaunch writes in each root over earlier attempts of this run
        "output_path": ["run_record.json", "terminal.json", "resolved-launch.yaml", ".status.json",
                        ".artifact.json", ".lock.json", "exports/", "cancellations/", ".run_record.json.tmp-0a1b",
                        ".run_record.json.lock", ".lock.json.stale-0a1b2c3d", "run_record.json.corrupt-20261201T0101",
                        ".status.json.corrupt"],
        "export_root": ["global_step_4/"],
        "checkpoint_root": ["global_step_2/", "global_step_4/", "latest", "latest_ckpt_global_step.txt",
                            "rlaunch_runtime.json", ".latest.0123456789abcdef0123456789abcdef.tmp"],
        "attempts_root": ["0a1b2c3d4e5f/", "0a1b2c3d4e5f.json"],
    }  # fmt: skip
    for field, names in layout.items():
        for name in names:
            path = Path(art[field]) / name.rstrip("/")
            path.mkdir(exist_ok=True) if name.endswith("/") else path.write_text("{}")
    assert output_problems(schema.from_dict(document)) == []


@pytest.mark.parametrize(
    ("field", "name"),
    [
        ("output_path", "model.safetensors"), ("output_path", "notes"), ("export_root", "policy"),
        ("export_root", "global_step_x"), ("checkpoint_root", "optimizer.pt"), ("attempts_root", "run.log"),
        ("checkpoint_root", "global_step_3.bak"),
    ],
)  # fmt: skip
def test_one_foreign_name_beside_rlaunchs_own_is_enough_to_refuse(
    tmp_path: Path, document: dict[str, Any], field: str, name: str
) -> None:
    root = Path(document["artifacts"][field])
    (root / ("exports" if field == "output_path" else "global_step_1")).mkdir(parents=True)
    (root / name).write_text("x")
    (problem,) = output_problems(schema.from_dict(document))
    assert f"artifacts.{field}=" in problem and f"({name})" in problem


def test_an_existing_resolved_document_elsewhere_is_refused(tmp_path: Path, document: dict[str, Any]) -> None:
    theirs = tmp_path / "their-config.yaml"
    theirs.write_text("mine: true\n")
    changed = copy.deepcopy(document)
    changed["artifacts"]["resolved_config_uri"] = str(theirs)
    (problem,) = output_problems(schema.from_dict(changed))
    assert f"artifacts.resolved_config_uri={str(theirs)!r} already exists" in problem
    changed["artifacts"]["resolved_config_uri"] = str(tmp_path / "new.yaml")
    assert output_problems(schema.from_dict(changed)) == []


@pytest.mark.parametrize(
    ("count", "shown"),
    [(5, "f1.txt, f2.txt, f3.txt, f4.txt, f5.txt"), (6, "f1.txt, f2.txt, f3.txt, f4.txt, f5.txt and 1 more")],
)
def test_a_refusal_shows_five_foreign_names_and_counts_the_rest(
    tmp_path: Path, document: dict[str, Any], count: int, shown: str
) -> None:
    roots = [Path(document["artifacts"][field]) for field in ("checkpoint_root", "attempts_root")]
    for root in roots:
        root.mkdir(parents=True)
        for n in range(1, count + 1):
            (root / f"f{n}.txt").write_text("x")  # not an attempt id
    with pytest.raises(ForeignOutputError) as refused:
        refuse_foreign_outputs(schema.from_dict(document))
    problems = [
        f"artifacts.{field}={str(root)!r} is an existing directory holding files rlaunch did not write ({shown}); "
        "a run writes only into an empty or new directory, or one it laid out itself. Point it at a new directory "
        "(or the default the experiment renders), or move those files away"
        for field, root in zip(("checkpoint_root", "attempts_root"), roots, strict=True)
    ]
    assert str(refused.value) == (
        "2 output location(s) refused, nothing was written or submitted:\n  - " + "\n  - ".join(problems)
    )


@pytest.mark.parametrize("field", ["export_root", "checkpoint_root"])
def test_a_step_directory_of_someone_elses_naming_is_foreign(
    tmp_path: Path, document: dict[str, Any], field: str
) -> None:
    """rlaunch names a step's directory `global_step_<N>` and nothing more: a name that only starts so is not its."""
    root = Path(document["artifacts"][field])
    (root / "global_step_3").mkdir(parents=True)
    (root / "global_step_3_final").mkdir()
    (problem,) = output_problems(schema.from_dict(document))
    assert f"artifacts.{field}={str(root)!r}" in problem and "(global_step_3_final)" in problem
