"""`SkyRLLaunchConfig`: load/dump round trip; unknown keys and wrong types are errors naming the path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from rlaunch import storage
from rlaunch.launch_config import schema
from rlaunch.launch_config.typed import DocumentError


def problems_of(data: Any) -> list[str]:
    with pytest.raises(DocumentError) as info:
        schema.from_dict(data)
    assert isinstance(info.value, ValueError)
    return info.value.problems


def test_round_trip_dump_load(document: dict[str, Any], prefix: str) -> None:
    config = schema.from_dict(document)
    text = schema.dumps(config)
    again = schema.loads(text)
    assert again == config
    assert schema.dumps(again) == text
    assert again.to_dict() == yaml.safe_load(text)
    url = storage.join(prefix, "docs", "launch.yaml")
    storage.write_text_atomic(url, text)
    assert schema.load(url) == config


def test_round_trip_keeps_types(document: dict[str, Any]) -> None:
    config = schema.loads(schema.dumps(schema.from_dict(document)))
    assert config.cluster.allocation.cpu == 96.0 and isinstance(config.cluster.allocation.cpu, float)
    assert config.run.seed == 17 and config.run.export_hf is True
    assert config.skyrl["trainer"]["placement"]["colocate_all"] is False
    assert config.inputs.train_data[0].relative_path == "train.parquet"
    assert config.runtime.compatible_checkpoint_digests == ()
    assert config.artifacts.resume_checkpoint_count == 3


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("run.seed", "1", "run.seed: expected an integer, got '1'"),
        ("run.seed", True, "run.seed: expected an integer, got True"),
        ("cluster.allocation.num_nodes", True, "cluster.allocation.num_nodes: expected an integer, got True"),
        ("cluster.allocation.cpu", "96", "cluster.allocation.cpu: expected a number, got '96'"),
        ("run.export_hf", 1, "run.export_hf: expected bool, got 1"),
        ("runtime.profile", 3, "runtime.profile: expected str, got 3"),
        ("run.submission", "later", "run.submission: 'later' is not one of ['prepare', 'detach', 'wait']"),
        (
            "cluster.backend",
            "kubernetes",
            "cluster.backend: 'kubernetes' is not one of ['local', 'ray', 'iris', 'slurm']",
        ),
        ("inputs.train_data", "train.parquet", "inputs.train_data: expected a list"),
        ("artifacts", "somewhere", "artifacts: expected a mapping for ArtifactsSection"),
    ],
)
def test_wrong_types_name_the_path(document: dict[str, Any], path: str, value: Any, expected: str) -> None:
    data = copy.deepcopy(document)
    node = data
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    problems = problems_of(data)
    assert any(p.startswith(expected) for p in problems), problems


@pytest.mark.parametrize(
    ("where", "key", "expected"),
    [
        ((), "extra", "extra: unknown key; SkyRLLaunchConfig accepts"),
        (("run",), "seeed", "run.seeed: unknown key; RunSection accepts"),
        (("cluster", "allocation"), "gpus", "cluster.allocation.gpus: unknown key; Allocation accepts"),
        (("inputs", "model"), "revison", "inputs.model.revison: unknown key; ModelInput accepts"),
    ],
)
def test_unknown_keys_name_the_path(document: dict[str, Any], where: tuple[str, ...], key: str, expected: str) -> None:
    data = copy.deepcopy(document)
    node = data
    for part in where:
        node = node[part]
    node[key] = 1
    problems = problems_of(data)
    assert any(p.startswith(expected) for p in problems), problems


def test_unknown_key_in_a_list_item_names_the_index(document: dict[str, Any]) -> None:
    data = copy.deepcopy(document)
    data["inputs"]["validation_data"][0]["shard"] = 3
    assert any(p.startswith("inputs.validation_data[0].shard: unknown key") for p in problems_of(data))


def test_missing_required_keys_are_named(document: dict[str, Any]) -> None:
    data = copy.deepcopy(document)
    del data["run"]["attempt_id"]
    del data["skyrl"]
    problems = problems_of(data)
    assert "run.attempt_id: required key is missing" in problems
    assert "skyrl: required key is missing" in problems


def test_every_problem_is_reported_at_once(document: dict[str, Any]) -> None:
    data = copy.deepcopy(document)
    data["run"]["seed"] = "1"
    data["cluster"]["allocation"]["num_nodes"] = True
    data["surprise"] = {}
    problems = problems_of(data)
    assert len(problems) == 3
    text = str(DocumentError(problems))
    assert "3 problem(s)" in text


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        ("schema_version", 2, "schema_version=2 is not supported"),
        ("artifacts.resume_checkpoint_count", 6, "between 1 and 5"),
        ("cluster.allocation.cpu", 0, "must be positive"),
        ("cluster.max_retries", -1, "cannot be negative"),
        ("cluster.allocation.memory", "lots", "memory"),
    ],
)
def test_value_rules_are_errors_naming_the_section(
    document: dict[str, Any], path: str, value: Any, fragment: str
) -> None:
    data = copy.deepcopy(document)
    node = data
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    assert any(fragment in p for p in problems_of(data))


def test_the_document_root_must_be_a_mapping() -> None:
    assert problems_of(["not", "a", "mapping"]) == [
        "<root>: expected a mapping for SkyRLLaunchConfig, got ['not', 'a', 'mapping']"
    ]
    with pytest.raises(DocumentError):
        schema.loads("- 1\n- 2\n")
