"""`import rlaunch` and a dry run never import torch, ray, transformers, trl, vllm or skyrl.

Each check runs in a fresh interpreter whose path starts with empty stand-ins for those packages,
so an import of one (even a guarded `try: import torch`) lands in `sys.modules` and is caught
whether or not the real package is installed here.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from tests.support.polling import run_python

REPO = pathlib.Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray", "transformers", "trl", "vllm", "skyrl")

REPORT = (
    "import json, sys\n"
    f"heavy = {HEAVY!r}\n"
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy})))\n"
)


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("heavy-stubs")
    for name in HEAVY:
        (root / name).mkdir()
        (root / name / "__init__.py").write_text("# stand-in: importing this is what the test catches\n")
    return root


def heavy_imported(code: str, stubs: pathlib.Path, cwd: pathlib.Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")}
    env["PYTHONPATH"] = os.pathsep.join([str(stubs), str(REPO)])
    env["RLAUNCH_PREFIX"] = str(cwd / "prefix")
    out = run_python(["-c", code + "\n" + REPORT], cwd, env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_stand_ins_are_caught(stubs, tmp_path):
    """The check itself works: a module that does import torch is reported."""
    assert heavy_imported(
        "import rlaunch\ntry:\n    import torch, trl.trainer\nexcept ImportError:\n    pass", stubs, tmp_path
    ) == [
        "torch",
        "trl",
    ]


def test_importing_rlaunch_and_its_cli_imports_nothing_heavy(stubs, tmp_path):
    assert (
        heavy_imported("import rlaunch, rlaunch.cli, rlaunch.artifacts, rlaunch.cli.experiment", stubs, tmp_path) == []
    )


@pytest.mark.parametrize(
    "code",
    [
        "import sys\n"
        "from experiments.hello import main\n"
        "main(['--version', '2026.11.30'], standalone_mode=False)\n"
        "main(['--version', 'dev', '--plan-format', 'json'], standalone_mode=False)\n",
        "import runpy, sys\n"
        "sys.argv = ['experiments.hello', '--version', '2026.11.30']\n"
        "try:\n"
        "    runpy.run_module('experiments.hello', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n",
    ],
    ids=["main-called", "run-as-main"],
)
def test_a_hello_dry_run_imports_nothing_heavy(stubs, tmp_path, code):
    assert heavy_imported(code, stubs, tmp_path) == []
