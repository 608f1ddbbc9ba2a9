"""Reaching an Iris controller: the requirement check, the controller URL, and the cluster's facts.

An Iris cluster is named by its controller URL, or by its cluster config (the YAML `iris --config`
takes). For a local config (`iris --config X cluster start --local`) the URL is the one the
running cluster recorded in Iris's credential store (`~/.config/marin/credentials/<name>.json`);
for a remote config it is resolved the way the `iris` CLI resolves it (configured address or
discovery, then a tunnel held as long as the backend lives). Inside an Iris task the controller is
the one that runs the task (`IRIS_CONTROLLER_ADDRESS`).

The config also gives the facts a capacity check needs that the controller does not publish: each
scale group's VMs per slice (a coscheduled gang of N tasks needs a group whose slices have N VMs)
and per-VM capacity. The controller reports each group's device, and the VMs of each live slice.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any

from rlaunch.errors import UserError

REQUIREMENTS = ("marin-iris[controller]==0.2.227.dev40316220070", "marin-finelog==0.2.71.dev40003900277")
INSTALL_HINT = "pip install 'rlaunch[iris]'"
CONTROLLER_ENV = "IRIS_CONTROLLER_ADDRESS"  # set by Iris inside every task


class IrisUnavailableError(UserError, ImportError):
    """Iris was chosen where it cannot run (Python < 3.12, or the extra is not installed)."""


class IrisConnectionError(UserError, ConnectionError):
    """No Iris controller answers where the execution points."""


def installed(module: str) -> bool:
    """Whether `module` can be found, without importing it (one blocked in sys.modules cannot)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def iris_problem() -> str | None:
    """Why this interpreter cannot use Iris, found without importing it (None: it may)."""
    needs = f"{INSTALL_HINT} on Python >= 3.12 (it pins {' and '.join(REQUIREMENTS)})"
    if sys.version_info < (3, 12):
        return (
            f"the iris backend needs Python >= 3.12, but this is Python {sys.version.split()[0]} "
            f"({sys.executable}); install it with: {needs}"
        )
    if not installed("iris"):
        return f"the iris backend needs Iris, which is not installed here: {needs}"
    return None


def require_iris() -> None:
    """Refuse, naming the requirement, when this interpreter cannot use Iris."""
    needs = f"{INSTALL_HINT} on Python >= 3.12 (it pins {' and '.join(REQUIREMENTS)})"
    problem = iris_problem()
    if problem:
        raise IrisUnavailableError(problem)
    try:
        import iris.client  # noqa: F401
    except ImportError as exc:
        raise IrisUnavailableError(
            f"the iris backend needs Iris, which is not importable here ({exc}): {needs}"
        ) from None


@dataclass(frozen=True)
class ScaleGroup:
    """One scale group as the cluster config declares it, or as the controller reports it (without
    per-VM capacity, and with num_vms 0 until the group has a live slice)."""

    name: str
    device_type: str  # "cpu" | "gpu" | "tpu"
    device_variant: str  # lowercase, "" when unset
    device_count: int
    num_vms: int
    max_slices: int


def load_cluster_config(path: str) -> Any:
    """The cluster config (Iris's own loader and validation), or an error naming the file."""
    if not os.path.isfile(path):
        raise IrisConnectionError(
            f"Iris cluster config {path!r} does not exist (IrisSkyRLExecution(cluster_config=...))"
        )
    from iris.cluster.config import load_config

    try:
        return load_config(path)
    except Exception as exc:  # noqa: BLE001 - Iris raises several kinds for a bad config
        raise IrisConnectionError(f"Iris cannot load cluster config {path!r}: {exc}") from None


def scale_groups(config: Any) -> tuple[ScaleGroup, ...]:
    from iris.cluster.constraints import accelerator_type_to_string

    groups = []
    for name, group in config.scale_groups.items():
        resources = group.resources
        groups.append(
            ScaleGroup(
                name=name,
                device_type=accelerator_type_to_string(resources.device_type) if resources else "cpu",
                device_variant=(resources.device_variant or "").lower() if resources else "",
                device_count=int(resources.device_count or 0) if resources else 0,
                num_vms=int(group.num_vms or 1),
                max_slices=int(group.max_slices or 0),
            )
        )
    return tuple(groups)


def cluster_name(config: Any) -> str:
    return config.name or "local"


def is_local(config: Any) -> bool:
    kind: str = config.controller.controller_kind()
    return kind == "local"


def resolve_controller_url(config: Any, path: str, resources: contextlib.ExitStack) -> str:
    """Where the controller of `config` answers (a tunnel, when one is needed, lives in `resources`)."""
    if is_local(config):
        from rigging.credential_store import load_credentials

        record = load_credentials(cluster_name(config))
        if record is None or not record.endpoint:
            raise IrisConnectionError(
                f"no running local Iris cluster {cluster_name(config)!r} is recorded; start it with "
                f"`iris --config {path} cluster start --local` (or pass controller_url=...)"
            )
        return str(record.endpoint)
    import click
    from iris.cli.connect import _resolve_controller_url

    url: str
    try:
        url, _ = _resolve_controller_url(config, None, path, resources)
    except click.ClickException as exc:
        raise IrisConnectionError(f"cannot reach the Iris controller of {path!r}: {exc.message}") from None
    return url


def in_task_controller() -> str | None:
    return os.environ.get(CONTROLLER_ENV) or None


def is_loopback(url: str) -> bool:
    from urllib.parse import urlparse

    return (urlparse(url).hostname or "") in ("127.0.0.1", "localhost", "::1")
