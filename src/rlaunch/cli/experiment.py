"""`build_options`: turn an experiment's Click `main` into "print the plan" or "run it".

The decorated main builds the graph inside a build context (so `--version`, `--override` and
`--set` reach builders) and returns its terminal handles. Without `--run` the plan is printed; with
`--run` an executor takes the handles: the local runner here, cluster submission for RL mains.
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

import click
from click.core import ParameterSource

from rlaunch import storage
from rlaunch.artifacts.identity import InvalidIdentityError, validate_name, validate_version
from rlaunch.artifacts.judged import judged, recorded_env_reads
from rlaunch.artifacts.plan import PlannedStep, plan_graph, refuse_foreign_steps
from rlaunch.artifacts.step import ArtifactStep, graph_handles
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.boundary import error_boundary
from rlaunch.cli import plan_text
from rlaunch.cli.step_checks import preflight_step_jobs
from rlaunch.errors import UserError
from rlaunch.runs.sweep import Axis, Grid, SweepMembership, sweep_name
from rlaunch.secrets import SecretArgumentError, refuse_secret_arguments
from rlaunch.skyrl.values import overrides as recipe_overrides
from rlaunch.submission.invocation import Invocation, Sweep

if TYPE_CHECKING:
    from rlaunch.judgement.judge import Finding
    from rlaunch.skyrl.plan.planning import Planning


class Executor(Protocol):
    """What `--run` does with the built graph. Returns the process exit code.

    `planning` is every RL step of the graph planned once (`rlaunch.skyrl.plan.planning.plan`; None: the
    graph has none): what the plan shows, the judgement and the submission checks read."""

    option_names: tuple[str, ...]

    def options(self) -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]: ...

    def check(self, handles: list[ArtifactStep[Any]], invocation: Invocation) -> None: ...

    def run(self, handles: list[ArtifactStep[Any]], invocation: Invocation, planning: Planning | None) -> int: ...

    def judgement(
        self, planned: list[PlannedStep], invocation: Invocation, planning: Planning | None
    ) -> dict[str, tuple[Finding, ...] | None]:
        """What the dry run shows after the plan: each gated step's findings, as `--run` would refuse
        on them (None: served from storage, nothing launches, nothing is judged)."""
        ...


class LocalRunExecutor:
    """Execute the graph in this process with the artifact runner.

    `submitter` names the path this process is (an RL coordinator: "@rl_build_options"); steps
    only another path may launch are refused before anything is built, in the plan too."""

    option_names: tuple[str, ...] = ()

    def __init__(
        self,
        submitter: str | None = None,
        retry: Mapping[str, Any] | None = None,
        placement: Mapping[str, Any] | None = None,
    ) -> None:
        self.submitter = submitter
        self.retry = retry  # the `--retry` authorisation a step job needs after a failed attempt
        self.placement = placement or {}  # the backend's options step jobs record (an RL coordinator's)

    def options(self) -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
        return []

    def check(self, handles: list[ArtifactStep[Any]], invocation: Invocation) -> None:
        refuse_foreign_steps(plan_graph(handles, invocation.prefix), self.submitter)

    def judgement(
        self, planned: list[PlannedStep], invocation: Invocation, planning: Planning | None
    ) -> dict[str, tuple[Finding, ...] | None]:
        return {}  # nothing this path builds is gated: RL steps are the coordinator's

    def run(self, handles: list[ArtifactStep[Any]], invocation: Invocation, planning: Planning | None = None) -> int:
        from rlaunch.artifacts.runner import RunFailedError, Runner
        from rlaunch.host.step_job import StepJobLauncher

        click.echo(f"Running {len(handles)} terminal step(s) with at most {invocation.max_concurrent} at a time")
        runner = Runner(
            invocation.prefix,
            max_concurrent=invocation.max_concurrent,
            report=click.echo,
            submitter=self.submitter,
            step_jobs=StepJobLauncher(retry=self.retry, placement=self.placement),
        )
        try:
            runner.run(handles)
        except RunFailedError as exc:
            click.echo(f"error: {exc}", err=True)
            for outcome in exc.failed:
                click.echo(f"  {outcome.identity}: {outcome.error}", err=True)
            return 1
        click.echo("All steps succeeded.")
        return 0


def parse_overrides(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for raw in values:
        _refuse_credential(raw, "--override")
        name, sep, version = raw.partition("=")
        name, version = name.strip(), version.strip()
        if not sep or not name:
            raise click.BadParameter(f"{raw!r} is not NAME=VERSION (e.g. --override data/toy=2026.11.29)")
        try:
            validate_name(name, field=f"--override {raw}")
        except InvalidIdentityError as exc:
            raise click.BadParameter(str(exc)) from exc
        if name in overrides:
            raise click.BadParameter(f"{name!r} is overridden twice; keep one --override {name}=...")
        try:
            overrides[name] = validate_version(version, field=f"--override {name}")
        except InvalidIdentityError as exc:
            raise click.BadParameter(str(exc)) from exc
    return overrides


def parse_recipe_overrides(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
    """`--set KEY=VALUE`, repeatable: recipe key -> YAML scalar, in the order given. Whether each key
    is a knob is the RL spec's to say (its runtime's base config): `_plan_or_run` reports it."""
    found: dict[str, Any] = {}
    for raw in values:
        _refuse_credential(raw, "--set")
        try:
            override = recipe_overrides.parse(raw)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        if override.key in found:
            raise click.BadParameter(f"{override.key} is set twice; keep one --set {override.key}=...")
        found[override.key] = override.value
    return found


def parse_sweep(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Grid | None:
    """`--sweep KEY=V1,V2,...`, repeatable: each value read like a `--set` value (a YAML scalar), every
    combination one variant (a key both set and swept is refused by `_refuse_set_and_swept`)."""
    axes = []
    for raw in values:
        _refuse_credential(raw, "--sweep")
        key, sep, texts = raw.partition("=")
        if not sep:
            raise click.BadParameter(
                f"{raw!r} is not KEY=V1,V2,... (e.g. --sweep trainer.policy.optimizer_config.lr=1e-3,2e-3)"
            )
        try:
            parsed = [recipe_overrides.parse(f"{key}={text}") for text in texts.split(",")]
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        axes.append(
            Axis(
                parsed[0].key, tuple((text.strip(), o.value) for text, o in zip(texts.split(","), parsed, strict=True))
            )
        )
    try:
        return Grid(tuple(axes)) if axes else None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _option_values(params: Mapping[str, Any]) -> list[str]:
    """Every string option value as `--name=value` (what a command line carried, however it was spelled)."""
    out = []
    for name, value in params.items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and item:
                out.append(f"--{name}={item}")
    return out


def _refuse_credential(raw: str | list[str], option: str) -> None:
    """Checked before parsing, so a credential is never echoed back in an error message."""
    try:
        refuse_secret_arguments(raw if isinstance(raw, list) else [option, raw])
    except SecretArgumentError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _parse_version(ctx: click.Context, param: click.Parameter, value: str) -> str:
    _refuse_credential(value, "--version")
    try:
        return validate_version(value, field="--version")
    except InvalidIdentityError as exc:
        raise click.BadParameter(str(exc)) from exc


def normalise_handles(returned: Any) -> list[ArtifactStep[Any]]:
    """Accept one handle, a list/tuple of handles, or a name -> handle mapping."""
    if isinstance(returned, ArtifactStep):
        items: list[Any] = [returned]
    elif isinstance(returned, (list, tuple)):
        items = list(returned)
    elif isinstance(returned, Mapping):
        items = list(returned.values())
    else:
        raise TypeError(
            f"an experiment main must return an ArtifactStep, a list/tuple of them, or a name -> step "
            f"mapping; got {type(returned).__qualname__}"
        )
    if not items:
        raise TypeError("the experiment main returned no steps; return the terminal step(s) to plan or run")
    for item in items:
        if not isinstance(item, ArtifactStep):
            raise TypeError(f"the experiment main returned {item!r}, which is not an ArtifactStep")
    return items


def experiment_module(fn: Callable[..., Any]) -> str | None:
    """The importable module of the main (None when it runs as a script: it can plan, not replay)."""
    module = fn.__module__
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        return spec.name if spec is not None and spec.name else None
    return module


def make_build_options(executor: Executor) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            with error_boundary(experiment_module(fn) or fn.__name__):
                refuse_secret_arguments([*sys.argv[1:], *_option_values(click.get_current_context().params)])
                options = BuildOptions(**{f.name: kwargs.pop(f.name) for f in fields(BuildOptions)})
                _plan_or_run(fn, executor, args, kwargs, options)

        decorators: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
            click.option(  # runs first: a credential is refused before any option is parsed or echoed
                "--refuse-credentials",
                is_flag=True,
                hidden=True,
                is_eager=True,
                expose_value=False,
                callback=lambda ctx, param, value: _refuse_credential(sys.argv[1:], "the command line"),
            ),
            click.option(
                "--version",
                "default_version",
                required=True,
                callback=_parse_version,
                help="Run-wide artifact version: YYYY.MM.DD[.N] (immutable) or dev / <label>-dev (mutable).",
            ),
            click.option(
                "--override",
                "overrides",
                multiple=True,
                callback=parse_overrides,
                metavar="NAME=VERSION",
                help="Version for one artifact by its base name; repeatable.",
            ),
            click.option(
                "--set",
                "recipe_overrides",
                multiple=True,
                callback=parse_recipe_overrides,
                metavar="KEY=VALUE",
                help="Set a recipe key of the RL steps (a dotted key of the runtime's base config, e.g. "
                "trainer.policy.optimizer_config.lr=2e-6); repeatable. VALUE is read as a YAML scalar: 2e-6 a "
                "float, true a bool, 8 an int, null none, anything else a string. Keys the role plan renders "
                "(parallelism, placement, batch sizes) and keys rlaunch sets (paths, seed) are refused. "
                "Kept in the fingerprint, the plan and the run record.",
            ),
            click.option(
                "--sweep",
                "sweep",
                multiple=True,
                callback=parse_sweep,
                metavar="KEY=V1,V2,...",
                help="Sweep a recipe key of the RL steps over values, as one submission: every combination of the "
                "--sweep keys is a variant, its own artifact (its label ends the names of the steps it changes, e.g. "
                "smoke/rl.lr-1e-3), with the steps no variant changes shared. Values are read like --set values and "
                "refused like them; --set applies to every variant; a key both set and swept is refused. Repeatable.",
            ),
            click.option("--run", "do_run", is_flag=True, help="Execute the graph instead of printing the plan."),
            click.option(
                "--max-concurrent",
                type=click.IntRange(min=1),
                default=8,
                show_default=True,
                help="Steps built at once.",
            ),
            click.option(
                "--plan-format",
                type=click.Choice(["text", "json"]),
                default="text",
                show_default=True,
                help="How the plan is printed without --run.",
            ),
            *executor.options(),
        ]
        decorated: Callable[..., Any] = wrapper
        for decorator in reversed(decorators):
            decorated = decorator(decorated)
        return decorated

    return decorate


@dataclass(frozen=True)
class BuildOptions:
    """The options `build_options` adds to every experiment main (named as their click parameters)."""

    default_version: str
    overrides: dict[str, str]
    recipe_overrides: dict[str, Any]  # `--set`: recipe key -> value, laid over every RL spec's recipe
    sweep: Grid | None  # `--sweep`: the grid of variants (None: one run)
    do_run: bool
    max_concurrent: int
    plan_format: str


def _plan_or_run(
    fn: Callable[..., Any], executor: Executor, args: tuple[Any, ...], kwargs: dict[str, Any], options: BuildOptions
) -> None:
    """Build the graph, check it, then print the plan or hand the handles to the executor."""
    executor_options = {k: kwargs.pop(k) for k in executor.option_names if k in kwargs}
    _refuse_set_and_swept(options)
    codex = VersionCodex(options.default_version, options.overrides)
    try:
        context = BuildContext(codex, options.recipe_overrides)
        with build_context(context), recorded_env_reads() as env_reads:
            handles = normalise_handles(fn(*args, **kwargs))
            swept = {axis.key: axis.values[0][1] for axis in options.sweep.axes} if options.sweep else {}
            _refuse_unread_recipe_overrides(handles, {**options.recipe_overrides, **swept})
            sweep = declared_sweep(context.declared, handles, options)
            if options.sweep is not None:
                sweep = build_sweep(lambda: normalise_handles(fn(*args, **kwargs)), handles, options, codex)
                handles = [h for _, built_for in sweep.variants for h in built_for]
            built = judged(handles, env_reads)  # a coordinator replaying this main must build the same
        unused = codex.unused_overrides()
        if unused:
            raise click.BadParameter(
                f"never applied to any artifact: {unused}. The name is a typo, or that artifact "
                "hardcodes its version (an explicit version wins over an override)",
                param_hint="--override",
            )
        invocation = Invocation(
            module=experiment_module(fn),
            argv=tuple(sys.argv[1:]),
            version=options.default_version,
            max_concurrent=options.max_concurrent,
            prefix=storage.default_prefix(),
            options=executor_options,
            judged=built,
            sweep=sweep,
        )
        planning = plan_rl_steps(handles, invocation.prefix)
        preflight_step_jobs(handles, invocation.prefix)
        planned = plan_graph(handles, invocation.prefix)
        executor.check(handles, invocation)
    except recipe_overrides.RecipeOverrideError as exc:  # an RL spec's runtime refused a `--set`
        raise click.BadParameter(str(exc), param_hint="'--set'") from None
    except (ValueError, TypeError, LookupError) as exc:
        if isinstance(exc, (click.ClickException, UserError)):
            raise  # click's own, and expected errors: the boundary prints them (exit 2)
        raise click.ClickException(str(exc)) from exc
    if not options.do_run:
        findings = executor.judgement(planned, invocation, planning)
        terminal = [h.identity for h in handles]
        render = plan_text.plan_json if options.plan_format == "json" else plan_text.plan_text
        notes = default_stage_notes()
        click.echo(render(planned, invocation.prefix, terminal, handles, planning, findings, notes, sweep))
        return
    sys.exit(executor.run(handles, invocation, planning))


def _refuse_set_and_swept(options: BuildOptions) -> None:
    """A key both set and swept: which value would a variant get? Refused, in whichever order given."""
    both = [axis.key for axis in options.sweep.axes if axis.key in options.recipe_overrides] if options.sweep else []
    if both:
        raise click.BadParameter(
            f"{both[0]} is both set (--set) and swept (--sweep); keep one of them", param_hint="'--sweep'"
        )


def declared_sweep(
    declared: list[SweepMembership], handles: list[ArtifactStep[Any]], options: BuildOptions
) -> Sweep | None:
    """The sweep the main declared in Python (`rlaunch.artifacts.variants`; None: none), each variant
    with the terminal steps that carry its label."""
    if not declared:
        return None
    if options.sweep is not None:
        raise click.BadParameter(
            f"this main declares the sweep {declared[0].name} in code (variants(...)); a sweep is one grid: "
            "drop --sweep, or sweep in code",
            param_hint="'--sweep'",
        )
    variants = []
    for member in declared:
        terminals = tuple(h for h in handles if h.name.endswith(f".{member.variant}"))
        if not terminals:
            raise click.ClickException(
                f"variant {member.variant} of {member.name} ends in no step the main returns; return the steps "
                "built inside each variants(...) choice"
            )
        variants.append((member, terminals))
    return Sweep(declared[0].name, tuple(variants))


def build_sweep(
    build: Callable[[], list[ArtifactStep[Any]]],
    plain: list[ArtifactStep[Any]],
    options: BuildOptions,
    codex: VersionCodex,
) -> Sweep:
    """The main built once per variant of the grid, each in a build context naming its variant (a
    step it changes takes the variant's label; one it does not is shared). The sweep is named after
    the first terminal step built without it (`plain`), its version and the grid."""
    assert options.sweep is not None
    name = sweep_name(plain[0].name, plain[0].version, options.sweep)
    variants = []
    for variant in options.sweep.variants(name):
        with build_context(BuildContext(codex, options.recipe_overrides, variant)):
            variants.append((variant, tuple(build())))
    for (variant, built_for), (other, theirs) in itertools.combinations(variants, 2):
        shared = sorted({h.identity for h in built_for} & {h.identity for h in theirs})
        if shared:
            raise click.BadParameter(
                f"variants {variant.variant} and {other.variant} both end in {shared[0]}: the sweep changes nothing "
                "it builds; sweep a key its RL steps read",
                param_hint="'--sweep'",
            )
    return Sweep(name, tuple(variants))


def _refuse_unread_recipe_overrides(handles: list[ArtifactStep[Any]], given: Mapping[str, Any]) -> None:
    """`--set` on a graph without an RL step would change nothing: refused, like an unused `--override`."""
    if not given or _rl_steps(handles):
        return
    settings = ", ".join(str(recipe_overrides.RecipeOverride(k, v)) for k, v in given.items())
    raise click.BadParameter(
        f"{settings}: no RL step reads it; this main builds no skyrl_step, so there is no recipe to set. "
        "Drop --set, or set the key in the step's own configuration",
        param_hint="'--set'",
    )


def _rl_steps(handles: list[ArtifactStep[Any]]) -> list[Any]:
    """The graph's RL steps (none without their module: a main that builds none loads no RL code)."""
    if "rlaunch.skyrl.plan.rl_step" not in sys.modules:
        return []
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

    return [s for s in graph_handles(handles) if isinstance(s, SkyRLArtifactStep)]


def default_stage() -> tuple[str, str] | None:
    """The experiment's terminal stage and its choices when its `--stage` option came from its
    default (None: chosen on the command line, or no such option)."""
    ctx = click.get_current_context(silent=True)
    param = next((p for p in ctx.command.params if p.name == "stage"), None) if ctx else None
    if ctx is None or param is None or ctx.get_parameter_source("stage") is not ParameterSource.DEFAULT:
        return None
    choices = "|".join(map(str, param.type.choices)) if isinstance(param.type, click.Choice) else "STAGE"
    return str(ctx.params["stage"]), choices


def default_stage_notes() -> list[str]:
    """A note when the experiment's terminal stage came from its default: the seed asks for the
    terminal stage to be chosen, and a default one may add downstream work (a large launch is refused
    on it: `rlaunch.judgement.judge`)."""
    found = default_stage()
    if found is None:
        return []
    stage, choices = found
    return [
        f"note: --stage {stage} [default]: the terminal stage came from its default, not the "
        f"command line; choose it with --stage {choices}"
    ]


def plan_rl_steps(handles: list[ArtifactStep[Any]], prefix: str) -> Planning | None:
    """Every RL step in the graph planned once, with its preflight, before the graph is planned: a
    spec reads nothing when it is built, so what storage holds is read and judged here (one
    PreflightError listing every violation). None: the graph has no RL step."""
    steps = _rl_steps(handles)
    if not steps:
        return None
    from rlaunch.skyrl.plan.planning import plan

    return plan(steps, prefix)


build_options = make_build_options(LocalRunExecutor())
