"""Where a cluster backend puts jobs, as plain values validated once (no dependency: ground floor).

An execution (`RaySkyRLExecution`) builds a `RayPlacement` from its fields and writes
`options()` into the launch document's `cluster.placement`; the Ray backend builds the same type
from its constructor arguments. So a plan and the backend refuse the same mistakes, in the same
words, and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RAY_STRATEGIES = ("auto", "PACK", "SPREAD", "STRICT_SPREAD", "STRICT_PACK")


def _strings(owner: str, name: str, value: Any) -> tuple[str, ...]:
    if (
        isinstance(value, str)
        or not isinstance(value, (tuple, list))
        or not all(isinstance(v, str) and v for v in value)
    ):
        raise TypeError(f"{owner}.{name} must be a tuple of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class RayPlacement:
    """A Ray cluster and how rlaunch's jobs use it (see `RaySkyRLExecution` for each field).

    address        dashboard URL (http://<head>:8265) or GCS address (<head>:6379); None: from the environment
    working_dir    uploaded once as the jobs' working directory (None: the cluster has the code)
    excludes       gitignore-style patterns left out of the upload
    py_executable  the interpreter on the cluster; pip: packages Ray installs per job
    strategy       placement of a multi-replica gang (auto: STRICT_SPREAD when there is a node per replica)
    check_capacity refuse a job the cluster could never fit; priority: recorded on the jobs
    """

    address: str | None = None
    working_dir: str | None = None
    excludes: tuple[str, ...] = ()
    py_executable: str | None = None
    pip: tuple[str, ...] = ()
    strategy: str = "auto"
    check_capacity: bool = True
    priority: str | None = None
    owner: str = field(default="RayPlacement", compare=False, repr=False)  # who errors name

    def __post_init__(self) -> None:
        owner = self.owner
        for name in ("address", "working_dir", "py_executable", "priority"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise TypeError(f"{owner}.{name} must be a non-empty string or None, got {value!r}")
        object.__setattr__(self, "excludes", _strings(owner, "excludes", self.excludes))
        object.__setattr__(self, "pip", _strings(owner, "pip", self.pip))
        if self.address is not None and self.address.startswith("ray://"):
            raise ValueError(
                f"{owner}.address={self.address!r} is a Ray Client address; rlaunch uses the Jobs API: give the "
                "dashboard URL (http://<head>:8265) or the GCS address (<head>:6379)"
            )
        if self.strategy not in RAY_STRATEGIES:
            raise ValueError(f"{owner}.strategy={self.strategy!r}: choose one of {list(RAY_STRATEGIES)}")
        if not isinstance(self.check_capacity, bool):
            raise TypeError(f"{owner}.check_capacity must be true or false, got {self.check_capacity!r}")

    def options(self) -> dict[str, Any]:
        """The Ray backend's constructor arguments (the launch document's `cluster.placement`)."""
        return {
            "address": self.address,
            "working_dir": self.working_dir,
            "excludes": list(self.excludes),
            "py_executable": self.py_executable,
            "pip": list(self.pip),
            "strategy": self.strategy,
            "check_capacity": self.check_capacity,
            "priority": self.priority,
        }
