"""`python -m rlaunch.cluster.ray.job_driver -- ARGV...`: the entrypoint of every rlaunch job on Ray.

The Ray job's entrypoint is this driver followed by the job's own argv (so `ray job list` shows
what runs). It reads the gang description from $RLAUNCH_RAY_GANG and owns the job from start to
terminal state, the way the local backend's supervisor does:

  * placement. An *entrypoint* job (a top-level single replica, e.g. a coordinator) runs its
    replica as a subprocess of this driver, inside the entrypoint resources Ray reserved for it.
    A *placement-group* job (a child job, any multi-replica gang) reserves one bundle per replica
    (STRICT_SPREAD across nodes, or PACK on a single-node cluster; the backend chose) and runs each
    replica as a streaming Ray task pinned to its bundle; rank 0's task picks the rendezvous on
    its own node and the other ranks start once it is known.
  * each replica attempt runs under a keeper (see `keeper`), from the allow-listed environment of
    its node plus spec.env and the RLAUNCH_* variables: nothing else of Ray's environment leaks in.
  * output: every replica line goes into the job log as `[rank N] line` (credentials redacted),
    the driver's own notes as `[rlaunch] ...`, and its last line is `[rlaunch] job <state>[: why]`.
  * retries per replica (max_retries), the timeout (from when the gang is placed), and a failed
    replica stops the others, like the local backend.
  * cancellation: Ray's stop_job signals this driver (SIGTERM); a child job also watches its
    parent through the Jobs API and cancels itself when the parent ends. When the job ends for any
    reason its own children are stopped, so none outlives it.
  * status: the record (job state, message, per-replica state/attempts/exit codes/node) is
    published to Ray's internal KV after every change (see `kv`).

Exit code: 0 succeeded, 1 failed, 75 cancelled (how the Jobs API alone tells the two apart).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from rlaunch.cluster import lifecycle
from rlaunch.cluster.combined_log import rank_prefix
from rlaunch.cluster.job_environment import free_port
from rlaunch.cluster.lifecycle import Decision, GangLifecycle, Outcome
from rlaunch.cluster.protocol import BACKEND_ENV, JOB_ID_ENV, WORLD_SIZE_ENV, JobState
from rlaunch.cluster.ray.contract import (
    ENTRYPOINT,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_SUCCEEDED,
    GANG_ENV,
    GCS_ADDRESS_ENV,
    NOTE_PREFIX,
    WORKING_DIR_ENV,
)
from rlaunch.cluster.ray.kv import StatusStore
from rlaunch.cluster.ray.replica import replica_cwd, replica_environment, run_attempt
from rlaunch.secrets import Scrubber
from rlaunch.storage import utc_now

POLL_SECONDS = 0.1
PLACEMENT_NOTE_AFTER = 10.0
WIND_DOWN_EXTRA = 3.0
RAY_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # Ray sets it for the entrypoint (runtime_env, metadata)


_SIGNALS: list[str] = []  # signals received, recorded from the very start of the driver


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _SIGNALS.append(signal.Signals(signum).name)


def install_signal_handlers() -> None:
    """SIGTERM (Ray's stop_job), SIGINT and SIGHUP ask the driver to stop; nothing else does."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # Ray blocks it in its processes


@dataclass
class _Attempt:
    number: int
    stop: threading.Event = field(default_factory=threading.Event)
    ref: Any = None  # the ObjectRefGenerator of a placement-group attempt
    ended: bool = False


def package_uri(environ: Mapping[str, str]) -> str | None:
    """The job's uploaded working_dir (`gcs://_ray_pkg_<hash>.zip`), which child jobs reuse."""
    try:
        config = json.loads(environ.get(RAY_JOB_CONFIG_ENV) or "{}")
    except ValueError:
        return None
    working_dir = (config.get("runtime_env") or {}).get("working_dir")
    return working_dir if isinstance(working_dir, str) and "://" in working_dir else None


class Gang:
    def __init__(self, argv: list[str], config: dict[str, Any], environ: Mapping[str, str]) -> None:
        self.argv = argv
        self.config = config
        self.job_id = environ[JOB_ID_ENV]
        self.mode = config["placement"]
        self.grace = float(config["kill_grace"])
        self.gang = GangLifecycle(
            self.job_id,
            int(config["replicas"]),
            max_retries=int(config["max_retries"]),
            timeout_seconds=config.get("timeout_seconds"),
            parent=config.get("parent"),
        )
        self.replicas = self.gang.replicas
        self.attempts: dict[int, _Attempt] = {}  # rank -> its current attempt
        self.resources = config["resources"]
        self.gcs = environ.get("RAY_ADDRESS") or environ.get(GCS_ADDRESS_ENV)
        self.package = package_uri(environ)
        self.job_env = self._job_env(environ)
        self.scrubber = Scrubber.for_process(self.job_env)
        self.events: queue.Queue[tuple[int, int, str, Any]] = queue.Queue()
        self.rendezvous: str | None = None
        self.placement_group: Any = None
        self.node_ip: str | None = None
        self._client: Any = None
        self.driver = {"pid": os.getpid(), "started_at": utc_now()}
        try:
            self.store = StatusStore.connect(self.gcs)
        except Exception as exc:  # noqa: BLE001 - status detail is lost, the job still runs
            self.store = None
            self._note(f"cannot publish replica status to the cluster's KV ({exc!r}); status shows the job only")

    def _job_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """spec.env and the backend's variables (as submitted), then what is true inside the cluster."""
        env = {name: environ[name] for name in self.config["env_names"] if name in environ}
        env[BACKEND_ENV] = "ray"
        env[JOB_ID_ENV] = self.job_id
        env[WORLD_SIZE_ENV] = str(self.config["replicas"])
        if self.gcs:
            env[GCS_ADDRESS_ENV] = self.gcs  # reachable from every node, unlike a forwarded dashboard URL
        if self.package:
            env[WORKING_DIR_ENV] = self.package  # children reuse the uploaded package, no second upload
        return env

    # -- output ---------------------------------------------------------------------------------

    def _scrub(self, line: str) -> str:
        return self.scrubber.text(line)

    def _write(self, lines: list[str]) -> None:
        out = sys.stdout
        for line in lines:
            out.write(self._scrub(line) + "\n")
        out.flush()

    def _note(self, message: str) -> None:
        self._write([NOTE_PREFIX + message])

    # -- status ---------------------------------------------------------------------------------

    def _publish(self) -> None:
        if self.store is None:
            return
        record = {
            **self.gang.record(),
            "rendezvous": self.rendezvous,
            "placement": self.mode,
            "strategy": self.config.get("strategy"),
            "driver": self.driver,
        }
        try:
            self.store.put_state(self.job_id, record)
        except Exception as exc:  # noqa: BLE001 - a GCS hiccup must not fail the job
            self._note(f"could not publish status: {exc!r}")

    def _jobs(self) -> Any:
        if self._client is None:
            from ray.job_submission import JobSubmissionClient

            self._client = JobSubmissionClient(self.gcs)
        return self._client

    # -- the job --------------------------------------------------------------------------------

    def run(self) -> int:
        try:
            outcome = self._stop_requested() or self._supervise()
        except Exception as exc:  # noqa: BLE001 - recorded as the job's failure
            traceback.print_exc()
            outcome = lifecycle.failed(f"driver error: {exc!r}")
        return self._finish(outcome)

    def _supervise(self) -> Outcome:
        self._publish()
        if self.mode == ENTRYPOINT:
            import ray.util

            self.node_ip = ray.util.get_node_ip_address()
            self.rendezvous = f"{self.node_ip}:{free_port()}"
        else:
            stop = self._place()
            if stop:
                return stop
        self.gang.begin(time.monotonic())
        if self.rendezvous is not None or self.store is not None:
            for replica in self.replicas:  # placement group: the ranks meet through the KV (see tasks)
                self._start(replica.rank)
        else:
            self._start(0)  # no KV: the others start once rank 0 has picked the rendezvous
        self._publish()
        while True:
            outcome = self._pump(POLL_SECONDS) or self._stop_requested() or self.gang.check(time.monotonic())
            if outcome:
                return outcome

    def _place(self) -> Outcome | None:
        """Reserve one bundle per replica; wait (cancellable) until the cluster has placed them all."""
        import ray
        from ray.util.placement_group import placement_group

        ray.init(address="auto", log_to_driver=False, logging_level=logging.WARNING, namespace="rlaunch")
        bundle = self.config["bundle"]
        strategy = self.config["strategy"]
        self.placement_group = placement_group(
            [dict(bundle) for _ in self.replicas], strategy=strategy, name=f"rlaunch-{self.job_id}"
        )
        ready = self.placement_group.ready()
        started = time.monotonic()
        next_note = started + PLACEMENT_NOTE_AFTER
        while True:
            done, _ = ray.wait([ready], timeout=0.25)
            if done:
                ray.get(ready)
                return None
            stop = self._stop_requested()
            if stop:
                return stop
            if time.monotonic() >= next_note:
                next_note = time.monotonic() + 60.0
                self._note(
                    f"waiting {time.monotonic() - started:.0f}s for the cluster to place {len(self.replicas)} x {bundle} "
                    f"({strategy}); resources are busy"
                )

    def _start(self, rank: int) -> None:
        replica = self.gang.attempt_started(rank)
        replica.details.setdefault("node_id", None)
        attempt = _Attempt(replica.attempts)
        self.attempts[rank] = attempt
        if self.mode == ENTRYPOINT:
            replica.details["node_ip"] = self.node_ip
            target = self._run_local
        else:
            replica.details.setdefault("node_ip", None)
            attempt.ref = self._launch_remote(rank)
            target = self._follow_remote
        threading.Thread(target=target, args=(rank, attempt), daemon=True).start()

    def _run_local(self, rank: int, attempt: _Attempt) -> None:
        try:
            assert self.rendezvous is not None
            env = replica_environment(self.job_env, rank=rank, rendezvous=self.rendezvous, node_ip=self.node_ip)
            cwd = replica_cwd(bool(self.package), self.config.get("working_dir"))
            for kind, data in run_attempt(self.argv, env, cwd, self.grace, attempt.stop.is_set):
                self.events.put((rank, attempt.number, kind, data))
        except Exception as exc:  # noqa: BLE001 - reported as the attempt's end
            self.events.put((rank, attempt.number, "error", repr(exc)))
        finally:
            self.events.put((rank, attempt.number, "done", None))

    def _launch_remote(self, rank: int) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from rlaunch.cluster.ray.tasks import replica_attempt

        bundle = self.config["bundle"]
        options: dict[str, Any] = {
            "num_cpus": bundle.get("CPU", 0),
            "num_gpus": bundle.get("GPU", 0),
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                self.placement_group, placement_group_bundle_index=rank
            ),
        }
        if "memory" in bundle:
            options["memory"] = bundle["memory"]
        custom = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU", "memory")}
        if custom:
            options["resources"] = custom
        return replica_attempt.options(**options).remote(
            self.argv,
            self.job_env,
            rank,
            self.rendezvous,
            int(self.resources.get("accelerators") or 0),
            bool(self.package),
            self.config.get("working_dir"),
            self.grace,
        )

    def _follow_remote(self, rank: int, attempt: _Attempt) -> None:
        import ray

        try:
            for ref in attempt.ref:
                kind, data = ray.get(ref)
                self.events.put((rank, attempt.number, kind, data))
        except Exception as exc:  # noqa: BLE001 - cancelled, worker died, node died
            reason = type(exc).__name__
            if reason != "TaskCancelledError":
                reason = f"{reason}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
            self.events.put((rank, attempt.number, "error", reason))
        finally:
            self.events.put((rank, attempt.number, "done", None))

    # -- events ---------------------------------------------------------------------------------

    def _pump(self, timeout: float) -> Outcome | None:
        try:
            first = self.events.get(timeout=timeout)
        except queue.Empty:
            return None
        batch = [first]
        while len(batch) < 1000:
            try:
                batch.append(self.events.get_nowait())
            except queue.Empty:
                break
        outcome = None
        changed = False
        for rank, number, kind, data in batch:
            if kind == "out":
                prefix = rank_prefix(rank)
                self._write([prefix + line for line in data])
                continue
            attempt = self.attempts.get(rank)
            if attempt is None or attempt.number != number or attempt.ended:
                continue
            if kind == "rendezvous":
                if self.rendezvous is None:
                    self.rendezvous = data
                    if not self.gang.stopping:
                        for other in self.replicas[1:]:
                            if other.attempts == 0:
                                self._start(other.rank)
                changed = True
            elif kind == "node":
                self.replicas[rank].details.update(node_id=data.get("node_id"), node_ip=data.get("ip"))
                changed = True
            elif kind in ("exit", "error", "done"):
                code = data if kind == "exit" else None
                if kind == "error":
                    self._note(f"rank {rank} attempt {number} ended abnormally: {data}")
                ended = self._attempt_ended(rank, code, data if kind != "exit" else None)
                outcome = outcome or ended
                changed = True
        if changed:
            self._publish()
        return outcome

    def _attempt_ended(self, rank: int, code: int | None, error: str | None) -> Outcome | None:
        self.attempts[rank].ended = True
        why = f"its Ray task ended ({error or 'no exit code'})"
        verdict = self.gang.attempt_ended(rank, code, why)
        if verdict.note:
            self._note(verdict.note)
        if verdict.decision is Decision.RETRY:
            self._start(rank)
        return verdict.outcome

    # -- stopping -------------------------------------------------------------------------------

    def _stop_requested(self) -> Outcome | None:
        """The Ray job was stopped (a signal), or this child's parent job has ended."""
        if _SIGNALS:
            request = self._cancel_request()
            message = (
                lifecycle.cancel_message(request)
                if request
                else f"stopped through the Ray Jobs API (the driver got {_SIGNALS[0]})"
            )
            return lifecycle.cancelled(message)
        if self.gang.parent_due(time.monotonic()):
            ended = self._parent_ended()
            if ended:
                assert self.gang.parent is not None
                reason = lifecycle.parent_ended_reason(self.gang.parent, ended)
                self._request_cancel(self.job_id, reason)
                request = self._cancel_request()
                return lifecycle.cancelled(lifecycle.cancel_message(request) if request else reason)
        return None

    def _parent_ended(self) -> str | None:
        """The parent's final Ray state when it has ended, "its record is gone", or None."""
        try:
            status = self._jobs().get_job_status(self.gang.parent)
        except RuntimeError as exc:
            return "its record is gone" if "does not exist" in str(exc) else None
        except Exception:  # noqa: BLE001 - the dashboard is briefly unreachable: check again later
            return None
        return status.value.lower() if status.is_terminal() else None

    def _cancel_request(self) -> dict[str, Any] | None:
        if self.store is None:
            return None
        try:
            return self.store.cancel_request(self.job_id)
        except Exception:  # noqa: BLE001
            return None

    def _request_cancel(self, job_id: str, reason: str) -> None:
        if self.store is None:
            return
        with contextlib.suppress(Exception):  # the cancel itself goes through the Jobs API
            self.store.request_cancel(job_id, lifecycle.cancel_request(reason))

    def _running(self) -> list[int]:
        return [rank for rank, attempt in self.attempts.items() if not attempt.ended]

    def _wind_down(self) -> None:
        """Stop every running attempt; wait for them (draining output); force what is left."""
        for rank in self._running():
            attempt = self.attempts[rank]
            attempt.stop.set()
            if attempt.ref is not None:
                import ray

                with contextlib.suppress(Exception):  # it finished meanwhile
                    ray.cancel(attempt.ref)
        deadline = time.monotonic() + self.grace + WIND_DOWN_EXTRA
        while self._running() and time.monotonic() < deadline:
            self._pump(POLL_SECONDS)
        for rank in self._running():
            attempt = self.attempts[rank]
            if attempt.ref is not None:
                import ray

                with contextlib.suppress(Exception):  # the keeper stops the group when its worker dies
                    ray.cancel(attempt.ref, force=True)
            self._attempt_ended(rank, None, "did not stop in time")
        while True:  # output still queued
            try:
                rank, _number, kind, data = self.events.get_nowait()
            except queue.Empty:
                break
            if kind == "out":
                self._write([rank_prefix(rank) + line for line in data])

    def _cancel_children(self, reason: str) -> None:
        """Stop this job's unfinished children (their drivers cascade further down)."""
        from rlaunch.cluster.ray.contract import META_PARENT

        if not self.gcs:
            return
        try:
            jobs = self._jobs().list_jobs()
        except Exception as exc:  # noqa: BLE001
            self._note(f"could not list child jobs to stop them: {exc!r}")
            return
        for job in jobs:
            if (job.metadata or {}).get(META_PARENT) != self.job_id or job.status.is_terminal():
                continue
            self._request_cancel(job.submission_id, reason)
            try:
                self._jobs().stop_job(job.submission_id)
            except Exception as exc:  # noqa: BLE001
                self._note(f"could not stop child job {job.submission_id}: {exc!r}")

    def _finish(self, outcome: Outcome) -> int:
        self.gang.stop(outcome)
        try:
            self._wind_down()
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        self.gang.finish(outcome)
        self._cancel_children(self.gang.children_reason())
        if self.placement_group is not None:
            from ray.util.placement_group import remove_placement_group

            with contextlib.suppress(Exception):  # the job's end removes it anyway
                remove_placement_group(self.placement_group)
        self._write([NOTE_PREFIX + lifecycle.outcome_line(outcome)])
        self._publish()
        return {JobState.SUCCEEDED: EXIT_SUCCEEDED, JobState.CANCELLED: EXIT_CANCELLED}.get(outcome.state, EXIT_FAILED)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or args[0] != "--":
        print(
            "usage: python -m rlaunch.cluster.ray.job_driver -- ARGV...  (gang description in $RLAUNCH_RAY_GANG)",
            file=sys.stderr,
        )
        return 2
    install_signal_handlers()
    config = json.loads(os.environ[GANG_ENV])
    return Gang(args[1:], config, os.environ).run()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is recorded and every replica has stopped: skip Ray's orderly driver shutdown
    # (about a second on a small machine); the cluster treats the driver as gone either way.
    os._exit(code)
