"""A CPU runtime's memory report is sized against the host memory it is given: a trl-cpu slot has no
fixed size, so the report must carry the node's memory through to the memory model, and without
it says the device was not sized (it never guesses)."""

from __future__ import annotations

from rlaunch.rules.devices import GIB, Device
from rlaunch.skyrl import ModelFacts
from rlaunch.skyrl.views.memory_fit import memory_report
from tests.support.built_counts import BASE
from tests.support.specs import BASE_RECIPE, cpu_topology

QWEN2 = ModelFacts.from_hf_config({**BASE, "model_type": "qwen2", "intermediate_size": 512})


def test_a_cpu_runtimes_report_is_sized_against_the_host_memory_it_is_given() -> None:
    report = memory_report(cpu_topology(), BASE_RECIPE, "trl-cpu", QWEN2, seed=17, host_memory_bytes=4 * GIB)
    assert report.table.device == Device("cpu slot", 4 * GIB, "host memory per node / 1 slots")
    assert report.lines()[0] == "  per device: cpu slot, 4.0 GiB (host memory per node / 1 slots)"
    assert [(r.role, r.phase) for r in report.table.rows] == [("policy", "model states"), ("policy", "training step")]


def test_a_cpu_runtimes_report_without_host_memory_says_the_device_was_not_sized() -> None:
    report = memory_report(cpu_topology(), BASE_RECIPE, "trl-cpu", QWEN2, seed=17)
    assert report.lines() == ["  cannot size the device: host memory per CPU slot is not known (no allocation)"]
    assert report.violations == ()
