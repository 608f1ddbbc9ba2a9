"""Regenerate what rlaunch pins, from the packages themselves. Run from the repository root:

    python -m scripts.skyrl_regen locks [trl-cpu|contract|iris|fsdp|megatron ...]   # hashed whole locks, by uv
    python -m scripts.skyrl_regen base-config                                       # runtimes/base_configs/skyrl-<v>.yaml

`locks`: each lock is generated from the `requirements.in` beside it by `uv pip compile
--generate-hashes` for linux x86_64 (manylinux_2_28) and the lock's CPython (3.11 for trl-cpu,
3.12 for the rest), from the public registry and pip's configured find-links (where this
machine keeps the CPU build of torch that trl-cpu pins). Versions already in a lock are kept
(uv prefers the output file's pins) unless `--upgrade`. Every package of the environment is
pinned with the sha256 of each of its files, so the runtime's source digest, which hashes its
lock, changes whenever anything in the environment would, and the builder installs nothing else
(`uv pip sync --require-hashes`). Nothing is built or installed: sdists whose build scripts
import torch just to report their metadata get static metadata from `uv.toml` beside the GPU
locks (written by this script from `SKYRL_UV_TOML`), which also carries SkyRL's own overrides
and the build settings the node's install uses; see the GPU locks' `requirements.in`.
The contract lock is also the fsdp-rehearsal runtime's lock (one venv for both).

`base-config`: builds (or reuses) the contract tier's venv (tests/contract/skyrl/lock.txt) and
runs `python -m rlaunch_skyrl.base_config` in it, writing the dump into `runtimes/base_configs/`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNTIMES = REPO / "src" / "rlaunch" / "runtimes"


@dataclass(frozen=True)
class Lock:
    directory: Path
    python: str  # major.minor
    uv_toml: bool = False  # the GPU locks: SkyRL's overrides, static metadata, build settings
    copies: tuple[Path, ...] = ()  # other locks that are this one


LOCKS = {
    "trl-cpu": Lock(RUNTIMES / "trl_cpu", "3.11"),
    "contract": Lock(REPO / "tests" / "contract" / "skyrl", "3.12", copies=(RUNTIMES / "fsdp_rehearsal",)),
    "iris": Lock(REPO / "tests" / "iris", "3.12"),
    "fsdp": Lock(RUNTIMES / "fsdp", "3.12", uv_toml=True),
    "megatron": Lock(RUNTIMES / "megatron", "3.12", uv_toml=True),
}
PLATFORM = "x86_64-manylinux_2_28"

# SkyRL 0.4.0's GPU extras, resolved from the public registry. Upstream resolves them with its own
# [tool.uv] overrides and extra indexes, which a wheel's metadata does not carry; these are its
# overrides, less what only those indexes serve:
# * flashinfer-jit-cache (never on the registry) and flashinfer-cubin (not past 0.6.13 there) are
#   left out: flashinfer JIT-compiles the kernels a run uses on first use (nvcc on the node, cached
#   under ~/.cache/flashinfer; minutes per new kernel shape, once per node and shape).
# * transformer-engine-cu13 is the registry's 2.16.0 wheel, not the `+cu.13.0` build of
#   Astral's index.
# * megatron-bridge pins flashinfer-python 0.6.8.post1; SkyRL holds 0.6.18.post1 (vLLM 0.30.0 needs
#   >= 0.6.16). mamba-ssm and vLLM disagree on tilelang / apache-tvm-ffi; vLLM's pins win.
#   xgrammar 0.2.3 is the last with a cp312 x86_64 wheel. torchvision 0.28.0 is the one for torch 2.13.0.
# Static metadata: these sdists import torch in setup.py to report their dependencies.
# flash-attn 2.8.3 is the registry's sdist, built on the node at install time against its torch
# (extra-build-dependencies); its setup first fetches upstream's prebuilt wheel for that
# torch/CUDA/Python and compiles with the node's CUDA toolkit only when none matches.
SKYRL_UV_TOML = """\
override-dependencies = [
    "flashinfer-python==0.6.18.post1",
    "flashinfer-jit-cache; sys_platform == 'never'",
    "flashinfer-cubin; sys_platform == 'never'",
    "nixl-cu12; sys_platform == 'never'",
    "transformer-engine[pytorch]==2.16.0",
    "transformer-engine-cu13==2.16.0",
    "transformers>=5.6.1,<=5.16.1",
    "megatron-core>=0.16.0",
    "ml_dtypes>=0.5.0",
    "tilelang==0.1.12",
    "apache-tvm-ffi==0.1.11",
    "xgrammar==0.2.3",
    "torch==2.13.0",
    "torchvision==0.28.0",
]

[extra-build-dependencies]
flash-attn = [{ requirement = "torch", match-runtime = true }]
causal-conv1d = [{ requirement = "torch", match-runtime = true }]
mamba-ssm = [{ requirement = "torch", match-runtime = true }]
fast-hadamard-transform = [{ requirement = "torch", match-runtime = true }]
transformer-engine-torch = [{ requirement = "torch", match-runtime = true }]

[[dependency-metadata]]
name = "flash-attn"
version = "2.8.3"
requires-dist = ["torch", "einops"]

[[dependency-metadata]]
name = "causal-conv1d"
version = "1.6.2.post1"
requires-dist = ["torch", "packaging", "ninja"]

[[dependency-metadata]]
name = "mamba-ssm"
version = "2.3.2.post1"
requires-dist = ["torch", "triton", "ninja", "einops", "transformers", "packaging", "setuptools>=61.0.0"]
"""


def interpreter(version: str) -> str:
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    sys.path.insert(0, str(REPO))
    from tests.support.py312_tier import find_python312

    found = find_python312()
    if found.path is None:
        raise SystemExit(f"needs Python 3.12: {found.reason}")
    return found.path


def write_lock(name: str, *, upgrade: bool = False) -> Path:
    from uv import find_uv_bin

    from rlaunch.runtimes.environment import pip_find_links
    from rlaunch.runtimes.lockfile import read_lock

    spec = LOCKS[name]
    lock = spec.directory / "lock.txt"
    argv = [find_uv_bin(), "pip", "compile", str(spec.directory / "requirements.in"), "--quiet", "--no-header"]
    argv += ["--python", interpreter(spec.python), "--python-version", spec.python, "--python-platform", PLATFORM]
    argv += ["--generate-hashes", "--output-file", str(lock)] + (["--upgrade"] if upgrade else [])
    argv += [arg for link in pip_find_links() for arg in ("--find-links", link)]
    if spec.uv_toml:
        config = spec.directory / "uv.toml"
        config.write_text(
            f"# uv settings of the {name} lock and its install. GENERATED: python -m scripts.skyrl_regen locks {name}\n"
            + SKYRL_UV_TOML,
            encoding="utf-8",
        )
        argv += ["--config-file", str(config)]
    else:
        argv += ["--no-config"]
    proc = subprocess.run(argv, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"}, text=True, capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"uv could not resolve {spec.directory / 'requirements.in'}:\n{proc.stderr[-4000:]}")
    body = lock.read_text(encoding="utf-8")
    packages = len(read_lock(body))
    header = [
        f"# {name} lock: every package of the environment with the sha256 of its files, resolved by uv for CPython "
        f"{spec.python} on linux x86_64 ({PLATFORM})",
        f"# from requirements.in beside it. GENERATED: python -m scripts.skyrl_regen locks {name}",
        f"# {packages} packages.",
    ]
    lock.write_text("\n".join(header) + "\n" + body.lstrip("\n") + "\n", encoding="utf-8")
    for copy in spec.copies:
        shutil.copyfile(lock, copy / "lock.txt")
    print(f"{lock.relative_to(REPO)}: {packages} packages")
    return lock


def contract_venv(python: str) -> str:
    """The contract tier's venv python (skyrl 0.4.0 and its CPU stack), built on first use."""
    sys.path.insert(0, str(REPO))
    from tests.contract.skyrl_tier import SKYRL_TIER
    from tests.support.py312_tier import tier_environment

    return tier_environment(SKYRL_TIER, python)


def write_base_config() -> Path:
    venv_python = contract_venv(interpreter("3.12"))
    adapter = RUNTIMES / "adapters" / "skyrl"
    out = subprocess.run(
        [venv_python, "-m", "rlaunch_skyrl.base_config"],
        env={**os.environ, "PYTHONPATH": str(adapter)},
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    version = next(ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.strip().startswith("skyrl_version:"))
    target = RUNTIMES / "base_configs" / f"skyrl-{version.strip(chr(39))}.yaml"
    target.write_text(out, encoding="utf-8")
    print(f"{target.relative_to(REPO)} written")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.skyrl_regen", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    locks = sub.add_parser("locks", help="regenerate whole hashed locks with uv")
    locks.add_argument("names", nargs="*", metavar="NAME", help=f"any of {sorted(LOCKS)} (default: all)")
    locks.add_argument("--upgrade", action="store_true", help="resolve afresh instead of keeping the locked versions")
    sub.add_parser("base-config", help="dump SkyRL's default config from the installed package")
    args = parser.parse_args()
    if args.command == "locks":
        unknown = sorted(set(args.names) - set(LOCKS))
        if unknown:
            parser.error(f"unknown lock(s) {unknown}; choose from {sorted(LOCKS)}")
        for name in args.names or list(LOCKS):
            write_lock(name, upgrade=args.upgrade)
        from rlaunch.runtimes.parsed import write_twins

        write_twins()  # the locks' JSON twins, which the preflight reads
    else:
        write_base_config()


if __name__ == "__main__":
    main()
