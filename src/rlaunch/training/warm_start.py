"""The SFT step: a model trained on the prompt/response rows of a data split, loss on the response only.

`sft_step(model, data, name=..., settings=SftSettings(epochs=1, ...), execution=StepExecution(...))`
builds an `SftArtifactStep` (an `ArtifactStep[HfModel]`) that runs as a step job in the execution's
runtime. The step turns each row into a conversation (its `prompt` chat messages, then the
assistant's response, read at the dotted path `response`) and hands them to the runtime's own
SFT: on the GPU runtimes SkyRL 0.4.0's `SFTTrainer` (FSDP over the job's GPUs, `rlaunch_skyrl.sft`,
its configuration rendered here from the settings, `skyrl_sft_overrides`), on trl-cpu its CPU twin
(`rlaunch_trl_cpu.sft`). Both train on the last assistant message only. The step records the
exported Hugging Face model with the sha256 of every file (`HfModel.files`) and declares
`FromBase(model)`: the model it builds keeps its base's architecture, so an RL step after it is
sized in the dry run, and so is the step itself (`sft_memory`: its memory rows as a training
role's, refused when the model states alone exceed its device).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, StepContext, resolve_version
from rlaunch.dotted import get_path
from rlaunch.rules.devices import Device, device, host_slot
from rlaunch.rules.memory import CODES, MemoryTable, gib, sft_table
from rlaunch.rules.model_shape import Architecture, from_hf_config
from rlaunch.runtimes.environment import runtime_tool
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl.plan.stored_facts import model_architecture
from rlaunch.sources.inputs import FromBase, HfModel, PromptData
from rlaunch.step_jobs import StepExecution
from rlaunch.units import parse_size

# The runtime's SFT module, by its profile's adapter directory.
TOOLS = {"trl_cpu": "rlaunch_trl_cpu.sft", "skyrl": "rlaunch_skyrl.sft"}
CONVERSATIONS = "train.jsonl"  # the staged conversations; SkyRL loads the directory's `train` split
# Larger than any step count: SkyRL exports the HF model once, after the last step.
EXPORT_AT_END = 2**31 - 1


@dataclass(frozen=True, kw_only=True)
class SftSettings:
    """How long and how the model trains: `epochs` passes over the rows (or exactly `steps` optimizer
    steps), `batch_size` conversations a step in micro batches of `micro_batch` per device, each cut to
    `max_length` tokens, AdamW at `lr`, seeded."""

    epochs: int | None = None
    steps: int | None = None
    lr: float = 1e-5
    batch_size: int = 16
    micro_batch: int = 1
    max_length: int = 2048
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.epochs is None) == (self.steps is None):
            raise ValueError(
                f"SftSettings: epochs={self.epochs}, steps={self.steps}; give exactly one (SkyRL's SFT derives the "
                "steps from the epochs, or takes the steps)"
            )
        for name in ("epochs", "steps", "batch_size", "micro_batch", "max_length"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"SftSettings.{name}={value!r} must be a positive int")
        if not isinstance(self.lr, (int, float)) or isinstance(self.lr, bool) or not 0 < self.lr < 1:
            raise ValueError(f"SftSettings.lr={self.lr!r} must be a learning rate in (0, 1), e.g. 1e-5")

    def batch_problem(self, devices: int) -> str | None:
        """Why `batch_size` cannot be cut over `devices` data-parallel ranks in micro batches (None: it can)."""
        if self.batch_size % devices or (self.batch_size // devices) % self.micro_batch:
            return (
                f"SftSettings.batch_size={self.batch_size} must be a multiple of micro_batch={self.micro_batch} x "
                f"{devices} device(s) = {self.micro_batch * devices} (each device takes whole micro batches); "
                f"set batch_size={self.micro_batch * devices * max(1, self.batch_size // (self.micro_batch * devices))}"
            )
        return None


@dataclass(frozen=True, eq=False, kw_only=True)
class SftArtifactStep(ArtifactStep[HfModel]):
    """An SFT step: it keeps its settings and its base model, which the dry run sizes it by (`sft_memory`)."""

    settings: SftSettings
    base: ArtifactStep[Any]

    def __repr__(self) -> str:
        return f"SftArtifactStep({self.identity})"


def sft_tool(runtime: str | None) -> str:
    """The runtime's SFT adapter (its key in `TOOLS`); refuses a runtime without one."""
    if runtime is None:
        raise ValueError(
            "sft_step: execution.runtime=None; SFT runs in a runtime's environment (one whose adapter is "
            f"{sorted(TOOLS)}), e.g. StepExecution(runtime='fsdp', accelerators=8, accelerator_type='H100')"
        )
    profile = get_profile(runtime)
    adapter = os.path.basename(profile.adapter_dir)
    if adapter not in TOOLS or (adapter == "skyrl" and profile.strategy != "fsdp"):
        raise ValueError(
            f"sft_step: execution.runtime={runtime!r} (adapter {adapter!r}, strategy {profile.strategy!r}) has no "
            "SFT rlaunch renders; use 'fsdp' (SkyRL's SFTTrainer, FSDP on GPUs) or 'trl-cpu'"
        )
    return adapter


def sft_step(
    model: ArtifactStep[HfModel],
    data: ArtifactStep[PromptData],
    *,
    name: str,
    settings: SftSettings,
    execution: StepExecution,
    split: str = "train.jsonl",
    response: str = "reward_spec.ground_truth",
    version: str | None = None,
) -> SftArtifactStep:
    """Train `model` on the rows of the file `split` of `data` (each row's `prompt`, then the value at
    `response` as the assistant's answer, the only tokens with a loss), as a step job placed by `execution`."""
    tool = sft_tool(execution.runtime)
    if tool == "skyrl" and (execution.accelerators < 1 or execution.nodes != 1):
        raise ValueError(
            f"sft_step {name}: execution.accelerators={execution.accelerators}, nodes={execution.nodes}; SkyRL's SFT "
            "trains over the GPUs of one node here: give it accelerators >= 1 (e.g. 8 x 'H100') and nodes=1"
        )
    problem = settings.batch_problem(max(1, execution.accelerators))
    if problem:
        raise ValueError(f"sft_step {name}: {problem}")

    def build(ctx: StepContext) -> dict[str, Any]:
        config: dict[str, Any] = {
            "output_path": ctx.output_path,
            "model_path": ctx.artifact_path(model),
            "data_uri": storage.join(ctx.artifact_path(data), split),
            "response": response,
            "settings": asdict(settings),
            "runtime": execution.runtime,
            "tool": tool,
            **FromBase(model).declaration(ctx),  # SFT keeps the base's architecture
        }
        if not ctx.is_fingerprint:  # placement: outside the fingerprint
            config["gpus"] = execution.accelerators
        return config

    return SftArtifactStep(
        name=name,
        version=resolve_version(name, version),
        artifact_type=HfModel,
        run=train,
        build_config=build,
        deps=(model, data),
        execution=execution,
        settings=settings,
        base=model,
    )


def conversations(text: str, response: str, where: str) -> list[dict[str, Any]]:
    """Each JSON line of a prompt split as a conversation: the prompt's chat messages (a plain string is
    one user message), then the assistant's response, the value at the dotted path `response`."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        prompt = row.get("prompt")
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        if not isinstance(prompt, list) or not prompt or not all(isinstance(m, dict) for m in prompt):
            raise ValueError(f"{where} line {number}: 'prompt' must be a non-empty list of chat messages or a string")
        answer = get_path(row, response, None)
        if answer is None:
            raise ValueError(
                f"{where} line {number}: no response at {response!r} (the row's fields: {sorted(row)}); "
                "name the field that holds it, sft_step(..., response='<dotted path>')"
            )
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
        content = answer if isinstance(answer, str) else json.dumps(answer)
        out.append({"messages": [*messages, {"role": "assistant", "content": content}]})
    if not out:
        raise ValueError(f"{where}: no rows to train on")
    return out


def staged_conversations(rows: list[dict[str, Any]], data_dir: str) -> str:
    """Write the conversations as the one JSON-lines file of `data_dir` (the directory's `train` split)."""
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, CONVERSATIONS)
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    return path


def skyrl_sft_overrides(
    settings: SftSettings, *, model: str, data_dir: str, export_dir: str, gpus: int
) -> dict[str, Any]:
    """SkyRL 0.4.0's `SFTConfig` for the step, as the dotted overrides `SFTConfig.from_cli_overrides`
    takes: FSDP over `gpus` GPUs of one node, the conversations in `data_dir` (its `train` split), loss on
    the last assistant message, the HF model exported once, after the last step, under `export_dir`."""
    length = {"num_epochs": settings.epochs} if settings.epochs is not None else {"num_steps": settings.steps}
    return {
        "strategy": "fsdp",
        "model.path": model,
        "placement.num_nodes": 1,
        "placement.num_gpus_per_node": gpus,
        "train_datasets": [data_dir],
        "train_dataset_splits": ["train"],
        "messages_key": "messages",
        "train_on_what": "last_assistant_message",
        **length,
        "batch_size": settings.batch_size,
        "micro_train_batch_size_per_gpu": settings.micro_batch,
        "max_length": settings.max_length,
        "optimizer_config.lr": settings.lr,
        "seed": settings.seed,
        "logger": "console",
        "disable_cache": True,  # the conversations are staged afresh for each run
        "hf_save_interval": EXPORT_AT_END,
        "export_path": export_dir,
    }


def trl_cpu_arguments(settings: SftSettings, *, model: str, data: str, out: str, rows: int) -> list[str]:
    """The CPU twin's arguments: the steps SkyRL would take (epochs x ceil(rows / batch_size)), or the steps given."""
    steps = (
        settings.steps if settings.steps is not None else (settings.epochs or 0) * math.ceil(rows / settings.batch_size)
    )
    return [
        "--model", model, "--data", data, "--out", out, "--steps", str(steps), "--seed", str(settings.seed),
        "--batch-size", str(settings.batch_size), "--micro-batch", str(settings.micro_batch),
        "--max-length", str(settings.max_length), "--lr", str(settings.lr),
    ]  # fmt: skip


def train(config: dict[str, Any]) -> HfModel:
    """Stage the base and the conversations, train in the runtime's environment, publish the HF model."""
    settings = SftSettings(**config["settings"])
    with tempfile.TemporaryDirectory() as tmp:
        base, data_dir, out = (os.path.join(tmp, part) for part in ("base", "data", "model"))
        fs, root = storage.filesystem(config["model_path"])
        fs.get(root, base, recursive=True)
        rows = conversations(storage.read_text(config["data_uri"]), config["response"], config["data_uri"])
        data = staged_conversations(rows, data_dir)
        if config["tool"] == "skyrl":
            overrides = skyrl_sft_overrides(
                settings, model=base, data_dir=data_dir, export_dir=os.path.join(tmp, "exports"), gpus=config["gpus"]
            )
            rendered = os.path.join(tmp, "sft.json")
            with open(rendered, "w", encoding="utf-8") as handle:
                json.dump(overrides, handle)
            args = ["--config", rendered, "--out", out]
        else:
            args = trl_cpu_arguments(settings, model=base, data=data, out=out, rows=len(rows))
        info = runtime_tool(config["runtime"], TOOLS[config["tool"]], *args)
        files = published(out, config["output_path"])
        with open(os.path.join(out, "config.json"), encoding="utf-8") as handle:
            hf_config = json.load(handle)
    storage.write_json_atomic(
        storage.join(config["output_path"], "sft.json"),
        {key: info.get(key) for key in ("steps", "losses", "first_loss", "last_loss", "examples", "seconds")},
    )
    return HfModel(
        path=config["output_path"],
        num_attention_heads=hf_config["num_attention_heads"],
        context_length=hf_config["max_position_embeddings"],
        files=files,
        hf_config=hf_config,
    )


def published(local_dir: str, output_path: str) -> dict[str, str]:
    """Copy the exported model to the artifact's path; the sha256 of every file, by relative path."""
    fs, root = storage.filesystem(output_path)
    files = {}
    for folder, _, names in os.walk(local_dir):
        for file in sorted(names):
            local = os.path.join(folder, file)
            relative = os.path.relpath(local, local_dir).replace(os.sep, "/")
            files[relative] = storage.hashed(local)[0]
            fs.makedirs(f"{root}/{os.path.dirname(relative)}".rstrip("/"), exist_ok=True)
            fs.put_file(local, f"{root}/{relative}")
    return dict(sorted(files.items()))


def step_device(execution: StepExecution) -> Device | None:
    """The device one rank of the step trains on: its accelerator, or on the CPU the job's memory."""
    if execution.accelerators:
        return device(execution.accelerator_type or "")
    return host_slot(parse_size(execution.memory, field="StepExecution.memory"), 1)


def sft_memory(step: SftArtifactStep, prefix: str | None) -> MemoryTable:
    """The step's memory rows (a training role's: model states, training step) on its device, from its
    base's recorded (else declared) config.json; unsized, saying why, when either is not known."""
    config = model_architecture(step.base, prefix)
    arch = from_hf_config(config) if config else None
    if not isinstance(arch, Architecture):
        why = getattr(arch, "reason", f"{step.base.identity} records and declares no config.json")
        return MemoryTable(None, unsized=(f"cannot size the model: {why}",))
    execution: StepExecution = step.execution
    dev = step_device(execution)
    if dev is None:
        return MemoryTable(
            None, unsized=(f"cannot size the device: accelerator_type {execution.accelerator_type!r} is not known",)
        )
    s = step.settings
    return sft_table(arch, dev, gpus=execution.accelerators, micro_batch=s.micro_batch, max_length=s.max_length)


def sft_memory_problem(step: SftArtifactStep, table: MemoryTable) -> str | None:
    """The step's certain failure (`memory.model_states`): its model states alone exceed the device."""
    refused = [row for row in table.rows if row.status == "REFUSED"]
    if not refused or table.device is None:
        return None
    row = max(refused, key=lambda r: r.certain)
    execution: StepExecution = step.execution
    return (
        f"{step.identity}: {CODES[0]}: {row.role} {row.phase}: the model states alone need at least "
        f"{gib(row.certain)} GiB per device ({row.detail}) but one {table.device.name} has "
        f"{gib(row.capacity)} GiB; give StepExecution.accelerators={execution.accelerators} more GPUs "
        "(FSDP shards the states over them), or a larger accelerator_type"
    )
