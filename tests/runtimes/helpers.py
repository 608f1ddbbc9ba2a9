"""Helpers for runtime tests: compose a recipe on the base config, write FINAL.yaml, run the adapter."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import yaml

from rlaunch.runtimes.registry import get_profile


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def compose(overrides: dict[str, Any]) -> dict[str, Any]:
    """The trl-cpu base config with dotted `overrides` applied (what the launcher's compose yields)."""
    recipe = copy.deepcopy(get_profile("trl-cpu").base_config())
    for key, value in overrides.items():
        set_dotted(recipe, key, value)
    return recipe


def small_recipe(assets: dict[str, Any], root: Path, **overrides: Any) -> dict[str, Any]:
    """1 slot, colocated, 1 engine, TP=PP=DP=EP=1; 4 prompts x 4 samples; 4 steps."""
    base = {
        "data.train_data": [str(assets["data"])],
        "data.val_data": [],  # the host injects the document's validation data (none here)
        "trainer.policy.model.path": str(assets["model"]),
        "trainer.placement.colocate_all": True,
        "trainer.placement.policy_num_nodes": 1,
        "trainer.placement.policy_num_gpus_per_node": 1,
        "trainer.placement.ref_num_gpus_per_node": 1,
        "generator.inference_engine.num_engines": 1,
        "generator.inference_engine.tensor_parallel_size": 1,
        "generator.inference_engine.pipeline_parallel_size": 1,
        "generator.inference_engine.data_parallel_size": 1,
        "generator.inference_engine.expert_parallel_size": 1,
        "trainer.train_batch_size": 4,
        "trainer.policy_mini_batch_size": 4,
        "trainer.micro_train_batch_size_per_gpu": 4,
        "trainer.micro_forward_batch_size_per_gpu": 4,
        "generator.n_samples_per_prompt": 4,
        "generator.sampling_params.max_generate_length": 12,
        "trainer.max_prompt_length": 64,
        "trainer.max_training_steps": 4,
        "trainer.ckpt_interval": 2,
        "trainer.max_ckpts_to_keep": 2,
        "trainer.ckpt_path": str(root / "ckpts"),
        "trainer.export_path": str(root / "exports"),
        "trainer.logger": "console",
        "trainer.resume_mode": "latest",
        "trainer.policy.optimizer_config.lr": 1.0e-3,
        "trainer.seed": 7,
        "environment.env_class": "arithmetic",
    }
    base.update({k.replace("__", "."): v for k, v in overrides.items()})
    return compose(base)


def write_final(path: Path, recipe: dict[str, Any]) -> Path:
    document = {
        "name": "test-rl",
        "version": "dev",
        "run": {"export_hf": True},
        "runtime": {"profile": "trl-cpu"},
        "skyrl": recipe,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def run_entry(
    env,
    final: Path,
    *,
    attempt: str,
    task_dir: Path,
    digest: str | None = None,
    compatible: str = "",
    resume_from: str = "",
    nproc: int = 1,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    extra = {
        "RLAUNCH_RESUME_FROM": resume_from,
        "RLAUNCH_ATTEMPT_DIR": attempt,
        "RLAUNCH_TASK_DIR": str(task_dir),
        "RLAUNCH_RUNTIME_DIGEST": env.digest if digest is None else digest,
        "RLAUNCH_COMPATIBLE_DIGESTS": compatible,
        "RLAUNCH_MODEL_IDENTITY": "test/tiny-model@2026.11.30:abc123",
    }
    task_dir.mkdir(parents=True, exist_ok=True)
    return run_group(
        env.command("rlaunch_trl_cpu.entry", ["--config", str(final)], nproc=nproc),
        env=env.process_env(extra, inherit=True),
        cwd=task_dir,
        timeout=timeout,
    )


def run_small_recipe(
    env, assets: dict[str, Any], root: Path, overrides: dict[str, Any], attempt: str = "att", nproc: int = 1
) -> subprocess.CompletedProcess:
    """`small_recipe` with the dotted `overrides`, run by the trl-cpu entry as attempt `root/<attempt>`
    (its final config beside it as `<attempt>.yaml`, the task directory `root/t`)."""
    final = write_final(root / f"{attempt}.yaml", small_recipe(assets, root, **overrides))
    return run_entry(env, final, attempt=str(root / attempt), task_dir=root / "t", nproc=nproc)


def run_group(argv: list[str], *, env: dict[str, str], cwd: Path | None = None, timeout: float = 300):
    """subprocess.run in its own session; on timeout the whole group (torchrun and its workers)
    is killed, so nothing outlives the test, and the output so far is reported."""
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(
            f"{' '.join(argv)} did not finish in {timeout}s\n--- stdout\n{stdout[-3000:]}\n--- stderr\n{stderr[-6000:]}"
        ) from None
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def run_module(env, module: str, args: list[str], timeout: float = 300) -> dict[str, Any]:
    """Run an adapter CLI that prints one JSON line; return it."""
    result = run_group(env.command(module, args), env=env.process_env(inherit=True), timeout=timeout)
    assert result.returncode == 0, f"{module} {args} failed:\n{result.stderr[-4000:]}"
    lines = [ln for ln in result.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, f"{module} printed {len(lines)} lines, expected one JSON line:\n{result.stdout}"
    return json.loads(lines[0])


def metrics(attempt: Path) -> list[dict[str, Any]]:
    path = attempt / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def explain(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-6000:]}"
