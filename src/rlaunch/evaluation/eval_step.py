"""The evaluation step: score a model on a data split with a named verifiable reward.

`evaluation_step(model, data, split=..., scorer="gsm8k", sampling=Sampling(...), execution=...)`
builds an `ArtifactStep[EvalReport]` that runs as a step job (`StepExecution`) in the execution's
runtime: the runtime's own evaluation tool (`rlaunch_trl_cpu.evaluate` on the CPU, HF generation;
`rlaunch_skyrl.evaluate` on GPUs, vLLM) generates, scores each completion with the scorer (a
reward the runtime registers by name) and reports the accuracy with its 95% interval clustered by
prompt (`rlaunch.intervals`). The step writes `report.json` beside its record: that report, the
sampling settings, and the identities (`name@version:fingerprint`) of the model and data scored,
which `rlaunch status` shows and `rlaunch compare` reads.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, StepContext, records, resolve_version
from rlaunch.runs.layout import EVALUATION_REPORT
from rlaunch.runtimes.environment import runtime_tool
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl.plan.rl_step import SkyRLRun
from rlaunch.sources.inputs import HfModel, PromptData
from rlaunch.step_jobs import StepExecution


@dataclass(frozen=True)
class EvalReport(Artifact):
    """What a researcher reads of an evaluation: the accuracy and its 95% interval clustered by
    prompt over `n` completions (`samples` per prompt, `n_prompts` prompts), the scorer, and exactly
    which model (identity and weights digest) and data (identity) were scored."""

    accuracy: float = 0.0
    accuracy_interval: tuple[float, float] = (0.0, 1.0)
    stderr: float = 0.0
    n: int = 0
    n_prompts: int = 0
    samples: int | None = None
    scorer: str = ""
    model: str = ""
    model_sha256: str = ""
    data: str = ""


@dataclass(frozen=True)
class Sampling:
    """How completions are drawn: greedily (temperature 0, one per prompt) or `samples` per prompt
    at `temperature`, seeded; at most `max_new_tokens` each."""

    max_new_tokens: int
    temperature: float = 0.0
    samples: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"Sampling.max_new_tokens={self.max_new_tokens} must be at least 1")
        if self.samples < 1:
            raise ValueError(f"Sampling.samples={self.samples} must be at least 1 completion per prompt")
        if self.temperature < 0:
            raise ValueError(f"Sampling.temperature={self.temperature} cannot be negative (0: greedy)")
        if self.samples > 1 and self.temperature == 0:
            raise ValueError(
                f"Sampling.samples={self.samples} with temperature=0: greedy decoding gives one completion per "
                "prompt; set temperature > 0 (e.g. 1.0, as the policy samples in training) or samples=1"
            )


@dataclass(frozen=True)
class EvaluationTool:
    """A runtime's evaluation module, the scorers it knows, and whether it spreads over the job's GPUs."""

    module: str
    scorers: tuple[str, ...]
    tensor_parallel: bool = False

    def arguments(self, config: dict[str, Any], model: str, data: str) -> list[str]:
        sampling = config["sampling"]
        args = ["--model", model, "--data", data]
        args += ["--max-new-tokens", str(sampling["max_new_tokens"]), "--seed", str(sampling["seed"])]
        args += ["--temperature", str(sampling["temperature"]), "--samples", str(sampling["samples"])]
        if self.tensor_parallel:
            return args + ["--tensor-parallel-size", str(config["tensor_parallel_size"])]
        return args + ["--env-class", config["scorer"]]


# By the runtime profile's adapter directory: the trl-cpu adapter scores with any reward it registers
# (rlaunch_trl_cpu.rewards), the SkyRL adapter with the GSM8K rule (rlaunch_skyrl.gsm8k).
TOOLS: dict[str, EvaluationTool] = {
    "trl_cpu": EvaluationTool("rlaunch_trl_cpu.evaluate", ("arithmetic", "gsm8k")),
    "skyrl": EvaluationTool("rlaunch_skyrl.evaluate", ("gsm8k",), tensor_parallel=True),
}


def evaluation_tool(runtime: str | None, scorer: str) -> str:
    """The runtime's evaluation tool (its key in `TOOLS`); refuses a runtime without one and a scorer
    it does not know."""
    if runtime is None:
        raise ValueError(
            "evaluation_step: execution.runtime=None; an evaluation runs in a runtime's environment "
            f"(one whose adapter is {sorted(TOOLS)}), e.g. StepExecution(runtime='trl-cpu')"
        )
    adapter = os.path.basename(get_profile(runtime).adapter_dir)
    tool = TOOLS.get(adapter)
    if tool is None:
        raise ValueError(
            f"evaluation_step: execution.runtime={runtime!r} (adapter {adapter!r}) has no evaluation tool; "
            f"use a runtime whose adapter is one of {sorted(TOOLS)}"
        )
    if scorer not in tool.scorers:
        raise ValueError(
            f"evaluation_step: scorer={scorer!r} is not scored by runtime {runtime!r} ({tool.module}); "
            f"its scorers: {list(tool.scorers)}"
        )
    return adapter


def evaluation_step(
    model: ArtifactStep[SkyRLRun] | ArtifactStep[HfModel],
    data: ArtifactStep[PromptData],
    *,
    name: str,
    split: str,
    execution: StepExecution,
    sampling: Sampling,
    scorer: str = "gsm8k",
    version: str | None = None,
) -> ArtifactStep[EvalReport]:
    """Score `model` (an RL run's export, or an HF model as it is) on the file `split` of `data`
    with the reward named `scorer`, sampling as `sampling` says, as a step job placed by `execution`."""
    tool = evaluation_tool(execution.runtime, scorer)
    if TOOLS[tool].tensor_parallel and execution.accelerators < 1:
        raise ValueError(
            f"evaluation_step {name}: execution.accelerators=0, but {TOOLS[tool].module} generates with vLLM over "
            "the job's GPUs; give the StepExecution accelerators (e.g. accelerators=8, accelerator_type='H100')"
        )

    def build(ctx: StepContext) -> dict[str, Any]:
        config: dict[str, Any] = {
            "output_path": ctx.output_path,
            "policy": ctx.artifact_path(model),
            "data_uri": storage.join(ctx.artifact_path(data), split),
            "scorer": scorer,
            "sampling": asdict(sampling),
            "runtime": execution.runtime,
            "tool": tool,
        }
        if not ctx.is_fingerprint:  # placement, and what the report names: outside the fingerprint
            config["tensor_parallel_size"] = execution.accelerators
            config.update(scored_identities(ctx, config.pop("policy"), model, data))
        return config

    return ArtifactStep(
        name=name,
        version=resolve_version(name, version),
        artifact_type=EvalReport,
        run=evaluate,
        build_config=build,
        deps=(model, data),
        execution=execution,
    )


def evaluate(config: dict[str, Any]) -> EvalReport:
    """Generate and score in the runtime's environment, then write `report.json`."""
    tool = TOOLS[config["tool"]]
    with tempfile.TemporaryDirectory() as tmp:
        model, data = scored_inputs(config, tmp)
        info = runtime_tool(config["runtime"], tool.module, *tool.arguments(config, model, data))
    weights = info.get("weights_sha256")
    report = {
        **info,
        "model": config["model"],  # the tool names its local copies; the report names identities
        "data": config["data"],
        "model_sha256": weights if isinstance(weights, str) else json.dumps(weights, sort_keys=True),
    }
    storage.write_json_atomic(storage.join(config["output_path"], EVALUATION_REPORT), report)
    return EvalReport(
        path=config["output_path"],
        accuracy=report["accuracy"],
        accuracy_interval=(report["accuracy_interval"][0], report["accuracy_interval"][1]),
        stderr=report["stderr"],
        n=report["n"],
        n_prompts=report["n_prompts"],
        samples=report["samples"],
        scorer=report["scorer"],
        model=report["model"],
        model_sha256=report["model_sha256"],
        data=report["data"],
    )


def scored_inputs(config: dict[str, Any], tmp: str) -> tuple[str, str]:
    """Local copies, under `tmp`, of the model (`model_uri`) and the data file (`data_uri`, its name kept:
    the tools read a split by its suffix)."""
    model, data = os.path.join(tmp, "model"), os.path.join(tmp, os.path.basename(config["data_uri"]))
    fs, root = storage.filesystem(config["model_uri"])
    fs.get(root, model, recursive=True)
    data_fs, data_path = storage.filesystem(config["data_uri"])
    data_fs.get_file(data_path, data)
    return model, data


def scored_identities(
    ctx: StepContext, policy: str, model: ArtifactStep[SkyRLRun] | ArtifactStep[HfModel], data: ArtifactStep[PromptData]
) -> dict[str, str]:
    """What an evaluation loads and names, known once its inputs are built: the model's URI (an RL
    run's export, or an HF model's path) and the recorded identities of the model (at `policy`, its
    artifact path, which the run's config drops: a step job would stage all of it) and the data."""
    resolved = ctx.resolved(model)
    uri = resolved.hf_model_uri if isinstance(resolved, SkyRLRun) else resolved.path
    if uri is None:
        raise ValueError(
            f"evaluation of {model.identity}: the RL run exported no HF model (hf_model_uri=None); "
            "build it with skyrl_step(..., export_hf=True)"
        )
    return {
        "model_uri": uri,
        "model": recorded_identity(policy),
        "data": recorded_identity(ctx.artifact_path(data)),
    }


def recorded_identity(path: str) -> str:
    """`name@version:fingerprint` as the artifact's record at `path` states it."""
    record = records.read_record(path) or {}
    return f"{record.get('name')}@{record.get('version')}:{record.get('fingerprint')}"
