"""Resume by identity: a checkpoint resumes only under the run fingerprint and runtime digest that
wrote it (or ones declared compatible); the plan side and the host compute the same fingerprint."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.host.compose import compose_document
from rlaunch.host.validate import validate_document
from rlaunch.launch_config import schema
from rlaunch.runs import layout
from rlaunch.runs.resume import foreign_checkpoint, refusal, run_fingerprint
from tests.support.documents import rendered_document, rl_step
from tests.support.specs import launch_of

DIGEST = "d" * 64


def resolve(doc: schema.SkyRLLaunchConfig) -> schema.SkyRLLaunchConfig:
    """What the host does before its resume check: validate, compose, stamp the fingerprint."""
    return compose_document(doc, validate_document(doc))


def checkpoint(root: str, step: int, **meta: Any) -> None:
    storage.write_json_atomic(storage.join(layout.checkpoint_dir(root, step), layout.CHECKPOINT_META), meta)
    storage.write_text_atomic(storage.join(root, layout.LATEST_MARKER), f"{step}\n")


def test_the_plan_and_the_host_compute_the_same_fingerprint(prefix: str) -> None:
    document = rendered_document(prefix)
    resolved = resolve(schema.from_dict(document))
    planned = launch_of(rl_step(), prefix).document.to_dict()  # what the plan's resume check hashes
    assert resolved.run.fingerprint == run_fingerprint(planned) == run_fingerprint(document)
    # the resolved document keeps it through a YAML round trip (the child reads it from there)
    assert schema.loads(schema.dumps(resolved)).run.fingerprint == resolved.run.fingerprint


@pytest.mark.parametrize(
    ("section", "key", "value", "changes"),
    [
        ("skyrl", "trainer", {"max_prompt_length": 512}, True),
        ("run", "seed", 18, True),
        ("inputs", "model", {"identity": "models/other@2026.11.30:" + "0" * 64}, True),
        ("cluster", "allocation", {"num_nodes": 4}, True),
        ("cluster", "allocation", {"cpu": 8.0, "memory": "1TB"}, False),  # placement, not identity
        ("cluster", "priority", "batch", False),
        ("artifacts", "resume_checkpoint_count", 5, False),  # retention
        ("run", "attempt_id", "another", False),
    ],
)
def test_what_changes_the_fingerprint(prefix: str, section: str, key: str, value: Any, changes: bool) -> None:
    document = rendered_document(prefix)
    changed = copy.deepcopy(document)
    if isinstance(value, dict):
        changed[section][key] = {**changed[section][key], **value}
    else:
        changed[section][key] = value
    assert (run_fingerprint(changed) != run_fingerprint(document)) is changes


def test_a_checkpoint_of_another_recipe_is_refused_naming_both_fingerprints(prefix: str) -> None:
    root = storage.join(prefix, "ckpts")
    checkpoint(root, 4, runtime_digest=DIGEST, run_fingerprint="a" * 64)
    assert foreign_checkpoint(root, DIGEST, "a" * 64) is None
    info = foreign_checkpoint(root, DIGEST, "b" * 64)
    assert info is not None and info.fingerprint == "a" * 64
    message = refusal(info, DIGEST, "b" * 64)
    assert f"run fingerprint {'a' * 64} (this run: {'b' * 64})" in message
    assert "runtime digest" not in message  # only what differs is named
    assert f"compatible_checkpoint_digests=({'a' * 64!r},)" in message
    assert foreign_checkpoint(root, DIGEST, "b" * 64, compatible=["a" * 64]) is None  # declared compatible


def test_a_checkpoint_without_a_fingerprint_is_refused(prefix: str) -> None:
    root = storage.join(prefix, "ckpts")
    checkpoint(root, 2, runtime_digest=DIGEST)
    info = foreign_checkpoint(root, DIGEST, "b" * 64)
    assert info is not None
    assert "run fingerprint unknown" in refusal(info, DIGEST, "b" * 64)


def test_both_digests_must_match(prefix: str) -> None:
    root = storage.join(prefix, "ckpts")
    checkpoint(root, 2, runtime_digest="e" * 64, run_fingerprint="a" * 64)
    info = foreign_checkpoint(root, DIGEST, "a" * 64)
    assert info is not None and "runtime digest eeeeeeeeeeeeeeee (this runtime: dddddddddddddddd)" in refusal(
        info, DIGEST, "a" * 64
    )
    assert foreign_checkpoint(root, DIGEST, "a" * 64, compatible=["e" * 64]) is None


def test_the_host_refuses_a_foreign_checkpoint_before_submitting(prefix: str) -> None:
    """The host judges the document it is handed with `judge`, whose resume gate reads the latest
    checkpoint of the run's own root (`launch_evidence.resume_evidence`)."""
    from tests.support.refusals import run_refusals

    document = schema.from_dict(rendered_document(prefix))
    root, digest = document.artifacts.checkpoint_root, document.runtime.source_digest
    checkpoint(root, 3, runtime_digest=digest, run_fingerprint="a" * 64)
    (refused,) = run_refusals(document, "resume")
    assert refused.startswith("resume: resume_mode=latest would resume") and f"run fingerprint {'a' * 64}" in refused
    checkpoint(root, 4, runtime_digest=digest, run_fingerprint=run_fingerprint(document.to_dict()))
    assert run_refusals(document, "resume") == []  # its own run wrote the latest one


@pytest.mark.parametrize("differs", ["both", "fingerprint", "runtime digest"])
def test_the_resume_refusals_declaration_followed_verbatim_lets_the_resume_go(prefix: str, differs: str) -> None:
    """When the run fingerprint and the runtime digest both changed, the refusal declares both: a
    declaration naming one of them would be refused again."""
    import ast

    from tests.support.refusals import run_refusals

    data = rendered_document(prefix)
    document = schema.from_dict(data)
    fingerprint, digest = run_fingerprint(document.to_dict()), document.runtime.source_digest
    written = {
        "both": ("a" * 64, "e" * 64),
        "fingerprint": ("a" * 64, digest),
        "runtime digest": (fingerprint, "e" * 64),
    }[differs]
    checkpoint(document.artifacts.checkpoint_root, 3, run_fingerprint=written[0], runtime_digest=written[1])
    (refused,) = run_refusals(document, "resume")
    declared = ast.literal_eval(refused.rpartition("SkyRLSpec(compatible_checkpoint_digests=")[2].removesuffix(")"))
    assert set(declared) == {w for w, ours in zip(written, (fingerprint, digest)) if w != ours}
    data["runtime"]["compatible_checkpoint_digests"] = list(declared)  # the advice, followed
    assert run_refusals(schema.from_dict(data), "resume") == []
