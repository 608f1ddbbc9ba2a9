"""Property: any `rlaunch` argument vector ends in exit 0, 1 or 2 with a message, never a traceback,
never an unexpected error, and writes nothing outside the test's temporary root.

The prefix holds fabricated runs (a succeeded one, a failed one whose job is known) and one real,
finished local job, so references resolve as often as they miss. `launch` is left out: it reads
launch documents, whose properties the document tests cover.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlaunch.artifacts import records
from rlaunch.cli.admin import main as rlaunch_main
from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobSpec
from tests.support.polling import py

REPO = Path(__file__).resolve().parents[2]
VERSION = "2026.11.30"
SWEEP = "demo-sweep"
EXAMPLES = int(os.environ.get("RLAUNCH_CLI_PROPERTY_EXAMPLES", "500"))


class World:
    """The temporary root every example runs in (shared: examples only read it, or fail to)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefix = root / "prefix"
        self.jobs = self.prefix / ".jobs"
        self.errors = root / "errors"
        self.home = root / "home"
        self.home.mkdir()
        backend = LocalBackend(self.jobs, cpus=2, kill_grace=1.0)
        self.job_id = backend.submit(JobSpec(name="finished", argv=py("print('a line')\nprint('another')")))
        backend.wait(self.job_id, timeout=60)
        self.ok = self._run(VERSION, "succeeded", terminal=True)
        record = json.loads((self.ok / "run_record.json").read_text())
        record["sweep"] = {"name": SWEEP, "variant": "a", "settings": {"trainer.seed": 1}}  # a sweep's variant
        (self.ok / "run_record.json").write_text(json.dumps(record))
        self.failed = self._run("2026.11.29", "failed", job=self.job_id)
        self.env = {
            "RLAUNCH_PREFIX": str(self.prefix),
            "RLAUNCH_LOCAL_ROOT": str(self.jobs),
            "RLAUNCH_ERROR_DIR": str(self.errors),
            "HOME": str(self.home),
            "RLAUNCH_TEMP_PREFIX": str(root / "tmp-prefix"),
        }

    def _run(self, version: str, state: str, *, terminal: bool = False, job: str | None = None) -> Path:
        out = self.prefix / "demo" / "rl" / version
        out.mkdir(parents=True)
        attempt = {"attempt_id": f"a-{version}", "state": state, "artifact": f"demo/rl@{version}", "backend": "local"}
        if job:
            attempt["coordinator_job_id"] = job
        (out / "run_record.json").write_text(json.dumps({"run_id": "demo/rl", "attempts": [attempt]}))
        records.write_status(str(out), state, identity=f"demo/rl@{version}")
        if terminal:
            manifest = {"config": {}, "result": {"state": state, "attempt_id": attempt["attempt_id"]}}
            (out / "terminal.json").write_text(json.dumps(manifest))
        return out

    def snapshot(self) -> dict[str, set[str]]:
        """What exists outside the root where a stray write would land (in the shared temporary
        directory only rlaunch's own default places: other programs use it meanwhile)."""
        tool_caches = {".hypothesis", ".pytest_cache"}  # the test tools' own, not rlaunch's
        places = {str(p): set(os.listdir(p)) - tool_caches for p in (REPO, Path.home() / ".cache") if p.is_dir()}
        temp = Path(tempfile.gettempdir())
        places[str(temp)] = {name for name in ("rlaunch-errors", "rlaunch-task") if (temp / name).exists()}
        return places


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("cli-properties"))


def anything() -> st.SearchStrategy[str]:
    return st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


def numbers() -> st.SearchStrategy[str]:
    return st.one_of(st.integers().map(str), st.integers(min_value=10**15).map(str), anything())


def world_strategies(world: World) -> dict[str, st.SearchStrategy[str]]:
    runs = st.sampled_from([
        f"demo/rl@{VERSION}", "demo/rl@2026.11.29", "demo/rl@2099.01.01", "x@y", "a@b@c", "@", "",
        world.job_id, str(world.ok), str(world.failed), "j" * 300, "/", "/proc", ".", "~", "nosuch://x/y",
    ])  # fmt: skip
    prefixes = st.sampled_from([
        str(world.prefix), "/", "/proc", "/sys/kernel", "nosuch://x", "memory://props", "relative-dir",
        f"file://{world.prefix}", "~", "", str(world.root / "missing"), "s3://bucket/x",
    ])  # fmt: skip
    outputs = st.sampled_from([
        str(world.root / "plots" / "x.png"), str(world.root / "x.png"), "/nonexistent/x.png", "", "/",
        str(world.root), "relative.png",
    ])  # fmt: skip
    return {
        "run": st.one_of(runs, anything()),
        "prefix": st.one_of(prefixes, anything()),
        "int": numbers(),
        "text": anything(),
        "sweep": st.one_of(st.just(SWEEP), anything()),
        "output": outputs,
        "job": st.one_of(st.sampled_from([world.job_id, "j" * 300, "../x", "nope", ""]), anything()),
        "backend": st.sampled_from(["local", "iris", "nonesuch", ""]),
        "root": st.sampled_from([str(world.jobs), str(world.root / "no-jobs"), "/", "relative-root"]),
    }


def argv_strategy(world: World) -> st.SearchStrategy[list[str]]:
    s = world_strategies(world)

    def opt(name: str, value: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
        return st.one_of(st.just([]), value.map(lambda v: [name, v]))

    def flag(name: str) -> st.SearchStrategy[list[str]]:
        return st.sampled_from([[], [name]])

    def command(name: str, positional: list[st.SearchStrategy[str]], *options: st.SearchStrategy[list[str]]):
        parts = st.tuples(st.tuples(*positional) if positional else st.just(()), *options)
        return parts.map(lambda p: [name, *p[0], *[x for o in p[1:] for x in o]])

    top = st.one_of(
        command(
            "runs", [], opt("--prefix", s["prefix"]), opt("--name", s["text"]), opt("--sweep", s["sweep"]),
            flag("--json"),
        ),
        command(
            "compare", [], opt("--sweep", s["sweep"]), opt("--prefix", s["prefix"]), opt("--plot", s["output"]),
            flag("--json"),
        ),
        command("status", [s["run"]], opt("--prefix", s["prefix"]), opt("--attempt", s["text"]), flag("--json")),
        command("verify-smoke", [s["run"]], opt("--prefix", s["prefix"]), opt("--attempt", s["text"]), flag("--json")),
        command(
            "logs", [s["run"]], opt("--prefix", s["prefix"]), opt("--replica", s["int"]), opt("--tail", s["int"]),
            flag("--coordinator"), flag("--follow"),
        ),
        command("cancel", [s["run"]], opt("--prefix", s["prefix"]), flag("--yes"), opt("--reason", s["text"])),
        command("plot", [s["run"]], opt("--prefix", s["prefix"]), opt("--attempt", s["text"]), opt("-o", s["output"])),
    )  # fmt: skip
    jobs_sub = st.one_of(
        command("list", [], flag("--json")),
        command("status", [s["job"]], flag("--json")),
        command("logs", [s["job"]], opt("--replica", s["int"]), opt("--tail", s["int"]), flag("--follow")),
        command("cancel", [s["job"]], st.just(["--yes"]), opt("--reason", s["text"])),
    )
    jobs = st.tuples(opt("--backend", s["backend"]), opt("--root", s["root"]), jobs_sub).map(
        lambda p: ["jobs", *p[0], *p[1], *p[2]]
    )
    junk = st.lists(st.one_of(anything(), st.sampled_from(["--help", "--json", "-o", "--", "--prefix"])), max_size=4)
    noise = st.one_of(st.just([]), st.just([]), junk)  # mostly well-formed command lines
    return st.tuples(st.one_of(top, jobs), noise).map(lambda p: p[0] + p[1])


def test_every_argument_vector_ends_cleanly(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    (world.root / "cwd").mkdir(exist_ok=True)
    monkeypatch.chdir(world.root / "cwd")  # relative paths land inside the root
    before = world.snapshot()
    runner = CliRunner()
    codes: dict[int, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    @given(argv=argv_strategy(world))
    def check(argv: list[str]) -> None:
        result = runner.invoke(rlaunch_main, argv, env=world.env, catch_exceptions=True)
        codes[result.exit_code] = codes.get(result.exit_code, 0) + 1
        shown = f"rlaunch {argv!r} -> {result.exit_code}\n{result.output}"
        assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
            shown + f"\nescaped: {result.exception!r}"
        )
        assert result.exit_code in (0, 1, 2), shown
        assert "Traceback" not in result.output, shown
        if result.exit_code != 0:
            assert result.output.strip(), shown
        saved = list(world.errors.glob("*.txt")) if world.errors.exists() else []
        assert not saved, shown + "\nunexpected error: " + (saved[0].read_text() if saved else "")

    check()
    after = world.snapshot()
    added = {place: after[place] - before.get(place, set()) for place in after}
    assert not any(added.values()), f"an rlaunch command wrote outside the test's root: {added}"
    assert codes.get(0) and codes.get(2), f"the examples should reach both successes and refusals: {codes}"
    print(f"exit codes over {sum(codes.values())} examples: {dict(sorted(codes.items()))}")
