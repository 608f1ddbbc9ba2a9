"""Build (once) and describe the environment a runtime profile runs in. Launcher side: stdlib and the ground floor.

`ensure_environment(profile)` returns a `RuntimeEnvironment`: the interpreter to run, the adapter
directory to put on PYTHONPATH, the environment variables and the argv of a runtime process.

* `environment: host` - the interpreter running rlaunch (`sys.executable`) and the profile's
  adapter directory in place; nothing is installed (test runtimes).
* `environment: venv` - under the cache root (`$RLAUNCH_RUNTIME_CACHE`, default
  `~/.cache/rlaunch/runtimes`)::

      <root>/venvs/<sha256(lock.txt)[:16]>/         the virtualenv, shared by every digest with this lock
          .rlaunch-complete                          written last: the venv is usable
          lock.txt, freeze.txt                       what was asked for / what uv installed
      <root>/<profile>-<digest[:16]>/               one per source digest, immutable once complete
          adapter/                                   snapshot of the adapter source (what runs)
          profile/, base_config.yaml                 snapshot of the rest of what was digested
          venv -> ../venvs/<key>                     convenience link
          environment.json                           profile, digest, venv, python, created
          .rlaunch-complete

  uv (the `uv` wheel, a dependency of rlaunch) makes the venv (`uv venv --python <profile.python>`,
  never downloading an interpreter) and installs exactly the lock, every file checked against its
  sha256 (`uv pip sync --require-hashes`, with pip's configured find-links, where a machine keeps
  wheels the registry does not serve, such as the CPU build of torch). A venv without its
  completion marker is half-built: it is removed and rebuilt, never used. A snapshot is copied to
  a temporary directory, checked against the digest, and renamed into place. Builders serialise
  on file locks (`filelock`) under `<root>/.locks/`, so concurrent processes build each thing once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import storage
from rlaunch.experiment_code import CODE_PATH_ENV
from rlaunch.runtimes.lockfile import read_lock

if TYPE_CHECKING:  # pragma: no cover
    from rlaunch.runtimes.registry import RuntimeProfile

CACHE_ENV = "RLAUNCH_RUNTIME_CACHE"
DEFAULT_CACHE = "~/.cache/rlaunch/runtimes"
COMPLETE = ".rlaunch-complete"
BASE_CONFIG_ENV = "RLAUNCH_BASE_CONFIG"
PROFILE_ENV = "RLAUNCH_RUNTIME_PROFILE"
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
HEARTBEAT_S = 15.0
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".pytest_cache")

Progress = Callable[[str], None]


class RuntimeEnvironmentError(RuntimeError):
    """The environment could not be built (missing interpreter, pip failure, changed source)."""


def _stderr_progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser().resolve()


@dataclass(frozen=True)
class RuntimeEnvironment:
    profile_name: str
    digest: str
    kind: str  # "host" | "venv"
    python: str  # interpreter path (do not resolve: a venv's bin/python is a symlink that must stay one)
    adapter_dir: str  # goes on PYTHONPATH
    base_config: str  # the base config file the recipe composes onto (snapshot for venv)
    profile_file: str  # the profile.yaml the adapter reads its capabilities from (snapshot for venv)
    launcher: str  # "python" | "torchrun"
    root: str | None = None  # <root>/<profile>-<digest16> (venv only)
    venv_dir: str | None = None
    built: bool = False  # this call built the venv or the snapshot
    venv_built: bool = False  # this call built the venv

    def process_env(self, extra: Mapping[str, str] | None = None, *, inherit: bool = False) -> dict[str, str]:
        """Variables a runtime process needs: PYTHONPATH = the adapter dir, then the experiment's
        staged code (`$RLAUNCH_EXPERIMENT_CODE`, from `extra` or an inherited environment), then an
        `extra` PYTHONPATH; offline flags for HF libraries, `RLAUNCH_BASE_CONFIG`,
        `RLAUNCH_RUNTIME_PROFILE`, then `extra`.

        An overlay by default (merge it onto the parent environment); `inherit=True` returns
        `os.environ` with the overlay applied (the parent's PYTHONPATH is dropped, not inherited)."""
        extra = dict(extra or {})
        env: dict[str, str] = {}
        if inherit:
            env.update(os.environ)
            env.pop("PYTHONPATH", None)
        env.update(OFFLINE_ENV)
        env[BASE_CONFIG_ENV] = self.base_config
        env[PROFILE_ENV] = self.profile_file
        if self.kind == "venv":
            env["PYTHONNOUSERSITE"] = "1"
        paths = [self.adapter_dir]
        code = extra.get(CODE_PATH_ENV) or env.get(CODE_PATH_ENV)
        if code:  # the adapter's own modules cannot be shadowed by the experiment's
            paths.append(code)
        if extra.get("PYTHONPATH"):
            paths.append(extra.pop("PYTHONPATH"))
        else:
            extra.pop("PYTHONPATH", None)
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def command(self, module: str, args: list[str] | tuple[str, ...] = (), *, nproc: int = 1) -> list[str]:
        """argv that runs `python -m module args` (under `torch.distributed.run` for a torchrun
        runtime with more than one process per node)."""
        if self.launcher == "torchrun" and nproc > 1:
            return [
                self.python,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc_per_node={nproc}",
                "-m",
                module,
                *args,
            ]
        return [self.python, "-m", module, *args]


def ensure_environment(
    profile: RuntimeProfile,
    *,
    progress: Progress | None = None,
    cache: str | os.PathLike[str] | None = None,
) -> RuntimeEnvironment:
    """The runtime's environment, built on first use and reused afterwards."""
    say = progress or _stderr_progress
    digest = profile.source_digest
    if profile.environment == "host":
        return RuntimeEnvironment(
            profile_name=profile.name,
            digest=digest,
            kind="host",
            python=sys.executable,
            adapter_dir=str(profile.adapter_dir),
            base_config=str(profile.base_config_file),
            profile_file=os.path.join(profile.directory, "profile.yaml"),
            launcher=profile.launcher,
        )
    if profile.environment != "venv":
        raise RuntimeEnvironmentError(
            f"runtime {profile.name!r}: environment {profile.environment!r} is not supported (use 'venv' or 'host')"
        )
    root = Path(cache).expanduser().resolve() if cache is not None else cache_root()
    root.mkdir(parents=True, exist_ok=True)
    venv, venv_built = _ensure_venv(profile, root, say)
    env_dir, snap_built = _ensure_snapshot(profile, digest, root, venv, say)
    return RuntimeEnvironment(
        profile_name=profile.name,
        digest=digest,
        kind="venv",
        python=str(venv / "bin" / "python"),
        adapter_dir=str(env_dir / "adapter"),
        base_config=str(env_dir / "base_config.yaml"),
        profile_file=str(env_dir / "profile" / "profile.yaml"),
        launcher=profile.launcher,
        root=str(env_dir),
        venv_dir=str(venv),
        built=venv_built or snap_built,
        venv_built=venv_built,
    )


class RuntimeToolError(RuntimeError):
    """A module run in a runtime's environment failed, or ended without printing its JSON line."""


def runtime_tool(runtime: str, module: str, *args: str, progress: Progress | None = None) -> dict[str, Any]:
    """Run `python -m module args` in `runtime`'s environment (built on first use) and return the
    JSON object of the last line it prints.

    A step's function runs in rlaunch's own interpreter, which has none of a runtime's packages
    (torch, pyarrow, vLLM); its heavy work goes through the runtime's environment this way."""
    from rlaunch.runtimes.registry import get_profile

    env = ensure_environment(get_profile(runtime), progress=progress)
    done = subprocess.run(
        env.command(module, list(args)), env=env.process_env({}, inherit=True), capture_output=True, text=True
    )
    command = f"{module} {' '.join(args)}".strip()
    if done.returncode != 0:
        raise RuntimeToolError(
            f"runtime {runtime!r}: {command} failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict):
        raise RuntimeToolError(
            f"runtime {runtime!r}: {command} exited 0 but its last line of output is not a JSON object "
            f"({lines[-1][:200] if lines else 'it printed nothing'!r}); the module must print its result as the "
            f"last line:\n{done.stderr[-3000:]}"
        )
    return result


# ---------------------------------------------------------------- locking


@contextmanager
def _heartbeat(say: Progress, message: Callable[[float], str]) -> Iterator[None]:
    """Say `message(seconds so far)` every HEARTBEAT_S while the block runs, so a long wait is never silent."""
    started = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            say(message(time.monotonic() - started))

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextmanager
def _locked(path: Path, say: Progress, what: str) -> Iterator[None]:
    from filelock import FileLock, Timeout  # imported on use: only a build takes this lock

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))  # an OS file lock: released by the kernel even when the holder is killed
    try:
        lock.acquire(timeout=0)
    except Timeout:
        say(f"waiting for another process that is building {what} (lock {path})")
        with _heartbeat(say, lambda s: f"still waiting for {what} ({s:.0f}s)"):
            lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- venv


def venv_key(profile: RuntimeProfile) -> str:
    return _sha256(profile.lock_file.read_bytes())[:16]


def _venv_complete(venv: Path) -> bool:
    return (venv / COMPLETE).is_file() and (venv / "bin" / "python").exists()


def _ensure_venv(profile: RuntimeProfile, root: Path, say: Progress) -> tuple[Path, bool]:
    if not profile.lock_file.is_file():
        raise RuntimeEnvironmentError(f"runtime {profile.name!r} has no lock file at {profile.lock_file}")
    return build_venv(f"runtime {profile.name}", profile.lock_file, profile.python, root=root, progress=say)


def build_venv(
    what: str,
    lock_file: Path,
    python: str,
    *,
    interpreter: str | None = None,
    root: Path | None = None,
    progress: Progress | None = None,
) -> tuple[Path, bool]:
    """The venv for `lock_file` under `<root>/venvs/<sha256(lock)[:16]>`, built once; (venv, built now).

    `what` names it in progress and errors ("runtime fsdp", "test tier skyrl"); `interpreter`
    creates it (default: the Python `python` (major.minor) that uv finds). Shared by runtime
    profiles and the test tiers that need another Python (tests/support/py312_tier.py)."""
    say = progress or _stderr_progress
    root = root if root is not None else cache_root()
    lock_bytes = lock_file.read_bytes()
    key = _sha256(lock_bytes)[:16]
    venv = root / "venvs" / key
    if _venv_complete(venv):
        _check_venv_python(what, python, venv)
        return venv, False
    with _locked(root / ".locks" / f"venv-{key}.lock", say, f"the venv for {what}"):
        if _venv_complete(venv):
            _check_venv_python(what, python, venv)
            return venv, False
        if venv.exists():
            say(f"removing half-built venv {venv} (no completion marker)")
            shutil.rmtree(venv)
        started = time.monotonic()
        say(f"building {what}: creating venv (Python {python}) at {venv}")
        venv.parent.mkdir(parents=True, exist_ok=True)
        created = _uv(["venv", "--quiet", "--python", interpreter or str(python), str(venv)])
        if created.returncode != 0:
            raise RuntimeEnvironmentError(
                f"{what} needs Python {python} to build its environment, and uv could not create one: "
                f"{created.stdout.strip()[-1500:]}. Install Python {python} (e.g. `pyenv install {python}`) "
                f"so that `python{python}` is on PATH."
            )
        (venv / "lock.txt").write_bytes(lock_bytes)
        total = len(read_lock(lock_bytes.decode("utf-8"), str(lock_file)))
        config = lock_file.parent / "uv.toml"  # the GPU locks' build settings (scripts/skyrl_regen.py)
        if config.is_file():
            shutil.copyfile(config, venv / "uv.toml")
        _install(venv, venv / "lock.txt", total, what, say)
        (venv / "freeze.txt").write_text(_uv(["pip", "freeze", "--python", str(venv / "bin" / "python")]).stdout)
        seconds = time.monotonic() - started
        marker = {
            "profile": what,
            "lock_sha256": _sha256(lock_bytes),
            "python": python,
            "requirements": total,
            "seconds": round(seconds, 1),
            "built_at": time.time(),
        }
        storage.write_json_atomic(venv / COMPLETE, marker)
        say(f"{what} venv ready in {seconds:.0f}s ({venv})")
        return venv, True


def _check_venv_python(what: str, python: str, venv: Path) -> None:
    try:
        marker = json.loads((venv / COMPLETE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    built_with = str(marker.get("python", python))
    if built_with != str(python):
        raise RuntimeEnvironmentError(
            f"{what} wants Python {python}, but the venv for its lock at {venv} was built "
            f"with Python {built_with}; remove {venv} (or use another {CACHE_ENV})"
        )


def _uv(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run uv (the `uv` wheel's binary) with stderr folded into stdout; never downloads a Python.

    uv trusts the machine's certificate store, as pip does: with its own roots only, a machine whose
    index traffic passes a local CA fails every package its caches do not hold yet (a cold HOME)."""
    from uv import find_uv_bin

    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1", "UV_SYSTEM_CERTS": "1"}
    return subprocess.run([find_uv_bin(), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def pip_find_links() -> list[str]:
    """The find-links locations pip is configured with (`pip config list`, PIP_FIND_LINKS): uv does not read
    pip's configuration, and a machine's wheels there (e.g. the CPU build of torch) are what its locks pin.
    A local directory this machine lacks (forwarded from a submitter elsewhere) is skipped, as pip does."""
    found = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    values = [line.split("=", 1)[1].strip("'\"") for line in found if line.split("=", 1)[0].endswith(".find-links")]
    values.append(os.environ.get("PIP_FIND_LINKS", ""))
    links = dict.fromkeys(link for value in values for link in value.split() if link)
    return [link for link in links if "://" in link or os.path.isdir(link)]  # a path another machine lacks is skipped


_UV_SAYS = ("Resolved ", "Prepared ", "Installed ", "Uninstalled ", "Audited ")


def _install(venv: Path, lock: Path, total: int, name: str, say: Progress) -> None:
    """`uv pip sync --require-hashes`: exactly the lock's packages, each checked against its sha256
    (with the lock's `uv.toml` when it has one, else no uv configuration of this machine)."""
    links = [arg for link in pip_find_links() for arg in ("--find-links", link)]
    config = venv / "uv.toml"
    links += ["--config-file", str(config)] if config.is_file() else ["--no-config"]
    say(f"installing {name}: {total} packages from {lock.name} with uv (hashes required)")
    started = time.monotonic()
    with _heartbeat(say, lambda s: f"installing {name}: {total} packages ... {s:.0f}s"):
        result = _uv(["pip", "sync", "--python", str(venv / "bin" / "python"), "--require-hashes", *links, str(lock)])
    lines = result.stdout.splitlines()
    for line in lines:
        if line.startswith(_UV_SAYS):
            say(f"installing {name}: {line.strip()}")
    if result.returncode != 0:
        raise RuntimeEnvironmentError(
            f"uv could not install {name} from {lock} (exit {result.returncode}); last lines:\n"
            + "\n".join(lines[-60:])
        )
    say(f"installing {name}: {total}/{total} packages ... done in {time.monotonic() - started:.0f}s")


# ---------------------------------------------------------------- snapshot


def _ensure_snapshot(profile: RuntimeProfile, digest: str, root: Path, venv: Path, say: Progress) -> tuple[Path, bool]:
    env_dir = root / f"{profile.name}-{digest[:16]}"
    if (env_dir / COMPLETE).is_file():
        return env_dir, False
    with _locked(root / ".locks" / f"{env_dir.name}.lock", say, f"the source snapshot of runtime {profile.name}"):
        if (env_dir / COMPLETE).is_file():
            return env_dir, False
        if env_dir.exists():
            say(f"removing incomplete runtime snapshot {env_dir}")
            shutil.rmtree(env_dir)
        tmp = root / f".{env_dir.name}.{uuid.uuid4().hex}.tmp"
        try:
            shutil.copytree(profile.adapter_dir, tmp / "adapter", ignore=_IGNORED)
            shutil.copytree(profile.directory, tmp / "profile", ignore=_IGNORED)
            shutil.copyfile(profile.base_config_file, tmp / "base_config.yaml")
            copied = dataclasses.replace(
                profile,
                directory=str(tmp / "profile"),
                adapter_dir=str(tmp / "adapter"),
                base_config_file=str(tmp / "base_config.yaml"),
            )
            if copied.source_digest != digest:
                raise RuntimeEnvironmentError(
                    f"the source of runtime {profile.name} changed while it was being snapshotted "
                    f"(digest {digest[:16]} became {copied.source_digest[:16]}); run again"
                )
            os.symlink(os.path.relpath(venv, env_dir), tmp / "venv")
            info = {
                "profile": profile.name,
                "digest": digest,
                "venv": str(venv),
                "python": str(venv / "bin" / "python"),
                "launcher": profile.launcher,
                "created": time.time(),
            }
            (tmp / "environment.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            (tmp / COMPLETE).write_text(digest + "\n", encoding="utf-8")
            os.rename(tmp, env_dir)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        say(f"runtime {profile.name} source snapshot {digest[:16]} at {env_dir}")
        return env_dir, True
