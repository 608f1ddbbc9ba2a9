"""Confinement: a launch document cannot make staging delete (or write) outside the task's root.

The data loss this guards against: `inputs.<name>.local_path` given as an absolute path (or with
`..`) was joined onto the staging root, and staging then replaced the target, removing a directory
outside the root while the host reported success.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from rlaunch.artifacts import records
from rlaunch.launch_config import schema
from rlaunch.launch_config.typed import DocumentError, decode
from rlaunch.paths import ConfinementError, inside, remove_inside
from rlaunch.task.bootstrap import stage_inputs
from rlaunch.task.staging import stage


def victim(tmp_path: Path) -> Path:
    """A directory outside every root, holding work someone cares about."""
    target = tmp_path / "outside" / "precious"
    target.mkdir(parents=True)
    (target / "thesis.tex").write_text("years of work")
    return target


def built_artifact(tmp_path: Path, name: str = "models/qwen3-8b", version: str = "2026.11.30") -> tuple[str, str]:
    """A real artifact directory with its record, so identity verification passes."""
    root = tmp_path / "artifacts" / name / version
    root.mkdir(parents=True)
    (root / "config.json").write_text("{}")
    records.write_record(str(root), {"name": name, "version": version, "fingerprint": "f" * 64, "result": {}})
    return str(root), f"{name}@{version}:{'f' * 64}"


def edited(document: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(document)
    node = doc
    *parents, last = dotted.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[last] = value
    return doc


@pytest.mark.parametrize(
    ("dotted", "value", "fragment"),
    [
        ("inputs.model.local_path", "/home/alice/thesis", "is absolute"),
        ("inputs.model.local_path", "../../outside/precious", "contains '..'"),
        ("inputs.model.local_path", "models/../../x", "contains '..'"),
        ("inputs.model.local_path", "s3://bucket/x", "has a URL scheme"),
        ("inputs.model.local_path", "models//qwen", "is not normalised"),
        ("inputs.model.local_path", "", "must be a non-empty relative path"),
        ("inputs.train_data.0.local_path", "/etc", "is absolute"),
        ("inputs.train_data.0.relative_path", "../../../etc/passwd", "contains '..'"),
        ("inputs.model.uri", "relative/model", "is relative"),
        ("artifacts.export_root", "exports", "is relative"),
        ("artifacts.checkpoint_root", "/data/../etc", "contains '..'"),
        ("run.attempt_id", "../../x", "run.attempt_id='../../x' must be 1-64 letters"),
        ("run.attempt_id", "a/b", "must be 1-64 letters"),
        ("run.attempt_id", "x" * 65, "must be 1-64 letters"),
        ("cluster.job_name", "-.-", "cluster.job_name='-.-' has no usable characters"),
        ("cluster.job_name", "a/b", "cluster.job_name='a/b' contains a path separator '/'"),
        ("cluster.job_name", "/../", "contains a path separator '/' (U+002F) at position 0"),
        ("cluster.job_name", "rl\trun", "cluster.job_name='rl\\trun' contains whitespace '\\t' (U+0009) at position 2"),
        (
            "cluster.job_name",
            "rl-run\n",
            "cluster.job_name='rl-run\\n' contains whitespace '\\n' (U+000A) at position 6",
        ),
        ("cluster.job_name", "r" * 64, "is 64 characters; at most 63"),
        ("run.id", "rl/x-dev\t", "run.id='rl/x-dev\\t' contains whitespace '\\t' (U+0009) at position 8"),
        ("run.id", "rl\\x-dev", "run.id='rl\\\\x-dev' contains a path separator '\\\\'"),
        ("run.artifact", "rl/x@dev\n", "run.artifact='rl/x@dev\\n' contains whitespace '\\n'"),
    ],
)
def test_a_path_that_leaves_its_root_is_refused_naming_the_field(
    document: dict[str, Any], dotted: str, value: Any, fragment: str
) -> None:
    with pytest.raises(DocumentError) as info:
        schema.from_dict(edited(document, dotted, value))
    (problem,) = info.value.problems
    assert problem.startswith(dotted.replace(".0.", "[0].")) and fragment in problem


def test_urls_and_absolute_locations_are_accepted(document: dict[str, Any]) -> None:
    doc = edited(document, "artifacts.export_root", "gs://bucket/exports")
    assert schema.from_dict(doc).artifacts.export_root == "gs://bucket/exports"


@pytest.mark.parametrize("local_path", ["ABSOLUTE", "../../outside/precious"])
def test_staging_never_deletes_outside_its_root(tmp_path: Path, document: dict[str, Any], local_path: str) -> None:
    """The data-loss reproduction: the document is refused, and staging itself refuses too, so even a
    document that skipped the loader leaves the outside directory intact."""
    precious = victim(tmp_path)
    uri, identity = built_artifact(tmp_path)
    task_root = tmp_path / "staging" / "run" / "attempt" / "replica-0"
    task_root.mkdir(parents=True)
    path = str(precious) if local_path == "ABSOLUTE" else os.path.relpath(precious, task_root)
    doc = edited(document, "inputs.model.local_path", path)
    doc["inputs"]["model"].update(uri=uri, identity=identity)

    with pytest.raises(DocumentError, match="inputs.model.local_path"):
        schema.from_dict(doc)
    unchecked = decode(schema.SkyRLLaunchConfig, doc)  # as if the document had skipped the loader
    with pytest.raises(ConfinementError, match="inputs.model.local_path"):
        stage_inputs(unchecked, str(task_root))
    with pytest.raises(ConfinementError, match="outside"):
        stage(uri, identity, str(precious), lambda line: None, root=str(task_root))

    assert (precious / "thesis.tex").read_text() == "years of work"
    assert not list(task_root.iterdir())


def test_staging_inside_the_root_still_works(tmp_path: Path) -> None:
    uri, identity = built_artifact(tmp_path)
    root = tmp_path / "task"
    target = root / "models" / "qwen3-8b"
    assert stage(uri, identity, str(target), lambda line: None, root=str(root)) == str(target)
    assert (target / "config.json").read_text() == "{}"


def test_cleanup_refuses_a_symlink_that_leads_outside(tmp_path: Path) -> None:
    precious = victim(tmp_path)
    root = tmp_path / "task"
    root.mkdir()
    (root / "models").symlink_to(precious)
    with pytest.raises(ConfinementError):
        remove_inside(str(root), str(root / "models") + "/")  # through the link
    with pytest.raises(ConfinementError):
        inside(str(root), str(root))
    remove_inside(str(root), str(root / "models"))  # the link goes, not what it points to
    assert not (root / "models").exists() and (precious / "thesis.tex").exists()
