"""What would fit: a refused or tight plan names the nearest plans that fit, and each passes the preflight.

The search (`rlaunch.rules.fit`) reads the same memory model as the plan; these tests apply every
change it prints to the spec's topology and recipe and run the whole preflight on the result.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments import rl_plan_example as example
from rlaunch import rules
from rlaunch.dotted import set_path
from rlaunch.rules import fit, memory
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import ModelFacts, PreflightError, SkyRLTopology, check_plan, skyrl_step
from rlaunch.skyrl.plan import planning
from rlaunch.skyrl.preflight import subject_of
from rlaunch.skyrl.values.config_yaml import parse_config_yaml, render_recipe
from rlaunch.skyrl.views.plan_view import describe_step
from rlaunch.sources.hub import hf_model_source
from tests.skyrl.helpers import DAY, iris, planned_launch_view, recipe, spec, topology

QWEN3_8B = ModelFacts.from_hf_config(example.QWEN3_8B_CONFIG)


def applied(topo: SkyRLTopology, written: dict[str, Any], changes: list[str]) -> tuple[SkyRLTopology, dict[str, Any]]:
    """`topo` and `written` with each printed change (`field=value`) pasted in, as a user would."""
    plan_changes: dict[str, Any] = {}
    tree = copy.deepcopy(written)
    for change in changes:
        field, _, text = change.partition("=")
        value: Any = {"true": True, "false": False}.get(text, int(text) if text.lstrip("-").isdigit() else text)
        section, _, name = field.partition(".")
        if section == "role_plan":
            plan_changes[name] = value
        elif section == "topology":
            topo = dataclasses.replace(topo, **{name: value})
        else:
            assert section == "config_yaml", change
            set_path(tree, name, value)
    return dataclasses.replace(topo, role_plan=dataclasses.replace(topo.role_plan, **plan_changes)), tree


def nearest(found: list[PreflightError]) -> list[list[str]]:
    """The changes of each nearest plan the memory refusal names."""
    (first,) = [v for v in found if "nearest_fits" in v.values]
    assert "Nearest plans that fit: (1) " in first.fix
    return [line.split(": ", 1)[1].split(" (tightest", 1)[0].split(", ") for line in first.values["nearest_fits"]]


def example_plan(variant: str) -> tuple[SkyRLTopology, dict[str, Any]]:
    return example.topology(False, variant), parse_config_yaml(example.recipe(variant))


@pytest.mark.parametrize("variant", ["one-node-24gb", "long-generation-24gb"])
def test_a_refused_example_names_plans_that_fit_and_each_passes_the_preflight(variant: str) -> None:
    topo, written = example_plan(variant)
    refused = check_plan(topo, written, "fsdp", seed=17, model=QWEN3_8B)
    assert any(v.code.startswith("memory.") for v in refused)
    plans = nearest(refused)
    assert plans
    for changes in plans:
        fixed_topo, fixed_recipe = applied(topo, written, changes)
        assert check_plan(fixed_topo, fixed_recipe, "fsdp", seed=17, model=QWEN3_8B) == [], changes


def test_the_one_node_24gb_example_is_told_to_offload_or_to_take_more_nodes() -> None:
    topo, written = example_plan("one-node-24gb")
    plans = nearest(check_plan(topo, written, "fsdp", seed=17, model=QWEN3_8B))
    assert ["config_yaml.trainer.policy.fsdp_config.cpu_offload=true"] == [c for c in plans[0] if "offload" in c]
    (nodes,) = [p for p in plans if any(c.startswith("role_plan.policy_num_nodes=") for c in p)]
    # 2 nodes leave the training bar over; 3 nodes give a policy dp of 12, which the batch rules
    # refuse (256 x 8 samples are not a multiple of it): the fewest that fit and pass is 4.
    assert "role_plan.policy_num_nodes=4" in nodes and "topology.num_nodes=4" in nodes


def test_a_plan_that_fits_gets_no_suggestion_and_no_search(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_plan(topology(), recipe(), "fsdp", model=QWEN3_8B) == []
    called = []
    monkeypatch.setattr(fit, "_Search", lambda *a, **k: called.append(a))
    assert check_plan(topology(), recipe(), "fsdp", model=QWEN3_8B) == []
    assert called == []


def test_the_search_is_bounded_by_its_evaluation_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = []
    real = memory.table_for

    def counting(*args: Any) -> memory.MemoryTable:
        tables.append(args)
        return real(*args)

    monkeypatch.setattr(memory, "table_for", counting)
    topo, written = example_plan("long-generation-24gb")
    check_plan(topo, written, "fsdp", seed=17, model=QWEN3_8B)
    # the plan's own table (the rules' and the search's), the budget, and one table per direction shown
    assert 2 < len(tables) <= fit.MAX_EVALUATIONS + 2 + 5


def judged(topo: SkyRLTopology, written: dict[str, Any]) -> tuple[rules.Subject, dict[str, Any]]:
    """What the rules judge and the composed recipe, as the preflight renders them."""
    profile = get_profile("fsdp")
    composed, problems = profile.compose(render_recipe(written, topo.role_plan, profile, 17))
    assert not problems
    return subject_of(topo, written, profile, 17, QWEN3_8B), composed


def composed_rules(s: rules.Subject, c: dict[str, Any]) -> list[rules.Violation]:
    return rules.composed_rules(s, c, sound=True, suggest=False)


def nearest_of(topo: SkyRLTopology, written: dict[str, Any]) -> list[fit.FitPlan]:
    """The search on a plan as the preflight composes it (a tight plan is not refused: no error carries it)."""
    return fit.nearest_fits(*judged(topo, written), composed_rules)


def test_a_tight_plan_is_offered_only_plans_where_every_row_is_ok() -> None:
    topo, written = example_plan("long-generation-24gb")
    set_path(written, "generator.sampling_params.max_generate_length", 2047)
    assert check_plan(topo, written, "fsdp", seed=17, model=QWEN3_8B) == []  # tight, not refused
    found = nearest_of(topo, written)
    assert found
    for plan in found:
        assert {r.status for r in plan.table.rows} == {"ok"}, plan.line()
        fixed = applied(topo, written, [c.text() for c in plan.changes])
        assert check_plan(*fixed, "fsdp", seed=17, model=QWEN3_8B) == []


def test_a_refused_plan_is_never_offered_a_tight_one() -> None:
    """The longest generation offered leaves every row ok; one block longer (with the same engine and
    offload mends) is tight or over, where OOMs happen, so it has nearest plans of its own."""
    topo, written = example_plan("long-generation-24gb")
    (plan,) = [p for p in nearest_of(topo, written) if p.direction == "longest generation"]
    assert {r.status for r in plan.table.rows} == {"ok"}, plan.line()
    change, *mends = plan.changes
    assert change.field.endswith("max_generate_length") and change.value % 16 == 0 and 0 < change.value < 32768
    tight = applied(topo, written, [f"{change.field}={change.value + 16}", *(c.text() for c in mends)])
    longer = fit.nearest_fits(*judged(*tight), composed_rules)  # one block longer does not fit: it is searched
    assert longer, "one block longer is tight or over, so it has nearest plans of its own"


def qwen3_8b_source() -> Any:
    """The example's model with its config.json, at a stated version (no build context here)."""
    return hf_model_source(
        "models/qwen3-8b", "Qwen/Qwen3-8B", example.QWEN3_8B_COMMIT, config=example.QWEN3_8B_CONFIG, version=DAY
    )


def test_the_plan_of_a_tight_plan_prints_what_would_fit(prefix: str) -> None:
    model = qwen3_8b_source()
    topo, written = example_plan("long-generation-24gb")
    set_path(written, "generator.sampling_params.max_generate_length", 2047)
    text = "\n".join(describe_step(*planned_launch_view(spec(topo=topo, tree=written, model=model))))
    assert "  tight\n" in text or "  over (estimate)\n" in text  # not refused, but it may not fit
    head = "what would fit (nearest plans from the same memory model; paste the changes into the spec):"
    section = text.split(head, 1)[1].split("\n")[1:]
    shown = [line for line in section if line.startswith("  ") and "tightest row" in line]
    assert shown, text
    assert [line.strip() for line in shown] == [f.line() for f in nearest_of(topo, written)]
    step = skyrl_step(spec(topo=topo, tree=written, model=model), iris(), export_hf=True)
    as_data = planning.plan([step], prefix).numbers(step)["what_would_fit"]  # --plan-format json carries them
    assert [(f["direction"], f["changes"]) for f in as_data] == [
        (f.direction, {c.field: c.value for c in f.changes}) for f in nearest_of(topo, written)
    ]
    assert all(f["tightest"]["status"] == "ok" for f in as_data)


def test_the_plan_of_a_plan_that_fits_prints_no_such_section(prefix: str) -> None:
    model = qwen3_8b_source()
    text = "\n".join(describe_step(*planned_launch_view(spec(model=model))))
    assert "per device: H100" in text and "what would fit" not in text


@st.composite
def sized_plans(draw: st.DrawFn) -> tuple[SkyRLTopology, dict[str, Any]]:
    """Colocated Qwen3-8B plans over GPUs, node counts, micro batches and generation lengths."""
    gpus = draw(st.sampled_from([2, 4, 8]))
    nodes = draw(st.sampled_from([1, 2]))
    tp = draw(st.sampled_from([1, 2]))
    topo = SkyRLTopology(
        num_nodes=nodes,
        gpus_per_node=gpus,
        gpu_variant=draw(st.sampled_from(["L4", "A100", "H100"])),
        role_plan=dataclasses.replace(
            example.topology(False, "one-node-24gb").role_plan,
            policy_num_nodes=nodes,
            policy_num_gpus_per_node=gpus,
            num_inference_engines=nodes * gpus // tp,
            inference_engine_tensor_parallel_size=tp,
            micro_train_batch_size_per_gpu=draw(st.sampled_from([1, 2, 4])),
        ),
    )
    written = parse_config_yaml(example.recipe("one-node-24gb"))
    set_path(written, GENERATE, draw(st.sampled_from([512, 3072, 8192, 31744])))
    return topo, written


GENERATE = "generator.sampling_params.max_generate_length"


@settings(max_examples=25, deadline=None, derandomize=True)
@given(case=sized_plans())
def test_every_nearest_plan_fits_and_passes_the_preflight_the_plan_passes_but_for_memory(
    case: tuple[SkyRLTopology, dict[str, Any]],
) -> None:
    topo, written = case
    before = {v.code for v in check_plan(topo, written, "fsdp", seed=17, model=QWEN3_8B)}
    for plan in nearest_of(topo, written):
        assert fit.fits(plan.table), plan.line()
        fixed = applied(topo, written, [c.text() for c in plan.changes])
        after = {v.code for v in check_plan(*fixed, "fsdp", seed=17, model=QWEN3_8B)}
        assert not {c for c in after if c.startswith("memory.")} and after <= before, (plan.line(), after)


def test_huge_sizes_keep_the_search_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A micro batch or generation budget of 2**40 (refused by other rules, still searched) costs no
    more memory tables than the budget: divisors and bisection steps, never a count-down."""
    tables = []
    real = memory.table_for

    def counting(*args: Any) -> memory.MemoryTable:
        tables.append(args)
        return real(*args)

    monkeypatch.setattr(memory, "table_for", counting)
    topo, written = example_plan("one-node-24gb")
    huge = dataclasses.replace(
        topo, role_plan=dataclasses.replace(topo.role_plan, micro_train_batch_size_per_gpu=2**40)
    )
    set_path(written, GENERATE, 2**40)
    found = check_plan(huge, written, "fsdp", seed=17, model=QWEN3_8B)
    assert any(v.code.startswith("memory.") for v in found)
    assert len(tables) <= fit.MAX_EVALUATIONS + 2 + 5
