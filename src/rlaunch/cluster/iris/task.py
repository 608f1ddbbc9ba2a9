"""`python -m rlaunch.cluster.iris.task`: what every Iris task of an rlaunch job runs.

The job itself (the submitter's interpreter, argv, environment, working directory) travels as one
JSON variable, `RLAUNCH_IRIS_JOB`: Iris's local process runtime rewrites every argument and
variable that starts with `/tmp/` to the task's private directory, which would move a prefix, a
runtime environment or the interpreter itself away when it lives under /tmp (a HOME or
RLAUNCH_RUNTIME_CACHE there, as on many CI machines). So the Iris entrypoint names no path:
it is Iris's own `python` (the worker's interpreter in local mode, the image's on a real worker)
running `BOOTSTRAP`, standard-library code that replaces itself with the submitter's interpreter
running this module. Iris starts a task with the worker's whole environment; this wrapper replaces the
process with the job's argv under the environment every rlaunch replica gets (see
`cluster.protocol`): the allow-listed base, the job's own variables, Iris's `IRIS_*` plumbing (so
code in the job can submit children and use endpoints), and the RLAUNCH_* job variables.

Rendezvous: every job requests the named ports `rendezvous` and `ray-head`. In a gang of more
than one task, rank 0 registers `<host>:<rendezvous port>` in Iris's endpoint registry under a
name derived from the job id and the others resolve it; every replica gets it as
RLAUNCH_RENDEZVOUS. Every replica also gets its own address (RLAUNCH_NODE_IP) and its `ray-head`
port (RLAUNCH_RAY_PORT): a gang that bootstraps Ray starts its head there and publishes the head
record through the endpoint registry too (`rlaunch.task.iris_rendezvous`). Nothing is left
behind: Iris drops an endpoint when the attempt that registered it ends.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rlaunch.cluster.iris.connect import is_loopback
from rlaunch.cluster.job_environment import replica_base
from rlaunch.cluster.protocol import (
    BACKEND_ENV,
    JOB_ID_ENV,
    NODE_IP_ENV,
    RANK_ENV,
    RAY_PORT_ENV,
    RENDEZVOUS_ENV,
    WORLD_SIZE_ENV,
)
from rlaunch.waiting import WaitTimeout, wait_until

JOB_ENV = "RLAUNCH_IRIS_JOB"
MODULE = "rlaunch.cluster.iris.task"
# Run by Iris's `python -c`: any Python 3, standard library only (rlaunch may not be importable there).
BOOTSTRAP = f"""\
import json, os, sys
python = json.loads(os.environ["{JOB_ENV}"])["python"]
try:
    os.execv(python, [python, "-m", "{MODULE}"])
except OSError as exc:
    sys.exit("[rlaunch.iris] cannot start the submitter's interpreter %r on this worker (%s): it must exist "
             "at the same path on every Iris worker" % (python, exc))
"""
PORT_NAME = "rendezvous"
RAY_PORT_NAME = "ray-head"  # the Ray head's GCS port, when the gang bootstraps Ray (rlaunch.task.ray_cluster)
PORT_NAMES = (PORT_NAME, RAY_PORT_NAME)
TIMEOUT_ENV = "RLAUNCH_IRIS_RENDEZVOUS_TIMEOUT"
DEFAULT_TIMEOUT = 600.0


def endpoint_name(job_id: str) -> str:
    """The registry name of a job's rendezvous (endpoint names are namespaced by the root job)."""
    return "rlaunch-rendezvous" + job_id.replace("/", ".")


def _say(message: str) -> None:
    sys.stderr.write(f"[rlaunch.iris] {message}\n")
    sys.stderr.flush()


def node_ip(info: object, rank: int) -> str:
    """This task's address: Iris's advertised host; on a local cluster (every task on this machine)
    a loopback address per rank, so that each rank has its own identity (as the local backend does)."""
    if is_loopback(info.controller_address or ""):  # type: ignore[attr-defined]
        return f"127.0.0.{rank + 1}" if sys.platform.startswith("linux") else "127.0.0.1"
    return str(info.advertise_host)  # type: ignore[attr-defined]


def rendezvous(info: object, job_id: str, rank: int, world: int) -> str:
    """Rank 0's `host:port`: registered by rank 0, resolved through Iris by the others."""
    from iris.client.client import iris_ctx

    port = info.ports.get(PORT_NAME, 0)  # type: ignore[attr-defined]
    host = node_ip(info, rank)
    if world == 1:
        return f"{host}:{port}"
    ctx = iris_ctx()
    name = endpoint_name(job_id)
    if rank == 0:
        address = f"{host}:{port}"
        ctx.registry.register(name, address)
        _say(f"rank 0 registered rendezvous {address} as endpoint {name}")
        return address
    timeout = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)
    last: list[Exception] = []  # the resolver's latest error while the endpoint is not there

    def resolved() -> str | None:
        last.clear()
        try:
            found = ctx.resolver.resolve(name)
        except Exception as exc:  # noqa: BLE001 - not registered yet reads differently across controllers
            last.append(exc)
            return None
        return None if found.is_empty else found.first().url

    try:
        address = wait_until(resolved, timeout, f"rendezvous endpoint {name}", 0.1, max_interval=2.0)
    except WaitTimeout:
        raise SystemExit(
            f"[rlaunch.iris] rank {rank} found no rendezvous endpoint {name} after {timeout:g}s "
            f"(rank 0 never registered it{f'; last error: {last[0]}' if last else ''}); raise ${TIMEOUT_ENV} "
            "if rank 0 needs longer to start"
        ) from None
    _say(f"rank {rank} resolved rendezvous {address} from endpoint {name}")
    return address


def encode_job(python: str, argv: list[str], env: dict[str, str], cwd: str | None) -> str:
    return json.dumps({"python": python, "argv": argv, "env": env, "cwd": cwd}, sort_keys=True)


def decode_job(raw: str | None) -> dict[str, Any]:
    job: dict[str, Any] = json.loads(raw or "{}")
    if not job.get("argv"):
        raise SystemExit(f"rlaunch.cluster.iris.task needs ${JOB_ENV} (set by the iris backend at submission)")
    return job


def replica_env(job_env: dict[str, str], job_variables: dict[str, str]) -> dict[str, str]:
    plumbing = {k: v for k, v in os.environ.items() if k.startswith("IRIS_")}
    return replica_base({**job_env, **plumbing, **job_variables})


def main() -> None:
    job = decode_job(os.environ.get(JOB_ENV))
    argv, cwd = job["argv"], job.get("cwd")
    from iris.cluster.client.job_info import get_job_info

    info = get_job_info()
    if info is None:
        raise SystemExit("rlaunch.cluster.iris.task runs inside an Iris task (no IRIS_TASK_ID here)")
    job_id = info.task_id.parent.to_wire()
    rank, world = info.task_id.task_index, info.num_tasks
    variables = {
        BACKEND_ENV: "iris",
        JOB_ID_ENV: job_id,
        RANK_ENV: str(rank),
        WORLD_SIZE_ENV: str(world),
        RENDEZVOUS_ENV: rendezvous(info, job_id, rank, world),
        NODE_IP_ENV: node_ip(info, rank),
        RAY_PORT_ENV: str(info.ports.get(RAY_PORT_NAME, 0)),
    }
    if cwd and os.path.isdir(cwd):
        os.chdir(cwd)
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], argv, replica_env(job["env"], variables))
    except OSError as exc:
        raise SystemExit(f"[rlaunch.iris] cannot start {argv[0]!r}: {exc}") from None


if __name__ == "__main__":
    main()
