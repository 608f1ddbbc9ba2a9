"""Recipe rules: what the recipe may say (the role plan's keys only with its values, no keys the
launcher owns), the explicitness a reviewer expects, what SkyRL's validator refuses inside an
allocated job, W&B identity, and the model facts (attention heads, context length) when known."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.composition import RecipeProblem, get_path, has_path
from rlaunch.launch_config.geometry import CRITIC_FROM_POLICY, CRITIC_MODEL_KEY, ROLE_PLAN_KEYS, Geometry, rendered_plan
from rlaunch.launch_config.recipe_keys import ALGORITHM, DATA, ENGINE, GENERATOR, ROLE, SAMPLING, TRAINER, role_key
from rlaunch.rules.subject import Subject, Violation, divisor_hint, violation
from rlaunch.rules.topology import engine_tps

CODES = (
    "recipe.unknown_key",
    "recipe.type_mismatch",
    "recipe.disagrees_with_plan",
    "recipe.launcher_owned",
    "explicit.checkpoint_interval",
    "explicit.resume_mode",
    "explicit.export_policy",
    "explicit.token_budget",
    "explicit.wandb_project",
    "explicit.wandb_entity",
    "recipe.critic",
    "recipe.kl_exclusive",
    "recipe.gae_needs_critic",
    "recipe.max_training_steps",
    "recipe.resume_mode",
    "recipe.input_length",
    "recipe.prefill_decode",
    "recipe.external_engines",
    "recipe.executor_backend",
    "model.tp_heads",
    "model.context_budget",
    "model.revision_mismatch",
)

# Injected by the launch host from the launch document; a recipe setting them would point a run
# at ambient paths or fork the seed and retention away from the spec.
LAUNCHER_OWNED: dict[str, str] = {
    TRAINER.CKPT_PATH: "the RL artifact's checkpoint root",
    TRAINER.EXPORT_PATH: "the RL artifact's export root",
    TRAINER.RESUME_PATH: "the checkpoint root (resume_mode: latest)",
    TRAINER.MAX_CKPTS_TO_KEEP: "SkyRLRetentionPolicy.resume_checkpoint_count",
    TRAINER.RUN_NAME: "the RL artifact's name@version",
    TRAINER.LOG_PATH: "the attempt directory",
    role_key("policy", ROLE.MODEL_PATH): "SkyRLSpec.model (an artifact dependency)",
    role_key("ref", ROLE.MODEL_PATH): "SkyRLSpec.model (an artifact dependency)",
    DATA.TRAIN_DATA: "SkyRLSpec.train_data (artifact dependencies)",
    DATA.VAL_DATA: "SkyRLSpec.validation_data (artifact dependencies)",
}

EXPLICIT_KEYS = {
    TRAINER.CKPT_INTERVAL: ("explicit.checkpoint_interval", "how often a resumable checkpoint is written"),
    TRAINER.RESUME_MODE: ("explicit.resume_mode", "whether a relaunch resumes (latest) or starts over (none)"),
    TRAINER.HF_SAVE_INTERVAL: (
        "explicit.export_policy",
        "the HF export policy (SkyRL exports every N steps, at epoch ends and the final step; -1: none during training, and export_hf=True still exports the final step)",
    ),
    TRAINER.MAX_PROMPT_LENGTH: ("explicit.token_budget", "the request token budget"),
    SAMPLING.MAX_GENERATE_LENGTH: ("explicit.token_budget", "the response token budget"),
}


def recipe_problem(p: RecipeProblem) -> Violation:
    """A composition problem (unknown key, type mismatch) as a violation of its recipe path."""
    return violation(p.code, [f"config_yaml.{p.path}"], p.message, p.fix, value=p.value)


def plan_disagreements(s: Subject) -> list[Violation]:
    """Recipe keys that repeat a role-plan (or seed) value with anything but the identical typed value."""
    expected = rendered_plan(s.plan)
    if s.plan_in_recipe:  # the recipe states the role plan: only what follows from it can disagree
        for key in ROLE_PLAN_KEYS.values():
            expected.pop(key)
    if s.seed is not None:
        expected[TRAINER.SEED] = s.seed
    # A document runs what it states or else the base-config default; a sparse recipe gets the
    # role plan's values rendered in.
    defaults = s.profile.base_config() if s.plan_in_recipe else None
    out = []
    for key, want in expected.items():
        if has_path(s.recipe, key):
            got = get_path(s.recipe, key)
        elif defaults is not None:
            got = get_path(defaults, key, None)
        else:
            continue
        if type(got) is not type(want) or got != want:
            source = s.seed_source if key == TRAINER.SEED else "the role plan"
            out.append(
                violation(
                    "recipe.disagrees_with_plan",
                    [f"config_yaml.{key}"],
                    f"SkyRL config {key}={got!r} disagrees with {source} value {want!r}",
                    f"remove {key} from config_yaml (it is rendered from {source}) or make it exactly {want!r}",
                    recipe=got,
                    plan=want,
                )
            )
    return out


def launcher_owned(s: Subject) -> list[Violation]:
    return [
        violation(
            "recipe.launcher_owned",
            [f"config_yaml.{key}"],
            f"{key} is set by rlaunch from {source}",
            f"remove {key} from config_yaml",
            recipe=get_path(s.recipe, key),
        )
        for key, source in LAUNCHER_OWNED.items()
        if has_path(s.recipe, key)
    ]


def explicitness(s: Subject) -> list[Violation]:
    return [
        violation(
            code,
            [f"config_yaml.{key}"],
            f"{key} is not set explicitly; it decides {what}",
            f"set {key} in config_yaml instead of relying on the trainer default",
        )
        for key, (code, what) in EXPLICIT_KEYS.items()
        if not has_path(s.recipe, key)
    ]


def recipe_rules(c: Mapping[str, Any]) -> list[Violation]:
    def g(key: str) -> Any:
        return get_path(c, key)

    out = []
    critic = g(CRITIC_MODEL_KEY)
    if critic and critic != CRITIC_FROM_POLICY:
        out.append(
            violation(
                "recipe.critic",
                [f"config_yaml.{CRITIC_MODEL_KEY}"],
                "the critic's model is not written in the recipe: the role plan's critic starts from the "
                "policy's model",
                f"remove {CRITIC_MODEL_KEY}; for a critic, set SkyRLRolePlan(critic=SkyRLCriticPlan(...)) "
                "(critic-free estimators such as grpo need none)",
                value=critic,
            )
        )
    elif critic and g(TRAINER.STRATEGY) == "megatron":
        out.append(
            violation(
                "recipe.critic",
                ["role_plan.critic", "runtime.profile"],
                "SkyRL 0.4.0 trains a critic only with FSDP: its Megatron backend refuses one (GRPO only)",
                "run the critic's plan on the fsdp runtime, or drop the critic (and GAE) for grpo",
                value=critic,
            )
        )
    if g(ALGORITHM.USE_KL_LOSS) and g(ALGORITHM.USE_KL_IN_REWARD):
        out.append(
            violation(
                "recipe.kl_exclusive",
                ["config_yaml.trainer.algorithm.use_kl_loss", "config_yaml.trainer.algorithm.use_kl_in_reward"],
                "use_kl_loss and use_kl_in_reward are mutually exclusive",
                "keep one of them true",
                use_kl_loss=True,
                use_kl_in_reward=True,
            )
        )
    if g(ALGORITHM.ADVANTAGE_ESTIMATOR) == "gae" and not critic:
        # SkyRL's own rule (`validate_cfg`): GAE's values come from the critic.
        out.append(
            violation(
                "recipe.gae_needs_critic",
                ["config_yaml.trainer.algorithm.advantage_estimator", "role_plan.critic"],
                "advantage_estimator 'gae' needs a critic, which the role plan does not describe",
                "add one to the role plan (SkyRLRolePlan(critic=SkyRLCriticPlan(num_nodes, num_gpus_per_node, "
                "mini_batch_size))), or use grpo, rloo or reinforce++",
                value="gae",
            )
        )
    steps = g(TRAINER.MAX_TRAINING_STEPS)
    if steps is not None and (not _is_int(steps) or steps <= 0):
        out.append(
            violation(
                "recipe.max_training_steps",
                ["config_yaml.trainer.max_training_steps"],
                f"trainer.max_training_steps={steps!r} must be a positive integer when set",
                "set it to a positive integer or remove it",
                value=steps,
            )
        )
    if g(TRAINER.RESUME_MODE) not in ("none", "latest", None):
        out.append(
            violation(
                "recipe.resume_mode",
                ["config_yaml.trainer.resume_mode"],
                f"trainer.resume_mode={g(TRAINER.RESUME_MODE)!r} is not supported",
                "use latest (resume from the checkpoint root) or none",
                value=g(TRAINER.RESUME_MODE),
            )
        )
    prompt, turns, max_input = g(TRAINER.MAX_PROMPT_LENGTH), g(GENERATOR.MAX_TURNS), g(GENERATOR.MAX_INPUT_LENGTH)
    if max_input is not None and (
        not _is_int(max_input) or (turns == 1 and max_input != prompt) or (turns > 1 and max_input < prompt)
    ):
        rel = "equal" if turns == 1 else "be at least"
        out.append(
            violation(
                "recipe.input_length",
                ["config_yaml.generator.max_input_length"],
                f"generator.max_input_length={max_input!r} must {rel} trainer.max_prompt_length={prompt} with max_turns={turns}",
                "remove generator.max_input_length (it defaults to max_prompt_length)",
                value=max_input,
            )
        )
    engines = g(ENGINE.NUM_ENGINES)
    if g(ENGINE.ENABLE_PD):
        prefill = g(ENGINE.NUM_PREFILL)
        if engines < 2 or not 0 < prefill < engines:
            out.append(
                violation(
                    "recipe.prefill_decode",
                    ["config_yaml.generator.inference_engine.num_prefill"],
                    f"prefill/decode disaggregation needs num_engines >= 2 and 0 < num_prefill < num_engines; got {prefill} of {engines}",
                    "choose num_prefill between 1 and num_engines-1",
                    num_prefill=prefill,
                    num_engines=engines,
                )
            )
    if g(ENGINE.EXTERNAL_PROXY_URL) or g(ENGINE.EXTERNAL_SERVER_URLS):
        out.append(
            violation(
                "recipe.external_engines",
                ["config_yaml.generator.inference_engine.external_server_urls"],
                "the role plan describes local engines; external inference servers are not part of it",
                "remove the external URLs",
                value=True,
            )
        )
    if g(ENGINE.DISTRIBUTED_EXECUTOR_BACKEND) not in ("ray", "mp"):
        out.append(
            violation(
                "recipe.executor_backend",
                ["config_yaml.generator.inference_engine.distributed_executor_backend"],
                f"distributed_executor_backend must be ray or mp; got {g(ENGINE.DISTRIBUTED_EXECUTOR_BACKEND)!r}",
                "use ray (may span nodes) or mp (one node)",
                value=g(ENGINE.DISTRIBUTED_EXECUTOR_BACKEND),
            )
        )
    return out


def wandb_project(s: Subject, composed: Mapping[str, Any]) -> list[Violation]:
    if get_path(composed, TRAINER.LOGGER) != "wandb" or has_path(s.recipe, TRAINER.PROJECT_NAME):
        return []
    return [
        violation(
            "explicit.wandb_project",
            ["config_yaml.trainer.project_name"],
            "trainer.logger is wandb but config_yaml does not name trainer.project_name",
            "set trainer.project_name explicitly (or use logger: console)",
        )
    ]


def wandb_entity(composed: Mapping[str, Any], entity: str | None, setting: str) -> list[Violation]:
    """W&B logging needs the entity the run is recorded under; `setting` is where to name it."""
    if get_path(composed, TRAINER.LOGGER) != "wandb" or entity:
        return []
    return [
        violation(
            "explicit.wandb_entity",
            ["execution.wandb_entity"],
            "trainer.logger is wandb but the execution names no W&B entity",
            f"set {setting} or use logger: console",
        )
    ]


def model_rules(s: Subject, c: Mapping[str, Any], geo: Geometry) -> list[Violation]:
    if s.model is None:
        return []
    out = []
    model = s.model
    heads, tp = model.num_attention_heads, s.plan["inference_engine_tensor_parallel_size"]
    if heads and heads % tp:
        g, held = s.gpus_per_node, engine_tps(s, geo)
        out.append(
            violation(
                "model.tp_heads",
                ["role_plan.inference_engine_tensor_parallel_size"],
                f"inference TP={tp} must divide the model's {heads} attention heads",
                f"choose TP among the divisors of {heads} whose engines fill a {g}-GPU node: "
                f"{divisor_hint(g, keep=held.__contains__)}",
                heads=heads,
                tp=tp,
            )
        )
    recorded, pinned = model.revision, model.tokenizer_revision
    if recorded and pinned and recorded != pinned:
        out.append(
            violation(
                "model.revision_mismatch",
                ["model.tokenizer_revision"],
                f"the spec pins tokenizer revision {pinned!r} but the model artifact recorded revision {recorded!r}",
                f"pin tokenizer_revision={recorded!r}, or point the model at an artifact built from {pinned!r}",
                pinned=pinned,
                recorded=recorded,
            )
        )
    context = model.context_length
    budget = get_path(c, TRAINER.MAX_PROMPT_LENGTH) + get_path(c, SAMPLING.MAX_GENERATE_LENGTH)
    if context and budget > context:
        out.append(
            violation(
                "model.context_budget",
                ["config_yaml.trainer.max_prompt_length", "config_yaml.generator.sampling_params.max_generate_length"],
                f"max_prompt_length + max_generate_length = {budget} exceeds the model's context length {context}",
                f"shrink the token budget to at most {context}",
                budget=budget,
                context_length=context,
            )
        )
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
