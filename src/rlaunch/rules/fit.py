"""What would fit: for a plan whose memory table is refused, over or tight, the nearest plans that fit.

Each nearest plan is a few edits the user writes (role-plan or topology fields, recipe keys) and is
judged by the same memory model (`rlaunch.rules.memory.table_for`) as the plan itself, and fits
when every row is `ok`: an estimate within the tight margin is where OOMs happen, so it is never
offered as a fit. Five directions are searched, each giving at most one plan (a direction that mends
the trainer's rows is paired with the smallest engine TP when the engine's rows are short too, and
the other way round):

* offload: one role's FSDP states to the CPU (policy, reference or critic), else the policy's and
  the others' together; each plan that offloads says the host memory a node needs for it, and with
  the node's host memory known (`Subject.host_memory_bytes`) one needing more than 90 % of it is not
  offered;
* fewest nodes: the fewest policy nodes (colocated engines grow with them, one per engine slice);
* largest micro batch: the largest divisor of the per-device mini batch below the current one;
* longest generation: the longest `max_generate_length`, in whole KV blocks (a bisection); never
  when the mends it is paired with fit at the current length (that plan is another direction's);
* smallest engine TP: the smallest tensor parallelism above the current one among those the model's
  heads and a node hold (`rlaunch.rules.topology.engine_tps`), the rollout GPUs kept (fewer, wider
  engines).

A candidate is kept only if the composed rules (topology, batches, runtime, recipe) raise nothing
the original plan did not, and nothing at all on a field it changes: a nearest plan that the
preflight refuses for another reason is not shown. Each is labelled by everything it changes (a
shorter generation that needs an offload says so). Pure and bounded: at most `MAX_EVALUATIONS` memory tables while searching, then one table
and one rule check a direction; no I/O.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.dotted import get_path, set_path
from rlaunch.launch_config.geometry import Geometry, rendered_plan
from rlaunch.launch_config.recipe_keys import ROLE, SAMPLING, role_key
from rlaunch.rules import memory
from rlaunch.rules.subject import Subject, divisors
from rlaunch.rules.topology import engine_tps

MAX_EVALUATIONS = 64  # memory tables a whole search may compute (a handful per direction)
MAX_EXTRA_NODES = 8  # the fewest-nodes search tries up to this many more policy nodes
GENERATE_KEY = SAMPLING.MAX_GENERATE_LENGTH
ENGINE, TRAINER = "engine", "trainer"  # the two sides of a table: rollout rows, and every other row
MEGATRON_OFFLOAD = role_key("policy", ROLE.MEGATRON_OPTIMIZER_CPU_OFFLOAD)
OFFLOADED = "offload"
# What a change's field says it trades, in a plan's label; the engine count goes with its TP.
KINDS = (
    ("cpu_offload", OFFLOADED),
    ("inference_engine_tensor_parallel_size", "wider engines"),
    ("policy_num_nodes", "more nodes"),
    ("micro_train_batch_size_per_gpu", "a smaller micro batch"),
    ("max_generate_length", "a shorter generation"),
)
DIRECTION_KIND = {
    "offload": OFFLOADED,
    "smallest engine TP": "wider engines",
    "fewest nodes": "more nodes",
    "largest micro batch": "a smaller micro batch",
    "longest generation": "a shorter generation",
}


def _side(row: memory.Row) -> str:
    return ENGINE if row.role == "rollout" else TRAINER


def _held(table: memory.MemoryTable, role: str) -> int:
    """What a trainer role holds on one GPU between steps: its model states (the reference: its weights)."""
    if role == "reference":
        return sum(r.part("weights") for r in table.rows if r.role == role)
    return sum(r.estimate for r in table.rows if r.role == role and r.phase == "model states")


@dataclass(frozen=True)
class Change:
    """One edit as the user writes it: `field` in the preflight's vocabulary (`role_plan.*`,
    `topology.*`, `config_yaml.*`) and its new value."""

    field: str
    value: Any

    def text(self) -> str:
        value = str(self.value).lower() if isinstance(self.value, bool) else self.value
        return f"{self.field}={value}"


def kinds(changes: tuple[Change, ...]) -> list[str]:
    """What `changes` trade, in `KINDS` order, each once."""
    return [kind for key, kind in KINDS if any(c.field.endswith(key) for c in changes)]


@dataclass(frozen=True)
class FitPlan:
    """A nearest plan that fits: what it trades (`direction`), its changes, its memory table and the
    host memory a node needs for what it offloads (0: nothing offloaded)."""

    direction: str
    changes: tuple[Change, ...]
    table: memory.MemoryTable
    host_bytes: int = 0

    @property
    def label(self) -> str:
        """The direction, with whatever else the plan changes (`longest generation, with offload`)."""
        others = [k for k in kinds(self.changes) if k != DIRECTION_KIND.get(self.direction)]
        return self.direction + (f", with {' and '.join(others)}" if others else "")

    @property
    def tightest(self) -> memory.Row:
        """The estimated row closest to its capacity (budget rows, which vLLM fills by design, aside)."""
        estimates = [r for r in self.table.rows if r.margin > 0] or list(self.table.rows)
        return min(estimates, key=lambda r: r.headroom / max(1, r.capacity))

    def line(self) -> str:
        worst = self.tightest
        need, has = memory.gib(worst.estimate), memory.gib(worst.capacity)
        host = f"; the offload needs {memory.gib(self.host_bytes)} GiB of host memory a node" if self.host_bytes else ""
        return (
            f"{self.label}: {', '.join(c.text() for c in self.changes)} "
            f"(tightest row {worst.role} {worst.phase}: {need} of {has} GiB{host})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "label": self.label,
            "changes": {c.field: c.value for c in self.changes},
            "tightest": self.tightest.as_dict(),
            "host_memory_gib_per_node": memory.gib(self.host_bytes),
        }


def fits(table: memory.MemoryTable) -> bool:
    """Every row of a sized table is `ok`: none refused, over or tight."""
    return table.device is not None and bool(table.rows) and all(r.status == "ok" for r in table.rows)


def needs_search(table: memory.MemoryTable) -> bool:
    """A sized table with a row that is refused, over or tight: the plan prints what would fit."""
    return table.device is not None and any(r.status != "ok" for r in table.rows)


@dataclass
class _Search:
    """One plan's search: its subject and composed recipe, the rule codes it already breaks, and a
    budget of memory-table evaluations shared by every direction."""

    subject: Subject
    composed: Mapping[str, Any]
    known: frozenset[str]
    rules: Callable[[Subject, Mapping[str, Any]], list[Any]]
    left: int = MAX_EVALUATIONS

    def fits(self, table: memory.MemoryTable, side: str | None = None) -> bool:
        """Whether `table` fits, on one side only (`ENGINE` or `TRAINER`) when `side` is given."""
        rows = tuple(r for r in table.rows if side is None or _side(r) == side)
        return fits(dataclasses.replace(table, rows=rows))

    def variant(self, changes: tuple[Change, ...]) -> tuple[Subject, dict[str, Any]]:
        plan = dict(self.subject.plan)
        composed = copy.deepcopy(dict(self.composed))
        num_nodes = self.subject.num_nodes
        for c in changes:
            section, _, name = c.field.partition(".")
            if section == "role_plan":
                plan[name] = c.value
            elif section == "topology" and name == "num_nodes":
                num_nodes = c.value
            else:
                set_path(composed, name, c.value)
        for key, value in rendered_plan(plan).items():
            set_path(composed, key, value)
        return dataclasses.replace(self.subject, plan=plan, num_nodes=num_nodes), composed

    def table(self, changes: tuple[Change, ...]) -> memory.MemoryTable | None:
        """The memory table with `changes` applied; None once the evaluation budget is spent."""
        if self.left <= 0:
            return None
        self.left -= 1
        return self._table(changes)

    def _table(self, changes: tuple[Change, ...]) -> memory.MemoryTable:
        subject, composed = self.variant(changes)
        return memory.table_for(subject, Geometry.from_recipe(composed), composed)

    def accepted(self, direction: str, changes: tuple[Change, ...]) -> FitPlan | None:
        """`changes` as a nearest plan if its whole table fits, it breaks no rule the plan did not (and
        none on a field it changes), and the node's host memory, when known, holds what it offloads
        (one or two tables a direction, outside the search's budget, so a long search never drops a find)."""
        table = self._table(changes)
        if not self.fits(table) or self.breaks(changes):
            return None
        host = self.host_bytes(changes, table)
        limit = self.subject.host_memory_bytes
        if limit is not None and host > limit * (1 - memory.TIGHT_MARGIN):
            return None
        return FitPlan(direction, changes, table, host)

    def breaks(self, changes: tuple[Change, ...]) -> bool:
        """Whether `changes` break a rule (topology, batches, ...) the plan itself did not, or any rule
        on a field they change (a TP the heads refuse is not offered because the plan's TP was refused too)."""
        subject, composed = self.variant(changes)
        changed = {c.field for c in changes}
        return any(v.code not in self.known or changed & set(v.fields) for v in self.rules(subject, composed))

    def host_bytes(self, changes: tuple[Change, ...], table: memory.MemoryTable) -> int:
        """Host memory one node needs for every role the plan with `changes` offloads: what each
        offloaded role's rows hold on a GPU without the offload, times that role's GPUs on a node."""
        _, composed = self.variant(changes)
        geo = Geometry.from_recipe(composed)
        offloaded = [
            Change(f"config_yaml.{key}", False)
            for key in (
                *(role_key(role, ROLE.FSDP_CPU_OFFLOAD) for role in ("policy", "ref", "critic")),
                MEGATRON_OFFLOAD,
            )
            if get_path(composed, key, False)
        ]
        if not offloaded:
            return 0
        resident = self._table((*changes, *offloaded))
        per_node = {"policy": geo.policy_gpus_per_node, "reference": geo.policy_gpus_per_node}
        per_node["critic"] = geo.critic_gpus_per_node or geo.policy_gpus_per_node
        return sum(max(0, _held(resident, role) - _held(table, role)) * gpus for role, gpus in per_node.items())


def nearest_fits(
    subject: Subject,
    composed: Mapping[str, Any],
    rules: Callable[[Subject, Mapping[str, Any]], list[Any]],
) -> list[FitPlan]:
    """The nearest plans that fit (see the module docstring); [] when the plan fits or cannot be sized.

    `rules(subject, composed)` is the rule set a candidate must not break anew (the composed rules).
    A direction that mends one side (the trainer's rows or the engine's) is paired with the nearest
    mend of the other side when that side does not fit either, so every plan shown fits whole.
    """
    geo = Geometry.from_recipe(composed)
    table = memory.table_for(subject, geo, composed)
    if not needs_search(table):
        return []
    known = frozenset(v.code for v in rules(subject, composed) if not v.code.startswith("memory."))
    search = _Search(subject, composed, known, rules)
    engine_fix = () if search.fits(table, ENGINE) else _engine_tp(search, geo)
    trainer_fix = () if search.fits(table, TRAINER) else _offload(search, geo, engine_fix or ())
    directions: list[tuple[str, tuple[Change, ...] | None]] = [
        ("offload", None if not trainer_fix or engine_fix is None else trainer_fix + engine_fix),
        ("fewest nodes", _fewest_nodes(search, geo, engine_fix)),
        ("largest micro batch", _largest_micro_batch(search, geo, engine_fix)),
        ("longest generation", _longest_generation(search, geo, composed, engine_fix)),
        ("smallest engine TP", None if not engine_fix or trainer_fix is None else engine_fix + trainer_fix),
    ]
    out: list[FitPlan] = []
    for direction, changes in directions:
        if changes and all(set(changes) != set(f.changes) for f in out):
            found = search.accepted(direction, changes)
            out += [found] if found is not None else []
    return out


def _offload(search: _Search, geo: Geometry, engine: tuple[Change, ...] = ()) -> tuple[Change, ...] | None:
    """The fewest offload settings that make the trainer's rows fit beside the engine's mend (`engine`:
    a colocated weight sync holds the engine's weights); None if none does."""
    if geo.strategy == "megatron":
        tried: list[tuple[Change, ...]] = [(Change(f"config_yaml.{MEGATRON_OFFLOAD}", True),)]
    else:
        roles = ["policy"] + (["ref"] if geo.use_reference else []) + (["critic"] if geo.use_critic else [])
        offload = [Change(f"config_yaml.trainer.{role}.fsdp_config.cpu_offload", True) for role in roles]
        # one role alone first (the fewest settings), then the policy with each role after it
        tried = [(c,) for c in offload] + [tuple(offload[:i]) for i in range(2, len(offload) + 1)]
    for changes in tried:
        if all(get_path(search.composed, c.field.removeprefix("config_yaml."), False) for c in changes):
            continue  # already offloaded
        table = search.table(changes + engine)
        if table is not None and search.fits(table, TRAINER):
            return changes
    return None


def _engines(geo: Geometry, gpus: int, tp: int) -> int | None:
    """Engines of `tp` x PP x DP that fill `gpus` exactly, or None."""
    width = tp * geo.pp * geo.dp
    return gpus // width if width > 0 and gpus % width == 0 and gpus >= width else None


def _engine_tp(search: _Search, geo: Geometry) -> tuple[Change, ...] | None:
    """The smallest engine TP above the current one that the model's heads and a node hold (the
    rollout GPUs kept) whose engine rows fit; None if none does."""
    for tp in engine_tps(search.subject, geo):
        engines = _engines(geo, geo.rollout_gpus, tp) if tp > geo.tp else None
        if engines is not None:
            changes = (
                Change("role_plan.inference_engine_tensor_parallel_size", tp),
                Change("role_plan.num_inference_engines", engines),
            )
            table = search.table(changes)
            if table is None:
                return None
            if search.fits(table, ENGINE):
                return changes
    return None


def _fewest_nodes(search: _Search, geo: Geometry, engine_fix: tuple[Change, ...] | None) -> tuple[Change, ...] | None:
    """The fewest policy nodes whose trainer rows fit (colocated engines fill the new nodes)."""
    gpn = geo.policy_gpus_per_node
    if engine_fix is None or geo.policy_nodes <= 0 or gpn <= 0:
        return None
    tp = next((c.value for c in engine_fix if c.field == "role_plan.inference_engine_tensor_parallel_size"), geo.tp)
    rollout_nodes = search.subject.num_nodes - geo.policy_nodes
    for nodes in range(geo.policy_nodes + 1, geo.policy_nodes + MAX_EXTRA_NODES + 1):
        changes = [Change("topology.num_nodes", nodes + (0 if geo.colocate_all else rollout_nodes))]
        changes.append(Change("role_plan.policy_num_nodes", nodes))
        changes += [c for c in engine_fix if c.field != "role_plan.num_inference_engines"]
        if geo.colocate_all:
            engines = _engines(geo, nodes * gpn, tp)
            if engines is None:
                continue
            changes.append(Change("role_plan.num_inference_engines", engines))
        else:
            changes += [c for c in engine_fix if c.field == "role_plan.num_inference_engines"]
        table = search.table(tuple(changes))
        if table is None:
            return None
        if search.fits(table, TRAINER) and not search.breaks(tuple(changes)):
            return tuple(changes)
    return None


def _largest_micro_batch(
    search: _Search, geo: Geometry, engine_fix: tuple[Change, ...] | None
) -> tuple[Change, ...] | None:
    """The largest micro batch below the current one that divides the per-device mini batch and
    whose trainer rows fit."""
    dp = geo.policy_dp
    if engine_fix is None or not dp or geo.micro_batch <= 1:
        return None
    smaller = [m for m in divisors(geo.per_gpu_mini(dp)) if m < geo.micro_batch]  # bounded for any size
    for micro in reversed(smaller):
        changes = (Change("role_plan.micro_train_batch_size_per_gpu", micro), *engine_fix)
        table = search.table(changes)
        if table is None:
            return None
        if search.fits(table, TRAINER):
            return changes
    return None


def _longest_generation(
    search: _Search, geo: Geometry, composed: Mapping[str, Any], engine_fix: tuple[Change, ...] | None
) -> tuple[Change, ...] | None:
    """The longest `max_generate_length` below the current one, in whole KV blocks, that fits whole
    (a bisection over blocks: log2 of the blocks evaluations). When no length fits as the plan
    stands, the engine's nearest mend goes with it (its overhead can leave room for no length at the
    current TP), and then the trainer's offload too (the model states alone can leave no room)."""
    block = memory.VLLM_BLOCK
    current = int(get_path(composed, GENERATE_KEY, 0) or 0)
    engine = engine_fix or ()
    offload = _offload_all(composed, geo)
    for extra in dict.fromkeys([(), engine, engine + offload]):
        if extra and search.fits(search.table(extra) or memory.MemoryTable(None)):
            return None  # the mends alone fit: a shorter generation would trade tokens for nothing
        lo, hi, best = 1, (current - 1) // block, None
        while lo <= hi:
            mid = (lo + hi) // 2
            table = search.table((Change(f"config_yaml.{GENERATE_KEY}", mid * block), *extra))
            if table is None:
                return None
            if search.fits(table):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if best is not None:
            return (Change(f"config_yaml.{GENERATE_KEY}", best * block), *extra)
    return None


def _offload_all(composed: Mapping[str, Any], geo: Geometry) -> tuple[Change, ...]:
    """Every trainer role's FSDP offload not yet set (none on Megatron, whose offload is the optimizer's)."""
    if geo.strategy == "megatron":
        return ()
    roles = ["policy"] + (["ref"] if geo.use_reference else []) + (["critic"] if geo.use_critic else [])
    keys = [role_key(role, ROLE.FSDP_CPU_OFFLOAD) for role in roles]
    return tuple(Change(f"config_yaml.{key}", True) for key in keys if not get_path(composed, key, False))
