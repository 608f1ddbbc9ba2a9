"""The runtime environment builder, on a tiny fake profile (a lock with one small wheel)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlaunch.runtimes.environment import (
    COMPLETE,
    RuntimeEnvironmentError,
    RuntimeToolError,
    ensure_environment,
    pip_find_links,
    runtime_tool,
    venv_key,
)
from rlaunch.runtimes.registry import Capabilities, RuntimeProfile, get_profile

pytestmark = pytest.mark.runtime

SIX_WHEEL = "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"  # six-1.17.0-py2.py3-none-any.whl
LOCK = f"# a tiny lock for builder tests\nsix==1.17.0 \\\n    --hash=sha256:{SIX_WHEEL}\n"


def make_profile(
    root: Path, *, python: str | None = None, lock: str = LOCK, message: str = "one", write: bool = True
) -> RuntimeProfile:
    """The fake profile under `root`; `write=False` only describes files another process wrote."""
    directory = root / "profile"
    if write:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "profile.yaml").write_text("strategy: fsdp\nenvironment: venv\n")
        (directory / "lock.txt").write_text(lock)
        adapter = root / "adapter" / "fake_adapter"
        adapter.mkdir(parents=True, exist_ok=True)
        (adapter / "__init__.py").write_text("")
        (adapter / "hello.py").write_text(
            textwrap.dedent(
                f"""
                import json, os, sys
                import six
                print(json.dumps({{"message": {message!r}, "file": __file__, "prefix": sys.prefix,
                                   "six": six.__version__, "offline": os.environ.get("HF_HUB_OFFLINE")}}))
                """
            )
        )
        (root / "base.yaml").write_text("trainer:\n  seed: 1\n")
    base = root / "base.yaml"
    return RuntimeProfile(
        name="fake",
        directory=str(directory),
        base_config_file=str(base),
        adapter_dir=str(root / "adapter"),
        strategy="fsdp",
        strategy_aliases={},
        entrypoints={"standard": "fake_adapter.hello"},
        launcher="torchrun",
        environment="venv",
        python=python or f"{sys.version_info.major}.{sys.version_info.minor}",
        capabilities=Capabilities(accelerator="cpu"),
    )


def run_hello(env) -> dict:
    result = subprocess.run(
        env.command("fake_adapter.hello", []), env=env.process_env(inherit=True), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("env-built")
    profile = make_profile(root / "src")
    messages: list[str] = []
    env = ensure_environment(profile, progress=messages.append, cache=root / "cache")
    return {"root": root, "profile": profile, "env": env, "messages": messages}


def test_builds_once_then_reuses(built):
    env, profile = built["env"], built["profile"]
    assert env.built and env.venv_built and env.kind == "venv"
    cache = built["root"] / "cache"
    key = env.venv_dir.rsplit("/", 1)[-1]
    assert Path(env.venv_dir) == cache / "venvs" / key and len(key) == 16
    assert Path(env.root) == cache / f"fake-{profile.source_digest[:16]}"
    assert Path(env.adapter_dir) == Path(env.root) / "adapter"
    assert (Path(env.venv_dir) / COMPLETE).exists() and (Path(env.root) / COMPLETE).exists()
    assert (Path(env.root) / "venv").resolve() == Path(env.venv_dir).resolve()
    assert "six==1.17.0" in (Path(env.venv_dir) / "freeze.txt").read_text()

    messages: list[str] = []
    again = ensure_environment(profile, progress=messages.append, cache=cache)
    assert not again.built and not again.venv_built
    assert (again.python, again.adapter_dir) == (env.python, env.adapter_dir)
    assert messages == []  # nothing to do, nothing to say

    out = run_hello(env)
    assert out["six"] == "1.17.0" and out["offline"] == "1"
    assert Path(out["prefix"]).resolve() == Path(env.venv_dir).resolve()


def test_progress_is_reported(built):
    text = "\n".join(built["messages"])
    assert "creating venv" in text
    assert "installing runtime fake: 1 packages" in text
    assert "with uv (hashes required)" in text and "Installed 1 package" in text
    assert "1/1 packages ... done in" in text
    assert "venv ready" in text


def test_adapter_snapshot_is_what_runs(built):
    env, profile = built["env"], built["profile"]
    source = built["root"] / "src"
    hello = source / "adapter" / "fake_adapter" / "hello.py"
    original = hello.read_text()
    try:
        hello.write_text(original.replace("'one'", "'two'"))
        # the same profile object keeps the digest it computed: its snapshot is unchanged
        same = ensure_environment(profile, progress=lambda m: None, cache=built["root"] / "cache")
        assert same.adapter_dir == env.adapter_dir
        out = run_hello(same)
        assert out["message"] == "one" and out["file"].startswith(env.adapter_dir)
        # a fresh profile sees the edit: new digest, new snapshot, the same shared venv
        edited = make_profile(source, message="two")
        assert edited.source_digest != profile.source_digest
        new = ensure_environment(edited, progress=lambda m: None, cache=built["root"] / "cache")
        assert new.built and not new.venv_built
        assert new.venv_dir == env.venv_dir and new.adapter_dir != env.adapter_dir
        assert run_hello(new)["message"] == "two"
    finally:
        hello.write_text(original)


def test_source_changing_during_snapshot_is_refused(built, tmp_path):
    profile = make_profile(tmp_path / "src", message="three")  # a digest not built yet
    digest = profile.source_digest  # computed now, as a launcher would
    (tmp_path / "src" / "adapter" / "fake_adapter" / "late.py").write_text("x = 1\n")
    with pytest.raises(RuntimeEnvironmentError, match="changed while it was being snapshotted"):
        ensure_environment(profile, progress=lambda m: None, cache=built["root"] / "cache")
    assert not (built["root"] / "cache" / f"fake-{digest[:16]}").exists()


def test_half_built_environment_is_rebuilt_not_used(tmp_path):
    profile = make_profile(tmp_path / "src")
    cache = tmp_path / "cache"
    # what an interrupted build leaves: directories without their completion markers
    venv = cache / "venvs" / venv_key(profile)
    snapshot = cache / f"fake-{profile.source_digest[:16]}"
    for half in (venv, snapshot):
        (half / "bin").mkdir(parents=True)
        (half / "debris").write_text("half")
    (venv / "bin" / "python").symlink_to(sys.executable)  # looks usable, but has no marker
    messages: list[str] = []
    env = ensure_environment(profile, progress=messages.append, cache=cache)
    assert env.venv_built and env.built
    assert Path(env.venv_dir) == venv and Path(env.root) == snapshot
    assert not (venv / "debris").exists() and not (snapshot / "debris").exists()
    assert (venv / COMPLETE).exists() and (snapshot / COMPLETE).exists()
    assert any("half-built" in m for m in messages) and any("incomplete" in m for m in messages)
    assert run_hello(env)["six"] == "1.17.0"


BUILDER = """
import json, sys
sys.path.insert(0, {tests!r})
from runtimes.test_environment import make_profile
from rlaunch.runtimes.environment import ensure_environment
from pathlib import Path
profile = make_profile(Path({src!r}), write=False)
env = ensure_environment(profile, progress=lambda m: print("progress:", m, file=sys.stderr, flush=True), cache={cache!r})
print(json.dumps({{"venv_built": env.venv_built, "built": env.built, "python": env.python}}))
"""


def test_two_concurrent_builders_build_once(tmp_path):
    make_profile(tmp_path / "src")
    script = BUILDER.format(
        tests=str(Path(__file__).parents[1]), src=str(tmp_path / "src"), cache=str(tmp_path / "cache")
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        outs.append((json.loads(stdout), stderr))
    assert sorted(o["venv_built"] for o, _ in outs) == [False, True]  # the venv is built once
    # and so is the snapshot, by either (the other may have said it waited for "the source snapshot")
    assert sum(len(re.findall(r"source snapshot [0-9a-f]{16} at ", err)) for _, err in outs) == 1
    assert any(o["built"] for o, _ in outs)
    assert outs[0][0]["python"] == outs[1][0]["python"]
    waiter = next(err for o, err in outs if not o["venv_built"])
    assert "waiting for another process" in waiter
    assert len(list((tmp_path / "cache" / "venvs").glob("*/" + COMPLETE))) == 1


def test_missing_interpreter_fails_clearly(tmp_path):
    profile = make_profile(tmp_path / "src", python="3.99")
    with pytest.raises(RuntimeEnvironmentError, match=r"(?s)needs Python 3\.99.*python3\.99"):
        ensure_environment(profile, progress=lambda m: None, cache=tmp_path / "cache")


@pytest.mark.parametrize(
    "lock, says",
    [
        (LOCK.replace(SIX_WHEEL, "0" * 64), "hash"),  # a file that is not the one the lock names
        ("six==1.17.0\n", "hash"),  # a lock without hashes is not installed at all
    ],
    ids=["wrong-hash", "no-hash"],
)
def test_a_lock_whose_hashes_do_not_hold_is_refused_and_leaves_no_usable_venv(tmp_path, lock, says):
    profile = make_profile(tmp_path / "src", lock=lock)
    with pytest.raises(RuntimeEnvironmentError, match=f"(?s)uv could not install runtime fake.*{says}"):
        ensure_environment(profile, progress=lambda m: None, cache=tmp_path / "cache")
    assert not list((tmp_path / "cache" / "venvs").glob("*/" + COMPLETE))


def test_host_environment_uses_this_interpreter(tmp_path):
    from dataclasses import replace

    profile = replace(make_profile(tmp_path / "src"), environment="host", launcher="python")
    env = ensure_environment(profile, progress=lambda m: pytest.fail(m), cache=tmp_path / "cache")
    assert env.kind == "host" and env.python == sys.executable and env.adapter_dir == str(profile.adapter_dir)
    assert not (tmp_path / "cache").exists()
    assert env.command("fake_adapter.hello", ["--x"], nproc=4) == [sys.executable, "-m", "fake_adapter.hello", "--x"]


def test_command_and_process_env(built):
    env = built["env"]
    assert env.command("m", ["--config", "F.yaml"]) == [env.python, "-m", "m", "--config", "F.yaml"]
    assert env.command("m", ["a"], nproc=3) == [
        env.python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=3",
        "-m",
        "m",
        "a",
    ]
    overlay = env.process_env({"RLAUNCH_ATTEMPT_DIR": "/x", "PYTHONPATH": "/extra"})
    assert overlay["PYTHONPATH"] == os.pathsep.join([env.adapter_dir, "/extra"])
    for key, value in {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "RLAUNCH_ATTEMPT_DIR": "/x",
    }.items():
        assert overlay[key] == value
    assert overlay["RLAUNCH_BASE_CONFIG"] == str(Path(env.root) / "base_config.yaml")
    assert overlay["RLAUNCH_RUNTIME_PROFILE"] == str(Path(env.root) / "profile" / "profile.yaml")
    assert Path(overlay["RLAUNCH_RUNTIME_PROFILE"]).is_file()
    assert "PATH" not in overlay
    full = env.process_env({}, inherit=True)
    assert full["PATH"] == os.environ["PATH"] and full["PYTHONPATH"] == env.adapter_dir


def test_trl_cpu_profile_is_a_torchrun_venv():
    profile = get_profile("trl-cpu")
    assert profile.environment == "venv" and profile.launcher == "torchrun" and profile.python == "3.11"
    assert any(r.startswith("trl==") for r in profile.lock_requirements())
    assert "torch==2.13.0+cpu" in profile.lock_requirements()  # the CPU build, from pip's configured find-links


def test_find_links_are_pips_and_a_local_directory_this_machine_lacks_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no configuration files: the variable alone
    monkeypatch.setenv("PIP_FIND_LINKS", f"{wheels} {tmp_path / 'elsewhere'} https://example.org/wheels")
    assert pip_find_links() == [str(wheels), "https://example.org/wheels"]


def test_runtime_tool_returns_the_last_json_line_and_names_the_module_when_there_is_none(tmp_path: Path) -> None:
    """The host test runtime runs stdlib modules in this interpreter: a JSON line, a failure, prose."""
    import tests.plugins.marker_runtime  # noqa: F401  registers `test-marker`

    document = tmp_path / "result.json"
    document.write_text('{"n": 2,\n "correct": 1}')
    assert runtime_tool("test-marker", "json.tool", "--compact", str(document)) == {"n": 2, "correct": 1}
    with pytest.raises(RuntimeToolError, match=r"runtime 'test-marker': no_such_module failed \(exit 1\)"):
        runtime_tool("test-marker", "no_such_module")
    with pytest.raises(RuntimeToolError, match="exited 0 but its last line of output is not a JSON object"):
        runtime_tool("test-marker", "json.tool", str(document))  # pretty-printed: the last line is "}"
