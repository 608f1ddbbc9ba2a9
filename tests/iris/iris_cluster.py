"""A real local Iris cluster for the tests: `iris --config <yaml> cluster start --local` as one process.

The config has a CPU scale group, a CPU group of two-VM slices, a fake `H100x8` group whose
slices are two VMs (a coscheduled 2-node gang is one slice), and a fake `V100x4` group of two-VM
slices that only the controller-URL capacity test uses (so it has no live slice until that test
starts one, whatever ran before). `start` waits for the controller line, `stop` terminates that PID and
returns what is left of it (processes carrying its controller address in their environment);
the caller asserts that is empty. The cluster's environment carries a canary variable that
replicas must never see (they start from an allow-list).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

CANARY = "RLAUNCH_TEST_IRIS_CANARY_TOKEN"
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0


def _scale_group(num_vms: int, max_slices: int, **resources: object) -> dict[str, object]:
    """Slices of `num_vms` local VMs with these resources each, none kept warm."""
    return {
        "num_vms": num_vms,
        "resources": {**resources, "capacity_type": "on-demand"},
        "buffer_slices": 0,
        "max_slices": max_slices,
        "slice_template": {"num_vms": num_vms, "local": {}},
    }


def _config(name: str) -> str:
    """The cluster's config: a local controller on a free port and the scale groups the module docstring lists."""
    gpu, cpu = {"device_type": "gpu"}, {"device_type": "cpu", "device_variant": "cpu"}
    groups = {
        "cpu": _scale_group(1, 4, cpu=16, ram="32GB", disk="100GB", **cpu),
        "cpu-pair": _scale_group(2, 1, cpu=8, ram="16GB", disk="50GB", **cpu),
        "h100x8": _scale_group(2, 1, cpu=32, ram="256GB", disk="500GB", **gpu, device_variant="H100", device_count=8),
        "v100x4": _scale_group(2, 1, cpu=8, ram="32GB", disk="50GB", **gpu, device_variant="V100", device_count=4),
    }
    config = {
        "name": name,
        "platform": {"local": None},
        "controller": {"local": {"port": 0}},
        "worker_provider": {},
        "scale_groups": groups,
    }
    return yaml.safe_dump(config, sort_keys=False)


@dataclass
class IrisCluster:
    process: subprocess.Popen[bytes]
    url: str
    name: str
    config: Path
    workdir: Path
    log: Path

    @property
    def iris(self) -> str:
        """The `iris` CLI of this interpreter."""
        return str(Path(sys.executable).with_name("iris"))

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`iris --controller-url <this cluster> <args>`, its output captured."""
        argv = [self.iris, "--controller-url", self.url, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def iris_importable() -> bool:
    import importlib.util

    return sys.version_info >= (3, 12) and importlib.util.find_spec("iris") is not None


def start() -> IrisCluster:
    name = f"rlaunch-test-{uuid.uuid4().hex[:8]}"
    workdir = Path(tempfile.mkdtemp(prefix="rlaunch-iris-"))
    config = workdir / "cluster.yaml"
    config.write_text(_config(name))
    log = workdir / "cluster.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_", "IRIS_"))}
    env.update({CANARY: "must-not-reach-replicas", "TMPDIR": str(workdir)})
    argv = [str(Path(sys.executable).with_name("iris")), "--config", str(config), "cluster", "start", "--local"]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir, start_new_session=True
        )
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        found = re.search(r"Controller started at (http://\S+)", log.read_text(errors="replace"))
        if found:
            return IrisCluster(process, found.group(1), name, config, workdir, log)
        if process.poll() is not None or time.monotonic() > deadline:
            text = log.read_text(errors="replace")[-4000:]
            stop(IrisCluster(process, "", name, config, workdir, log))
            raise RuntimeError(f"the test Iris cluster did not come up (exit {process.poll()}):\n{text}")
        time.sleep(0.2)


def _leftovers(cluster: IrisCluster) -> list[str]:
    """`pid cmdline` of live processes that carry the cluster's controller address (its tasks)."""
    if not cluster.url:
        return []
    needle = f"IRIS_CONTROLLER_ADDRESS={cluster.url}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
            found.append(f"{entry} {cmdline}")
        except OSError:
            continue
    return found


def stop(cluster: IrisCluster) -> list[str]:
    """Stop the cluster by its PID; returns (and kills) what outlived it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(cluster.process.pid, signal.SIGTERM)
    try:
        cluster.process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cluster.process.pid, signal.SIGKILL)
        cluster.process.wait()
    left = _leftovers(cluster)
    for line in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)
    credentials = Path.home() / ".config" / "marin" / "credentials" / f"{cluster.name}.json"
    credentials.unlink(missing_ok=True)
    import shutil

    shutil.rmtree(cluster.workdir, ignore_errors=True)
    return left
