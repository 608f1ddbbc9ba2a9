"""Regenerate what rlaunch pins for SkyRL 0.4.0, from the package itself. Run from the repository root:

    python -m scripts.skyrl_regen locks [contract|fsdp|megatron ...]   # whole locks, by pip's resolver
    python -m scripts.skyrl_regen base-config                          # runtimes/base_configs/skyrl-<v>.yaml

Both need Python 3.12 (found as the test tier finds it: $RLAUNCH_PYTHON312, `python3.12` on PATH,
or pyenv's 3.12.*).

`locks`: each lock is generated from the `requirements.in` beside it by
`python3.12 -m pip install --dry-run --ignore-installed --report` (pip's resolver, for the
interpreter's platform: linux x86_64, CPython 3.12); nothing is installed. The lock pins every
package of the resolved environment (`name==version`), so a runtime's source digest, which hashes
its lock, changes whenever anything in the environment would. The GPU locks (fsdp, megatron)
include sdists whose build scripts import torch just to report their metadata (flash-attn,
causal-conv1d, ...): they are resolved with the contract tier's venv (which has torch and the
build tools) and `--no-build-isolation`, with their `*_SKIP_CUDA_BUILD` switches set, so no CUDA
toolkit is needed to resolve them.

`base-config`: builds (or reuses) the contract tier's venv (tests/contract/skyrl/lock.txt) and
runs `python -m rlaunch_skyrl.base_config` in it, writing the dump into `runtimes/base_configs/`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCKS = {
    "contract": REPO / "tests" / "contract" / "skyrl",
    "fsdp": REPO / "src" / "rlaunch" / "runtimes" / "fsdp",
    "megatron": REPO / "src" / "rlaunch" / "runtimes" / "megatron",
}
SKIP_CUDA_BUILD = {
    "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE",
    "CAUSAL_CONV1D_SKIP_CUDA_BUILD": "TRUE",
    "MAMBA_SKIP_CUDA_BUILD": "TRUE",
    "FAST_HADAMARD_TRANSFORM_SKIP_CUDA_BUILD": "TRUE",
    "NVTE_FRAMEWORK": "pytorch",
}


def python312() -> str:
    sys.path.insert(0, str(REPO))
    from tests.py312_tier import find_python312

    found = find_python312()
    if found.path is None:
        raise SystemExit(f"needs Python 3.12: {found.reason}")
    return found.path


def resolve(python: str, requirements: Path, *, no_build_isolation: bool = False) -> list[tuple[str, str]]:
    """(name, version) of every package pip's resolver installs for `requirements`, sorted by name."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        argv = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report)]
        argv += ["--no-build-isolation"] if no_build_isolation else []
        argv += ["-r", str(requirements)]
        proc = subprocess.run(argv, env={**os.environ, **SKIP_CUDA_BUILD}, text=True, capture_output=True)
        if proc.returncode != 0:
            tail = "\n".join(ln for ln in proc.stderr.splitlines() if not ln.startswith("WARNING: Location"))
            raise SystemExit(f"pip could not resolve {requirements}:\n{tail[-4000:]}")
        return pins_from_report(json.loads(report.read_text()))


def pins_from_report(report: dict) -> list[tuple[str, str]]:
    pins = {(i["metadata"]["name"], i["metadata"]["version"]) for i in report["install"]}
    return sorted(pins, key=lambda p: p[0].lower().replace("_", "-"))


def write_lock(name: str, python: str, pins: list[tuple[str, str]] | None = None) -> Path:
    directory = LOCKS[name]
    if pins is None and name != "contract":
        pins = resolve(contract_venv(python), directory / "requirements.in", no_build_isolation=True)
    pins = pins if pins is not None else resolve(python, directory / "requirements.in")
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
    ).stdout.strip()
    header = [
        f"# {name} lock: every package of the environment, resolved by pip for CPython {version} on linux x86_64",
        f"# from requirements.in beside it. GENERATED: python -m scripts.skyrl_regen locks {name}",
        f"# {len(pins)} packages.",
    ]
    lock = directory / "lock.txt"
    lock.write_text("\n".join(header + [f"{n}=={v}" for n, v in pins]) + "\n", encoding="utf-8")
    print(f"{lock.relative_to(REPO)}: {len(pins)} packages")
    return lock


def contract_venv(python: str) -> str:
    """The contract tier's venv python (skyrl 0.4.0 and its CPU stack), built on first use."""
    sys.path.insert(0, str(REPO))
    from tests.contract.skyrl_tier import SKYRL_TIER
    from tests.py312_tier import tier_environment

    return tier_environment(SKYRL_TIER, python)


def write_base_config(python: str) -> Path:
    venv_python = contract_venv(python)
    adapter = REPO / "src" / "rlaunch" / "runtimes" / "adapters" / "skyrl"
    out = subprocess.run(
        [venv_python, "-m", "rlaunch_skyrl.base_config"],
        env={**os.environ, "PYTHONPATH": str(adapter)},
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    version = next(ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.strip().startswith("skyrl_version:"))
    target = REPO / "src" / "rlaunch" / "runtimes" / "base_configs" / f"skyrl-{version.strip(chr(39))}.yaml"
    target.write_text(out, encoding="utf-8")
    print(f"{target.relative_to(REPO)} written")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.skyrl_regen", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    locks = sub.add_parser("locks", help="regenerate whole locks with pip's resolver")
    locks.add_argument("names", nargs="*", metavar="NAME", help=f"any of {sorted(LOCKS)} (default: all)")
    sub.add_parser("base-config", help="dump SkyRL's default config from the installed package")
    args = parser.parse_args()
    python = python312()
    if args.command == "locks":
        unknown = sorted(set(args.names) - set(LOCKS))
        if unknown:
            parser.error(f"unknown lock(s) {unknown}; choose from {sorted(LOCKS)}")
        for name in args.names or list(LOCKS):
            write_lock(name, python)
    else:
        write_base_config(python)


if __name__ == "__main__":
    main()
