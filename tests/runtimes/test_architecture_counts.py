"""Evidence: the pure architecture facts equal what transformers itself builds.

Source of truth: transformers (the trl-cpu runtime's pinned version), which builds each model
on the meta device from a config written here (no download) in the runtime's own venv
(tests/runtimes/transformers_counts.py); the launcher side never imports transformers. The
configs and the numbers transformers built from them are the table of tests/support/built_counts.py,
which the fast lane holds `rlaunch.rules.model_shape` to; here every entry is rebuilt (once per
script, configs and venv: tests/support/kept_measurements.py), so a table that no longer says what
transformers builds fails.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest

from rlaunch.rules import memory
from rlaunch.rules.model_shape import FAMILIES, Architecture
from rlaunch.skyrl import ModelFacts
from tests.support.built_counts import BUILT, Built
from tests.support.kept_measurements import keep, kept

SCRIPT = Path(__file__).with_name("transformers_counts.py")
IDS = [f"{i}-{b.id}" for i, b in enumerate(BUILT)]


@pytest.fixture(scope="module")
def built(trl_env) -> list[dict]:
    env, _ = trl_env
    question = [b.config for b in BUILT]
    answer = kept(SCRIPT, env.python, question)  # what transformers built for these configs before
    if answer is None:
        out = subprocess.run(
            [env.python, str(SCRIPT)],
            input=json.dumps(question),
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        answer = json.loads(out.stdout)
        keep(SCRIPT, env.python, question, answer)
    return answer


def test_every_supported_family_is_covered() -> None:
    """Each family is built by transformers here, or (Kimi-K2, which transformers builds as
    DeepSeek-V3) held to its published total."""
    from tests.rules.test_memory_model import PUBLISHED_TOTALS

    published = {config["model_type"] for config, _, _ in PUBLISHED_TOTALS}
    assert {b.config["model_type"] for b in BUILT} | published == set(FAMILIES)


@pytest.mark.parametrize("index", range(len(BUILT)), ids=IDS)
def test_the_table_says_what_transformers_builds(built: list[dict], index: int) -> None:
    entry: Built = BUILT[index]
    assert built[index]["total"] == entry.total
    assert built[index]["kv_width"] == entry.kv_width
    if entry.sliding_layers is not None:
        assert built[index]["sliding_layers"] == entry.sliding_layers
    if entry.by_component:
        assert built[index]["by_component"] == entry.by_component


@pytest.mark.parametrize("index", range(len(BUILT)), ids=IDS)
def test_parameters_and_kv_width_equal_transformers(built: list[dict], index: int) -> None:
    """Through the launcher's own entry (`ModelFacts`), not only the module the table is held to."""
    arch = ModelFacts.from_hf_config(BUILT[index].config).architecture
    assert isinstance(arch, Architecture)
    assert arch.params.total == built[index]["total"]
    if built[index]["kv_width"]:
        assert memory.kv_bytes_per_token(arch, dtype_bytes=2) == 2 * built[index]["kv_width"]
    if BUILT[index].by_component:
        assert {k: v for k, v in asdict(arch.params).items() if v} == built[index]["by_component"]
