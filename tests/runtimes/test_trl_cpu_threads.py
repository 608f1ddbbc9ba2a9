"""Every process of the trl-cpu runtime computes on one thread (a device slot is one core), unless it
was given a thread count: the adapter package sets `OMP_NUM_THREADS` before any of its modules
imports torch. Checked on the package itself (its `__init__` imports nothing heavy), in a process
of this interpreter with the adapter on its path, as the runtime's processes find it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlaunch.runtimes.registry import get_profile

ADAPTER = get_profile("trl-cpu").adapter_dir


@pytest.mark.parametrize(("given", "seen"), [(None, "1"), ("3", "3")], ids=["default", "kept"])
def test_the_adapter_gives_its_processes_one_thread_unless_told(given: str | None, seen: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(ADAPTER)
    if given is not None:
        env["OMP_NUM_THREADS"] = given
    code = "import os, rlaunch_trl_cpu; print(os.environ['OMP_NUM_THREADS'])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip() == seen, done.stderr
