"""`rlaunch compare --sweep NAME`: one row per variant (label, settings, state, steps done of planned,
the reward last logged, its evaluation's accuracy with the 95 % interval, GPU-hours used) and a PNG
with one reward curve per variant.

The runs and evaluations are laid out by hand the way a launch records them
(tests/observe/sweep_records.py): the seed's gang, 8 nodes x 8 H100, so half an hour is 32 GPU-hours.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rlaunch.cli.admin import main
from rlaunch.observe.sweep_compare import compare_sweep, gpu_hours
from tests.observe.sweep_records import LR, VERSION, evaluation, join_sweep, rl_run, variant

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def rlaunch(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def t(hour: int, minute: int) -> str:
    return f"2026-12-01T{hour:02d}:{minute:02d}:00+00:00"


@pytest.fixture
def sweep(prefix: str, document: dict[str, Any]) -> dict[str, Any]:
    """`lr-sweep`: `a` succeeded and evaluated, `b` cancelled at step 2, `c` launching with no metrics yet."""
    variant(document, "lr-sweep", "a", 1e-6, finished_at=t(10, 30))
    variant(document, "lr-sweep", "b", 2e-6, state="cancelled", rewards=(0.1, 0.15), finished_at=t(10, 15))
    variant(document, "lr-sweep", "c", 3e-6, rewards=(), joined_at=None)
    rl_run(document, "plain/rl")  # no sweep's
    scored = evaluation(prefix, f"eval/lr-a@{VERSION}", f"sweeps/rl-a@{VERSION}:f1", right=12)
    return {"prefix": prefix, "a": scored}


def columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_each_variant_has_its_row_with_what_it_has_and_a_dash_for_what_it_has_not(sweep: dict[str, Any]) -> None:
    done = rlaunch("compare", "--sweep", "lr-sweep")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    a = sweep["a"]
    assert lines[0] == "sweep lr-sweep: 3 variant(s)"
    assert [columns(line) for line in lines[1:5]] == [
        ["VARIANT", "SETTINGS", "STATE", "STEPS", "REWARD", "EVALUATION", "GPU-HOURS"],
        ["a", f"{LR}=1e-06", "succeeded", "4/4", "0.4", f"0.600 [{a.low:.3f}, {a.high:.3f}]", "32.00"],
        ["b", f"{LR}=2e-06", "cancelled", "2/4", "0.15", "-", "16.00"],
        ["c", f"{LR}=3e-06", "launching", "-/4", "-", "-", "0.00"],
    ]
    assert lines[6:9] == [
        f"a  sweeps/rl-a@{VERSION}  (evaluated by eval/lr-a@{VERSION})",
        f"b  sweeps/rl-b@{VERSION}  (no evaluation)",
        f"c  sweeps/rl-c@{VERSION}  (no evaluation)",
    ]
    assert "plain/rl" not in done.stdout


def test_the_json_holds_every_row_and_the_plot_written(sweep: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "curves.png"
    done = rlaunch("compare", "--sweep", "lr-sweep", "--json", "--plot", str(out))
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)
    assert shown["sweep"] == "lr-sweep" and shown["plot"] == str(out) and out.read_bytes()[:4] == b"\x89PNG"
    a, b, c = shown["variants"]
    assert (a["variant"], a["settings"], a["steps_done"], a["steps_planned"], a["final_reward"]) == (
        "a",
        {LR: 1e-6},
        4,
        4,
        0.4,
    )
    assert a["score"]["accuracy"]["n"] == 80 and a["score"]["headline"].startswith("accuracy 0.600 [")
    assert (b["state"], b["score"], b["evaluation"], b["gpu_hours"]) == ("cancelled", None, None, 16.0)
    assert (c["steps_done"], c["final_reward"], c["gpu_hours"]) == (None, None, 0.0) and "rewards" not in c
    assert done.stderr == f"wrote {out}: 2 reward curve(s), one per variant that logged a reward\n"


def test_the_plot_draws_one_curve_per_variant_that_logged_a_reward(
    sweep: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.figure import Figure

    drawn: list[list[tuple[str, list[float]]]] = []
    save = Figure.savefig

    def savefig(fig: Figure, *args: Any, **kwargs: Any) -> None:
        drawn.append([(line.get_label(), list(line.get_ydata())) for ax in fig.axes for line in ax.get_lines()])
        save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    done = rlaunch("compare", "--sweep", "lr-sweep")  # the default file: ./<sweep>-rewards.png
    assert done.exit_code == 0, done.output
    assert drawn == [[("a", [0.1, 0.2, 0.3, 0.4]), ("b", [0.1, 0.15])]]
    assert Path("lr-sweep-rewards.png").read_bytes()[:4] == b"\x89PNG"
    assert done.stdout.endswith("wrote lr-sweep-rewards.png: 2 reward curve(s), one per variant that logged a reward\n")


def test_a_sweep_without_a_reward_yet_writes_no_plot_and_says_so(prefix: str, document: dict[str, Any]) -> None:
    variant(document, "quiet", "a", 1e-6, rewards=(), joined_at=None)
    done = rlaunch("compare", "--sweep", "quiet")
    assert done.exit_code == 0, done.output
    assert done.stdout.endswith("no plot written: no variant of quiet has logged a reward yet\n")
    assert not Path("quiet-rewards.png").exists()


def test_a_resumed_variant_is_read_over_all_its_attempts(prefix: str, document: dict[str, Any]) -> None:
    variant(document, "resumed", "a", 1e-6, state="failed", rewards=(0.1, 0.2, 0.9), finished_at=t(10, 30))
    rl_run(
        document,
        "sweeps/rl-a",
        attempt_id="a2",
        first_step=3,
        rewards=(0.5, 0.6),
        joined_at=t(11, 0),
        finished_at=t(11, 15),
    )
    (found,) = compare_sweep(prefix, "resumed", NOW).variants
    assert (found.state, found.steps_done, found.final_reward) == ("succeeded", 4, 0.6)
    assert found.rewards == ((1, 0.1), (2, 0.2), (3, 0.5), (4, 0.6))  # the later attempt wins at step 3
    assert found.gpu_hours == pytest.approx(32 + 16)


def test_a_variant_two_evaluations_scored_names_both_and_shows_neither(sweep: dict[str, Any]) -> None:
    evaluation(sweep["prefix"], f"eval/lr-a-again@{VERSION}", f"sweeps/rl-a@{VERSION}:f1", right=5)
    evaluation(sweep["prefix"], f"eval/lr-ab@{VERSION}", f"sweeps/rl-ab@{VERSION}:f1", right=5)  # another model
    a = compare_sweep(sweep["prefix"], "lr-sweep", NOW).variants[0]
    assert (a.evaluation, a.score) == (None, None)
    assert a.evaluation_note == (
        f"2 evaluations scored it (eval/lr-a-again@{VERSION}, eval/lr-a@{VERSION}): compare them by name"
    )


def test_an_older_report_shows_its_accuracy_without_an_interval(sweep: dict[str, Any]) -> None:
    evaluation(sweep["prefix"], f"eval/lr-b@{VERSION}", f"sweeps/rl-b@{VERSION}:f1", right=5)
    report = Path(sweep["prefix"]) / "eval" / "lr-b" / VERSION / "report.json"
    report.write_text(json.dumps({k: v for k, v in json.loads(report.read_text()).items() if k != "n_prompts"}))
    row = next(line for line in rlaunch("compare", "--sweep", "lr-sweep").stdout.splitlines() if line.startswith("b "))
    assert columns(row)[5] == "0.250 (no interval)"


def test_an_unknown_sweep_is_refused_naming_the_sweeps_there(sweep: dict[str, Any]) -> None:
    done = CliRunner().invoke(main, ["compare", "--sweep", "lr"])
    assert done.exit_code != 0
    assert f"no run under {sweep['prefix']} is a variant of sweep 'lr'; sweeps there: lr-sweep" in done.output


def test_a_malformed_record_is_told_beside_the_table(sweep: dict[str, Any], document: dict[str, Any]) -> None:
    broken = rl_run(document, "sweeps/rl-broken")
    join_sweep(broken, {"name": "lr-sweep", "variant": "d"})
    done = rlaunch("compare", "--sweep", "lr-sweep")
    assert done.exit_code == 0 and done.stdout.startswith("sweep lr-sweep: 3 variant(s)\n")
    assert done.stderr == (
        f"warning: {broken / 'run_record.json'}: sweep lacks settings: {{'name': 'lr-sweep', 'variant': 'd'}}; "
        "it is written by the sweep's launch: relaunch the variant, or remove the field to list the run alone\n"
    )


@pytest.mark.parametrize(
    ("args", "told"),
    [
        (["a@1", "--sweep", "lr-sweep"], "give two evaluations A B, or --sweep NAME, not both"),
        (["a@1", "b@1", "--plot", "x.png"], "--plot draws a sweep's reward curves: give it with --sweep NAME"),
        (["a@1"], "give two evaluations A B (or two RL versions), or --sweep NAME"),
    ],
    ids=["both", "plot-without-sweep", "one-evaluation"],
)
def test_compare_takes_two_evaluations_or_a_sweep(prefix: str, args: list[str], told: str) -> None:
    done = CliRunner().invoke(main, ["compare", *args])
    assert done.exit_code == 2 and told in done.output


def test_gpu_hours_count_what_each_attempts_gang_held() -> None:
    gang = {"num_nodes": 2, "gpus_per_node": 4, "gpu_variant": "H100"}

    def attempt(state: str, finished: str | None, **phases: str) -> dict[str, Any]:
        return {"state": state, "allocation": gang, "finished_at": finished, "phases": phases}

    queued = attempt("failed", t(10, 30), child_submitted=t(9, 0), replica_1_joined=t(10, 0), replica_0_joined=t(10, 5))
    assert gpu_hours([queued], False, NOW) == pytest.approx(8 * 0.5)  # from the first replica, not the queue
    unjoined = attempt("failed", t(10, 30), child_submitted=t(10, 0))
    assert gpu_hours([unjoined], False, NOW) == pytest.approx(8 * 0.5)
    running = attempt("running", None, replica_0_joined=t(11, 0))
    assert gpu_hours([queued, running], True, NOW) == pytest.approx(8 * 0.5 + 8 * 1.0)  # to now
    assert gpu_hours([running, queued], True, NOW) == pytest.approx(8 * 0.5)  # only the latest is open
    assert gpu_hours([queued, running], False, NOW) == pytest.approx(8 * 0.5)  # ended without a recorded end
    cpu = {**queued, "allocation": {**gang, "gpu_variant": "cpu"}}
    garbled = attempt("failed", "yesterday", replica_0_joined=t(10, 0))
    recorded_topology = {**queued, "allocation": None, "topology": gang}
    assert gpu_hours([cpu, garbled, {"state": "failed"}], False, NOW) == 0.0
    assert gpu_hours([recorded_topology], False, NOW) == pytest.approx(8 * 0.5)
