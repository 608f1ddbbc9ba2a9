"""What would fit: a refused or tight plan names the nearest plans that fit, and each passes the preflight.

The search (`rlaunch.rules.fit`) reads the same memory model as the plan; these tests apply every
change it prints to the spec's topology and recipe and run the whole preflight on the result.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments import rl_plan_example as example
from rlaunch import rules
from rlaunch.dotted import set_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import fit, memory
from rlaunch.rules import topology as topology_rules
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import ModelFacts, PreflightError, SkyRLTopology, check_plan, skyrl_step
from rlaunch.skyrl.plan import planning
from rlaunch.skyrl.preflight import subject_of
from rlaunch.skyrl.values.config_yaml import parse_config_yaml, render_recipe
from rlaunch.skyrl.views.plan_view import describe_step
from rlaunch.sources.hub import hf_model_source
from tests.rules.test_memory import QWEN3_14B, one_node
from tests.support.specs import DAY, applied, iris, planned_launch_view, recipe, spec, topology

QWEN3_8B = ModelFacts.from_hf_config(example.QWEN3_8B_CONFIG)
QWEN3_14B_FACTS = ModelFacts.from_hf_config(QWEN3_14B)


def nearest(found: list[PreflightError]) -> list[list[str]]:
    """The changes of each nearest plan the memory refusal names."""
    (first,) = [v for v in found if "nearest_fits" in v.values]
    lines = first.values["nearest_fits"]
    assert first.fix.endswith(
        ". Nearest plans that fit: " + "; ".join(f"({i}) {line}" for i, line in enumerate(lines, 1))
    )
    return [line.split(": ", 1)[1].split(" (tightest", 1)[0].split(", ") for line in lines]


def example_plan(variant: str) -> tuple[SkyRLTopology, dict[str, Any]]:
    return example.topology(False, variant), parse_config_yaml(example.recipe(variant))


@pytest.mark.parametrize("variant", ["one-node-24gb", "long-generation-24gb"])
def test_a_refused_example_names_plans_that_fit_and_each_passes_the_preflight(variant: str) -> None:
    topo, written = example_plan(variant)
    refused = check_plan(topo, written, "fsdp", seed=17, model=QWEN3_8B)
    # every memory refusal is kept; only the first carries the plans that fit
    memory_refusals = [(v.code, v.fields) for v in refused if v.code.startswith("memory.")]
    alone = [(v.code, v.fields) for v in rules.fit_rules(*judged(topo, written)) if v.code.startswith("memory.")]
    assert memory_refusals == alone
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


def counted_tables(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The arguments of every memory table computed from now on, appended as each is."""
    tables: list[tuple[Any, ...]] = []
    real = memory.table_for

    def counting(*args: Any) -> memory.MemoryTable:
        tables.append(args)
        return real(*args)

    monkeypatch.setattr(memory, "table_for", counting)
    return tables


def test_the_search_is_bounded_by_its_evaluation_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = counted_tables(monkeypatch)
    topo, written = example_plan("long-generation-24gb")
    check_plan(topo, written, "fsdp", seed=17, model=QWEN3_8B)
    # the plan's own table (the rules' and the search's), the budget, and one table per direction shown
    assert 2 < len(tables) <= fit.MAX_EVALUATIONS + 2 + 5


def judged(
    topo: SkyRLTopology, written: dict[str, Any], model: ModelFacts = QWEN3_8B
) -> tuple[rules.Subject, dict[str, Any]]:
    """What the rules judge and the composed recipe, as the preflight renders them."""
    profile = get_profile("fsdp")
    composed, problems = profile.compose(render_recipe(written, topo.role_plan, profile, 17))
    assert not problems
    return subject_of(topo, written, profile, 17, model), composed


def nearest_of(topo: SkyRLTopology, written: dict[str, Any]) -> list[fit.FitPlan]:
    """The search on a plan as the preflight composes it (a tight plan is not refused: no error carries it)."""
    return fit.nearest_fits(*judged(topo, written), rules.fit_rules)


def test_every_memory_refusal_is_kept_and_the_first_names_the_plans_that_fit() -> None:
    """One node of 24 GB and a long generation: the trainer's states and one sequence's KV both refused."""
    topo, _ = example_plan("one-node-24gb")
    _, written = example_plan("long-generation-24gb")
    refused = check_plan(topo, written, "fsdp", seed=17, model=QWEN3_8B)
    assert [v.code for v in refused] == ["memory.model_states", "memory.kv_one_sequence"]
    assert "nearest_fits" in refused[0].values and "nearest_fits" not in refused[1].values
    (alone_first, alone_second) = rules.fit_rules(*judged(topo, written))
    assert refused[1].fix == alone_second.fix and refused[1].message == alone_second.message
    assert refused[0].fix.startswith(alone_first.fix + ". Nearest plans that fit: (1) ")
    assert "nearest_fits" not in alone_first.values  # the search's own judgement suggests nothing again
    assert nearest(refused)


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
    longer = fit.nearest_fits(*judged(*tight), rules.fit_rules)  # one block longer does not fit: it is searched
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
        gpu_variant=draw(st.sampled_from(["L4", "A100-40GB", "H100"])),
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
    tables = counted_tables(monkeypatch)
    topo, written = example_plan("one-node-24gb")
    huge = dataclasses.replace(
        topo, role_plan=dataclasses.replace(topo.role_plan, micro_train_batch_size_per_gpu=2**40)
    )
    set_path(written, GENERATE, 2**40)
    found = check_plan(huge, written, "fsdp", seed=17, model=QWEN3_8B)
    assert any(v.code.startswith("memory.") for v in found)
    assert len(tables) <= fit.MAX_EVALUATIONS + 2 + 5


def one_node_search(rules_: Any = None, known: frozenset[str] = frozenset(), left: int = fit.MAX_EVALUATIONS) -> Any:
    subject, composed = judged(*example_plan("one-node-24gb"))
    return fit._Search(subject, composed, known, rules_ or rules.fit_rules, left)


def test_the_search_budget_counts_every_table_down_to_none() -> None:
    search = one_node_search(left=2)
    assert search.table(()) is not None and search.table(()) is not None
    assert (search.table(()), search.left) == (None, 0)
    assert one_node_search(left=0).table(()) is None


def test_a_variant_carries_the_changed_plan_nodes_and_recipe() -> None:
    search = one_node_search()
    subject, composed = search.variant(
        (
            fit.Change("role_plan.micro_train_batch_size_per_gpu", 1),
            fit.Change("topology.num_nodes", 3),
            fit.Change("config_yaml.trainer.policy.fsdp_config.cpu_offload", True),
        )
    )
    assert subject.plan["micro_train_batch_size_per_gpu"] == 1 and subject.num_nodes == 3
    assert composed["trainer"]["micro_train_batch_size_per_gpu"] == 1  # the plan rendered into the recipe
    assert composed["trainer"]["policy"]["fsdp_config"]["cpu_offload"] is True
    assert search.subject.plan["micro_train_batch_size_per_gpu"] == 2  # the plan itself is untouched


def test_a_candidate_that_fits_but_breaks_a_new_rule_is_not_offered() -> None:
    (offload, *_) = nearest_of(*example_plan("one-node-24gb"))
    new_rule = rules.Violation("topology.something", ("topology.num_nodes",), "m", "f")
    assert one_node_search(lambda s, c: []).accepted("offload", offload.changes) is not None
    assert one_node_search(lambda s, c: [new_rule]).accepted("offload", offload.changes) is None
    # ... unless the plan broke it already
    already = one_node_search(lambda s, c: [new_rule], known=frozenset({"topology.something"}))
    assert already.accepted("offload", offload.changes) is not None


def test_a_plan_that_breaks_another_rule_too_is_still_offered_plans_that_fit() -> None:
    """The search's known codes are the plan's own non-memory violations (a wandb entity missing,
    say): a candidate breaking them again is no worse than the plan."""
    topo, written = example_plan("one-node-24gb")
    subject, composed = judged(topo, written)
    other = rules.Violation("recipe.other", ("config_yaml.x",), "m", "f")

    def with_other(s: rules.Subject, c: Any) -> list[rules.Violation]:
        return [*rules.fit_rules(s, c), other]

    assert (
        [f.direction for f in fit.nearest_fits(subject, composed, with_other)]
        == [f.direction for f in fit.nearest_fits(subject, composed, rules.fit_rules)]
        != []
    )


class _Recording(fit._Search):
    """A search that records the changes each table is asked for and fits where `fits_when` says so
    (each direction's order of trials, without sizing a table); no candidate breaks a rule."""

    def __init__(
        self,
        composed: dict[str, Any],
        accept: tuple[fit.Change, ...] | None = None,
        fits_when: Callable[[dict[str, Any], str | None], bool] | None = None,
        **subject: Any,
    ) -> None:
        base, _ = judged(*example_plan("one-node-24gb"))
        super().__init__(dataclasses.replace(base, **subject), composed, frozenset(), lambda s, c: [])
        self.asked: list[tuple[str, ...]] = []
        self.tables: list[dict[str, Any]] = []
        self.fits_when = fits_when or (lambda changes, side: side == fit.TRAINER and changes == _as_dict(accept))

    def table(self, changes: tuple[fit.Change, ...]) -> memory.MemoryTable | None:
        self.asked.append(tuple(c.field.split(".")[2] for c in changes if c.field.startswith("config_yaml.")))
        self.tables.append(_as_dict(changes))
        return memory.MemoryTable(None, unsized=(json.dumps(_as_dict(changes)),))

    def fits(self, table: memory.MemoryTable, side: str | None = None) -> bool:
        return self.fits_when(json.loads(table.unsized[0]), side)


def _as_dict(changes: tuple[fit.Change, ...] | None) -> dict[str, Any]:
    return {c.field: c.value for c in changes or ()}


def offload_geometry(**changes: Any) -> Any:
    _, composed = judged(*example_plan("one-node-24gb"))
    return dataclasses.replace(Geometry.from_recipe(composed), **changes)


def test_offload_tries_one_role_at_a_time_then_the_policy_with_the_others() -> None:
    search = _Recording({})
    assert fit._offload(search, offload_geometry(use_reference=True, use_critic=True)) is None
    assert search.asked == [("policy",), ("ref",), ("critic",), ("policy", "ref"), ("policy", "ref", "critic")]
    search = _Recording({})
    assert fit._offload(search, offload_geometry(use_reference=False, use_critic=False)) is None
    assert search.asked == [("policy",)]
    ref = (fit.Change("config_yaml.trainer.ref.fsdp_config.cpu_offload", True),)
    search = _Recording({}, accept=ref)
    assert fit._offload(search, offload_geometry(use_reference=True)) == ref
    assert search.asked == [("policy",), ("ref",)]


def test_offload_skips_what_the_recipe_already_offloads() -> None:
    composed = {"trainer": {"policy": {"fsdp_config": {"cpu_offload": True}}}}
    search = _Recording(composed)
    assert fit._offload(search, offload_geometry(use_reference=True, use_critic=True)) is None
    assert search.asked == [("ref",), ("critic",), ("policy", "ref"), ("policy", "ref", "critic")]


def test_megatron_offloads_the_optimizer() -> None:
    key = "config_yaml.trainer.policy.megatron_config.optimizer_config_kwargs.optimizer_cpu_offload"
    search = _Recording({}, accept=(fit.Change(key, True),))
    assert fit._offload(search, offload_geometry(strategy="megatron", use_reference=True)) == (fit.Change(key, True),)


@pytest.mark.parametrize(
    ("gpus", "tp", "engines"),
    [(8, 2, 4), (8, 8, 1), (8, 3, None), (4, 8, None), (1, 1, 1)],
)
def test_engines_fill_the_gpus_exactly(gpus: int, tp: int, engines: int | None) -> None:
    assert fit._engines(offload_geometry(pp=1, dp=1), gpus, tp) == engines
    assert fit._engines(offload_geometry(pp=1, dp=1), gpus, 0) is None


def test_an_engine_that_alone_does_not_fit_is_offered_wider_engines_and_nothing_for_the_trainer() -> None:
    """Eight L4s, the trainer offloaded: only one 8000-token sequence's KV is short at TP 1 (over the
    estimate, not refused: the plan prints what would fit)."""
    topo, written = example_plan("long-generation-24gb")
    set_path(written, "generator.sampling_params.max_generate_length", 8000)
    set_path(written, "trainer.policy.fsdp_config.cpu_offload", True)
    set_path(written, "trainer.ref.fsdp_config.cpu_offload", True)
    subject, composed = judged(topo, written)
    table = memory.table_for(subject, Geometry.from_recipe(composed), composed)
    assert [(r.role, r.phase) for r in table.rows if r.status != "ok"] == [("rollout", "KV of one sequence")]
    plans = {f.direction: [c.text() for c in f.changes] for f in nearest_of(topo, written)}
    # wider engines alone fit at 8000 tokens: no shorter generation is offered beside them; at TP 1 the
    # engine holds one sequence of 2656 generated tokens (its profiling peak: FlashInfer's sampler)
    assert list(plans) == ["fewest nodes", "largest micro batch", "longest generation", "smallest engine TP"]
    assert plans["longest generation"] == ["config_yaml.generator.sampling_params.max_generate_length=2656"]
    assert plans["smallest engine TP"] == [
        "role_plan.inference_engine_tensor_parallel_size=2",
        "role_plan.num_inference_engines=4",
    ]
    for changes in plans.values():
        fixed_topo, fixed_recipe = applied(topo, written, changes)
        assert check_plan(fixed_topo, fixed_recipe, "fsdp", seed=17, model=QWEN3_8B) == [], changes


TP = "role_plan.inference_engine_tensor_parallel_size"
ENGINES = "role_plan.num_inference_engines"
MICRO = "role_plan.micro_train_batch_size_per_gpu"
GENERATE_CHANGE = f"config_yaml.{GENERATE}"


def engine_side(changes: dict[str, Any], side: str | None, tp: int) -> bool:
    return side == fit.ENGINE and changes.get(TP) == tp


@pytest.mark.parametrize(
    ("shape", "gpus_per_node", "fits_at", "asked", "found"),
    [
        ({"tp": 1, "engines": 8}, 8, None, [(2, 4), (4, 2), (8, 1)], None),  # up to a node's width
        ({"tp": 1, "engines": 8}, 8, 4, [(2, 4), (4, 2)], (4, 2)),
        ({"tp": 3, "engines": 3}, 8, None, [], None),  # 9 GPUs hold no whole engine of TP 6; TP 12 is wider than a node
        ({"tp": 1, "engines": 8}, 1, 2, [], None),  # one GPU a node: no wider engine
        ({"tp": 1, "pp": 2, "engines": 8}, 8, None, [(2, 4), (4, 2)], None),  # TP x PP within a node
        ({"tp": 1, "dp": 2, "engines": 8}, 8, None, [(2, 4), (4, 2)], None),  # TP x DP within a node
    ],
)
def test_the_engine_tp_direction_doubles_tp_within_a_node(
    shape: dict[str, int], gpus_per_node: int, fits_at: int | None, asked: list, found: tuple | None
) -> None:
    geo = offload_geometry(**{"pp": 1, "dp": 1, **shape})
    search = _Recording({}, fits_when=lambda c, side: engine_side(c, side, fits_at), gpus_per_node=gpus_per_node)
    result = fit._engine_tp(search, geo)
    assert [(t[TP], t[ENGINES]) for t in search.tables] == asked
    assert (None if result is None else (_as_dict(result)[TP], _as_dict(result)[ENGINES])) == found


def test_the_fewest_nodes_direction_adds_policy_nodes_beside_dedicated_rollout_nodes() -> None:
    geo = offload_geometry(colocate_all=False, policy_nodes=2, policy_gpus_per_node=8, tp=1)
    engine_fix = (fit.Change(TP, 2), fit.Change(ENGINES, 4))
    never = _Recording({}, fits_when=lambda c, side: False, num_nodes=4)
    assert fit._fewest_nodes(never, geo, engine_fix) is None
    assert [t["role_plan.policy_num_nodes"] for t in never.tables] == list(range(3, 3 + fit.MAX_EXTRA_NODES))
    at_five = _Recording(
        {}, fits_when=lambda c, side: side == fit.TRAINER and c["role_plan.policy_num_nodes"] == 5, num_nodes=4
    )
    found = fit._fewest_nodes(at_five, geo, engine_fix)
    assert found is not None and [(c.field, c.value) for c in found] == [
        ("topology.num_nodes", 7),  # the 2 rollout nodes stay
        ("role_plan.policy_num_nodes", 5),
        (TP, 2),
        (ENGINES, 4),
    ]


def test_the_fewest_nodes_direction_fills_colocated_nodes_with_whole_engines() -> None:
    geo = offload_geometry(colocate_all=True, policy_nodes=1, policy_gpus_per_node=3, tp=2, pp=1, dp=1)
    search = _Recording({}, fits_when=lambda c, side: side == fit.TRAINER and c["role_plan.policy_num_nodes"] == 4)
    found = fit._fewest_nodes(search, geo, ())
    # 2 nodes x 3 GPUs: 3 engines of TP 2; 3 nodes: 9 GPUs hold no whole number of them (skipped)
    assert [(t["role_plan.policy_num_nodes"], t[ENGINES]) for t in search.tables] == [(2, 3), (4, 6)]
    assert found is not None and _as_dict(found) == {
        "topology.num_nodes": 4,
        "role_plan.policy_num_nodes": 4,
        ENGINES: 6,
    }
    one_gpu = offload_geometry(colocate_all=True, policy_nodes=1, policy_gpus_per_node=1, tp=1, pp=1, dp=1)
    assert fit._fewest_nodes(_Recording({}, fits_when=lambda c, side: side == fit.TRAINER), one_gpu, ()) is not None


@pytest.mark.parametrize(
    "geo_changes",
    [
        {"policy_nodes": 0},
        {"policy_gpus_per_node": 0},
        {"policy_nodes": -1},
        {"policy_gpus_per_node": 0, "colocate_all": False},
    ],
)
def test_the_fewest_nodes_direction_needs_nodes_and_gpus(geo_changes: dict[str, int]) -> None:
    search = _Recording({}, fits_when=lambda c, side: True)
    assert fit._fewest_nodes(search, offload_geometry(**geo_changes), ()) is None
    assert fit._fewest_nodes(search, offload_geometry(), None) is None
    assert search.tables == []


def test_the_micro_batch_direction_tries_smaller_divisors_largest_first() -> None:
    # the one-node plan: per-GPU mini batch 64 x 8 // 4 = 128; from a micro batch of 16 down
    geo = offload_geometry(micro_batch=16)
    assert geo.per_gpu_mini(geo.policy_dp) == 128
    never = _Recording({}, fits_when=lambda c, side: False)
    assert fit._largest_micro_batch(never, geo, ()) is None
    assert [t[MICRO] for t in never.tables] == [8, 4, 2, 1]
    at_two = _Recording({}, fits_when=lambda c, side: side == fit.TRAINER and c[MICRO] <= 2)
    engine_fix = (fit.Change(TP, 2),)
    assert _as_dict(fit._largest_micro_batch(at_two, geo, engine_fix)) == {MICRO: 2, TP: 2}
    for micro in (1, 0):
        assert fit._largest_micro_batch(never, offload_geometry(micro_batch=micro), ()) is None
    no_dp = offload_geometry(micro_batch=16, policy_sp=3)  # 4 GPUs in sequence-parallel groups of 3
    assert no_dp.policy_dp is None and fit._largest_micro_batch(never, no_dp, ()) is None
    assert fit._largest_micro_batch(never, offload_geometry(micro_batch=2), None) is None
    two = _Recording({}, fits_when=lambda c, side: side == fit.TRAINER)
    assert _as_dict(fit._largest_micro_batch(two, offload_geometry(micro_batch=2), ())) == {MICRO: 1}


def test_the_micro_batch_direction_stops_when_the_budget_is_spent() -> None:
    search = _Recording({}, fits_when=lambda c, side: side == fit.TRAINER)
    search.left = 0
    search.table = lambda changes: None  # type: ignore[method-assign]
    assert fit._largest_micro_batch(search, offload_geometry(micro_batch=16), ()) is None


def generating(length: int) -> dict[str, Any]:
    return {"generator": {"sampling_params": {"max_generate_length": length}}}


@pytest.mark.parametrize(
    ("current", "longest_fitting", "found"),
    [
        (4097, 10**6, 4096),  # everything fits: the longest whole block below the current length
        (4096, 10**6, 4080),
        (4097, 16, 16),  # one block
        (4097, 15, None),
        *((1601, t, t // 16 * 16) for t in range(16, 1600, 97)),  # the bisection lands on the last block that fits
    ],
)
def test_the_generation_direction_bisects_whole_blocks_below_the_current_length(
    current: int, longest_fitting: int, found: int | None
) -> None:
    geo = offload_geometry(use_reference=False, use_critic=False)
    search = _Recording(
        generating(current), fits_when=lambda c, side: c.get(GENERATE_CHANGE, current) <= longest_fitting
    )
    result = fit._longest_generation(search, geo, search.composed, None)
    assert (None if result is None else _as_dict(result)) == (None if found is None else {GENERATE_CHANGE: found})


def test_the_generation_direction_takes_the_engine_fix_then_the_offload_when_no_length_fits_alone() -> None:
    geo = offload_geometry(use_reference=True, use_critic=False)
    composed = generating(1024) | {"trainer": {"policy": {"fsdp_config": {"cpu_offload": True}}}}
    engine_fix = (fit.Change(TP, 2),)
    ref_offload = "config_yaml.trainer.ref.fsdp_config.cpu_offload"
    search = _Recording(composed, fits_when=lambda c, side: ref_offload in c and c.get(GENERATE_CHANGE, 1024) <= 512)
    found = fit._longest_generation(search, geo, composed, engine_fix)
    # the policy is offloaded already: only the reference's offload is added
    assert found is not None and _as_dict(found) == {GENERATE_CHANGE: 512, TP: 2, ref_offload: True}
    assert fit._longest_generation(_Recording({}), geo, {}, None) is None  # no length set: nothing to shorten


def test_offloading_every_role_names_only_those_not_offloaded() -> None:
    composed = {"trainer": {"ref": {"fsdp_config": {"cpu_offload": True}}}}
    both = offload_geometry(use_reference=True, use_critic=True)
    assert [c.field for c in fit._offload_all(composed, both)] == [
        "config_yaml.trainer.policy.fsdp_config.cpu_offload",
        "config_yaml.trainer.critic.fsdp_config.cpu_offload",
    ]
    assert all(c.value is True for c in fit._offload_all({}, both))
    assert [c.field.split(".")[2] for c in fit._offload_all({}, offload_geometry(use_reference=False))] == ["policy"]
    assert fit._offload_all({}, offload_geometry(strategy="megatron")) == ()


def test_a_direction_whose_plan_breaks_another_rule_is_left_out() -> None:
    """Every candidate that changes the role plan breaks a rule here (the plan itself breaks none):
    the one-node plan's offload and generation plans need wider engines, so nothing is offered."""
    subject, composed = judged(*example_plan("one-node-24gb"))
    plan_changed = rules.Violation("topology.other", ("topology.num_nodes",), "m", "f")

    def strict(s: rules.Subject, c: Any) -> list[rules.Violation]:
        return [] if s.plan == subject.plan else [plan_changed]

    assert [f.direction for f in fit.nearest_fits(subject, composed, rules.fit_rules)] != []
    assert fit.nearest_fits(subject, composed, strict) == []


def test_a_trainer_that_alone_does_not_fit_is_offered_no_engine_change() -> None:
    """Four L40S for Qwen3-14B with a token budget per micro batch: the trainer's rows are over, the
    engine's fit at TP 1."""
    subject, composed = judged(
        one_node(4, "L40S"), recipe(trainer={"max_tokens_per_microbatch": 6000}), QWEN3_14B_FACTS
    )
    table = memory.table_for(subject, Geometry.from_recipe(composed), composed)
    short = {r.role for r in table.rows if r.status != "ok"}
    assert short and "rollout" not in short
    plans = fit.nearest_fits(subject, composed, rules.fit_rules)
    assert plans and all(not c.field.startswith("role_plan.inference_engine") for f in plans for c in f.changes)


POLICY_OFFLOAD = "config_yaml.trainer.policy.fsdp_config.cpu_offload"


@pytest.mark.parametrize(
    ("direction", "fields", "label"),
    [
        ("longest generation", [GENERATE_CHANGE], "longest generation"),
        (
            "longest generation",
            [GENERATE_CHANGE, TP, ENGINES, POLICY_OFFLOAD],
            "longest generation, with offload and wider engines",
        ),
        ("offload", [POLICY_OFFLOAD, "config_yaml.trainer.ref.fsdp_config.cpu_offload"], "offload"),
        ("offload", [f"config_yaml.{fit.MEGATRON_OFFLOAD}"], "offload"),
        (
            "fewest nodes",
            ["topology.num_nodes", "role_plan.policy_num_nodes", TP, ENGINES],
            "fewest nodes, with wider engines",
        ),
        ("smallest engine TP", [TP, ENGINES, POLICY_OFFLOAD], "smallest engine TP, with offload"),
        ("largest micro batch", [MICRO, TP, ENGINES], "largest micro batch, with wider engines"),
    ],
)
def test_a_plan_is_labelled_by_everything_it_changes(direction: str, fields: list[str], label: str) -> None:
    table = memory.MemoryTable(None, rows=(memory.Row("policy", "model states", 1, 2),))
    plan = fit.FitPlan(direction, tuple(fit.Change(f, 1) for f in fields), table)
    assert plan.label == label and plan.as_dict()["label"] == label and plan.line().startswith(f"{label}: ")


def test_no_shorter_generation_is_offered_when_its_mends_fit_alone() -> None:
    """The issue's `longest generation: max_generate_length=3056` beside an offload that fits at 3072:
    the offload is the plan (another direction's), not a generation 16 tokens shorter."""
    geo = offload_geometry(use_reference=False, use_critic=False)
    alone = _Recording(generating(3072), fits_when=lambda c, side: POLICY_OFFLOAD in c)
    assert fit._longest_generation(alone, geo, alone.composed, None) is None
    shorter = _Recording(
        generating(3072), fits_when=lambda c, side: POLICY_OFFLOAD in c and c.get(GENERATE_CHANGE, 3072) <= 2048
    )
    found = fit._longest_generation(shorter, geo, shorter.composed, None)
    assert found is not None and _as_dict(found) == {GENERATE_CHANGE: 2048, POLICY_OFFLOAD: True}
    assert (
        fit.FitPlan("longest generation", found, memory.MemoryTable(None)).label == "longest generation, with offload"
    )


def test_an_offload_plan_states_the_host_memory_a_node_needs_and_a_node_short_of_it_is_not_offered() -> None:
    """One node of four L4s, the policy offloaded: its states (16 bytes a parameter over 4 GPUs) move
    to the host, four GPUs' worth on the one node; at most 90 % of a known node's memory is planned."""
    subject, composed = judged(*example_plan("one-node-24gb"))
    table = memory.table_for(subject, Geometry.from_recipe(composed), composed)
    (states,) = [r.estimate for r in table.rows if (r.role, r.phase) == ("policy", "model states")]
    (offload,) = [f for f in nearest_of(*example_plan("one-node-24gb")) if f.direction == "offload"]
    assert offload.host_bytes == 4 * states
    assert f"the offload needs {memory.gib(4 * states)} GiB of host memory a node)" in offload.line()
    enough = -(-offload.host_bytes * 10 // 9)  # the least node memory whose 90 % holds it
    for limit, offered in ((enough, True), (enough - 2, False)):
        search = fit._Search(
            dataclasses.replace(subject, host_memory_bytes=limit), composed, frozenset(), rules.fit_rules
        )
        assert (search.accepted("offload", offload.changes) is not None) is offered, limit
    nodes = [f for f in nearest_of(*example_plan("one-node-24gb")) if f.direction == "fewest nodes"]
    assert nodes and nodes[0].host_bytes == 0 and "host memory" not in nodes[0].line()


def test_a_candidate_breaking_a_known_rule_on_a_field_it_changes_is_not_offered() -> None:
    """The plan's own TP is refused by the heads: a candidate setting another TP the heads refuse is no
    fix, though the code is one the plan already breaks."""
    (offload, *_) = nearest_of(*example_plan("one-node-24gb"))
    on_tp = rules.Violation("model.tp_heads", (TP,), "m", "f")
    elsewhere = rules.Violation("model.tp_heads", ("role_plan.other",), "m", "f")
    known = frozenset({"model.tp_heads"})
    assert any(c.field == TP for c in offload.changes)
    assert one_node_search(lambda s, c: [on_tp], known=known).accepted("offload", offload.changes) is None
    assert one_node_search(lambda s, c: [elsewhere], known=known).accepted("offload", offload.changes) is not None


@pytest.mark.parametrize(
    ("gpus_per_node", "heads", "shape", "tps"),
    [
        (8, 28, {}, [1, 2, 4]),  # never 7, 14 or 28 on an 8-GPU node
        (8, 64, {}, [1, 2, 4, 8]),  # never 3
        (8, None, {}, [1, 2, 4, 8]),  # heads unknown: the node decides
        (6, 12, {}, [1, 2, 3, 6]),
        (8, 64, {"pp": 2}, [1, 2, 4]),
        (8, 64, {"dp": 2, "colocate_all": False}, [1, 2, 4]),
        (8, 64, {"dp": 3}, []),  # no engine of DP 3 fills an 8-GPU node
        (1, 64, {}, [1]),
    ],
)
def test_engine_tps_divide_the_heads_and_fill_a_node(
    gpus_per_node: int, heads: int | None, shape: dict[str, Any], tps: list[int]
) -> None:
    subject, _ = judged(*example_plan("one-node-24gb"))
    model = dataclasses.replace(QWEN3_8B, num_attention_heads=heads)
    subject = dataclasses.replace(subject, gpus_per_node=gpus_per_node, model=model)
    assert topology_rules.engine_tps(subject, offload_geometry(**{"pp": 1, "dp": 1, **shape})) == tps
