"""Session fixtures for runtime tests: the real trl-cpu environment and tiny assets built in it.

The environment is built from the profile's lock with `ensure_environment` in the same cache a
launched run uses (`$RLAUNCH_RUNTIME_CACHE`, default `~/.cache/rlaunch/runtimes`), so the test
session builds it once for these tests and the end-to-end launches alike. The first build takes
about 1.5 minutes; later ones are instant.
"""

from __future__ import annotations

import time

import pytest

from rlaunch.runtimes.environment import ensure_environment
from rlaunch.runtimes.registry import get_profile

from .helpers import run_module


@pytest.fixture(scope="session")
def trl_env(tmp_path_factory: pytest.TempPathFactory):
    messages: list[str] = []
    started = time.monotonic()

    def progress(message: str) -> None:
        messages.append(message)
        print(f"[{time.monotonic() - started:5.1f}s] {message}", flush=True)

    env = ensure_environment(get_profile("trl-cpu"), progress=progress)
    env_messages = list(messages)
    return env, env_messages


@pytest.fixture(scope="session")
def tiny_assets(trl_env, tmp_path_factory: pytest.TempPathFactory):
    env, _ = trl_env
    root = tmp_path_factory.mktemp("tiny-assets")
    tok = run_module(env, "rlaunch_trl_cpu.tiny", ["tokenizer", "--out", str(root / "tokenizer"), "--seed", "3"])
    model = run_module(
        env,
        "rlaunch_trl_cpu.tiny",
        ["model", "--tokenizer", str(root / "tokenizer"), "--out", str(root / "model"), "--seed", "3"],
    )
    data = run_module(
        env,
        "rlaunch_trl_cpu.tiny",
        ["data", "--out", str(root / "data" / "train.jsonl"), "--rows", "32", "--seed", "3"],
    )
    run_module(
        env, "rlaunch_trl_cpu.tiny", ["data", "--out", str(root / "data" / "val.jsonl"), "--rows", "8", "--seed", "4"]
    )
    return {
        "root": root,
        "val": root / "data" / "val.jsonl",
        "tokenizer": root / "tokenizer",
        "model": root / "model",
        "data": root / "data" / "train.jsonl",
        "tokenizer_info": tok,
        "model_info": model,
        "data_info": data,
    }
