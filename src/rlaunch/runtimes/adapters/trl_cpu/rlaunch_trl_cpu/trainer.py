"""`run(skyrl)`: the trl-cpu runtime entrypoint. TRL's `GRPOTrainer` on CPU, driven by a composed
SkyRL recipe (see `recipe` for the translation), writing rlaunch's records.

Context comes from environment variables set by the task bootstrap:

* `RLAUNCH_ATTEMPT_DIR`   records: `joined/trainer-rank-<r>.json` (every process),
                          `model_load.json`, `metrics.jsonl`, `eval.jsonl` (rank 0, the last only
                          with data.val_data). Local path or fsspec URL.
                          Default: `{RLAUNCH_TASK_DIR}/attempt`.
* `RLAUNCH_TASK_DIR`      task-local scratch (TRL output_dir, checkpoint/export staging). Default: cwd.
* `RLAUNCH_RUNTIME_DIGEST`      written into every checkpoint; a resume from another digest is refused
* `RLAUNCH_RUN_FINGERPRINT`     the run fingerprint (recipe, plan, inputs), written into every checkpoint
* `RLAUNCH_COMPATIBLE_DIGESTS`  comma-separated digests whose checkpoints may also be resumed
* `RLAUNCH_RESUME_FROM`         a pinned checkpoint to start from while the run's own root holds
                                none (JSON: checkpoint_root, step, runtime_digest)
* `RLAUNCH_MODEL_IDENTITY`      identity string of the model artifact (recorded in model_load.json)
* `RANK`, `WORLD_SIZE`, `LOCAL_RANK`  set by torchrun when the recipe has more than one device slot

Order of work: join marker -> refuse an unhonourable recipe -> check the resume checkpoint's
digest (all before torch is imported) -> load tokenizer, data, model (model-load record) ->
train (metrics line per optimizer step, checkpoint every `ckpt_interval` and at the final step)
-> export. A resume whose checkpoint is at or past the final step trains nothing and only makes
sure the export exists.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Any

from . import checkpoints, data, recipe, rewards, storage
from .checkpoints import CheckpointStore
from .libraries import quiet_libraries

ENV_ATTEMPT_DIR = "RLAUNCH_ATTEMPT_DIR"
ENV_TASK_DIR = "RLAUNCH_TASK_DIR"
ENV_DIGEST = "RLAUNCH_RUNTIME_DIGEST"
ENV_COMPATIBLE = "RLAUNCH_COMPATIBLE_DIGESTS"
ENV_FINGERPRINT = "RLAUNCH_RUN_FINGERPRINT"
ENV_IDENTITY = "RLAUNCH_MODEL_IDENTITY"
ENV_RESUME_FROM = "RLAUNCH_RESUME_FROM"

# Objects that must outlive run() in a multi-process run (see the end of `run`).
KEEP_ALIVE: list[Any] = []


@dataclass(frozen=True)
class Context:
    attempt_dir: str
    task_dir: str
    digest: str
    fingerprint: str
    compatible: list[str]
    identity: str
    rank: int
    local_rank: int
    world_size: int
    resume_from: dict[str, Any] | None = None  # the pinned checkpoint (ENV_RESUME_FROM)

    @classmethod
    def from_env(cls) -> Context:
        task_dir = os.path.abspath(os.path.expanduser(os.environ.get(ENV_TASK_DIR) or os.getcwd()))
        attempt = os.environ.get(ENV_ATTEMPT_DIR) or os.path.join(task_dir, "attempt")
        if not storage.is_url(attempt):
            attempt = os.path.abspath(os.path.expanduser(attempt))
        compatible = [d.strip() for d in os.environ.get(ENV_COMPATIBLE, "").split(",") if d.strip()]
        return cls(
            attempt_dir=attempt,
            task_dir=task_dir,
            digest=os.environ.get(ENV_DIGEST, ""),
            fingerprint=os.environ.get(ENV_FINGERPRINT, ""),
            compatible=compatible,
            identity=os.environ.get(ENV_IDENTITY, ""),
            rank=int(os.environ.get("RANK", "0")),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            world_size=int(os.environ.get("WORLD_SIZE", "1")),
            resume_from=json.loads(os.environ[ENV_RESUME_FROM]) if os.environ.get(ENV_RESUME_FROM) else None,
        )

    def log(self, message: str, *, every_rank: bool = False) -> None:
        """A progress line on stderr (rank 0 only unless `every_rank`)."""
        if self.rank == 0 or every_rank:
            sys.stderr.write(f"[trl-cpu rank{self.rank}] {message}\n")
            sys.stderr.flush()


def _location(value: str) -> str:
    return value if storage.is_url(value) else os.path.abspath(os.path.expanduser(value))


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


# ---------------------------------------------------------------- model-load record


def model_load_record(configured: str, loaded_dir: str, identity: str, model: Any, **extra: Any) -> dict[str, Any]:
    import hashlib

    files = storage.weight_digests(loaded_dir)
    if len(files) == 1:
        weights = next(iter(files.values()))
    else:
        weights = hashlib.sha256("".join(f"{n} {h}\n" for n, h in sorted(files.items())).encode()).hexdigest()
    config_file = os.path.join(loaded_dir, "config.json")
    architectures = getattr(model.config, "architectures", None) or [type(model).__name__]
    params = {id(p): p.numel() for p in model.parameters()}
    return {
        "configured_path": configured,
        "loaded_path": os.path.realpath(loaded_dir),
        "identity": identity,
        "weights_sha256": weights,
        "weight_files": files,
        "config_sha256": storage.sha256_file(config_file) if os.path.exists(config_file) else None,
        "architecture": architectures[0],
        "num_parameters": sum(params.values()),
        "dtype": str(getattr(model, "dtype", "")).replace("torch.", ""),
        "time": time.time(),
        **extra,
    }


# ---------------------------------------------------------------- export


def export_policy(model: Any, tokenizer: Any, step: int, export_root: str, stage_root: str) -> str:
    """Write `{export_root}/global_step_<step>/policy/` (HF model + generation config + tokenizer)."""
    destination = storage.join(export_root, f"global_step_{step}", "policy")
    stage = os.path.join(stage_root, f"export-global_step_{step}")
    shutil.rmtree(stage, ignore_errors=True)
    model.save_pretrained(stage)
    tokenizer.save_pretrained(stage)
    storage.publish_dir(stage, destination, last=["config.json"])
    shutil.rmtree(stage, ignore_errors=True)
    return destination


def export_exists(export_root: str, step: int) -> bool:
    policy = storage.join(export_root, f"global_step_{step}", "policy")
    if not storage.exists(storage.join(policy, "config.json")):
        return False
    names = storage.list_names(policy)
    return any(n.endswith((".safetensors", ".bin")) for n in names)


# ---------------------------------------------------------------- run


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def _prompt_length(tokenizer: Any, messages: list[dict[str, str]]) -> int:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def env_reward(completions: list[Any], ground_truth: list[str], env_class: list[str], **_: Any) -> list[float]:
    """TRL reward function: dispatches each completion to the reward registered for its row."""
    out = []
    for completion, truth, env in zip(completions, ground_truth, env_class):
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        out.append(float(rewards.get(env)(text, truth)))
    return out


def _scored_by(rows: list[dict[str, Any]], reward: str | None) -> list[dict[str, Any]]:
    """The rows, each scored by the shipped reward when there is one (in place of its env class)."""
    return rows if reward is None else [{**row, "env_class": reward} for row in rows]


def run(skyrl: dict[str, Any], *, export_hf: bool = False, reward: str | None = None) -> None:
    """Train the composed SkyRL recipe `skyrl` with TRL GRPO on CPU (`export_hf`: the document's run.export_hf;
    `reward`: its code.reward, the experiment's shipped reward that scores every row). Raises `recipe.RecipeRefused`,
    `checkpoints.ResumeRefused`, `data.DataError` or `rewards.UnknownRewardError` on refusal."""
    started = time.time()
    ctx = Context.from_env()
    storage.write_join_marker(ctx.attempt_dir, ctx.rank, ctx.world_size)
    ctx.log(f"joined as rank {ctx.rank} of {ctx.world_size} (pid {os.getpid()})", every_rank=True)
    plan = recipe.check_and_translate(skyrl, ctx.world_size, export_hf=export_hf)
    rewards.get(plan.env_class)
    if reward is not None:
        rewards.shipped(reward)
        ctx.log(
            f"reward: {reward} from {sys.modules[reward.partition(':')[0]].__file__} (the experiment's shipped code)"
        )
    store = CheckpointStore(_location(plan.ckpt_path))
    resume_step: int | None = None
    resume_store = store
    if plan.resume:
        resume_step = store.latest()
        if resume_step is not None:
            info = store.info(resume_step)
            checkpoints.check_digest(store, resume_step, info, ctx.digest, ctx.compatible, ctx.fingerprint)
        elif ctx.resume_from is not None:  # nothing of its own yet: start from the pinned checkpoint
            pin = ctx.resume_from
            resume_step = int(pin["step"])
            resume_store = checkpoints.pinned(_location(pin["checkpoint_root"]), resume_step, pin["runtime_digest"])
    if not ctx.digest:
        ctx.log("warning: RLAUNCH_RUNTIME_DIGEST is not set; checkpoints carry no runtime digest")

    quiet_libraries()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_path = os.path.abspath(os.path.expanduser(plan.model_path))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    rows = _scored_by(data.load_rows([os.path.expanduser(p) for p in plan.train_data], plan.env_class), reward)
    for row in rows:
        rewards.get(row["env_class"])
    kept = [r for r in rows if _prompt_length(tokenizer, r["prompt"]) <= plan.max_prompt_length]
    if len(kept) < len(rows):
        ctx.log(f"dropped {len(rows) - len(kept)} of {len(rows)} prompts longer than trainer.max_prompt_length")
    val_rows: list[dict[str, Any]] = []
    if plan.val_data:
        val_all = _scored_by(data.load_rows([os.path.expanduser(p) for p in plan.val_data], plan.env_class), reward)
        for row in val_all:
            rewards.get(row["env_class"])
        val_rows = [r for r in val_all if _prompt_length(tokenizer, r["prompt"]) <= plan.max_prompt_length]
    plan = plan.with_rows(len(kept))
    by_data = plan.epochs * (len(kept) // plan.train_batch_size)
    if plan.max_training_steps is not None and by_data < plan.max_training_steps:
        ctx.log(
            f"trainer.max_training_steps={plan.max_training_steps} but {plan.epochs} epoch(s) of {len(kept)} prompts "
            f"hold only {by_data} training steps of {plan.train_batch_size}: stopping there (raise trainer.epochs)"
        )
    ctx.log(
        f"plan: {plan.max_steps} optimizer steps on {ctx.world_size} process(es); "
        f"{plan.train_batch_size} prompts x {plan.grpo['num_generations']} samples per generation, "
        f"grad_accum={plan.grpo['gradient_accumulation_steps']} steps_per_generation={plan.grpo['steps_per_generation']} "
        f"beta={plan.grpo['beta']} loss_type={plan.grpo['loss_type']}"
    )
    ctx.log(  # what it trains with, stated once (a `--set` override is checked here, not in the per-step rate)
        f"optimizer: learning_rate={plan.grpo['learning_rate']!r} weight_decay={plan.grpo['weight_decay']!r} "
        f"max_grad_norm={plan.grpo['max_grad_norm']!r} warmup_steps={plan.grpo['warmup_steps']} "
        f"lr_scheduler_type={plan.grpo['lr_scheduler_type']}"
    )
    export_root = _location(plan.export_path)
    stage_root = os.path.join(ctx.task_dir, "trl-cpu-stage")
    os.makedirs(stage_root, exist_ok=True)

    local_resume: str | None = None
    if resume_step is not None:
        local_resume = storage.fetch_dir(
            resume_store.step_dir(resume_step), os.path.join(stage_root, f"resume-rank{ctx.rank}")
        )
        ctx.log(f"resuming from {resume_store.step_dir(resume_step)} (step {resume_step})")

    if resume_step is not None and resume_step >= plan.max_steps:
        ctx.log(f"checkpoint step {resume_step} is at or past the final step {plan.max_steps}: nothing to train")
        if ctx.rank == 0 and local_resume is not None:
            model = AutoModelForCausalLM.from_pretrained(local_resume, dtype=torch.float32)
            storage.write_json_atomic(
                storage.join(ctx.attempt_dir, "model_load.json"),
                model_load_record(plan.model_path, local_resume, ctx.identity, model, resumed_from_step=resume_step),
            )
            if plan.export_hf_artifact and not export_exists(export_root, resume_step):
                where = export_policy(model, tokenizer, resume_step, export_root, stage_root)
                ctx.log(f"exported {where}")
        return

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    if ctx.rank == 0:
        extra = {"resumed_from_step": resume_step} if resume_step is not None else {}
        storage.write_json_atomic(
            storage.join(ctx.attempt_dir, "model_load.json"),
            model_load_record(plan.model_path, model_path, ctx.identity, model, **extra),
        )

    trainer = _build_trainer(ctx, plan, store, model, tokenizer, kept, val_rows, resume_step or 0, stage_root)
    trainer.train(resume_from_checkpoint=local_resume)
    final_step = trainer.state.global_step
    if ctx.rank == 0 and plan.export_hf_artifact:
        unwrapped = trainer.accelerator.unwrap_model(trainer.model)
        where = export_policy(unwrapped, tokenizer, final_step, export_root, stage_root)
        ctx.log(f"exported {where}")
    _barrier()
    ctx.log(f"done: step {final_step} in {time.time() - started:.1f}s")
    if ctx.world_size > 1:
        # Freeing a DDP model frees its gloo process group, whose destructor joins a worker thread
        # that may need the GIL the destructor holds: a deadlock (seen with torch 2.13). Keep the
        # trainer alive; `entry` leaves with os._exit once run() returns.
        KEEP_ALIVE.append(trainer)


def _build_trainer(
    ctx: Context,
    plan: recipe.Plan,
    store: CheckpointStore,
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    val_rows: list[dict[str, Any]],
    resume_step: int,
    stage_root: str,
) -> Any:
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    output_dir = os.path.join(stage_root, "trl-output")
    config = GRPOConfig(output_dir=output_dir, **plan.grpo)
    metrics = storage.MetricsWriter(ctx.attempt_dir, resume_step=resume_step) if ctx.rank == 0 else None
    evals = (
        storage.MetricsWriter(ctx.attempt_dir, resume_step=resume_step, name="eval.jsonl")
        if ctx.rank == 0 and val_rows
        else None
    )
    k = plan.optimizer_steps_per_training_step
    max_new_tokens = int(plan.grpo["max_completion_length"])

    def evaluate_now(model: Any, step: int) -> dict[str, Any]:
        from .evaluate import score, summarise

        started = time.time()
        scores, _ = score(model, tokenizer, val_rows, max_new_tokens=max_new_tokens, batch_size=plan.eval_batch_size)
        result = {"step": step, "training_step": math.ceil(step / k), **summarise(scores), "time": time.time()}
        assert evals is not None
        evals.write(result)
        ctx.log(
            f"eval at step {step}: reward={result['reward_mean']:.3f} n={result['n']} ({time.time() - started:.1f}s)"
        )
        return result

    class RlaunchCallback(TrainerCallback):
        """Checkpoint cadence, publication to `ckpt_path`, and one metrics line per optimizer step."""

        def __init__(self) -> None:
            self.last_time = time.time()
            self.pending_eval: dict[str, Any] | None = None

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            # (the Trainer loads a resumed checkpoint's state only after on_train_begin)
            if evals is not None and plan.eval_before_train and resume_step == 0:
                evaluate_now(model, 0)
            return control

        def on_step_end(self, args, state, control, model=None, **kwargs):
            step = state.global_step
            if (plan.ckpt_every and step % plan.ckpt_every == 0) or step >= state.max_steps:
                control.should_save = True
            if evals is not None and plan.eval_interval > 0 and step % k == 0 and (step // k) % plan.eval_interval == 0:
                self.pending_eval = evaluate_now(model, step)
            return control

        def on_log(self, args, state, control, logs=None, **kwargs):
            if metrics is None or not logs or "loss" not in logs:
                return control
            step = state.global_step
            record = {
                "step": step,
                "training_step": math.ceil(step / k),
                "loss": _clean(logs.get("loss")),
                "reward_mean": _clean(logs.get("reward")),
                "reward_std": _clean(logs.get("reward_std")),
                "kl": _clean(logs.get("kl")),
                "learning_rate": _clean(logs.get("learning_rate")),
                "time": time.time(),
            }
            for key, value in logs.items():
                if key not in ("loss", "reward", "reward_std", "kl", "learning_rate") and isinstance(
                    value, (int, float)
                ):
                    record.setdefault(key, _clean(value))
            if self.pending_eval is not None and self.pending_eval["step"] == step:
                for key in ("reward_mean", "reward_std", "accuracy", "n"):
                    record[f"eval_{key}"] = self.pending_eval[key]
                self.pending_eval = None
            if metrics.write(record):
                now = time.time()
                ctx.log(
                    f"step {step}/{state.max_steps} loss={record['loss']:.4g} reward={record['reward_mean']:.3f} "
                    f"kl={record['kl'] if record['kl'] is None else format(record['kl'], '.4g')} "
                    f"lr={record['learning_rate']:.3g} ({now - self.last_time:.1f}s)"
                )
                self.last_time = now
            return control

        def on_save(self, args, state, control, **kwargs):
            step = state.global_step
            _barrier()  # every rank has written its part (rng state) of checkpoint-<step>
            if ctx.rank == 0:
                local = os.path.join(args.output_dir, f"checkpoint-{step}")
                where = store.publish(
                    local,
                    step,
                    {
                        "runtime_digest": ctx.digest,
                        "run_fingerprint": ctx.fingerprint,
                        "training_step": math.ceil(step / k),
                        "optimizer_steps_per_training_step": k,
                        "max_steps": state.max_steps,
                        "world_size": ctx.world_size,
                        "model_identity": ctx.identity,
                    },
                )
                pruned = store.prune(plan.max_ckpts_to_keep)
                shutil.rmtree(local, ignore_errors=True)
                ctx.log(f"checkpoint {where}" + (f" (removed steps {pruned})" if pruned else ""))
            _barrier()
            return control

    dataset = Dataset.from_list(rows)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[env_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[RlaunchCallback()],
    )
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer
