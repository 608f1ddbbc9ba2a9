"""Ray inside the allocation, for runtimes whose trainer is a Ray driver (`launcher: ray-driver`).

Rank 0 (the head):
  1. clears the rendezvous of earlier gangs, starts `ray start --head` with the node's CPUs, its
     logical GPUs (the allocation's `gpus_per_node`) and memory;
  2. publishes the head record (gang epoch, address and port, node count, Python and Ray versions)
     and keeps re-publishing it as a heartbeat;
  3. waits up to `ray.cluster_join_timeout_seconds` until every rank's node is alive in Ray (each
     node carries its rank as the `rlaunch-rank` label, so a missing one is named);
  4. runs the trainer driver with RAY_ADDRESS, streaming its output, under the liveness watchdog
     (`ray.driver_liveness_timeout_seconds` of silence kills its process group: exit 124);
  5. writes the outcome for its epoch, copies Ray's logs to the attempt's `ray-logs/rank-0`, and
     stops its node.
Ranks above 0 (workers): wait up to `ray.rendezvous_timeout_seconds` for a *current* head record
(see `rendezvous.current_head`), refuse a Python or Ray version skew, `ray start --address`,
publish a node record, park until the outcome of that epoch, stop their node and exit with the
head's exit code.

SIGTERM, SIGINT or SIGHUP on any rank stops its driver and its Ray node, copies the logs and
records what happened (the head: the outcome, state `terminated`; a worker: its node record);
the exit code is then 128 + the signal. On the Ray backend, the gang *is* the existing cluster:
the single replica only runs the driver attached to it (`run_attached`).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType

from rlaunch import storage
from rlaunch.cluster.protocol import BACKEND_ENV, JOB_ID_ENV, NODE_IP_ENV, RAY_PORT_ENV
from rlaunch.launch_config import schema
from rlaunch.runs.layout import attempt_dir
from rlaunch.runs.rehearsal_report import REHEARSED, PlacedGroup, render, report_url
from rlaunch.runtimes.registry import get_profile
from rlaunch.storage import utc_now
from rlaunch.task import rehearsal
from rlaunch.task.ray_node import PROBE, NodeSpec, RayNode, RayNodeError, Supervised
from rlaunch.task.rendezvous import GangOutcome, GangStopped, HeadRecord, Rendezvous, RendezvousTimeout
from rlaunch.units import parse_size
from rlaunch.waiting import wait_until

RAY_LOGS = "ray-logs"
HEARTBEAT_SECONDS = 5.0
EXIT_LIVENESS = 124
EXIT_FAILED = 1

Log = Callable[[str], None]


class VersionSkewError(RuntimeError):
    """A worker's runtime has another Python or Ray than the head's."""


@dataclass(frozen=True)
class Versions:
    python: str
    ray: str


class Stop:
    """Signals received by this rank (SIGTERM, SIGINT, SIGHUP): the first one is the reason."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.signum = 0

    def install(self) -> Stop:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is None:
            self.signal, self.signum = signal.Signals(signum).name, signum

    def __bool__(self) -> bool:
        return self.signal is not None

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def runtime_versions(python: str, env: Mapping[str, str]) -> Versions:
    """Python and Ray of the runtime's interpreter (the ones the cluster and driver will use)."""
    done = subprocess.run([python, PROBE, "versions"], env=dict(env), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RayNodeError(f"cannot ask {python} for its Python and Ray versions: {done.stderr.strip()[-500:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    if not data.get("ray"):
        raise RayNodeError(
            f"the runtime's interpreter {python} has no `ray`: a ray-driver runtime needs ray in its lock"
        )
    return Versions(python=data["python"], ray=data["ray"])


def check_versions(mine: Versions, head: HeadRecord, *, rank: int, host: str) -> None:
    """Same Python major.minor and the same Ray version as the head, or a refusal naming both."""
    same_python = mine.python.split(".")[:2] == head.python_version.split(".")[:2]
    if same_python and mine.ray == head.ray_version:
        return
    raise VersionSkewError(
        f"version skew: rank {rank} ({host}) has Python {mine.python} and Ray {mine.ray}, but the head, rank 0 "
        f"({head.head_host}), has Python {head.python_version} and Ray {head.ray_version}; every node of a Ray "
        "gang must run the same runtime environment (same lock, same base image)"
    )


def node_ip(rank: int) -> str:
    """This node's address: what the backend says ($RLAUNCH_NODE_IP), else a loopback address per
    rank for the local backend (every rank is on this machine: 127.0.0.<rank+1> gives each its own
    identity), else the address of the interface that routes off this machine (a UDP socket's
    local end; nothing is sent), else the address the hostname resolves to."""
    if os.environ.get(NODE_IP_ENV):
        return os.environ[NODE_IP_ENV]
    if os.environ.get(BACKEND_ENV) == "local":
        return f"127.0.0.{rank + 1}" if sys.platform.startswith("linux") else "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            address: str = probe.getsockname()[0]
        if not address.startswith("127."):
            return address
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def ray_port(doc: schema.SkyRLLaunchConfig) -> int:
    """The head's GCS port: the one the backend reserved for this replica (Iris: a named port), else `ray.port`."""
    return int(os.environ.get(RAY_PORT_ENV) or doc.ray.port)


def node_spec(doc: schema.SkyRLLaunchConfig, rank: int, head_address: str | None = None) -> NodeSpec:
    alloc = doc.cluster.allocation
    return NodeSpec(
        rank=rank,
        node_ip=node_ip(rank),
        cpus=max(1, int(alloc.cpu)),
        gpus=alloc.gpus_per_node,
        memory_bytes=parse_size(alloc.memory),
        port=ray_port(doc),
        head_address=head_address,
        spill_dir=doc.ray.spill_dir,
    )


def ray_logs_url(doc: schema.SkyRLLaunchConfig, rank: int) -> str:
    """The attempt's durable Ray log directory for one rank."""
    name = f"rank-{rank}-{socket.gethostname()}"
    return storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), RAY_LOGS, name)


def ray_process_env(base: Mapping[str, str]) -> dict[str, str]:
    """Ray's own processes start from the runtime's environment, never pointed at another cluster."""
    return {k: v for k, v in base.items() if k != "RAY_ADDRESS"}


class Periodic:
    """Runs `action` every `interval` seconds in a daemon thread until stopped (errors are logged)."""

    def __init__(self, interval: float, action: Callable[[], None], log: Log, first_after: float | None = None):
        self.interval, self.action, self.log = interval, action, log
        self.first_after = interval if first_after is None else first_after
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        wait = self.first_after
        while not self._stop.wait(wait):
            try:
                self.action()
            except Exception as exc:  # noqa: BLE001 - a missed heartbeat or log copy is not fatal
                self.log(f"periodic {getattr(self.action, '__name__', 'task')} failed: {exc!r}")
            wait = self.interval

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@dataclass
class DriverResult:
    exit_code: int
    state: str  # succeeded | failed | timed_out | terminated | rehearsed (a rehearsal's expected end, exit 0)
    reason: str | None


def run_driver(
    argv: list[str],
    env: Mapping[str, str],
    cwd: str,
    *,
    liveness: float,
    stop: Stop,
    log: Log,
    on_stop: Callable[[DriverResult], None] = lambda result: None,
    on_line: Callable[[str], None] | None = None,
) -> DriverResult:
    """Run the trainer driver (its own process group), streaming its output, under the watchdog.

    When it must be stopped (a signal, the watchdog), its group is asked to stop and `on_stop`
    runs with the result while it does (the head records the outcome and stops Ray then: the time
    left before a SIGKILL may be short), then the driver is waited for. `on_line` sees every line."""

    def echo(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if on_line is not None:
            on_line(line)

    driver = Supervised(argv, env, cwd, echo).start()
    stopped: DriverResult | None = None
    while driver.running and stopped is None:
        silent_for = time.monotonic() - driver.last_output
        if stop:
            log(f"received {stop.signal}: stopping the trainer driver")
            stopped = DriverResult(stop.exit_code, "terminated", f"rank 0 received {stop.signal}; stopped the driver")
        elif liveness > 0 and silent_for > liveness:
            reason = (
                f"the trainer driver printed nothing for {silent_for:.0f}s (ray.driver_liveness_timeout_seconds="
                f"{liveness:g}); killed its process group"
            )
            log(reason)
            stopped = DriverResult(EXIT_LIVENESS, "timed_out", reason)
        else:
            driver.wait(0.2)
    if stopped is not None:
        driver.request_stop()
        on_stop(stopped)
        driver.stop()
        return stopped
    if driver.exit_code is None:
        return DriverResult(EXIT_FAILED, "failed", f"the trainer driver's keeper failed: {driver.error}")
    code = driver.exit_code
    if code == 0:
        return DriverResult(0, "succeeded", None)
    return DriverResult(code, "failed", f"the trainer driver exited {code}")


def wait_for_nodes(
    python: str, env: Mapping[str, str], gcs: str, world: int, timeout: float, stop: Stop, log: Log
) -> None:
    """Until every rank's node is alive in Ray; RendezvousTimeout naming the missing ranks."""
    proc = subprocess.Popen(
        [python, PROBE, "wait-nodes", gcs, str(world), str(timeout)],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    alive: list[int] = []
    reader = threading.Thread(target=lambda: _read_ranks(proc, alive, log), daemon=True)
    reader.start()

    def probe_ended() -> bool:
        if stop:
            proc.kill()
            proc.wait()
            raise GangStopped(f"rank 0 received {stop.signal} while waiting for the nodes to join")
        return proc.poll() is not None

    wait_until(probe_ended, None, f"{world} Ray node(s) to join", 0.2)  # the probe's own TIMEOUT bounds it
    reader.join(timeout=5)
    if proc.returncode == 0:
        log(f"all {world} node(s) are alive in Ray")
        return
    missing = [r for r in range(world) if r not in alive]
    raise RendezvousTimeout(
        f"rank 0 waited {timeout:g}s (ray.cluster_join_timeout_seconds) for {world} Ray nodes; "
        f"rank(s) {', '.join(map(str, missing))} never joined (alive: ranks {alive or 'none'}). "
        "See the missing rank's log; raise ray.cluster_join_timeout_seconds if it is only slow to stage"
    )


def _read_ranks(proc: subprocess.Popen[str], alive: list[int], log: Log) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if "alive_ranks" in data:
            alive[:] = [r for r in data["alive_ranks"] if r >= 0]
            log(f"Ray nodes alive: ranks {alive}")


def node_record(node: RayNode, **fields: object) -> dict[str, object]:
    """What a rank publishes about its Ray node: where it runs and which processes are Ray's."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "address": node.spec.node_ip,
        "ray_temp_dir": node.temp_dir,
        "ray_pids": node.pids(),
        "written_at": utc_now(),
        **fields,
    }


def _finish_node(node: RayNode | None, doc: schema.SkyRLLaunchConfig, rank: int, log: Log) -> None:
    """Copy the node's logs to durable storage, stop every process of it, remove its temp dir."""
    if node is None:
        return
    try:
        node.copy_logs(ray_logs_url(doc, rank))
    except Exception as exc:  # noqa: BLE001 - lost logs must not keep Ray running
        log(f"could not copy Ray's logs: {exc!r}")
    swept = node.stop()
    if swept:
        log(f"killed {len(swept)} Ray process(es) left after stopping the node: {swept}")
    log("Ray stopped on this node")
    node.remove_temp_dir()


def run_head(
    doc: schema.SkyRLLaunchConfig,
    rendezvous: Rendezvous,
    *,
    world: int,
    python: str,
    env: Mapping[str, str],
    driver_argv: list[str],
    cwd: str,
    log: Log,
    stop: Stop,
    phases: dict[str, str],
) -> int:
    epoch = uuid.uuid4().hex
    node: RayNode | None = None
    beats: list[Periodic] = []
    outcome: DriverResult | None = None
    published: list[DriverResult] = []
    tail: rehearsal.OutputTail | None = None
    began = 0.0

    def publish(result: DriverResult) -> None:
        """The outcome of this epoch, once: the workers leave with its exit code."""
        if published:
            return
        published.append(result)
        for beat in beats:
            beat.stop()
        rendezvous.publish_outcome(
            GangOutcome(
                gang_epoch=epoch,
                exit_code=result.exit_code,
                state=result.state,
                reason=result.reason,
                written_at=utc_now(),
            )
        )

    try:
        rendezvous.clear()
        versions = runtime_versions(python, env)
        node = RayNode(node_spec(doc, 0), python, ray_process_env(env), log).start(should_stop=lambda: bool(stop))
        gcs = f"{node.spec.node_ip}:{node.spec.port}"
        rendezvous.publish_node(0, node_record(node, state="head", gang_epoch=epoch))

        def heartbeat() -> None:
            rendezvous.publish_head(
                HeadRecord(
                    gang_epoch=epoch,
                    attempt_id=doc.run.attempt_id,
                    job_id=os.environ.get(JOB_ID_ENV),
                    head_host=socket.gethostname(),
                    address=node.spec.node_ip,
                    port=node.spec.port,
                    num_nodes=world,
                    python_version=versions.python,
                    ray_version=versions.ray,
                    written_at=utc_now(),
                )
            )

        heartbeat()
        log(f"published the Ray head record (epoch {epoch[:8]}, {gcs}, {world} node(s))")
        beats.append(Periodic(HEARTBEAT_SECONDS, heartbeat, log))
        beats.append(
            Periodic(
                doc.ray.log_sync_interval_seconds,
                lambda: node.copy_logs(ray_logs_url(doc, 0)),
                log,
                first_after=min(60.0, doc.ray.log_sync_interval_seconds),
            )
        )
        wait_for_nodes(python, env, gcs, world, doc.ray.cluster_join_timeout_seconds, stop, log)
        driver_env = {**env, "RAY_ADDRESS": gcs, "PYTHONUNBUFFERED": "1"}
        phases["trainer_started_at"] = utc_now()
        if get_profile(doc.runtime.profile).rehearsal:
            tail, began = rehearsal.OutputTail(), time.monotonic()

        def stopping(result: DriverResult) -> None:
            node.process.request_stop()
            publish(result)

        outcome = run_driver(
            driver_argv,
            driver_env,
            cwd,
            liveness=doc.ray.driver_liveness_timeout_seconds,
            stop=stop,
            log=log,
            on_stop=stopping,
            on_line=tail,
        )
        if tail is not None:  # while Ray still runs: its table holds every group the driver placed
            seconds = time.monotonic() - began
            groups = functools.partial(rehearsal.placed_groups, python, env, gcs)
            outcome = _rehearsal_end(doc, outcome, tail, groups, world, seconds, log)
    except (RendezvousTimeout, RayNodeError) as exc:
        log(str(exc))
        outcome = DriverResult(EXIT_FAILED, "failed", str(exc))
    except GangStopped as exc:
        outcome = DriverResult(stop.exit_code, "terminated", str(exc))
    finally:
        if outcome is None:  # an unexpected error: the workers must not wait forever
            outcome = DriverResult(EXIT_FAILED, "failed", "rank 0's bootstrap failed (see its log)")
        publish(outcome)
        _finish_node(node, doc, 0, log)
    log(f"gang {outcome.state}" + (f": {outcome.reason}" if outcome.reason else ""))
    return outcome.exit_code


def _rehearsal_end(
    doc: schema.SkyRLLaunchConfig,
    result: DriverResult,
    tail: rehearsal.OutputTail,
    placed_groups: Callable[[], list[PlacedGroup]],
    world: int,
    seconds: float,
    log: Log,
) -> DriverResult:
    """A rehearsal's driver failure: its expected end (report written, state `rehearsed`, exit 0), or a failure."""
    if result.state != "failed":
        return result
    try:
        group = rehearsal.widest(placed_groups())
    except RuntimeError as exc:
        return DriverResult(result.exit_code, "failed", f"{result.reason}; not a rehearsal's end: {exc}")
    gpus = doc.cluster.allocation.gpus_per_node
    report = rehearsal.conclude(
        doc.runtime.profile, list(tail.lines), group, world=world, gpus_per_node=gpus, seconds=seconds
    )
    if report is None:
        why = rehearsal.why_not_rehearsed(list(tail.lines), group, world=world, gpus_per_node=gpus)
        return DriverResult(result.exit_code, "failed", f"{result.reason}; not a rehearsal's end: {why}")
    storage.write_json_atomic(report_url(doc.artifacts.attempts_root, doc.run.attempt_id), report.to_json())
    log(render(report))
    return DriverResult(0, REHEARSED, f"rehearsal ended at the GPU-only module {report.missing_module!r}")


def run_worker(
    doc: schema.SkyRLLaunchConfig,
    rendezvous: Rendezvous,
    *,
    rank: int,
    python: str,
    env: Mapping[str, str],
    started_at: float,
    log: Log,
    stop: Stop,
) -> int:
    host = socket.gethostname()
    node: RayNode | None = None
    record: dict[str, object] = {"host": host, "pid": os.getpid(), "state": "waiting"}

    def note(**changes: object) -> None:
        record.update(changes, written_at=utc_now())
        rendezvous.publish_node(rank, record)

    try:
        versions = runtime_versions(python, env)
        note(python_version=versions.python, ray_version=versions.ray)
        head = rendezvous.wait_for_head(
            attempt_id=doc.run.attempt_id,
            job_id=os.environ.get(JOB_ID_ENV),
            started_at=started_at,
            timeout=doc.ray.rendezvous_timeout_seconds,
            rank=rank,
            should_stop=lambda: bool(stop),
        )
        check_versions(versions, head, rank=rank, host=host)
        node = RayNode(node_spec(doc, rank, head.gcs_address), python, ray_process_env(env), log)
        node.start(should_stop=lambda: bool(stop))
        note(**node_record(node, state="joined", gang_epoch=head.gang_epoch))
        log(f"joined the Ray cluster at {head.gcs_address} (epoch {head.gang_epoch[:8]}); parked until rank 0 ends")
        dead: list[str] = []

        def should_stop() -> bool:
            if node is not None and not node.alive:
                dead.append(f"rank {rank}'s Ray node exited ({node.process.exit_code}); see {node.log_path}")
            return bool(stop) or bool(dead)

        try:
            outcome = rendezvous.wait_for_outcome(
                head, rank=rank, head_silence=doc.ray.rendezvous_timeout_seconds, should_stop=should_stop
            )
        except GangStopped:
            if dead:
                raise RayNodeError(dead[0]) from None
            raise
        note(state="left", outcome=outcome.state, exit_code=outcome.exit_code)
        log(f"rank 0 reported {outcome.state} (exit {outcome.exit_code}); leaving")
        return outcome.exit_code
    except VersionSkewError as exc:
        note(state="refused", reason=str(exc))
        log(str(exc))
        return EXIT_FAILED
    except (RendezvousTimeout, RayNodeError) as exc:
        note(state="failed", reason=str(exc))
        log(str(exc))
        return EXIT_FAILED
    except GangStopped as exc:
        note(state="terminated", reason=f"received {stop.signal}")
        log(str(exc))
        return stop.exit_code
    finally:
        _finish_node(node, doc, rank, log)


def run_attached(
    doc: schema.SkyRLLaunchConfig,
    *,
    gcs: str,
    env: Mapping[str, str],
    driver_argv: list[str],
    cwd: str,
    log: Log,
    stop: Stop,
) -> int:
    """The Ray backend: the gang is the cluster this job already runs in; only the driver runs here."""
    log(f"attaching the trainer driver to the Ray cluster at {gcs}")
    result = run_driver(
        driver_argv,
        {**env, "RAY_ADDRESS": gcs, "PYTHONUNBUFFERED": "1"},
        cwd,
        liveness=doc.ray.driver_liveness_timeout_seconds,
        stop=stop,
        log=log,
    )
    if result.reason:
        log(result.reason)
    return result.exit_code
