"""benchmarks/memory_fit.py without a GPU: its reading of vLLM's start-up log, the vLLM subprocess's
plumbing (with a stand-in child, no vLLM), and `compare` printing each measurement beside the
memory model's estimate of it.

The log lines are published ones (source beside each); tests/rules/test_memory_model.py holds the
same engines' numbers against the KV model.
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import pytest

from rlaunch.rules import memory
from rlaunch.rules.devices import GIB
from rlaunch.rules.model_shape import Architecture
from rlaunch.skyrl import ModelFacts
from tests.support import file_modules

fit = file_modules.load("benchmarks/memory_fit.py", "memory_fit_script")

# dennislee22/vLLM-benchmarking, log/vllm-7B-1gpuA10080GB-0.25GRAM.log: vLLM 0.10.1.1 (V1), Qwen2-7B-Instruct
# on an A100 80GB, --max-model-len 16384, --gpu-memory-utilization 0.25.
V1_LOG = """\
(EngineCore_0 pid=1812) INFO 09-04 01:02:54 [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: model='Qwen2-7B-Instruct'
(EngineCore_0 pid=1812) INFO 09-04 01:03:03 [gpu_model_runner.py:2007] Model loading took 14.2488 GiB and 4.422213 seconds
(EngineCore_0 pid=1812) INFO 09-04 01:04:29 [gpu_worker.py:276] Available KV cache memory: 5.01 GiB
(EngineCore_0 pid=1812) INFO 09-04 01:04:29 [kv_cache_utils.py:849] GPU KV cache size: 93,872 tokens
(EngineCore_0 pid=1812) INFO 09-04 01:04:29 [kv_cache_utils.py:853] Maximum concurrency for 16,384 tokens per request: 5.73x
(EngineCore_0 pid=1812) INFO 09-04 01:04:32 [gpu_model_runner.py:2708] Graph capturing finished in 3 secs, took 0.50 GiB
(APIServer pid=1671) INFO 09-04 01:04:33 [loggers.py:142] Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 5867
"""  # noqa: E501
# vllm-project/vllm#12569 (vLLM 0.7.1, V1 before "GPU KV cache size"): neuralmagic/Meta-Llama-3.1-70B-Instruct-
# quantized.w8a8, --max-model-len 2048.
V1_BLOCKS_LOG = """\
INFO 01-30 03:18:12 gpu_model_runner.py:848] Loading model weights took 67.7229 GB
INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381
INFO 01-30 03:19:14 kv_cache_utils.py:398] Maximum concurrency for 2048 tokens per request: 10.79x
"""
# vllm-project/vllm#7878 (V0): "# GPU blocks" beside "# CPU blocks" on one line.
V0_LOG = """\
INFO 08-26 19:19:06 model_runner.py:890] Loading model weights took 6.5727 GB
INFO 08-26 19:19:06 distributed_gpu_executor.py:56] # GPU blocks: 9650, # CPU blocks: 3276
"""


def test_parser_reads_a_published_v1_start_up_log() -> None:
    parsed = fit.parse_vllm_log(V1_LOG)
    assert parsed["kv_tokens"] == 93872
    assert (parsed["concurrency_len"], parsed["concurrency"]) == (16384, 5.73)
    assert (parsed["available_kv_gib"], parsed["weights_gib"], parsed["graphs_gib"]) == (5.01, 14.2488, 0.50)
    assert parsed["gpu_blocks"] == 5867  # the front-end's "num_gpu_blocks is: 5867" (5867 x 16 = 93,872)
    assert fit.measured_kv_tokens(parsed) == 93872 and fit.kv_log_error(parsed) is None


def test_parser_reads_the_block_wording_of_v0_and_vllm_0_7() -> None:
    early = fit.parse_vllm_log(V1_BLOCKS_LOG)
    assert early["kv_tokens"] is None and early["gpu_blocks"] == 1381
    assert fit.measured_kv_tokens(early) == 1381 * 16  # blocks of vLLM's default 16 tokens
    assert (early["concurrency_len"], early["concurrency"], early["weights_gib"]) == (2048, 10.79, 67.7229)
    v0 = fit.parse_vllm_log(V0_LOG)
    assert v0["gpu_blocks"] == 9650 and v0["weights_gib"] == 6.5727  # not the CPU blocks
    # vllm-project/vllm#10517 (V0 0.6.x), the memory profile's fragment as the issue quotes it
    assert fit.parse_vllm_log("memory profiling: kv_cache_size=3.81GiB gpu_memory_utilization=0.90")[
        "available_kv_gib"
    ] == pytest.approx(3.81)


def test_parser_reads_both_numbers_from_one_line_and_ignores_colour_codes() -> None:
    # Newer builds log "GPU KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx" as one
    # line (vllm/v1/core/kv_cache_utils.py); a terminal-coloured prefix must not hide it.
    line = (
        "\x1b[1;36m(EngineCore pid=7)\x1b[0;0m INFO 01-02 03:04:05 [kv_cache_utils.py:1] "
        "GPU KV cache size: 2,042,016 tokens, Maximum concurrency for 2,048 tokens per request: 997.08x"
    )
    parsed = fit.parse_vllm_log(line)
    assert (parsed["kv_tokens"], parsed["concurrency_len"], parsed["concurrency"]) == (2042016, 2048, 997.08)


def test_a_log_without_the_kv_line_gives_none_and_says_which_line_is_missing() -> None:
    without = "\n".join(line for line in V1_LOG.splitlines() if "KV cache size" not in line and "num_gpu" not in line)
    parsed = fit.parse_vllm_log(without)
    assert parsed["kv_tokens"] is None and parsed["gpu_blocks"] is None
    assert fit.measured_kv_tokens(parsed) is None
    assert "GPU KV cache size: N tokens" in fit.kv_log_error(parsed)
    assert parsed["concurrency"] == 5.73  # the other lines are still read
    assert all(v is None for v in fit.parse_vllm_log("Traceback: CUDA out of memory").values())


# --- the vLLM subprocess, with a stand-in child (no vLLM, no GPU) --------------------------------

# Checks what the script hands vLLM (the kwargs, the model directory, the environment), then prints
# the published V1 lines with the case's own length.
CHILD = """
import json, os, sys
kw = json.loads(sys.argv[1])
cfg = json.load(open(os.path.join(kw["model"], "config.json")))
assert cfg["architectures"] == ["Qwen2ForCausalLM"] and cfg["num_key_value_heads"] == 4, cfg
assert kw["load_format"] == "dummy" and kw["skip_tokenizer_init"] is True and kw["dtype"] == "bfloat16", kw
assert (kw["gpu_memory_utilization"], kw["max_num_seqs"], kw["enforce_eager"]) == (0.5, 256, True), kw
assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and "MASTER_PORT" not in os.environ
print("rlaunch-vllm-version 0.0.test")
print("INFO [gpu_worker.py:276] Available KV cache memory: 5.01 GiB")
print("INFO [kv_cache_utils.py:849] GPU KV cache size: 93,872 tokens")
print(f"INFO [kv_cache_utils.py:853] Maximum concurrency for {kw['max_model_len']:,} tokens per request: 22.92x")
print("rlaunch-vllm-ready", flush=True)
"""
QWEN2_CASE = fit.VLLM_GRID[0]


def test_vllm_case_starts_the_child_with_the_case_and_reads_its_log(monkeypatch: pytest.MonkeyPatch) -> None:
    assert QWEN2_CASE["family"] == "qwen2" and QWEN2_CASE["max_model_len"] == 4096
    monkeypatch.setattr(fit, "_VLLM_CHILD", CHILD)
    monkeypatch.setenv("MASTER_PORT", "29533")
    result = fit._vllm_case(QWEN2_CASE, timeout_s=60)
    assert "error" not in result and "warning" not in result, result
    assert (result["kind"], result["vllm"], result["returncode"]) == ("vllm", "0.0.test", 0)
    assert (result["kv_tokens"], result["concurrency_len"], result["available_kv_gib"]) == (93872, 4096, 5.01)
    assert any("GPU KV cache size: 93,872 tokens" in line for line in result["log_lines"])


def test_a_child_that_fails_before_the_kv_line_records_the_error_and_its_last_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        fit, "_VLLM_CHILD", "import sys; print('ValueError: No available memory for the cache blocks'); sys.exit(3)"
    )
    result = fit._vllm_case(QWEN2_CASE, timeout_s=60)
    assert result["kv_tokens"] is None and result["returncode"] == 3
    assert "GPU KV cache size" in result["error"] and "exit code 3" in result["error"]
    assert "No available memory for the cache blocks" in result["error"]


def test_a_child_past_its_timeout_is_killed_and_keeps_the_numbers_it_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    child = "import time; print('GPU KV cache size: 1,024 tokens', flush=True); time.sleep(60)"
    monkeypatch.setattr(fit, "_VLLM_CHILD", child)
    result = fit._vllm_case(QWEN2_CASE, timeout_s=1)
    assert result["kv_tokens"] == 1024 and "error" not in result
    assert "timed out after 1 s" in result["warning"]


# --- compare: the estimate beside the measurement -------------------------------------------------

CAPACITY = 80 * GIB  # not a table device's: the estimate must use the header's capacity
TRAINING = {"family": "qwen2", "micro": 1, "seq": 1024, "checkpointing": True, "kind": "training", "peak": 4247451136}
MEASURED_TOKENS = 3_000_000


def _vllm_case(**changes: Any) -> dict[str, Any]:
    parsed = fit.parse_vllm_log(V1_LOG.replace("93,872", f"{MEASURED_TOKENS:,}"))
    return {**QWEN2_CASE, "kind": "vllm", "vllm": "0.11.0", **parsed, "seconds": 41.0, **changes}


def _expected_kv_tokens() -> int:
    """The engine's KV tokens by the memory model's own parts, for QWEN2_CASE on CAPACITY: bf16 weights,
    the profiling peak at 8192 batched tokens and 256 sequences, no CUDA graphs (eager), the context."""
    arch = ModelFacts.from_hf_config(fit.FAMILIES["qwen2"]).architecture
    assert isinstance(arch, Architecture)
    dense, experts = arch.stored_bytes(2, 1, hopper=True)
    kv = memory.kv_capacity(
        arch,
        1,
        1,
        2,
        max_model_len=4096,
        batched_tokens=8192,
        device=CAPACITY,
        budget=int(0.5 * CAPACITY),
        weights=int(dense + experts),
        overhead=memory.profile_peak(arch, 1, 8192, 256, memory.LOCKED_VLLM.sampler_rows) + memory.non_torch(1),
    )
    return kv.tokens


def _compare(
    tmp_path: pathlib.Path, cases: list[dict[str, Any]], capsys: pytest.CaptureFixture[str], **header: Any
) -> str:
    data = {
        "device": "NVIDIA Test GPU 80GB",
        "device_bytes": CAPACITY,
        "device_sm": 90,
        "torch": "2.11.0+cu130",
        "transformers": "5.17.0",
        "vllm": "0.11.0",
        **header,
        "cases": cases,
    }
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(data))
    assert fit.main(["compare", str(path)]) == 0
    return capsys.readouterr().out


def test_compare_prints_each_measurement_beside_its_estimate(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _compare(tmp_path, [TRAINING, _vllm_case()], capsys)
    ours = fit.estimate(TRAINING)
    (train_line,) = [line for line in out.splitlines() if line.startswith("qwen2") and "training" in line]
    assert f"{TRAINING['peak'] / GIB:8.2f}G" in train_line and f"{ours / GIB:8.2f}G" in train_line
    assert f"{(ours - TRAINING['peak']) / TRAINING['peak']:+7.1%}" in train_line

    expected = _expected_kv_tokens()
    assert expected != MEASURED_TOKENS
    (kv_line,) = [line for line in out.splitlines() if line.startswith("qwen2") and f"{MEASURED_TOKENS:,}" in line]
    assert f"{expected:,}" in kv_line, (kv_line, expected)
    assert f"{(expected - MEASURED_TOKENS) / MEASURED_TOKENS:+7.1%}" in kv_line
    assert "5.73x" in kv_line and "5.01" in kv_line  # vLLM's concurrency and available KV memory, as printed
    assert "80.00 GiB" in out and "NVIDIA Test GPU 80GB" in out


def test_compare_reports_a_failed_vllm_case_and_estimates_the_block_wording(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = _vllm_case(kv_tokens=None, gpu_blocks=MEASURED_TOKENS // 16)
    failed = {**QWEN2_CASE, "kind": "vllm", "error": "vLLM printed no 'GPU KV cache size: N tokens' line (exit code 1)"}
    out = _compare(tmp_path, [blocks, failed], capsys)
    assert f"{MEASURED_TOKENS:,}" in out and f"{_expected_kv_tokens():,}" in out
    assert "failed on the device: vLLM printed no 'GPU KV cache size" in out
    assert "cases 1" in out


def test_compare_without_a_recorded_capacity_says_so(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _compare(tmp_path, [_vllm_case()], capsys, device_bytes=0)
    assert "no recorded capacity" in out and "not estimated" in out


def test_what_the_child_leaves_behind_is_killed_and_does_not_hold_its_output(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.compile's workers inherit the child's stdout: waiting for the pipe to close would wait for them.
    child = (
        "import subprocess, sys\n"
        "left = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('straggler', left.pid)\n"
        "print('GPU KV cache size: 2,048 tokens')\n"
        "print('rlaunch-vllm-ready', flush=True)\n"
    )
    monkeypatch.setattr(fit, "_VLLM_CHILD", child)
    started = time.monotonic()
    result = fit._vllm_case(QWEN2_CASE, timeout_s=50)
    assert time.monotonic() - started < 20, "waited for the straggler"
    assert result["kv_tokens"] == 2048 and "error" not in result and "warning" not in result, result
