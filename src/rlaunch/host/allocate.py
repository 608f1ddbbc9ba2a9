"""The child job a resolved document asks for: one replica per node, the allocation's resources,
the task bootstrap as entrypoint, and the document passed as a URL (never as per-field flags)."""

from __future__ import annotations

import sys

from rlaunch.cluster.environment import job_environment
from rlaunch.cluster.protocol import JobSpec, Resources
from rlaunch.launch_config.schema import Allocation, SkyRLLaunchConfig
from rlaunch.units import parse_size

TASK_MODULE = "rlaunch.task"


def child_resources(alloc: Allocation) -> Resources:
    """Per-replica resources of the gang an allocation describes."""
    if alloc.gpu_variant.lower() == "cpu":
        # CPU device slots are training processes: each needs a core, and no accelerator.
        return Resources(
            cpu=max(alloc.cpu, float(alloc.gpus_per_node)),
            memory_bytes=parse_size(alloc.memory),
            disk_bytes=parse_size(alloc.disk),
        )
    return Resources(
        cpu=alloc.cpu,
        memory_bytes=parse_size(alloc.memory),
        disk_bytes=parse_size(alloc.disk),
        accelerators=alloc.gpus_per_node,
        accelerator_type=alloc.gpu_variant,
    )


def child_job_spec(doc: SkyRLLaunchConfig, resolved_url: str, working_dir: str | None) -> JobSpec:
    cluster = doc.cluster
    return JobSpec(
        name=cluster.job_name,
        argv=(sys.executable, "-m", TASK_MODULE, "--config", resolved_url),
        env=job_environment(),
        working_dir=working_dir,
        resources=child_resources(cluster.allocation),
        replicas=cluster.allocation.num_nodes,
        timeout_seconds=float(cluster.timeout_seconds) if cluster.timeout_seconds else None,
        max_retries=cluster.max_retries,
        labels={"rlaunch.kind": "child", "rlaunch.run": doc.run.id, "rlaunch.attempt": doc.run.attempt_id},
    )
