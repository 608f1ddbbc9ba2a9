"""GSM8K in the SkyRL adapter: the answer rule (plain Python, here), the evaluation's scoring of
completions, and the conversion run for real with pyarrow (the trl-cpu runtime's interpreter, the
SkyRL adapter on its path: the fsdp runtime itself needs CUDA)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch.runtimes.registry import get_profile
from rlaunch.sources.data_facts import split_facts
from tests.support.adapters import import_adapter

SKYRL_ADAPTER = str(get_profile("fsdp").adapter_dir)
sys.path.insert(0, SKYRL_ADAPTER)

from rlaunch_skyrl import gsm8k  # noqa: E402
from rlaunch_skyrl.evaluate import summarise  # noqa: E402

# (completion, ground truth, score)
CASES = [
    ("so the total is #### 1,234", "1234", 1.0),  # the marked answer, its comma dropped
    ("#### -7", "-7", 1.0),  # negative
    ("The answer is 3,000 dollars.", "3000", 1.0),  # unmarked: the last number
    ("first 12, then 18", "18", 1.0),
    ("#### 5 and later 6", "5", 1.0),  # the marked answer wins over a later number
    ("#### 5.0", "5", 1.0),  # the same number
    ("I do not know", "4", 0.0),  # no number
    ("", "4", 0.0),
    ("#### 41", "42", 0.0),
    ("answer: -3", "3", 0.0),  # the sign counts
]


@pytest.mark.parametrize(("completion", "truth", "expected"), CASES)
def test_the_gsm8k_rule_scores_the_marked_or_last_number(completion: str, truth: str, expected: float) -> None:
    assert gsm8k.score(completion, truth) == expected


def test_the_skyrl_rule_agrees_with_the_trl_cpu_reward_it_copies() -> None:
    """The two adapters cannot import each other (each runs in its own environment): the same cases hold both."""
    trl_gsm8k = import_adapter().rewards.get("gsm8k")
    assert [gsm8k.score(c, t) for c, t, _ in CASES] == [trl_gsm8k(c, t) for c, t, _ in CASES]


def test_a_hub_answer_gives_its_marked_number_and_an_unmarked_one_none() -> None:
    assert gsm8k.marked_answer("She pays 2 * 3 = <<2*3=6>>6 dollars.\n#### 6") == "6"
    assert gsm8k.marked_answer("#### 1,000") == "1000"
    assert gsm8k.marked_answer("no mark 6") is None
    assert gsm8k.answer_of("nothing here") is None


def test_the_evaluation_counts_correct_completions_against_each_rows_ground_truth() -> None:
    rows = [
        {"prompt": [{"role": "user", "content": "2 + 2?"}], "reward_spec": {"ground_truth": "4"}},
        {"prompt": [{"role": "user", "content": "3 - 5?"}], "reward_spec": {"ground_truth": "-2"}},
    ]
    result = summarise(rows, [["It is #### 4"], ["It is 2"]])
    assert (result["n"], result["correct"], result["accuracy"], result["samples"]) == (2, 1, 0.5, 1)
    assert result["example"] == {
        "prompt": "2 + 2?", "completion": "It is #### 4", "answer": "4", "ground_truth": "4", "score": 1.0,
    }  # fmt: skip
    with pytest.raises(ValueError, match="completions for 1 rows, 2 rows"):
        summarise(rows, [["#### 4"]])


def test_sampled_completions_are_clustered_by_their_row() -> None:
    rows = [{"prompt": [{"role": "user", "content": "2 + 2?"}], "reward_spec": {"ground_truth": "4"}}] * 2
    result = summarise(rows, [["#### 4", "#### 4", "#### 4"], ["#### 5", "#### 4", "#### 5"]])
    assert (result["n"], result["n_prompts"], result["samples"], result["correct"]) == (6, 2, 3, 4)
    assert result["per_prompt"] == pytest.approx([1.0, 1 / 3])


WRITE = """
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.Table.from_pylist(json.loads(sys.argv[2])), sys.argv[1])
"""
READ = """
import json, sys
import pyarrow.parquet as pq
print(json.dumps(pq.read_table(sys.argv[1]).to_pylist()))
"""


def run_python(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SKYRL_ADAPTER, "PYTHONNOUSERSITE": "1"}
    return subprocess.run([python, *args], env=env, capture_output=True, text=True, timeout=300)


def write_parquet(python: str, path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    done = run_python(python, "-c", WRITE, str(path), json.dumps(rows))
    assert done.returncode == 0, done.stderr


def convert(python: str, source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return run_python(
        python, "-m", "rlaunch_skyrl.gsm8k", "--source", str(source), "--out", str(out), "--instruction", "Think.",
        "--split", "train.parquet=main/train-*.parquet", "--split", "test.parquet=main/test-*.parquet",
    )  # fmt: skip


TRAIN = [
    {"question": "Ann has 3 apples and buys 4. How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
    {"question": "A car costs 1,200 and a bike 300. Total?", "answer": "1200 + 300 = 1500\n#### 1,500"},
    {"question": "Tom owes 5 and pays 8. Balance?", "answer": "5 - 8 = -3\n#### -3"},
]
TEST = [{"question": "2 + 2?", "answer": "#### 4"}]


def test_the_conversion_writes_skyrls_rows_from_a_gsm8k_snapshot(trl_env, tmp_path: Path) -> None:
    env, _ = trl_env
    source, out = tmp_path / "snapshot", tmp_path / "out"
    write_parquet(env.python, source / "main" / "train-00000-of-00001.parquet", TRAIN)
    write_parquet(env.python, source / "main" / "test-00000-of-00001.parquet", TEST)
    done = convert(env.python, source, out)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"splits": {"test.parquet": 1, "train.parquet": 3}}
    read = run_python(env.python, "-c", READ, str(out / "train.parquet"))
    rows = json.loads(read.stdout)
    assert [r["reward_spec"] for r in rows] == [
        {"method": "rule", "ground_truth": truth} for truth in ("7", "1500", "-3")
    ]
    assert rows[0]["prompt"] == [{"role": "user", "content": f"{TRAIN[0]['question']} Think."}]
    assert {r["env_class"] for r in rows} == {"gsm8k"}
    assert rows[2]["extra_info"] == {"split": "train", "index": 2, **TRAIN[2]}
    # what the data step records and the preflight checks: every row has the fsdp runtime's data fields
    facts = split_facts(str(out))
    assert facts["train.parquet"]["rows"] == 3 and facts["test.parquet"]["rows"] == 1
    for name in get_profile("fsdp").data_fields:
        assert name in facts["train.parquet"]["fields"], name


def test_the_conversion_refuses_a_snapshot_without_a_gsm8k_column(trl_env, tmp_path: Path) -> None:
    env, _ = trl_env
    source = tmp_path / "snapshot"
    train = source / "main" / "train-00000-of-00001.parquet"
    write_parquet(env.python, train, [{"question": "2 + 2?", "solution": "#### 4"}])
    write_parquet(env.python, source / "main" / "test-00000-of-00001.parquet", TEST)
    done = convert(env.python, source, tmp_path / "out")
    assert done.returncode == 2
    assert f"{train}: no column 'answer'" in done.stderr and "'solution'" in done.stderr
    unmarked = source / "main" / "test-00000-of-00001.parquet"
    write_parquet(env.python, train, TRAIN)
    write_parquet(env.python, unmarked, [{"question": "2 + 2?", "answer": "four"}])
    done = convert(env.python, source, tmp_path / "out")
    assert done.returncode == 2 and f"{unmarked} row 0: its answer marks no final answer" in done.stderr
