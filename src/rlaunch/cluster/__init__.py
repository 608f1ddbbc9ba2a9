"""Cluster backends behind one protocol: `local` (embedded default), `ray`, `iris`, `slurm`.

Each backend is imported only when chosen, so its optional dependency is never loaded by
`import rlaunch` or a dry run. What every backend shares lives here once: the gang lifecycle
(`lifecycle`: retries, deadline, parent watch, finish), the protocol's shared half (`base`:
cancel cascade, wait, submit_child, list order, log queries) and the combined log's format
(`logs`); a backend writes only its transport.
"""

from rlaunch.cluster.protocol import (
    Backend,
    JobSpec,
    JobState,
    JobStatus,
    ReplicaStatus,
    Resources,
    backend_from_env,
    get_backend,
)
from rlaunch.names import sanitize_job_name

__all__ = [
    "Backend",
    "JobSpec",
    "JobState",
    "JobStatus",
    "ReplicaStatus",
    "Resources",
    "backend_from_env",
    "get_backend",
    "sanitize_job_name",
]
