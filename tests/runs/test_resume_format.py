"""The run fingerprint's exact definition and the refusal's exact words.

Fingerprints are recorded in every checkpoint, so what goes into one (and how it is encoded) is
part of the format: a change would make every existing checkpoint foreign. Pinned here on a small
document; tests/runs/test_resume_identity.py checks what changes it on a real one.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from rlaunch.runs.layout import CheckpointInfo
from rlaunch.runs.resume import identity_view, refusal, run_fingerprint

DOCUMENT = {
    "skyrl": {"trainer": {"lr": 1e-06}},
    "run": {"seed": 7, "id": "not-identity", "attempt_id": "a1"},
    "runtime": {"profile": "fsdp", "entrypoint": "standard", "source_digest": "not-identity"},
    "cluster": {"allocation": {"num_nodes": 2, "gpus_per_node": 8, "gpu_variant": "H100", "cpu": 96}},
    "inputs": {
        "model": {"identity": "m@1:aa", "tokenizer_revision": "r1", "uri": "/not/identity"},
        "train_data": [{"identity": "d@1:bb", "relative_path": "train.jsonl", "uri": "/x"}, {"identity": "e@1:cc"}],
    },
}
VIEW = {
    "skyrl": {"trainer": {"lr": 1e-06}},
    "seed": 7,
    "runtime": {"profile": "fsdp", "entrypoint": "standard"},
    "allocation": {"num_nodes": 2, "gpus_per_node": 8, "gpu_variant": "H100"},
    "model": {"identity": "m@1:aa", "tokenizer_revision": "r1"},
    "train_data": [{"identity": "d@1:bb", "relative_path": "train.jsonl"}, {"identity": "e@1:cc", "relative_path": ""}],
    "validation_data": [],
}


def test_the_identity_view_holds_exactly_what_decides_a_checkpoint() -> None:
    assert identity_view(DOCUMENT) == VIEW


def test_the_fingerprint_is_sha256_of_the_canonical_json_of_the_view() -> None:
    canonical = json.dumps(VIEW, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    assert run_fingerprint(DOCUMENT) == hashlib.sha256(canonical).hexdigest()
    assert run_fingerprint(DOCUMENT) == "b37108bcba412d2c0ea1b82086a435ee9b49ad42cf0c9205309ab826d3e37cea"


D, F = "d" * 64, "f" * 64


def test_the_refusal_names_what_differs_and_what_to_declare() -> None:
    both = refusal(CheckpointInfo(3, "/c/global_step_3", "e" * 64, "a" * 64), D, F)
    assert both == (
        f"resume_mode=latest would resume /c/global_step_3 (step 3), written under run fingerprint {'a' * 64} "
        f"(this run: {F}) and runtime digest {'e' * 16} (this runtime: {'d' * 16}). Use a fresh RL artifact version "
        "(the checkpoint root follows name and version), or, once compatibility is established, declare it with "
        f"SkyRLSpec(compatible_checkpoint_digests=({'a' * 64!r}, {'e' * 64!r}))"
    )
    digest_only = refusal(CheckpointInfo(3, "/c/x", "e" * 64, F), D, F)
    assert f"written under runtime digest {'e' * 16} (this runtime: {'d' * 16}). Use" in digest_only
    assert digest_only.endswith(f"compatible_checkpoint_digests=({'e' * 64!r},))")
    unknown = refusal(CheckpointInfo(3, "/c/x", None, None), D, F)
    assert "run fingerprint unknown (written before fingerprints were recorded) (this run: " in unknown
    assert f"and runtime digest unknown (this runtime: {'d' * 16})" in unknown
    assert unknown.endswith(
        "Use a fresh RL artifact version (the checkpoint root follows name and version); it records no digest "
        "that could be declared compatible"
    )
    half = refusal(CheckpointInfo(3, "/c/x", None, "a" * 64), D, F)  # its fingerprint alone is known
    assert half.endswith("it records no digest that could be declared compatible")


def test_a_recipe_with_nan_gets_no_fingerprint() -> None:
    """NaN has no JSON text: a fingerprint over one would be JSON no reader parses back."""
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        run_fingerprint({**DOCUMENT, "skyrl": {"trainer": {"lr": float("nan")}}})
