"""`run(skyrl)` for the test-marker runtime.

`environment.env_class` picks the scenario: `ok` (default), `fail_at_<N>` (exit 3 after step
N-1), `flaky_at_<N>` (like `fail_at_<N>`, but only on an attempt that did not resume from a
checkpoint: a transient fault the next attempt survives), `no_steps` (loads the model, never
steps), `wrong_model` (records loading another path), `slow` (half a second per step),
`missing_module` (imports a module the runtime lacks: a deterministic failure), `sigkill_at_<N>`
(the trainer is killed with SIGKILL at step N, as the kernel's OOM killer would: an operational one),
`fill_disk_at_<N>` (step N's checkpoint writes weights until its filesystem is full: ENOSPC),
`slow_export` (like `slow`, and the export writes its config, then takes a minute before its
weights: a run to cancel while it exports), `signal_task` (sends SIGTERM to its task, as a cancel signals the whole process group, then
finishes what it was doing: `finished.json`, exit 0), `wandb_offline` (writes `wandb.json` as the adapters do for an offline W&B run: id, project, entity,
run directory under $WANDB_DIR).
Records follow the trl-cpu layout: model_load.json, metrics.jsonl, joined/trainer-rank-0.json,
checkpoints (weights, and a manifest of each file's size and sha256) with a latest marker, an
HF-shaped export.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import sys
import time

import yaml


def _write(path: str, payload: object) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
    os.replace(tmp, path)


def _get(tree: dict, dotted: str):  # noqa: ANN202 - plain data lookup
    for part in dotted.split("."):
        tree = tree[part]
    return tree


def run(skyrl: dict, export_hf: bool = False) -> int:
    attempt = os.environ["RLAUNCH_ATTEMPT_DIR"]
    digest = os.environ["RLAUNCH_RUNTIME_DIGEST"]
    fingerprint = os.environ.get("RLAUNCH_RUN_FINGERPRINT", "")
    scenario = _get(skyrl, "environment.env_class")
    model = _get(skyrl, "trainer.policy.model.path")
    ckpt_root, export_root = _get(skyrl, "trainer.ckpt_path"), _get(skyrl, "trainer.export_path")
    final_step = _get(skyrl, "trainer.max_training_steps") or 2
    interval, keep = _get(skyrl, "trainer.ckpt_interval"), _get(skyrl, "trainer.max_ckpts_to_keep")
    _write(
        f"{attempt}/joined/trainer-rank-0.json",
        {"rank": 0, "world_size": 1, "host": socket.gethostname(), "pid": os.getpid(), "time": time.time()},
    )
    loaded = "/elsewhere/model" if scenario == "wrong_model" else os.path.realpath(model)
    _write(
        f"{attempt}/model_load.json",
        {
            "configured_path": model,
            "loaded_path": loaded,
            "identity": os.environ.get("RLAUNCH_MODEL_IDENTITY"),
            "time": time.time(),
        },
    )
    credentials = {
        k: hashlib.sha256(os.environ[k].encode()).hexdigest() for k in ("HF_TOKEN", "WANDB_API_KEY") if k in os.environ
    }
    _write(f"{attempt}/marker.json", {
        "skyrl": skyrl,
        "model_files": sorted(os.listdir(model)),
        "data": _get(skyrl, "data.train_data"),
        "env_names": sorted(os.environ),
        "credential_sha256": credentials,
        "cwd": os.getcwd(),
        "task_dir": os.environ.get("RLAUNCH_TASK_DIR"),
    })  # fmt: skip
    if scenario == "signal_task":
        os.kill(os.getppid(), signal.SIGTERM)
        time.sleep(0.3)  # what a trainer does on a stop: finish its step, save, leave
        _write(f"{attempt}/finished.json", {"time": time.time()})
        return 0
    if scenario == "no_steps":
        time.sleep(1.0)
        return 0
    if scenario == "wandb_offline":
        run_id = hashlib.sha256(attempt.encode()).hexdigest()[:8]
        offline_dir = os.path.join(os.environ.get("WANDB_DIR") or attempt, "wandb", f"offline-run-{run_id}")
        os.makedirs(offline_dir, exist_ok=True)
        _write(f"{attempt}/wandb.json", {
            "run_id": run_id, "project": _get(skyrl, "trainer.project_name"), "entity": os.environ.get("WANDB_ENTITY"),
            "name": _get(skyrl, "trainer.run_name"), "url": None, "mode": "offline", "offline_dir": offline_dir,
        })  # fmt: skip
    if scenario == "missing_module":
        import rlaunch_marker_missing_dependency  # noqa: F401 - the runtime's environment lacks it
    start = 0
    latest = os.path.join(ckpt_root, "latest")
    if _get(skyrl, "trainer.resume_mode") == "latest" and os.path.exists(latest):
        with open(latest, encoding="utf-8") as handle:
            start = int(handle.read().strip())
    for step in range(start + 1, final_step + 1):
        if scenario == f"fail_at_{step}" or (scenario == f"flaky_at_{step}" and start == 0):
            print(f"scenario {scenario}: failing at step {step}", file=sys.stderr)
            return 3
        if scenario == f"sigkill_at_{step}":
            os.kill(os.getpid(), signal.SIGKILL)
        if scenario == f"fill_disk_at_{step}":
            os.makedirs(os.path.join(ckpt_root, f"global_step_{step}"), exist_ok=True)
            with open(os.path.join(ckpt_root, f"global_step_{step}", "model.safetensors"), "wb") as handle:
                while True:  # as a trainer saving weights does: the write that does not fit raises ENOSPC
                    handle.write(b"\0" * (1 << 20))
                    handle.flush()
        time.sleep(0.5 if scenario in ("slow", "slow_export") else 0.05)
        with open(f"{attempt}/metrics.jsonl", "a", encoding="utf-8") as handle:
            handle.write(
                json.dumps(
                    {
                        "step": step,
                        "loss": 1.0 / step,
                        "reward_mean": step / final_step,
                        "reward_std": 0.1,
                        "kl": 0.01 * step,
                        "learning_rate": 1e-3,
                        "time": time.time(),
                    }
                )
                + "\n"
            )
        if step % interval == 0 or step == final_step:
            directory = os.path.join(ckpt_root, f"global_step_{step}")
            weights = os.path.join(directory, "model.safetensors")
            os.makedirs(directory, exist_ok=True)
            with open(weights, "wb") as handle:
                handle.write(f"marker-weights-{step}\n".encode() * 64)
            with open(weights, "rb") as handle:
                data = handle.read()
            files = {"model.safetensors": {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
            meta = {"global_step": step, "runtime_digest": digest, "run_fingerprint": fingerprint, "files": files}
            _write(os.path.join(directory, "rlaunch_checkpoint.json"), meta)
            with open(f"{latest}.tmp", "w", encoding="utf-8") as handle:
                handle.write(str(step))
            os.replace(f"{latest}.tmp", latest)
            steps = sorted(int(n.split("_")[-1]) for n in os.listdir(ckpt_root) if n.startswith("global_step_"))
            for old in steps[:-keep] if keep > 0 else []:
                shutil.rmtree(os.path.join(ckpt_root, f"global_step_{old}"))
    if export_hf:
        export = os.path.join(export_root, f"global_step_{final_step}", "policy")
        os.makedirs(export, exist_ok=True)
        for name in ("config.json", "tokenizer.json"):
            shutil.copy(os.path.join(model, name), os.path.join(export, name))
        if scenario == "slow_export":
            time.sleep(60)  # as a large model's weights take: the window a cancel while exporting lands in
        with open(os.path.join(export, "model.safetensors"), "wb") as handle:
            handle.write(b"marker-weights")
    return 0


def read_document() -> tuple[dict, bool]:
    """The launch document `--config` names: its `skyrl` section, and whether to export."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    with open(args.config, encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    return document["skyrl"], bool((document.get("run") or {}).get("export_hf"))


def main() -> None:
    sys.exit(run(*read_document()))


if __name__ == "__main__":
    main()
