"""RL runs and evaluations laid out under a prefix the way a launch leaves them, for the sweep views.

A run is the seed's launch document renamed to the run's artifact, resolved into its attempt
directory, with the trainer's metrics beside it, and recorded by `rlaunch.runs.run_record` as the RL
step and then the host record an attempt. A sweep's variant carries, at the top of its run record,
the field the sweep writes: `"sweep": {"name", "variant", "settings"}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import records
from rlaunch.intervals import Accuracy, clustered_accuracy
from rlaunch.launch_config import schema
from rlaunch.runs import layout, run_record
from tests.support.documents import NAME

VERSION = "2026.11.30"  # the seed document's version
LR = "trainer.policy.optimizer_config.lr"


def rl_run(
    document: dict[str, Any],
    name: str,
    *,
    state: str = "succeeded",
    rewards: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4),
    first_step: int = 1,
    planned: int = 4,
    attempt_id: str = "a1",
    submitted_at: str = "2026-12-01T10:00:00+00:00",
    joined_at: str | None = "2026-12-01T10:00:00+00:00",
    finished_at: str | None = "2026-12-01T10:30:00+00:00",
) -> Path:
    """One attempt of the RL run `name`@VERSION (the seed's 8 x 8 H100 gang) that logged `rewards`
    from `first_step` on; `joined_at` None: the host never started a replica. Its output path."""
    data = json.loads(json.dumps(document).replace(NAME, name))
    data["run"]["attempt_id"] = attempt_id
    data["skyrl"]["trainer"]["max_training_steps"] = planned
    doc = schema.from_dict(data)
    attempt = Path(doc.artifacts.attempts_root) / attempt_id
    attempt.mkdir(parents=True, exist_ok=True)
    handed = attempt / "launch.yaml"
    handed.write_text(schema.dumps(doc))
    lines = [{"step": first_step + i, "reward_mean": r, "loss": 0.5, "time": 1.0 + i} for i, r in enumerate(rewards)]
    (attempt / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    output_path, alloc = doc.artifacts.output_path, doc.cluster.allocation
    run_record.update_attempt(output_path, doc.run.id, attempt_id, {
        "state": "launching", "artifact": doc.run.artifact, "backend": "local",
        "placement": {"root": str(Path(output_path) / "no-jobs")}, "topology": {"num_nodes": alloc.num_nodes},
        "launch_document_uri": str(handed), "submitted_at": submitted_at,
    })  # fmt: skip
    if joined_at is None:
        return Path(output_path)
    run_record.update_attempt(output_path, doc.run.id, attempt_id, {
        "state": state, "allocation": alloc.__dict__.copy(), "resolved_config_uri": str(handed),
        "finished_at": finished_at, "phases": {"child_submitted": submitted_at, "replica_0_joined": joined_at},
    })  # fmt: skip
    return Path(output_path)


def join_sweep(output_path: Path, value: Any) -> None:
    """Give the run record its top-level `sweep` field, as the sweep's launch writes it."""
    url = layout.run_record(str(output_path))
    storage.write_json_atomic(url, {**storage.read_json(url), "sweep": value})


def variant(document: dict[str, Any], sweep: str, label: str, lr: float, **run: Any) -> Path:
    """The variant `label` of `sweep`, setting the learning rate to `lr`: the run `sweeps/rl-<label>`."""
    path = rl_run(document, f"sweeps/rl-{label}", **run)
    join_sweep(path, {"name": sweep, "variant": label, "settings": {LR: lr}})
    return path


def evaluation(prefix: str, identity: str, model: str, right: int, prompts: int = 20) -> Accuracy:
    """An evaluation step job that scored `model` (name@version:fingerprint), as the step leaves it:
    `right` of `prompts` prompts solved in all 4 samples, the rest in none."""
    name, version = identity.split("@")
    path = str(Path(prefix) / name / version)
    records.write_status(path, "succeeded", identity=identity, fingerprint="f")
    run_record.update_attempt(path, "run-e", "e1", {"artifact": identity, "kind": "step", "state": "succeeded"})
    found = clustered_accuracy([[1.0] * 4] * right + [[0.0] * 4] * (prompts - right))
    report = {**found.to_json(), "scorer": "gsm8k", "model": model, "data": f"data/gsm8k@{VERSION}:d"}
    (Path(path) / "report.json").write_text(json.dumps(report))
    return found
