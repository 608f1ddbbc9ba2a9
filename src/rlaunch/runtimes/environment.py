"""Build (once) and describe the environment a runtime profile runs in. Launcher side: stdlib and the ground floor.

`ensure_environment(profile)` returns a `RuntimeEnvironment`: the interpreter to run, the adapter
directory to put on PYTHONPATH, the environment variables and the argv of a runtime process.

* `environment: host` - the interpreter running rlaunch (`sys.executable`) and the profile's
  adapter directory in place; nothing is installed (test runtimes).
* `environment: venv` - under the cache root (`$RLAUNCH_RUNTIME_CACHE`, default
  `~/.cache/rlaunch/runtimes`)::

      <root>/venvs/<sha256(lock.txt)[:16]>/         the virtualenv, shared by every digest with this lock
          .rlaunch-complete                          written last: the venv is usable
          lock.txt, freeze.txt                       what was asked for / what pip installed
      <root>/<profile>-<digest[:16]>/               one per source digest, immutable once complete
          adapter/                                   snapshot of the adapter source (what runs)
          profile/, base_config.yaml                 snapshot of the rest of what was digested
          venv -> ../venvs/<key>                     convenience link
          environment.json                           profile, digest, venv, python, created
          .rlaunch-complete

  The venv is made with `python<profile.python> -m venv` (the running interpreter when its
  major.minor matches), then `<venv>/bin/python -m pip install -r lock.txt`. A venv without its
  completion marker is half-built: it is removed and rebuilt, never used. A snapshot is copied to
  a temporary directory, checked against the digest, and renamed into place. Builders serialise
  on `fcntl` locks under `<root>/.locks/`, so concurrent processes build each thing once.
"""

from __future__ import annotations

import collections
import dataclasses
import fcntl
import hashlib
import json
import os
import re
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
from typing import TYPE_CHECKING

from rlaunch import storage

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
        """Variables a runtime process needs: PYTHONPATH = the adapter dir (an `extra` PYTHONPATH is
        appended after it), offline flags for HF libraries, `RLAUNCH_BASE_CONFIG`,
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


# ---------------------------------------------------------------- locking


@contextmanager
def _locked(path: Path, say: Progress, what: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another process that is building {what} (lock {path})")
            started = last = time.monotonic()
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(0.2)
                    if time.monotonic() - last >= HEARTBEAT_S:
                        last = time.monotonic()
                        say(f"still waiting for {what} ({time.monotonic() - started:.0f}s)")
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- venv


def venv_key(profile: RuntimeProfile) -> str:
    return _sha256(profile.lock_file.read_bytes())[:16]


def lock_requirements(lock_file: Path) -> list[str]:
    """The requirement lines of a lock (comments and blank lines dropped)."""
    lines = lock_file.read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


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
    creates it (default: `base_interpreter(python)`). Shared by runtime profiles and the test
    tiers that need another Python (tests/py312_tier.py)."""
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
        interpreter = interpreter or base_interpreter(python)
        say(f"building {what}: creating venv (Python {python}) at {venv}")
        venv.parent.mkdir(parents=True, exist_ok=True)
        _run_checked([interpreter, "-m", "venv", str(venv)], f"create the venv for {what}")
        (venv / "lock.txt").write_bytes(lock_bytes)
        venv_python = str(venv / "bin" / "python")
        requirements = lock_requirements(lock_file)
        _pip_install(venv_python, venv / "lock.txt", len(requirements), what, say)
        freeze = subprocess.run(
            [venv_python, "-m", "pip", "freeze", "--disable-pip-version-check"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        (venv / "freeze.txt").write_text(freeze, encoding="utf-8")
        seconds = time.monotonic() - started
        marker = {
            "profile": what,
            "lock_sha256": _sha256(lock_bytes),
            "python": python,
            "requirements": len(requirements),
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


def base_interpreter(version: str) -> str:
    """An interpreter of `version` (major.minor) to create a venv with."""
    version = str(version)
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    candidate = shutil.which(f"python{version}")
    if candidate:
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
        detail = f"{candidate} does not run as Python {version}: {(probe.stderr or probe.stdout).strip()[:300]}"
    else:
        detail = f"no python{version} on PATH"
    raise RuntimeEnvironmentError(
        f"this runtime needs Python {version} to build its environment, and {detail}. "
        f"Install Python {version} (e.g. `pyenv install {version}`) so that `python{version}` is on PATH."
    )


def _run_checked(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeEnvironmentError(
            f"could not {what}: `{' '.join(argv)}` exited {result.returncode}\n{(result.stderr or result.stdout)[-3000:]}"
        )


_COLLECT = re.compile(r"^(Collecting|Processing|Requirement already satisfied:?)\s+(\S+)")


def _package_name(spec: str) -> str:
    """`torch==2.13.0`, `/opt/wheels/torch-2.13.0+cpu-cp311-....whl` or `torch>=2` -> `torch`."""
    spec = os.path.basename(spec.rstrip(","))
    name = re.split(r"[=<>!~\[(;]|-\d", spec, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip_install(python: str, lock: Path, total: int, name: str, say: Progress) -> None:
    argv = [
        python,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--progress-bar",
        "off",
        "-r",
        str(lock),
    ]
    say(f"installing {name}: {total} packages from {lock.name} with pip")
    started = time.monotonic()
    tail: collections.deque[str] = collections.deque(maxlen=60)
    state = {"phase": "collecting", "seen": 0, "last_say": time.monotonic()}
    collected: set[str] = set()
    done = threading.Event()
    guard = threading.Lock()

    def emit(message: str) -> None:
        with guard:
            state["last_say"] = time.monotonic()
        say(message)

    def heartbeat() -> None:
        while not done.wait(1.0):
            with guard:
                quiet = time.monotonic() - state["last_say"]
            if quiet >= HEARTBEAT_S:
                emit(
                    f"installing {name}: {state['phase']} {state['seen']}/{total} packages ... "
                    f"{time.monotonic() - started:.0f}s"
                )

    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip()
            tail.append(line)
            match = _COLLECT.match(line)
            if match:
                package = _package_name(match.group(2))
                if package not in collected:
                    collected.add(package)
                    state["seen"] = min(len(collected), total)
                    if state["seen"] == 1 or state["seen"] % 10 == 0:
                        emit(f"installing {name}: collecting {state['seen']}/{total} packages ({package})")
            elif line.startswith("Installing collected packages:"):
                state["phase"] = "installing"
                emit(f"installing {name}: {state['seen']}/{total} collected, installing them ...")
        returncode = process.wait()
    finally:
        done.set()
        if process.poll() is None:
            process.kill()
            process.wait()
    if returncode != 0:
        raise RuntimeEnvironmentError(
            f"pip could not install {name} from {lock} (exit {returncode}); last lines:\n" + "\n".join(tail)
        )
    emit(f"installing {name}: {total}/{total} packages ... done in {time.monotonic() - started:.0f}s")


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
