"""Usable memory per accelerator, as the driver reports it to a process, not the marketing number.

The figure is what `torch.cuda.mem_get_info()` calls total (what vLLM multiplies by
`gpu_memory_utilization`) where a public start-up log states it, otherwise the driver's
`nvidia-smi` total (a little more, so a rule built on it errs toward letting a plan run). A GPU
name not listed here is not sized: the memory rules say so and refuse nothing. `cpu` slots (the
trl-cpu runtime) have no fixed size: their capacity is the node's host memory divided by its
slots, from the allocation.

AMD Instinct GPUs (MI300X, MI325X) are left out on purpose: SkyRL 0.4.0's stack (its CUDA builds of
torch, vLLM and flash-attn) does not run on ROCm as shipped, so a plan naming one is not sized and
says so rather than being judged against a GPU its runtime cannot use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class Device:
    name: str
    bytes: int
    source: str  # where the number comes from
    sm: int = 0  # CUDA compute capability x 10 (90: Hopper): vLLM picks its attention backend, so the KV block, by it


# Keys are upper-case names as a topology writes them (`gpu_variant`), spaces and dashes removed.
DEVICES: dict[str, Device] = {
    d.name.upper().replace("-", "").replace(" ", ""): d
    for d in (
        # vLLM #12126: "total_gpu_memory (79.22GiB)" on an H100-80G; nvidia-smi shows 81559MiB (vLLM #55169).
        Device("H100", int(79.22 * GIB), "vLLM start-up log, H100 80GB HBM3 (vllm-project/vllm#12126)", sm=90),
        Device("H100-80GB", int(79.22 * GIB), "as H100", sm=90),
        Device("H100-NVL", 95830 * MIB, "nvidia-smi total, H100 NVL 94GB", sm=90),
        Device("H800", int(79.22 * GIB), "as H100 (H800 80GB: the H100 die and memory, export NVLink)", sm=90),
        Device("H200", 143771 * MIB, "nvidia-smi total, H200 141GB", sm=90),
        Device("H20-96GB", 97871 * MIB, "nvidia-smi total, H20 96GB", sm=90),
        Device("H20-141GB", 143771 * MIB, "nvidia-smi total, H20 141GB HBM3e (as H200)", sm=90),
        # llm-foundry #183: "79.21 GiB total capacity" in a CUDA OOM message on an A100-80GB.
        Device("A100-80GB", int(79.21 * GIB), "CUDA total capacity, A100 80GB (mosaicml/llm-foundry#183)", sm=80),
        Device("A100-40GB", 40960 * MIB, "nvidia-smi total, A100 40GB", sm=80),
        Device("L4", 23034 * MIB, "nvidia-smi total, L4 24GB", sm=89),
        Device("L40S", 46068 * MIB, "nvidia-smi total, L40S 48GB", sm=89),
        Device("L40", 46068 * MIB, "nvidia-smi total, L40 48GB", sm=89),
        Device("A10G", 23028 * MIB, "nvidia-smi total, A10G 24GB", sm=86),
        Device("A10", 23028 * MIB, "nvidia-smi total, A10 24GB", sm=86),
        # vLLM #10517: "total_gpu_memory=23.58GiB" on an RTX 3090.
        Device("RTX3090", int(23.58 * GIB), "vLLM start-up log, RTX 3090 (vllm-project/vllm#10517)", sm=86),
        Device(
            "RTX4090",
            int(23.55 * GIB),
            "vLLM start-up log, RTX 4090: 0.98 x 23.55 GiB = 23.08 GiB (vllm-project/vllm#13061)",
            sm=89,
        ),
        # Ada consumer cards: nvidia-smi totals are the memory less 0.5 MiB a GiB (as the RTX 4090's 24564MiB).
        Device("RTX4080", 16376 * MIB, "nvidia-smi total, RTX 4080 16GB", sm=89),
        Device("RTX4080Super", 16376 * MIB, "nvidia-smi total, RTX 4080 Super 16GB", sm=89),
        Device("RTX4070TiSuper", 16376 * MIB, "nvidia-smi total, RTX 4070 Ti Super 16GB", sm=89),
        Device("RTX4070Ti", 12282 * MIB, "nvidia-smi total, RTX 4070 Ti 12GB", sm=89),
        Device("RTX4070Super", 12282 * MIB, "nvidia-smi total, RTX 4070 Super 12GB", sm=89),
        Device("RTX4070", 12282 * MIB, "nvidia-smi total, RTX 4070 12GB", sm=89),
        Device(
            "RTX4060Ti", 8188 * MIB, "nvidia-smi total, RTX 4060 Ti 8GB (say RTX4060Ti-16GB for the larger one)", sm=89
        ),
        Device("RTX4060Ti-8GB", 8188 * MIB, "nvidia-smi total, RTX 4060 Ti 8GB", sm=89),
        Device("RTX4060Ti-16GB", 16376 * MIB, "nvidia-smi total, RTX 4060 Ti 16GB", sm=89),
        Device("RTX4060", 8188 * MIB, "nvidia-smi total, RTX 4060 8GB", sm=89),
        # vLLM #34076: nvidia-smi "RTX 5090 D 32607MiB", "RTX 5070 Ti 16303MiB".
        Device("RTX5090", 32607 * MIB, "nvidia-smi total, RTX 5090 32GB (vllm-project/vllm#34076)", sm=120),
        Device("RTX5080", 16303 * MIB, "nvidia-smi total, RTX 5080 16GB (as RTX 5070 Ti, vllm#34076)", sm=120),
        Device("RTX5070Ti", 16303 * MIB, "nvidia-smi total, RTX 5070 Ti 16GB (vllm-project/vllm#34076)", sm=120),
        Device("RTX-PRO-6000", 97887 * MIB, "nvidia-smi total, RTX PRO 6000 Blackwell 96GB", sm=120),
        Device("B200", 183359 * MIB, "nvidia-smi total, B200 180GB", sm=100),
        Device("GB200", 189471 * MIB, "nvidia-smi total, GB200 (one Blackwell GPU)", sm=100),
        # DGX Spark: 128 GB of LPDDR5x shared by CPU and GPU; an upper bound (the OS and host use part of it).
        Device("GB10", 128 * 10**9, "unified memory, GB10 (DGX Spark) 128GB shared with the CPU", sm=121),
        Device("V100", 32768 * MIB, "nvidia-smi total, V100 32GB", sm=70),
        Device("T4", 15360 * MIB, "nvidia-smi total, T4 16GB", sm=75),
    )
}


def device(gpu_variant: str) -> Device | None:
    """The memory of one `gpu_variant` GPU; None for a name this table does not know (or `cpu`)."""
    return DEVICES.get(_key(gpu_variant))


def variants(gpu_variant: str) -> tuple[str, ...]:
    """The devices a name could mean when it names none exactly but a family sold with several memory
    sizes (`A100`: A100-40GB, A100-80GB), sorted; () for a name that is exact, unknown or of one size.
    Such a name is refused rather than sized as one of them: a plan sized for the wrong card is wrong."""
    key = _key(gpu_variant)
    if not key or key in DEVICES:
        return ()
    family = {d.name: d.bytes for d in DEVICES.values() if _key(re.sub(r"-\d+GB$", "", d.name)) == key}
    return tuple(sorted(family)) if len(set(family.values())) > 1 else ()


def _key(gpu_variant: str) -> str:
    return gpu_variant.upper().replace("-", "").replace(" ", "").replace("_", "")


def host_slot(node_memory_bytes: int | None, slots: int) -> Device | None:
    """One CPU device slot's share of a node's host memory (the trl-cpu runtime); None if unknown."""
    if not node_memory_bytes or slots <= 0:
        return None
    return Device("cpu slot", node_memory_bytes // slots, f"host memory per node / {slots} slots")
