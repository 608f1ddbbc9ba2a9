"""The documentation follows the code: every violation code has its page entry, and the README stays short.

The violation page is generated at build time by docs/hooks.py from the calls that raise each code;
these tests render it the same way and compare its entries with the rule set's registry
(`rlaunch.rules.CODES`) and the codes raised outside it, so a new code without an entry, or an entry
for a code no rule emits, fails here before `mkdocs build --strict` runs in CI.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from rlaunch import rules
from rlaunch.cli.admin import main as rlaunch_main
from tests import file_modules
from tests.host.test_host_rules import EXPERIMENT_SIDE_CODES, RECIPE_TEXT_CODES

REPO = Path(__file__).resolve().parents[1]


def _hooks() -> ModuleType:
    return file_modules.load("docs/hooks.py", "rlaunch_docs_hooks")


@functools.cache
def _entries() -> dict[str, str]:
    """The rendered violations page: each code's entry text."""
    source = (REPO / "docs" / "reference" / "violations.md").read_text(encoding="utf-8")
    page = _hooks().on_page_markdown(source, page=None, config=None, files=None)
    parts = re.split(r"^### `([^`]+)`$", page, flags=re.M)
    return {code: body.split("\n## ", 1)[0] for code, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_every_code_the_rule_set_can_emit_has_exactly_one_entry() -> None:
    emitted = set(rules.CODES) | RECIPE_TEXT_CODES | EXPERIMENT_SIDE_CODES | {"preflight.violations"}
    entries = _entries()
    assert len(entries) == len(set(entries)), "a code appears twice on the page"
    assert set(entries) == emitted, {"no entry": emitted - set(entries), "not emitted": set(entries) - emitted}


def test_every_entry_states_where_what_it_means_and_the_fix() -> None:
    for code, body in _entries().items():
        for part in ("**where**", "**meaning**", "**fix**"):
            line = next((ln for ln in body.splitlines() if ln.startswith(f"- {part}")), "")
            assert line.removeprefix(f"- {part}:").strip(), f"{code}: no {part} in its entry"


def test_the_batch_rule_entry_is_the_rules_own_text() -> None:
    body = _entries()["batch.train_mini"]
    assert "must be divisible by policy\\_mini\\_batch\\_size={mini}" in body
    assert "choose a mini batch among the divisors of {train}" in body


def test_a_code_chosen_from_a_table_gets_each_rows_text() -> None:
    """`explicit.token_budget` is raised for two recipe keys from EXPLICIT_KEYS: both are on the page."""
    body = _entries()["explicit.token_budget"]
    assert "trainer.max\\_prompt\\_length is not set explicitly" in body
    assert "generator.sampling\\_params.max\\_generate\\_length is not set explicitly" in body


def test_the_readme_is_short_and_keeps_the_two_set_up_commands() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for command in (
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/python -m experiments.smoke --version 2026.11.30 --run",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test,ray]' && .venv/bin/python -m pytest -n 3 --dist loadgroup",
    ):
        assert f"\n{command}\n" in readme, command


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    test_command = "python3 -m venv .venv && .venv/bin/pip install -e '.[test,ray]' && .venv/bin/python -m pytest -n 3 --dist loadgroup"
    assert test_command in readme
    assert (
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test,ray]' && .venv/bin/python -m pytest -n 3 --dist loadgroup"
        in ci
    )


def test_the_readmes_fit_line_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tour's `rlaunch fit` line, from the repository root of a fresh clone: its config.json ships."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in readme.splitlines() if ln.startswith(".venv/bin/rlaunch fit ")]
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(rlaunch_main, shlex.split(line)[1:])
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith("fits: every row is ok and the preflight passes")
