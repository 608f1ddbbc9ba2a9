"""`SkyRLSpec`: the identity of an RL run, a pure value.

Constructing one checks its own fields (types, names, the recipe parses) and reads nothing: no
storage, no environment. The preflight over the plan and what storage holds of its model and data
runs when the graph is planned (`rlaunch.skyrl.plan.planning`), again in the RL step once its inputs
are built, and in the launch host on the document.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from rlaunch.artifacts import ArtifactStep
from rlaunch.artifacts.identity import validate_name, validate_version
from rlaunch.experiment_code import ExperimentCode, function_reference
from rlaunch.field_checks import require_int, require_str
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.recipe_keys import TRAINER
from rlaunch.launch_config.schema import ResumeFrom as ResumeFrom  # exported by rlaunch.skyrl
from rlaunch.launch_config.schema import resume_from_problems
from rlaunch.runs.sweep import SweepMembership
from rlaunch.secrets import credential_name_problem
from rlaunch.skyrl.values.config_yaml import entrypoint_of, parse_config_yaml, render_recipe
from rlaunch.skyrl.values.overrides import RecipeOverride, RecipeOverrideError, from_build_context, refusals
from rlaunch.skyrl.values.overrides import apply as apply_overrides
from rlaunch.skyrl.values.retention import SkyRLRetentionPolicy
from rlaunch.skyrl.values.role_plan import SkyRLTopology
from rlaunch.skyrl.values.runtime import SkyRLRuntime
from rlaunch.sources.inputs import ArtifactDataSource, ArtifactHfModel


@dataclass(frozen=True, kw_only=True)
class SkyRLSpec:
    """Everything that decides what an RL run computes, and nothing about where it runs.

    `compatible_checkpoint_digests` declares runtime digests and run fingerprints whose
    checkpoints this run may resume (after compatibility was established); by default a resume
    across a runtime change or a changed recipe is refused (`rlaunch.runs.resume`).

    `credentials` names the environment variables the run needs (`("HF_TOKEN",)` for a gated
    model, a sandbox's key): names only, carried by the launch document's `run.credentials`,
    forwarded into the jobs by name, and a launch is refused while one is unset. They are what the
    run needs from where it runs, not what it computes, so they are not part of the fingerprint.

    `resume_from` starts the run from an explicit checkpoint (`ResumeFrom(root, step, digest)`,
    e.g. another version's), checked like its own (`rlaunch.runs.resume`); the run then keeps its
    own checkpoints under a root of its runtime, so it may be reused across a runtime repin. It is
    part of the fingerprint (it decides the starting weights) and needs `resume_mode: latest`.

    `recipe_overrides` are recipe keys set over `config_yaml` (`--set dotted.key=value`: a spec
    built inside a main takes the shell's by default); each must be a knob of its runtime's base
    config, not a key the role plan renders or rlaunch owns (`RecipeOverrideError` otherwise).

    `code` is the experiment's own code shipped with the run (`ExperimentCode`): staged by its
    digest into every task and put on the trainer's PYTHONPATH; its digest is in the launch
    document, so in the fingerprint. `reward` (`"module:function"`, a function of that code, called
    as `reward(completion, ground_truth) -> float`) is what the trainer scores with instead of
    `environment.env_class`, on a runtime that can (`capabilities.shipped_reward`: trl-cpu).
    """

    name: str
    version: str
    config_yaml: str
    runtime: SkyRLRuntime
    model: ArtifactHfModel
    train_data: tuple[ArtifactDataSource, ...]
    validation_data: tuple[ArtifactDataSource, ...] = ()
    topology: SkyRLTopology
    retention: SkyRLRetentionPolicy = SkyRLRetentionPolicy()
    seed: int
    compatible_checkpoint_digests: tuple[str, ...] = ()
    credentials: tuple[str, ...] = ()
    resume_from: ResumeFrom | None = None
    recipe_overrides: tuple[RecipeOverride, ...] = field(default_factory=from_build_context)
    code: ExperimentCode | None = None
    reward: str | None = None
    sweep: SweepMembership | None = None  # the sweep variant it is (`skyrl_step` sets it): provenance

    def __post_init__(self) -> None:
        validate_name(self.name, field="SkyRLSpec.name")
        validate_version(self.version, field="SkyRLSpec.version")
        require_int("SkyRLSpec", "seed", self.seed)
        for field_name, kind in (
            ("runtime", SkyRLRuntime),
            ("model", ArtifactHfModel),
            ("topology", SkyRLTopology),
            ("retention", SkyRLRetentionPolicy),
        ):
            if not isinstance(getattr(self, field_name), kind):
                raise TypeError(f"SkyRLSpec.{field_name} must be a {kind.__name__}, got {getattr(self, field_name)!r}")
        for field_name in ("train_data", "validation_data", "compatible_checkpoint_digests"):
            object.__setattr__(self, field_name, tuple(getattr(self, field_name)))
        if not self.train_data:
            raise ValueError("SkyRLSpec.train_data needs at least one ArtifactDataSource")
        for source in (*self.train_data, *self.validation_data):
            if not isinstance(source, ArtifactDataSource):
                raise TypeError(f"SkyRLSpec data sources must be ArtifactDataSource, got {source!r}")
        for digest in self.compatible_checkpoint_digests:
            require_str("SkyRLSpec", "compatible_checkpoint_digests[]", digest)
        if isinstance(self.credentials, str):  # not its letters: a string is never echoed (it may be a token)
            raise TypeError("SkyRLSpec.credentials must be a tuple of variable names, e.g. ('HF_TOKEN',), not a string")
        object.__setattr__(self, "credentials", tuple(dict.fromkeys(self.credentials)))
        for index, name in enumerate(self.credentials):
            problem = credential_name_problem(name)
            if problem:
                raise ValueError(f"SkyRLSpec.credentials[{index}]: {problem}")
        object.__setattr__(self, "recipe_overrides", tuple(self.recipe_overrides))
        for override in self.recipe_overrides:
            if not isinstance(override, RecipeOverride):
                raise TypeError(f"SkyRLSpec.recipe_overrides must hold RecipeOverride values, got {override!r}")
        if self.sweep is not None and not isinstance(self.sweep, SweepMembership):
            raise TypeError(f"SkyRLSpec.sweep must be a SweepMembership or None, got {self.sweep!r}")
        refused = refusals(self.recipe_overrides, self.runtime.runtime_profile)
        if refused:
            raise RecipeOverrideError("; ".join(refused))
        self._check_code()
        self.recipe  # noqa: B018 - the recipe parses (a PreflightError naming config_yaml otherwise)
        if self.resume_from is not None:
            if not isinstance(self.resume_from, ResumeFrom):
                raise TypeError(f"SkyRLSpec.resume_from must be a ResumeFrom, got {self.resume_from!r}")
            problems = resume_from_problems(self.resume_from, "SkyRLSpec.resume_from")
            mode = get_path(self.composed_recipe, TRAINER.RESUME_MODE)
            if mode != "latest":
                problems.append(
                    f"SkyRLSpec.resume_from needs trainer.resume_mode: latest (the recipe has {mode!r}): a run that "
                    "starts from a pinned checkpoint resumes its own checkpoints after that"
                )
            if problems:
                raise ValueError("; ".join(problems))

    def _check_code(self) -> None:
        """`code` is an ExperimentCode; `reward` names a function of it, for a runtime that calls one."""
        if self.code is not None and not isinstance(self.code, ExperimentCode):
            raise TypeError(f"SkyRLSpec.code must be an ExperimentCode, got {self.code!r}")
        if self.reward is None:
            return
        module = function_reference(self.reward, "SkyRLSpec.reward").partition(":")[0]
        if self.code is None or not self.code.covers(module):
            declared = self.code.modules if self.code is not None else ()
            raise ValueError(
                f"SkyRLSpec.reward={self.reward!r}: its module is not shipped with the run; declare "
                f"code=ExperimentCode(modules={(*declared, module)!r})"
            )
        profile = self.runtime.runtime_profile
        if not profile.capabilities.shipped_reward:
            raise ValueError(
                f"SkyRLSpec.reward={self.reward!r}: runtime {profile.name!r} does not call a reward function of the "
                "shipped code (capabilities.shipped_reward); register an environment with the runtime and name it "
                "in environment.env_class, or train on a runtime that does (trl-cpu)"
            )

    @functools.cached_property
    def recipe(self) -> dict[str, Any]:
        """The recipe as written (sparse), parsed from `config_yaml`, with the overrides set over it."""
        return apply_overrides(parse_config_yaml(self.config_yaml), self.recipe_overrides)

    @property
    def entrypoint(self) -> str:
        entrypoint: str = entrypoint_of(self.recipe)
        return entrypoint

    @functools.cached_property
    def composed_recipe(self) -> dict[str, Any]:
        """The rendered recipe laid over the runtime's base config: every key explicit (read-only use)."""
        composed, _ = self.runtime.runtime_profile.compose(self.rendered_recipe())
        return composed

    def rendered_recipe(self) -> dict[str, Any]:
        """The recipe with the role plan, strategy and seed rendered in: the launch document's `skyrl`."""
        return render_recipe(self.recipe, self.topology.role_plan, self.runtime.runtime_profile, self.seed)

    def deps(self) -> tuple[ArtifactStep[Any], ...]:
        """Model then data steps, deduplicated in order."""
        seen: dict[int, ArtifactStep[Any]] = {}
        sources: tuple[ArtifactHfModel | ArtifactDataSource, ...] = (
            self.model,
            *self.train_data,
            *self.validation_data,
        )
        for source in sources:
            for step in source.deps():
                seen.setdefault(id(step), step)
        return tuple(seen.values())
