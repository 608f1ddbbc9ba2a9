"""Translate a composed SkyRL 0.4.0 recipe into TRL 1.16 `GRPOConfig` arguments, or refuse it.

Pure Python (stdlib + yaml): importable without torch, so the refusal happens before anything
heavy is loaded.

Batch semantics (SkyRL -> TRL), with dp = world size (training processes = device slots) and
n = `generator.n_samples_per_prompt`:

==========================================  ===============================================
SkyRL key                                   TRL `GRPOConfig`
==========================================  ===============================================
generator.n_samples_per_prompt (n)          num_generations = n
trainer.micro_train_batch_size_per_gpu      per_device_train_batch_size = micro (completions)
trainer.policy_mini_batch_size (mini)       gradient_accumulation_steps = (mini*n/dp) / micro
trainer.train_batch_size (train)            steps_per_generation = (train*n/dp) / micro, so one
                                            generation of train*n completions feeds train/mini
                                            optimizer steps (generation_batch_size = train*n)
trainer.update_epochs_per_batch (mu)        num_iterations = mu
trainer.algorithm.use_kl_loss/kl_loss_coef  beta = kl_loss_coef if use_kl_loss else 0.0
                                            (TRL's KL is the k3 estimator, as kl_estimator_type=k3)
trainer.algorithm.eps_clip_low / high       epsilon / epsilon_high
trainer.algorithm.loss_reduction            loss_type: token_mean -> "dapo" (tokens of the whole
                                            accumulated batch), sequence_mean -> "grpo",
                                            seq_mean_token_sum_norm -> "dr_grpo"
trainer.algorithm.grpo_norm_by_std          scale_rewards = "group" if true else "none"
trainer.algorithm.use_entropy_loss/coef     entropy_coef = entropy_loss_coef if used else 0.0
trainer.policy.optimizer_config.*           learning_rate, weight_decay, max_grad_norm,
                                            warmup_steps (int), lr_scheduler_type
generator.sampling_params.*                 max_completion_length, temperature, top_p,
                                            top_k (-1 -> 0 = off), min_p (0 -> None = off)
trainer.seed                                seed, data_seed
data.val_data + trainer.eval_*              not TRL's eval loop: rank 0 generates greedily for the
                                            validation prompts (eval_batch_size per batch, up to
                                            max_generate_length tokens) before training
                                            (eval_before_train) and every eval_interval training
                                            steps, scored by the env's reward -> eval.jsonl and
                                            eval_* fields on that step's metrics line
trainer.max_training_steps / epochs         max_steps (see below)
(fixed)                                     use_cpu=True, bf16=False, report_to=[],
                                            logging_steps=1, save_strategy="no" (the adapter
                                            saves), gradient_checkpointing=False
==========================================  ===============================================

Step counting: the runtime's step is TRL's optimizer step (`global_step`). SkyRL counts training
steps (one per `train_batch_size` prompts); one training step is
`k = (train/mini) * update_epochs_per_batch` optimizer steps. `max_training_steps`,
`ckpt_interval` and epochs are scaled by k, so with `train == mini` (and mu = 1) both counters are
the same number. max_steps = k * min(max_training_steps, epochs * (rows // train)): the data is
read for at most `epochs` passes (SkyRL's dataloader drops the last partial batch, as TRL's
sampler does) and `max_training_steps`, when set, is a hard stop within that.

Which keys are honoured, and with which values, is declared once, as data, in the profile
(`trl_cpu/profile.yaml`, `capabilities.honoured_keys` / `allowed_values`): the launcher's preflight
reads it there, and this module reads the environment snapshot's copy of the same file
(`$RLAUNCH_RUNTIME_PROFILE`, set by the environment builder). A key outside the honoured keys
must keep its base-config default. The checking logic itself is a copy of the launcher's
(`registry.unsupported_settings`): the adapter runs in the runtime's own environment and cannot
import rlaunch (ARCHITECTURE.md lists the copies that boundary forces).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_CONFIG_ENV = "RLAUNCH_BASE_CONFIG"
BASE_CONFIG_NAME = "skyrl-0.4.0"
PROFILE_ENV = "RLAUNCH_RUNTIME_PROFILE"

LOSS_TYPES = {"token_mean": "dapo", "sequence_mean": "grpo", "seq_mean_token_sum_norm": "dr_grpo"}


class RecipeRefused(ValueError):
    """The recipe asks for something trl-cpu cannot honour. `violations`: (key, value, reason)."""

    def __init__(self, violations: list[tuple[str, Any, str]]):
        self.violations = list(violations)
        lines = [f"  {key} = {value!r}: {reason}" for key, value, reason in self.violations]
        super().__init__("the trl-cpu runtime cannot honour this recipe:\n" + "\n".join(lines))


# ---------------------------------------------------------------- helpers


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted leaf keys of a nested mapping (lists and scalars are leaves)."""
    out: dict[str, Any] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict) and value:
                out.update(flatten(value, path))
            else:
                out[path] = value
    return out


def get(tree: dict[str, Any], key: str, default: Any = None) -> Any:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _locate(env: str, snapshot: str, source: Path, what: str) -> Path:
    """`$env` (set by the environment builder), else `snapshot` beside an environment snapshot's
    `adapter/`, else `source` (relative to `runtimes/` in the rlaunch source tree)."""
    configured = os.environ.get(env)
    if configured:
        return Path(configured)
    here = Path(__file__).resolve()
    for candidate in (here.parents[2] / snapshot, here.parents[3] / source):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"cannot find {what}: set ${env} (the environment builder sets it)")


def base_config_path() -> Path:
    """The base config the recipe was composed on."""
    source = Path("base_configs") / f"{BASE_CONFIG_NAME}.yaml"
    return _locate(BASE_CONFIG_ENV, "base_config.yaml", source, f"the SkyRL base config {BASE_CONFIG_NAME}.yaml")


def profile_path() -> Path:
    """The runtime profile this adapter was snapshotted with: the one source of its capabilities."""
    return _locate(PROFILE_ENV, "profile/profile.yaml", Path("trl_cpu") / "profile.yaml", "the trl-cpu profile.yaml")


def _load_yaml(path: Path) -> Any:
    import yaml

    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def load_base_config() -> dict[str, Any]:
    tree = _load_yaml(base_config_path()) or {}
    tree.pop("_rlaunch", None)  # the generated file's description of its shape, not a SkyRL key
    return tree


@dataclass(frozen=True)
class Capabilities:
    """The profile's `capabilities.honoured_keys` (keys or `prefix.*`) and `allowed_values`."""

    honoured: tuple[str, ...]
    allowed: dict[str, list[Any]]

    def honours(self, key: str) -> bool:
        return any(key == k or (k.endswith(".*") and key.startswith(k[:-1])) for k in self.honoured)


def load_capabilities(path: Path | None = None) -> Capabilities:
    """What the profile at `path` (default: `profile_path()`) declares trl-cpu honours."""
    declared = (_load_yaml(path or profile_path()) or {}).get("capabilities") or {}
    allowed = {str(k): v if isinstance(v, list) else [v] for k, v in (declared.get("allowed_values") or {}).items()}
    return Capabilities(tuple(declared.get("honoured_keys") or ()), allowed)


# ---------------------------------------------------------------- checks


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps booleans apart from the integers 0 and 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def unsupported(
    skyrl: dict[str, Any], defaults: dict[str, Any], capabilities: Capabilities | None = None
) -> list[tuple[str, Any, str]]:
    """Every recipe setting trl-cpu cannot honour, as (key, value, reason)."""
    caps = capabilities or load_capabilities()
    out: list[tuple[str, Any, str]] = []
    base = flatten(defaults)
    given = flatten(skyrl)
    for key in sorted(set(given) - set(base)):
        out.append((key, given[key], "not a key of the SkyRL 0.4.0 base config"))
    for key, default in base.items():
        value = given.get(key, default)
        if not caps.honours(key):
            if not _same(value, default):
                out.append(
                    (key, value, f"not honoured by trl-cpu; only the base-config default {default!r} is accepted")
                )
        elif key in caps.allowed and not any(_same(value, a) for a in caps.allowed[key]):
            out.append((key, value, f"trl-cpu accepts only {caps.allowed[key]!r}"))
    policy_path = get(skyrl, "trainer.policy.model.path")
    ref_path = get(skyrl, "trainer.ref.model.path")
    if ref_path not in (None, policy_path):
        out.append(
            (
                "trainer.ref.model.path",
                ref_path,
                f"trl-cpu uses the initial policy as reference; accepted: null or {policy_path!r}",
            )
        )
    max_input = get(skyrl, "generator.max_input_length")
    prompt_len = get(skyrl, "trainer.max_prompt_length")
    if max_input is not None and max_input != prompt_len:
        out.append(
            (
                "generator.max_input_length",
                max_input,
                f"single-turn: accepted null or trainer.max_prompt_length ({prompt_len})",
            )
        )
    if get(skyrl, "trainer.max_ckpts_to_keep") == 0:
        out.append(("trainer.max_ckpts_to_keep", 0, "0 is refused (as by SkyRL); use -1 to keep all or N > 0"))
    if not get(skyrl, "trainer.policy.model.path"):
        out.append(("trainer.policy.model.path", None, "a local HF model directory is required"))
    return out


# ---------------------------------------------------------------- translation


@dataclass(frozen=True)
class Plan:
    """Everything `trainer.run` needs, derived from the recipe and the world size."""

    grpo: dict[str, Any]  # GRPOConfig keyword arguments (max_steps filled by `with_rows`)
    world_size: int
    train_data: list[str]
    model_path: str
    env_class: str
    max_prompt_length: int
    optimizer_steps_per_training_step: int
    max_training_steps: int | None
    epochs: int
    train_batch_size: int
    ckpt_path: str
    ckpt_every: int  # optimizer steps; 0 = only the final step
    max_ckpts_to_keep: int
    resume: bool
    export_path: str
    export_hf_artifact: bool
    val_data: list[str] = field(default_factory=list)
    eval_interval: int = 0  # training steps; <= 0 never
    eval_batch_size: int = 1
    eval_before_train: bool = False
    max_steps: int = 0
    notes: list[str] = field(default_factory=list)

    def with_rows(self, rows: int) -> Plan:
        """Fix max_steps once the number of (kept) prompt rows is known."""
        if rows < self.train_batch_size:
            raise RecipeRefused(
                [("trainer.train_batch_size", self.train_batch_size, f"the dataset has only {rows} usable prompt rows")]
            )
        k = self.optimizer_steps_per_training_step
        training_steps = self.epochs * (rows // self.train_batch_size)
        if self.max_training_steps is not None:
            training_steps = min(training_steps, self.max_training_steps)
        steps = training_steps * k
        grpo = {**self.grpo, "max_steps": steps}
        return Plan(**{**self.__dict__, "grpo": grpo, "max_steps": steps})


def _int(skyrl: dict[str, Any], key: str) -> int:
    value = get(skyrl, key)
    if isinstance(value, bool) or value is None:
        raise RecipeRefused([(key, value, "an integer is required")])
    return int(value)


def translate(skyrl: dict[str, Any], world_size: int, *, export_hf: bool = False) -> Plan:
    """The TRL arguments for this recipe on `world_size` processes; refuses what does not fit.
    `export_hf` is the launch document's `run.export_hf` (a launcher setting, not a SkyRL key)."""
    errors: list[tuple[str, Any, str]] = []
    n = _int(skyrl, "generator.n_samples_per_prompt")
    train = _int(skyrl, "trainer.train_batch_size")
    mini = _int(skyrl, "trainer.policy_mini_batch_size")
    micro = _int(skyrl, "trainer.micro_train_batch_size_per_gpu")
    mu = _int(skyrl, "trainer.update_epochs_per_batch")
    nodes = _int(skyrl, "trainer.placement.policy_num_nodes")
    per_node = _int(skyrl, "trainer.placement.policy_num_gpus_per_node")
    slots = nodes * per_node
    dp = world_size
    if slots != world_size:
        errors.append(
            (
                "trainer.placement.policy_num_gpus_per_node",
                per_node,
                f"the recipe places the policy on {slots} device slot(s) but {world_size} process(es) are running; "
                f"run under `python -m torch.distributed.run --standalone --nproc_per_node={slots}`",
            )
        )
    if get(skyrl, "trainer.placement.colocate_all"):
        engines = _int(skyrl, "generator.inference_engine.num_engines")
        width = engines * _int(skyrl, "generator.inference_engine.tensor_parallel_size")
        width *= _int(skyrl, "generator.inference_engine.pipeline_parallel_size")
        width *= _int(skyrl, "generator.inference_engine.data_parallel_size")
        if width != slots:
            errors.append(
                (
                    "generator.inference_engine.num_engines",
                    engines,
                    f"colocated: num_engines*tp*pp*dp = {width} must equal the policy's {slots} device slot(s)",
                )
            )
    if n < 2:
        errors.append(("generator.n_samples_per_prompt", n, "GRPO needs at least 2 samples per prompt"))
    if micro <= 0:
        errors.append(("trainer.micro_train_batch_size_per_gpu", micro, "must be > 0"))
    if mini <= 0 or train < mini or train % mini:
        errors.append(
            ("trainer.policy_mini_batch_size", mini, f"must be > 0 and divide trainer.train_batch_size ({train})")
        )
    if mu < 1:
        errors.append(("trainer.update_epochs_per_batch", mu, "must be >= 1"))
    if not errors and (mini * n) % dp:
        errors.append(
            (
                "trainer.policy_mini_batch_size",
                mini,
                f"mini*n = {mini * n} completions per optimizer step do not split evenly over {dp} processes",
            )
        )
    if not errors and ((mini * n) // dp) % micro:
        errors.append(
            (
                "trainer.micro_train_batch_size_per_gpu",
                micro,
                f"must divide the per-process mini-batch mini*n/dp = {(mini * n) // dp}",
            )
        )
    max_training_steps = get(skyrl, "trainer.max_training_steps")
    if max_training_steps is not None and int(max_training_steps) <= 0:
        errors.append(("trainer.max_training_steps", max_training_steps, "must be > 0 when set"))
    if errors:
        raise RecipeRefused(errors)

    per_dp_mini = (mini * n) // dp
    k = (train // mini) * mu
    opt = get(skyrl, "trainer.policy.optimizer_config") or {}
    algo = get(skyrl, "trainer.algorithm") or {}
    sampling = get(skyrl, "generator.sampling_params") or {}
    top_k = int(sampling.get("top_k", -1) or 0)
    min_p = float(sampling.get("min_p", 0.0) or 0.0)
    seed = _int(skyrl, "trainer.seed")
    grpo: dict[str, Any] = {
        "num_generations": n,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": per_dp_mini // micro,
        "steps_per_generation": (train * n // dp) // micro,
        "num_iterations": mu,
        "beta": float(algo.get("kl_loss_coef", 0.0)) if algo.get("use_kl_loss") else 0.0,
        "epsilon": float(algo.get("eps_clip_low", 0.2)),
        "epsilon_high": float(algo.get("eps_clip_high", 0.2)),
        "loss_type": LOSS_TYPES[algo.get("loss_reduction", "token_mean")],
        "scale_rewards": "group" if algo.get("grpo_norm_by_std", True) else "none",
        "entropy_coef": float(algo.get("entropy_loss_coef", 0.0)) if algo.get("use_entropy_loss") else 0.0,
        "learning_rate": float(opt.get("lr", 1e-6)),
        "weight_decay": float(opt.get("weight_decay", 0.0)),
        "max_grad_norm": float(opt.get("max_grad_norm", 1.0)),
        "warmup_steps": int(opt.get("num_warmup_steps", 0) or 0),
        "lr_scheduler_type": str(opt.get("scheduler", "constant_with_warmup")),
        "max_completion_length": int(sampling.get("max_generate_length", 1024)),
        "temperature": float(sampling.get("temperature", 1.0)),
        "top_p": float(sampling.get("top_p", 1.0)),
        "top_k": top_k if top_k > 0 else 0,
        "min_p": min_p if min_p > 0 else None,
        "seed": seed,
        "data_seed": seed,
        # fixed for a CPU run driven by rlaunch
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        "report_to": [],
        "logging_steps": 1,
        "save_strategy": "no",
        "gradient_checkpointing": False,
        "remove_unused_columns": False,
        "shuffle_dataset": True,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
        "log_completions": False,
        "use_vllm": False,
    }
    if world_size > 1:
        grpo["ddp_backend"] = "gloo"
        grpo["ddp_find_unused_parameters"] = False
    ckpt_interval = int(get(skyrl, "trainer.ckpt_interval") or 0)
    resume_mode = get(skyrl, "trainer.resume_mode")
    train_data = get(skyrl, "data.train_data") or []
    val_data = get(skyrl, "data.val_data") or []
    return Plan(
        grpo=grpo,
        world_size=world_size,
        train_data=[train_data] if isinstance(train_data, str) else list(train_data),
        model_path=str(get(skyrl, "trainer.policy.model.path")),
        env_class=str(get(skyrl, "environment.env_class")),
        max_prompt_length=_int(skyrl, "trainer.max_prompt_length"),
        optimizer_steps_per_training_step=k,
        max_training_steps=int(max_training_steps) if max_training_steps is not None else None,
        epochs=_int(skyrl, "trainer.epochs"),
        train_batch_size=train,
        ckpt_path=str(get(skyrl, "trainer.ckpt_path")),
        ckpt_every=ckpt_interval * k if ckpt_interval > 0 else 0,
        max_ckpts_to_keep=_int(skyrl, "trainer.max_ckpts_to_keep"),
        resume=resume_mode == "latest",
        export_path=str(get(skyrl, "trainer.export_path")),
        export_hf_artifact=export_hf,
        val_data=[val_data] if isinstance(val_data, str) else list(val_data),
        eval_interval=int(get(skyrl, "trainer.eval_interval") or 0),
        eval_batch_size=max(1, int(get(skyrl, "trainer.eval_batch_size") or 1)),
        eval_before_train=bool(get(skyrl, "trainer.eval_before_train")),
    )


def check_and_translate(
    skyrl: dict[str, Any], world_size: int, defaults: dict[str, Any] | None = None, *, export_hf: bool = False
) -> Plan:
    violations = unsupported(skyrl, load_base_config() if defaults is None else defaults)
    if violations:
        raise RecipeRefused(violations)
    return translate(skyrl, world_size, export_hf=export_hf)
