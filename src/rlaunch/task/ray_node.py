"""One Ray node of a gang, and the trainer driver, each run as a process group rlaunch can stop.

`RayNode` runs `ray start --block` (head or worker) with the runtime's own interpreter, so the
cluster and the driver share one Ray version. Both it and the driver run under a keeper
(`rlaunch.cluster.ray.keeper`): the leader of its own process group, which stops the whole group
(SIGTERM, SIGKILL after the grace) when asked, and also when this bootstrap dies however it died
(its lifeline pipe breaks). Ray's processes (GCS, raylet, agents, workers) stay in that group; as
a last sweep, anything whose command line mentions the node's private temp dir is killed too, so
no Ray process of the gang outlives its rank.

No global `ray stop`: several nodes (of this gang, of other gangs, other users' clusters) may
share a machine, and `ray stop` would kill them all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from rlaunch import storage
from rlaunch.cluster.job_environment import free_port
from rlaunch.cluster.ray.replica import Event, run_attempt
from rlaunch.processes import PROC_ROOT, stat_fields

PROBE = str(Path(__file__).with_name("ray_probe.py"))
RANK_LABEL = "rlaunch-rank"
STARTED_LINE = "Ray runtime started"
# Ray waits a fixed 30 s for a new node's raylet to register with the GCS, then gives up with this
# line; on a busy GCS or machine that is transient, so such a start is tried once more.
REGISTRATION_TIMED_OUT = "The current node timed out during startup"
START_TRIES = 2
START_TIMEOUT = 300.0
STOP_GRACE = 5.0
MIN_OBJECT_STORE = 80 * 1024**2  # Ray refuses less than 75 MiB
MAX_OBJECT_STORE = 96 * 1024**3
RAY_WORKER_PORTS = (10002, 19999)  # Ray's default --min-worker-port / --max-worker-port


@dataclass(frozen=True)
class NodeSpec:
    """What `ray start` is told about this node."""

    rank: int
    node_ip: str
    cpus: int
    gpus: int  # logical GPUs (`--num-gpus`): what the allocation gives this node
    memory_bytes: int
    port: int  # the head's GCS port
    head_address: str | None = None  # a worker's head (`ip:port`); None: this node is the head
    spill_dir: str | None = None

    @property
    def is_head(self) -> bool:
        return self.head_address is None

    def object_store_bytes(self) -> int:
        return max(MIN_OBJECT_STORE, min(MAX_OBJECT_STORE, self.memory_bytes // 4))

    def _worker_ports(self) -> list[str]:
        """Ray's worker ports avoid the head's port when a backend reserved one inside Ray's default
        worker range (Iris hands out ports from 12000 up)."""
        low, high = RAY_WORKER_PORTS
        if low <= self.port <= high:
            return [f"--min-worker-port={high + 1}", f"--max-worker-port={high + 1 + (high - low)}"]
        return []

    def argv(self, python: str, temp_dir: str) -> list[str]:
        """`ray start --block`: every port this node opens is a free one, except the head's GCS port."""
        argv = [python, "-m", "ray.scripts.scripts", "start", "--block"]
        if self.is_head:
            argv += [
                "--head",
                f"--port={self.port}",
                *self._worker_ports(),
                "--include-dashboard=false",
                f"--dashboard-port={free_port()}",
                f"--ray-client-server-port={free_port()}",
            ]
        else:
            argv.append(f"--address={self.head_address}")
        argv += [
            f"--node-ip-address={self.node_ip}",
            f"--num-cpus={self.cpus}",
            f"--num-gpus={self.gpus}",
            f"--memory={self.memory_bytes}",
            f"--object-store-memory={self.object_store_bytes()}",
            f"--labels={RANK_LABEL}={self.rank}",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
            "--log-style=record",
            "--log-color=false",
            *(
                f"--{name}={free_port()}"
                for name in (
                    "node-manager-port",
                    "object-manager-port",
                    "dashboard-agent-listen-port",
                    "dashboard-agent-grpc-port",
                    "runtime-env-agent-port",
                    "metrics-export-port",
                )
            ),
        ]
        if self.spill_dir:
            argv.append(f"--object-spilling-directory={self.spill_dir}")
        return argv


class RayNodeError(RuntimeError):
    """`ray start` failed or the node died."""


def processes_mentioning(text: str) -> list[int]:
    """Live processes (not this one) whose command line contains `text`."""
    found = []
    needle = text.encode()
    for entry in os.listdir(PROC_ROOT):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"{PROC_ROOT}/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        fields = stat_fields(int(entry))
        if needle in cmdline and fields and fields[0] not in ("Z", "X"):
            found.append(int(entry))
    return found


def describe(pid: int) -> str:
    """`pid command line` (shortened), for messages about processes that had to be killed."""
    try:
        with open(f"{PROC_ROOT}/{pid}/cmdline", "rb") as handle:
            command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        return f"{pid} {command[:160]}"
    except OSError:
        return str(pid)


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir(PROC_ROOT):
        if entry.isdigit():
            fields = stat_fields(int(entry))
            if fields and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                members.append(int(entry))
    return members


class Supervised:
    """A command run under a keeper in a background thread; its output lines go to `on_line`."""

    def __init__(self, argv: list[str], env: Mapping[str, str], cwd: str | None, on_line: Callable[[str], None]):
        self.argv, self.env, self.cwd, self.on_line = argv, dict(env), cwd, on_line
        self.pid: int | None = None  # the keeper: its group holds everything the command started
        self.exit_code: int | None = None
        self.error: str | None = None
        self.last_output = time.monotonic()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Supervised:
        self._thread.start()
        return self

    def _events(self) -> Iterator[Event]:
        return run_attempt(self.argv, self.env, self.cwd, STOP_GRACE, should_stop=self._stop.is_set)

    def _run(self) -> None:
        try:
            for kind, value in self._events():
                if kind == "started":
                    self.pid = int(value["pid"])
                elif kind == "out":
                    self.last_output = time.monotonic()
                    for line in value:
                        self.on_line(line)
                elif kind == "exit":
                    self.exit_code = int(value)
                else:
                    self.error = str(value)
        except Exception as exc:  # noqa: BLE001 - reported as this command's error
            self.error = repr(exc)
        finally:
            if self.exit_code is None and self.error is None:
                self.error = "ended without an exit code"
            self._done.set()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def request_stop(self) -> None:
        """Ask the keeper to stop the group (SIGTERM, SIGKILL after the grace); returns at once."""
        self._stop.set()

    def stop(self, timeout: float = STOP_GRACE + 15.0) -> None:
        """Stop the group and wait for the keeper to report."""
        self._stop.set()
        self._done.wait(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


class RayNode:
    """`ray start --block` for one rank, in its own short temp dir (Ray's socket paths must stay
    under 107 characters), with its output kept in `log_path`."""

    def __init__(self, spec: NodeSpec, python: str, env: Mapping[str, str], log: Callable[[str], None]):
        self.spec = spec
        self.temp_dir = tempfile.mkdtemp(prefix=f"rlray{spec.rank}-", dir="/tmp")
        self.log_path = os.path.join(self.temp_dir, "ray-start.log")
        self.log = log
        self._started = threading.Event()
        self._lines: list[str] = []
        self._command = (python, dict(env))
        self.process = self._supervised()

    def _supervised(self) -> Supervised:
        python, env = self._command
        return Supervised(self.spec.argv(python, self.temp_dir), env, self.temp_dir, self._on_line)

    def _on_line(self, line: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        self._lines = (self._lines + [line])[-40:]
        if STARTED_LINE in line:
            self._started.set()

    def start(self, timeout: float = START_TIMEOUT, should_stop: Callable[[], bool] = lambda: False) -> RayNode:
        """Start the node and return once Ray says it runs; RayNodeError with its output otherwise.
        A start that Ray gave up on while its raylet registered (`REGISTRATION_TIMED_OUT`) is
        stopped, swept and tried again, at most `START_TRIES` times in all."""
        tried = 1
        while True:
            try:
                return self._start_once(timeout, should_stop)
            except RayNodeError:
                if tried == START_TRIES or not any(REGISTRATION_TIMED_OUT in line for line in self._lines):
                    raise
            tried += 1
            self.log(
                f"Ray gave up on rank {self.spec.rank}'s raylet registering with the GCS within Ray's own 30 s "
                f"(a busy GCS or machine); starting the node again (try {tried} of {START_TRIES})"
            )
            self.stop()
            self._lines = []
            self.process = self._supervised()

    def _start_once(self, timeout: float, should_stop: Callable[[], bool]) -> RayNode:
        role = "head" if self.spec.is_head else f"worker (joining {self.spec.head_address})"
        self.log(f"starting Ray {role} on {self.spec.node_ip}: {self.spec.cpus} CPU, {self.spec.gpus} GPU")
        self.process.start()
        deadline = time.monotonic() + timeout
        while not self._started.wait(0.2):
            if not self.process.running:
                raise RayNodeError(
                    f"`ray start` on rank {self.spec.rank} exited {self.process.exit_code} before Ray was up; "
                    f"its last lines:\n  " + "\n  ".join(self._lines[-15:])
                )
            if should_stop():
                raise RayNodeError(f"rank {self.spec.rank} was stopped while Ray was starting")
            if time.monotonic() >= deadline:
                raise RayNodeError(
                    f"Ray did not start on rank {self.spec.rank} within {timeout:g}s; see {self.log_path}"
                )
        return self

    @property
    def alive(self) -> bool:
        return self.process.running

    def pids(self) -> list[int]:
        """Every live process of this node: the keeper's group, and anything naming its temp dir."""
        group = group_members(self.process.pid) if self.process.pid else []
        return sorted(set(group) | set(processes_mentioning(self.temp_dir)))

    def logs_dir(self) -> str:
        return os.path.join(self.temp_dir, "session_latest", "logs")

    def copy_logs(self, destination: str) -> None:
        """Copy Ray's session logs (and `ray start`'s output) to `destination` (any fsspec URL)."""
        with contextlib.suppress(OSError):
            if os.path.exists(self.log_path):
                storage.write_bytes_atomic(storage.join(destination, "ray-start.log"), Path(self.log_path).read_bytes())
        source = self.logs_dir()
        if not os.path.isdir(source):
            return
        fs, root = storage.filesystem(storage.join(destination, "session"))
        for directory, _, files in os.walk(source):
            for name in files:
                local = os.path.join(directory, name)
                if os.path.islink(local):
                    continue
                target = f"{root}/{os.path.relpath(local, source)}"
                with contextlib.suppress(OSError):
                    fs.makedirs(os.path.dirname(target), exist_ok=True)
                    fs.put_file(local, target)

    def stop(self) -> list[str]:
        """Stop every process of the node; returns those the final sweep had to kill (pid, command)."""
        self.process.stop()
        left = [describe(pid) for pid in self.pids()]
        for line in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        return left

    def remove_temp_dir(self) -> None:
        shutil.rmtree(self.temp_dir, ignore_errors=True)
