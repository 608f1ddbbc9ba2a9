"""Readiness items and required backend fixes: statuses for the pinned lock, open defects refused."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.rules.defect_triggers import TRIGGERS, findings
from rlaunch.runtimes.defects import FIXED, OPEN, UNVERIFIED, WORKED_AROUND, KnownDefect
from rlaunch.runtimes.lockfile import read_lock
from rlaunch.runtimes.registry import get_profile, profile_names
from rlaunch.skyrl import check_plan
from rlaunch.skyrl.views.readiness import DEFAULT, MISSING, OK, WARN, readiness, relied_defaults, render
from tests.support import specs as h
from tests.support.launchers import REPO

pytestmark = pytest.mark.parity


def test_lock_pins_are_read_by_packaging() -> None:
    lock = "skyrl[fsdp]==0.4.0\nvLLM==0.30.0 ; sys_platform == 'linux' \\\n    --hash=sha256:ab\n# x==1\ntorch>=2\nJinja2==3.1.6\n"
    pins = {pin.name: pin.version for pin in read_lock(lock)}
    assert pins == {"skyrl": "0.4.0", "vllm": "0.30.0", "torch": None, "jinja2": "3.1.6"}


@pytest.mark.parametrize(
    ("defect", "locked", "status"),
    [
        (KnownDefect("X#1", "vllm", "s", fixed_in="0.20.2"), {"vllm": "0.20.2"}, FIXED),
        (KnownDefect("X#1", "vllm", "s", fixed_in="0.20.2"), {"vllm": "0.20.1"}, OPEN),
        (KnownDefect("X#1", "vllm", "s", fixed_in="0.20.2"), {"vllm": "0.19.10"}, OPEN),  # numeric, not text
        (KnownDefect("X#1", "vllm", "s", fixed_in="0.20.2"), {"vllm": "0.20.2rc1"}, OPEN),  # pre-release first
        (KnownDefect("X#1", "vllm", "s", fixed_in="0.20.2"), {"vllm": "0.20.2.post1"}, FIXED),
        (KnownDefect("X#1", "vLLM", "s", fixed_in="0.20.2rc1"), {"vllm": "0.20.2rc2"}, FIXED),
        (
            KnownDefect("X#1", "vllm", "s", fixed_in="0.20.2", workaround="batch.tail_stride"),
            {"vllm": "0.19.0"},
            WORKED_AROUND,
        ),
        (KnownDefect("X#1", "vllm", "s", fixed_in="0.20.2"), {}, UNVERIFIED),  # a lock without the package
        (KnownDefect("X#1", "skyrl", "s"), {"skyrl": "9.9.9"}, OPEN),
    ],
)
def test_defect_status_for_a_lock(defect: KnownDefect, locked: dict[str, str], status: str) -> None:
    assert defect.status(locked) == status


def test_every_profile_names_only_known_triggers() -> None:
    for name in profile_names():
        for defect in get_profile(name).known_defects:
            assert defect.trigger is None or defect.trigger in TRIGGERS, (name, defect)


def test_skyrl_tail_stride_defect_is_worked_around_by_its_rule() -> None:
    profile = get_profile("fsdp")
    by_id = {f.defect.id: f for f in findings(profile, h.spec().composed_recipe)}
    assert by_id["SkyRL#1609"].status == WORKED_AROUND and not by_id["SkyRL#1609"].triggered
    broken = h.violations(h.seed_topology(train_batch_size=250, policy_mini_batch_size=50))
    assert "batch.tail_stride" in h.codes(broken)
    assert "defect.open" not in h.codes(broken)


def test_an_open_defect_the_geometry_triggers_is_a_preflight_violation() -> None:
    fsdp = get_profile("fsdp")
    open_defect = KnownDefect("SkyRL#9999", "skyrl", "tail batches crash", trigger="tail_stride")
    profile = dataclasses.replace(fsdp, name="fsdp-with-open-defect", known_defects=(open_defect,))
    assert check_plan(h.seed_topology(), h.BASE_RECIPE, profile) == []
    found = check_plan(h.seed_topology(train_batch_size=250, policy_mini_batch_size=50), h.BASE_RECIPE, profile)
    (violation,) = [v for v in found if v.code == "defect.open"]
    assert violation.values == {"defect": "SkyRL#9999", "package": "skyrl", "pinned": "0.4.0"}
    assert "tail batches crash" in violation.message


def _view(execution=None, *, export_hf: bool = True, **spec_kwargs):
    """The planned launch and stored facts readiness reads (never the spec)."""
    document, facts = h.planned_view(h.spec(**spec_kwargs), execution, export_hf=export_hf)
    return PlannedLaunch.of(document), facts


def _items(execution=None, **spec_kwargs) -> dict[str, list]:
    out: dict[str, list] = {}
    for item in readiness(*_view(execution, **spec_kwargs)):
        out.setdefault(item.label, []).append(item)
    return out


def test_readiness_names_a_missing_wandb_key_without_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    items = _items(tree=h.WANDB_RECIPE)
    (credential,) = items["credential"]
    assert credential.state == MISSING and "WANDB_API_KEY NOT set" in credential.value
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef0123456789abcdef01234567")
    (credential,) = _items(tree=h.WANDB_RECIPE)["credential"]
    assert credential.state == OK and "0123456789abcdef" not in credential.value
    (wandb,) = _items(tree=h.WANDB_RECIPE)["W&B identity"]
    assert wandb.value == "entity my-lab, project gsm8k-grpo, run checkpoints/gsm8k-grpo@2026.11.30"


def test_readiness_marks_a_missing_wandb_entity() -> None:
    view = _view(h.iris(wandb_entity=None), export_hf=False, tree=h.WANDB_RECIPE)
    items = {i.label: i for i in readiness(*view)}
    assert items["W&B identity"].state == MISSING
    assert items["export"].value.startswith("no terminal export")


def test_context_budget_is_checked_against_the_engine_max_model_len() -> None:
    tree = h.recipe(generator={"inference_engine": {"engine_init_kwargs": {"max_model_len": 2048}}})
    (budget,) = _items(tree=tree)["context budget"]
    assert budget.state == WARN and "engine max_model_len 2048" in budget.value
    tree = h.recipe(generator={"inference_engine": {"engine_init_kwargs": {"max_model_len": 8192}}})
    (budget,) = _items(tree=tree)["context budget"]
    assert budget.state == OK and "= 4096 tokens within engine max_model_len 8192" in budget.value


def test_host_resources_mark_every_default_for_every_role_and_the_coordinator() -> None:
    items = _items()  # the seed's plan: disaggregated, policy 4 nodes, rollout 4 nodes
    (policy,), (rollout,) = items["policy hosts"], items["rollout hosts"]
    assert policy.state == OK and policy.value == "4 node(s), each 96 CPU, 1600GB memory, 4TB disk"
    assert policy.source == "IrisSkyRLExecution(cpu, memory, disk)" and rollout.value == policy.value
    (coordinator,) = items["coordinator"]  # h.iris() states its deadline only
    assert coordinator.state == DEFAULT and coordinator.line(12).lstrip().startswith("[default]")
    assert coordinator.value == "4 CPU [default], 16GB memory [default], 64GB disk [default], 48h deadline"
    assert coordinator.source == (
        "IrisSkyRLExecution(coordinator_timeout_hours); "
        "IrisSkyRLExecution defaults for coordinator_cpu, coordinator_memory, coordinator_disk"
    )
    stated = h.iris(coordinator_cpu=4.0, coordinator_memory="16GB", coordinator_disk="64GB")
    (coordinator,) = _items(stated)["coordinator"]  # the same values, stated: no longer defaults
    assert coordinator.state == OK and "[default]" not in coordinator.value
    sized = h.iris(memory="1600GB", cpu=96, disk="4TB", max_retries=0)
    assert relied_defaults(_view(sized)[0].document) == [
        "IrisSkyRLExecution.coordinator_cpu=4.0",
        "IrisSkyRLExecution.coordinator_memory='16GB'",
        "IrisSkyRLExecution.coordinator_disk='64GB'",
    ]


def test_a_large_plan_lists_every_default_it_relies_on() -> None:
    defaults = relied_defaults(_view(h.iris())[0].document)
    lines = render(list(_items().values())[0], large=True, defaults=defaults)
    assert lines[-1].startswith("  a large launch relying on 3 default(s): IrisSkyRLExecution.coordinator_cpu=4.0")
    assert render(list(_items().values())[0], large=False, defaults=defaults)[-1].startswith("  [")


@pytest.mark.parametrize(
    ("module", "stage"),
    [
        ("experiments.smoke", ("--stage", "rl")),
        ("experiments.rl_plan_example", ("--stage", "rl")),
        ("experiments.cpu_scaled", ()),
    ],
)
def test_every_rl_experiment_plan_has_the_readiness_section(module: str, stage: tuple[str, ...], tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--version", "2026.11.30", *stage],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "RLAUNCH_PREFIX": str(tmp_path), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    section = done.stdout[done.stdout.index("readiness:") :]
    for label in ("policy", "coordinator", "context budget", "checkpoints", "export", "W&B identity"):
        assert label in section, (label, section)
    assert "backend fix" in section
    assert "smoke gate:" in done.stdout


def test_an_export_left_to_its_default_is_marked_a_default(prefix: str) -> None:
    from rlaunch.skyrl import skyrl_step

    def export_item(**export: bool) -> tuple[str, str]:
        step = skyrl_step(h.spec(), h.iris(), **export)
        (item,) = [i for i in readiness(*h.planned_view_of(step, prefix)) if i.label == "export"]
        return item.state, item.line(6)

    state, line = export_item()
    assert state == "default" and line.startswith("  [default] export  no terminal export;"), line
    assert "skyrl_step.export_hf=False" in relied_defaults(h.launch_of(skyrl_step(h.spec(), h.iris()), prefix).document)
    state, line = export_item(export_hf=False)  # stated: the same value, no longer a default
    assert state == "ok" and line.startswith("  [ok]      export  no terminal export;"), line
