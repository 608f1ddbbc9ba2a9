"""What fits: a plan's memory table on one device (the training roles' rows and the rollout
engine's, colocated or apart), and the certain failures the rules refuse."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rlaunch.dotted import set_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe_keys import TRAINER
from rlaunch.rules.devices import Device, device, host_slot
from rlaunch.rules.memory.rollout import KvCapacity, engine_kv, kv_tokens, rollout_rows
from rlaunch.rules.memory.rows import Keys, Row, gib, max_model_len
from rlaunch.rules.memory.training import reference_row, training_rows
from rlaunch.rules.model_shape import Architecture, Unsized
from rlaunch.rules.subject import Subject, Violation, violation
from rlaunch.rules.topology import wider_engines

CODES = ("memory.model_states", "memory.engine_weights", "memory.kv_one_sequence")  # = rules.MEMORY_CODES


@dataclass(frozen=True)
class MemoryTable:
    """Every row, the device it was sized against, the engine's KV capacity, and what was not sized."""

    device: Device | None
    rows: tuple[Row, ...] = ()
    kv: KvCapacity | None = None
    unsized: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        kv = None
        if self.kv is not None:
            kv = {
                "budget_gib": gib(self.kv.budget),
                "available_gib": gib(self.kv.available),
                "tokens": self.kv.tokens,
                "max_model_len": self.kv.max_model_len,
                "sequences": round(self.kv.sequences, 2),
            }
        return {
            "device": None
            if self.device is None
            else {"name": self.device.name, "capacity_gib": gib(self.device.bytes)},
            "rows": [r.as_dict() for r in self.rows],
            "kv_cache": kv,
            "unsized": list(self.unsized),
        }

    def warnings(self) -> list[str]:
        """What the plan and readiness show without refusing: rows that are tight, what was not sized."""
        out = [f"memory: {reason}" for reason in self.unsized]
        for r in self.rows:
            if r.status in ("tight", "over (estimate)"):
                out.append(
                    f"memory {r.status}: {r.role} {r.phase} needs ~{gib(r.estimate)} of {gib(r.capacity)} GiB "
                    f"per device ({r.detail}); an estimate, not refused: watch for OOM"
                )
        return out


def estimate(
    arch: Architecture, geo: Geometry, composed: Mapping[str, Any], dev: Device, *, cpu: bool = False
) -> MemoryTable:
    """The memory table of one plan on `dev` (see the module docstring)."""
    k = Keys(composed)
    seq = max_model_len(composed)
    rows: list[Row] = []
    train = training_rows(arch, geo, k, seq, dev, "policy", cpu=cpu)
    ref = reference_row(arch, geo, k, seq, dev) if geo.use_reference else None
    if cpu:
        rows += [train.states, train.step]
        return MemoryTable(dev, tuple(rows))
    critic = training_rows(arch, geo, k, seq, dev, "critic", cpu=False) if geo.use_critic else None
    kv = engine_kv(arch, geo, composed, dev)
    engine_rows = rollout_rows(kv, geo)
    rows += [train.states]
    if geo.colocate_all:
        rows.append(
            Row(
                "colocated",
                "training bar",
                train.step.estimate,
                dev.bytes,
                train.step.certain,
                train.step.detail + "; engine asleep",
                parts=train.step.parts,
            )
        )
        if ref is not None:
            rows.append(ref)
        rows += engine_rows
        gathered = 2 * max(arch.vocab * arch.hidden, arch.layer_params())
        rows.append(
            Row(
                "colocated",
                "weight sync",
                kv.weights + train.resident + gathered,
                dev.bytes,
                0,
                f"engine weights {gib(kv.weights)} woken beside the policy's resident weights {gib(train.resident)} "
                f"(optimizer offloaded) and one gathered bf16 tensor {gib(gathered)} GiB being broadcast; "
                "the KV pool wakes after the policy is offloaded",
            )
        )
        rows.append(
            Row(
                "colocated",
                "generation bar",
                kv.budget,
                dev.bytes,
                0,
                "engine awake; policy and reference offloaded to CPU",
                0.0,
            )
        )
    else:
        resident = ref.certain if ref is not None else 0
        detail = train.step.detail + (f"; + reference weights {gib(resident)} GiB resident" if resident else "")
        rows.append(
            Row(
                "policy",
                "training step",
                train.step.estimate + resident,
                dev.bytes,
                train.step.certain + resident,
                detail,
            )
        )
        if ref is not None:
            rows.append(
                Row(
                    ref.role,
                    ref.phase,
                    ref.estimate + train.states.estimate,
                    dev.bytes,
                    ref.certain + train.states.certain,
                    ref.detail + f"; + policy states {gib(train.states.estimate)} GiB resident",
                )
            )
        rows += engine_rows
    if critic is not None:  # its own step: colocated, SkyRL offloads the policy while the critic trains
        rows += [critic.states, critic.step]
    return MemoryTable(dev, tuple(rows), kv, unsized=(kv.unsized,) if kv.unsized else ())


def sft_table(arch: Architecture, dev: Device, *, gpus: int, micro_batch: int, max_length: int) -> MemoryTable:
    """An SFT step's rows on `dev`, sized as the policy's training role: FSDP over its `gpus`, one micro
    batch of `micro_batch x max_length` tokens, SkyRL's SFT defaults (gradient checkpointing, packed micro
    batches); on the CPU (`gpus=0`) the CPU twin's full fp32 replica, padded, without checkpointing. No
    engine, no reference: SFT trains the policy alone."""
    cpu = gpus == 0
    geo = Geometry(
        strategy="fsdp", colocate_all=False, policy_nodes=1, policy_gpus_per_node=max(1, gpus), ref_nodes=0,
        ref_gpus_per_node=0, engines=0, tp=1, pp=1, dp=1, ep=1, train_batch=micro_batch, mini_batch=micro_batch,
        micro_batch=micro_batch, n_samples=1, use_reference=False, policy_sp=1, ref_sp=1,
        megatron_policy=(1, 1, 1), megatron_ref=(1, 1, 1),
    )  # fmt: skip
    recipe: dict[str, Any] = {}
    set_path(recipe, TRAINER.MICRO_TRAIN_BATCH_SIZE_PER_GPU, micro_batch)
    if cpu:  # the CPU twin pads its micro batches and keeps every layer's activations
        set_path(recipe, TRAINER.REMOVE_MICROBATCH_PADDING, False)
        set_path(recipe, TRAINER.GRADIENT_CHECKPOINTING, False)
    train = training_rows(arch, geo, Keys(recipe), max_length, dev, "policy", cpu=cpu)
    return MemoryTable(dev, tuple(replace(row, role="sft") for row in (train.states, train.step)))


def table_for(s: Subject, geo: Geometry, composed: Mapping[str, Any]) -> MemoryTable:
    """The memory table of the plan `s` describes (its `architecture` and its device), or why not."""
    arch = s.architecture
    if not isinstance(arch, Architecture):
        reason = (
            arch.reason
            if isinstance(arch, Unsized)
            else "the model's architecture is not known (no config.json facts recorded)"
        )
        return MemoryTable(None, unsized=(f"cannot size the model: {reason}",))
    cpu = s.profile.capabilities.accelerator == "cpu"
    dev = host_slot(s.host_memory_bytes, s.gpus_per_node) if cpu else device(s.gpu_variant)
    if dev is None:
        what = (
            "host memory per CPU slot is not known (no allocation)"
            if cpu
            else f"gpu_variant {s.gpu_variant!r} is not in the device table"
        )
        return MemoryTable(None, unsized=(f"cannot size the device: {what}",))
    return estimate(arch, geo, composed, dev, cpu=cpu)


def memory_rules(s: Subject, geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    """The certain failures of `table_for(s, ...)`: each a lower bound beyond the device."""
    return violations(table_for(s, geo, composed), s, geo)


def violations(table: MemoryTable, s: Subject, geo: Geometry) -> list[Violation]:
    """One violation per certain failure; a refused engine's weights hide its KV row (same cause)."""
    refused = [r for r in table.rows if r.status == "REFUSED"]
    where = table.device.name if table.device is not None else s.gpu_variant
    out = []
    states = [r for r in refused if r.role != "rollout"]
    if states:
        r = max(states, key=lambda row: row.certain)
        role = {"reference": "ref", "critic": "critic"}.get(r.role, "policy")
        out.append(
            violation(
                "memory.model_states",
                [
                    "role_plan.critic.num_nodes" if role == "critic" else "role_plan.policy_num_nodes",
                    "topology.gpu_variant",
                    f"config_yaml.trainer.{role}.fsdp_config.cpu_offload",
                ],
                f"{r.role} {r.phase}: the model states alone need at least {gib(r.certain)} GiB per device "
                f"({r.detail}) but one {where} has {gib(r.capacity)} GiB",
                f"shard over more GPUs (more {'critic' if role == 'critic' else 'policy'} nodes), "
                f"set trainer.{role}.fsdp_config.cpu_offload=true, train LoRA adapters, or use a larger GPU",
                need_gib=gib(r.certain),
                capacity_gib=gib(r.capacity),
            )
        )
    weights = [r for r in refused if r.phase == "engine weights"]
    for r in weights:
        need_tp = math.ceil(r.certain * geo.tp / max(1, r.capacity))
        wider = wider_engines(s, geo, need_tp)
        tp_fix = (
            f"set inference_engine_tensor_parallel_size={wider[0]} and num_inference_engines={wider[1]} (the "
            f"smallest TP of at least {need_tp} that divides the model's heads and fills a node)"
            if wider
            else f"no engine TP of at least {need_tp} divides the model's heads and fills a node: use a larger GPU"
        )
        out.append(
            violation(
                "memory.engine_weights",
                [
                    "role_plan.inference_engine_tensor_parallel_size",
                    "config_yaml.generator.inference_engine.gpu_memory_utilization",
                ],
                f"a rollout engine's weights need {gib(r.certain)} GiB per device ({r.detail}) but its "
                f"gpu_memory_utilization budget on one {where} is {gib(r.capacity)} GiB",
                f"{tp_fix}, or raise generator.inference_engine.gpu_memory_utilization",
                need_gib=gib(r.certain),
                budget_gib=gib(r.capacity),
            )
        )
    kv = table.kv
    if kv is not None and not weights and any(r.phase == "KV of one sequence" for r in refused):
        one = kv.one_sequence
        fits = kv_tokens(kv.upper, kv.bytes_per_token, kv.block)
        out.append(
            violation(
                "memory.kv_one_sequence",
                [
                    "config_yaml.trainer.max_prompt_length",
                    "config_yaml.generator.sampling_params.max_generate_length",
                    "config_yaml.generator.inference_engine.gpu_memory_utilization",
                ],
                f"one {kv.max_model_len}-token sequence needs {gib(one)} GiB of KV cache per device "
                f"({kv.bytes_per_token} B/token) but the engine's budget of {gib(kv.budget)} GiB leaves at most "
                f"{gib(kv.upper)} GiB after {gib(kv.weights)} GiB of weights: vLLM refuses to start",
                f"shorten max_prompt_length + max_generate_length to at most {fits} tokens, raise "
                "gpu_memory_utilization, or raise the engine's tensor parallel size",
                need_gib=gib(one),
                available_gib=gib(kv.upper),
            )
        )
    return out
