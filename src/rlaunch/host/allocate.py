"""The child job a resolved document asks for: one replica per node, the allocation's resources,
the task bootstrap as entrypoint, and the document passed as a URL (never as per-field flags).

One exception: a runtime whose trainer is a Ray driver, on the Ray backend. The gang's nodes are
already one Ray cluster there, and the trainer places its own workers in it (placement groups
over the GPUs): the child job is the driver alone (`driver_job_spec`), holding no GPU and no
gang placement group, while the capacity check still asks whether the whole gang would fit.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from rlaunch.cluster.job_environment import job_environment
from rlaunch.cluster.protocol import JobSpec, Resources
from rlaunch.launch_config.schema import Allocation, SkyRLLaunchConfig
from rlaunch.runtimes.registry import RAY_DRIVER, get_profile
from rlaunch.units import parse_size

TASK_MODULE = "rlaunch.task"
DRIVER_CPU = 1.0


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
        env=job_environment(doc.run.credentials) | dict(cluster.task_env),
        working_dir=working_dir,
        resources=child_resources(cluster.allocation),
        replicas=cluster.allocation.num_nodes,
        timeout_seconds=float(cluster.timeout_seconds) if cluster.timeout_seconds else None,
        max_retries=cluster.max_retries,
        labels={"rlaunch.kind": "child", "rlaunch.run": doc.run.id, "rlaunch.attempt": doc.run.attempt_id},
    )


def drives_existing_cluster(doc: SkyRLLaunchConfig) -> bool:
    """A Ray-driver runtime on the Ray backend: its child job is a driver inside the cluster."""
    return doc.cluster.backend == "ray" and get_profile(doc.runtime.profile).launcher == RAY_DRIVER


def driver_job_spec(gang: JobSpec) -> JobSpec:
    """The gang's job reduced to its driver: one replica, one CPU, no accelerator."""
    return replace(
        gang,
        replicas=1,
        resources=Resources(cpu=DRIVER_CPU),
        labels={**gang.labels, "rlaunch.gang": "ray-driver-in-cluster"},
    )
