"""The runner: executes a planned graph deps-first, at most `max_concurrent` steps at a time.

A step with a `StepExecution` runs as a step job (`step_jobs`: the coordinator's backend); its
values come back from the job and its artifact is recorded here, exactly as for a step run in
this process.

A failing step fails its dependents, not the runner. Its failure is reported as one line
(`FAILED <identity>: <reason>`) and recorded in its status; only an error nobody anticipated (not
a `UserError`, not a full disk) is followed by its traceback, which then says that it is a bug. A
full disk is told by its errno, path and next step; one that keeps the failed status from being
recorded (the disk under the prefix is full) is told after the step's own failure, never instead.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rlaunch import storage
from rlaunch.artifacts import records
from rlaunch.artifacts.artifact import Artifact, ArtifactTypeMismatchError
from rlaunch.artifacts.context import StepContext
from rlaunch.artifacts.fingerprint import CanonicalizationError, canonical_value, diff_paths
from rlaunch.artifacts.lock import StepLock
from rlaunch.artifacts.plan import PlannedStep, plan_graph, refuse_foreign_steps
from rlaunch.artifacts.records import Provenance
from rlaunch.artifacts.step import ArtifactStep
from rlaunch.errors import UserError
from rlaunch.step_jobs import StepExecution, StepInput, StepJobRequest, StepJobs, function_path
from rlaunch.waiting import wait_until

A = TypeVar("A", bound=Artifact)

Reporter = Callable[[str], None]


class FingerprintDriftError(UserError, ValueError):
    """A pinned (`expected_fingerprint`) step whose stored output was built from another recipe."""


class NoStepJobsError(UserError, RuntimeError):
    """A step that runs as a job, given to a runner that submits no jobs."""


class RunFailedError(RuntimeError):
    def __init__(self, failed: list[StepOutcome]):
        self.failed = failed
        names = ", ".join(o.identity for o in failed)
        super().__init__(f"{len(failed)} step(s) failed: {names}")


@dataclass
class StepOutcome:
    identity: str
    action: str  # built | rebuilt | served | failed | skipped
    path: str
    seconds: float = 0.0
    error: str | None = None
    drift: list[str] = field(default_factory=list)
    value: Artifact | None = None

    @property
    def ok(self) -> bool:
        return self.action in ("built", "rebuilt", "served")


class Runner:
    def __init__(
        self,
        prefix: str | None = None,
        *,
        max_concurrent: int = 8,
        provenance: Provenance | None = None,
        report: Reporter = print,
        poll_seconds: float = 0.5,
        submitter: str | None = None,
        step_jobs: StepJobs | None = None,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent={max_concurrent} must be at least 1")
        self.prefix = prefix or storage.default_prefix()
        self.max_concurrent = max_concurrent
        self.provenance = provenance or Provenance.capture()
        self.report = report
        self.poll_seconds = poll_seconds
        self.submitter = submitter  # the path this runner is (an RL coordinator: "@rl_build_options")
        self.step_jobs = step_jobs  # how a step with a StepExecution runs (None: such a step fails)
        self._report_lock = threading.Lock()

    def run(self, roots: Iterable[ArtifactStep[Any]]) -> list[StepOutcome]:
        """Execute the graph; returns one outcome per executed step. Raises RunFailedError on failure."""
        planned = [p for p in plan_graph(list(roots), self.prefix) if p.action != "unneeded"]
        refuse_foreign_steps(planned, self.submitter)
        outcomes = self._execute(planned)
        failed = [o for o in outcomes if not o.ok]
        if failed:
            raise RunFailedError(failed)
        return outcomes

    def _say(self, message: str) -> None:
        with self._report_lock:
            self.report(message)

    def _execute(self, planned: list[PlannedStep]) -> list[StepOutcome]:
        by_id = {p.step.identity: p for p in planned}
        deps = {i: [d.identity for d in p.step.deps if d.identity in by_id] for i, p in by_id.items()}
        done: dict[str, StepOutcome] = {}
        running: dict[cf.Future[StepOutcome], str] = {}
        with cf.ThreadPoolExecutor(max_workers=self.max_concurrent) as pool:
            while len(done) < len(by_id):
                for ident, p in by_id.items():
                    if ident in done or ident in running.values():
                        continue
                    if any(d not in done for d in deps[ident]):
                        continue
                    failed_deps = [d for d in deps[ident] if not done[d].ok]
                    if failed_deps:
                        done[ident] = StepOutcome(
                            ident, "skipped", p.path, error=f"dependency failed: {', '.join(failed_deps)}"
                        )
                        self._say(f"  skipped {ident}: dependency failed ({', '.join(failed_deps)})")
                        continue
                    if len(running) < self.max_concurrent:
                        running[pool.submit(self._run_step, p)] = ident
                if not running:
                    continue
                finished, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
                for fut in finished:
                    ident = running.pop(fut)
                    done[ident] = fut.result()
        return [done[i] for i in by_id]

    def _run_step(self, planned: PlannedStep) -> StepOutcome:
        step, path = planned.step, planned.path
        start = time.monotonic()
        try:
            if planned.action == "serve":
                outcome = self._serve(step, path)
            else:
                outcome = self._build(step, path, planned.action)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failing step fails its dependents, not the runner
            message = failure_message(exc)
            outcome = StepOutcome(step.identity, "failed", path, error=message)
            self._say(f"  FAILED {step.identity}: {message}")
        outcome.seconds = time.monotonic() - start
        if outcome.ok:
            verb = {"built": "built", "rebuilt": "rebuilt (mutable)", "served": "served from storage"}[outcome.action]
            self._say(f"  {verb} {step.identity} ({outcome.seconds:.1f}s) -> {path}")
        return outcome

    def _serve(self, step: ArtifactStep[Any], path: str) -> StepOutcome:
        record = records.read_record(path)
        if record is None:
            raise FileNotFoundError(
                f"{step.identity}: stored output at {path} lost its record; rerun with a new version"
            )
        drift = self._drift(step, record)
        value = step.artifact_type.load(path)
        return StepOutcome(step.identity, "served", path, drift=drift, value=value)

    def _drift(self, step: ArtifactStep[Any], record: dict[str, Any]) -> list[str]:
        if record.get("fingerprint") == step.fingerprint:
            return []
        stored_payload = record.get("fingerprint_payload") or {}
        current_payload = json.loads(step.fingerprint_payload)
        fields = diff_paths(stored_payload, current_payload) or ["<unknown>"]
        if step.expected_fingerprint is not None:
            raise FingerprintDriftError(
                f"{step.identity} is pinned to fingerprint {step.expected_fingerprint} but its stored output was "
                f"built from another recipe (differs at {', '.join(fields)}); bump the version"
            )
        self._say(
            f"  warning: {step.identity} is served from storage, but its recipe changed since it was built "
            f"(differs at: {', '.join(fields)}). Bump the version to build the new recipe."
        )
        return fields

    def _build(self, step: ArtifactStep[Any], path: str, action: str) -> StepOutcome:
        lock = StepLock(path)
        said: list[bool] = []

        def acquired_or_built() -> bool:
            """The lock is ours, or its holder has built the output (served below; it keeps its lock)."""
            if lock.try_acquire():
                return True
            if not said:
                holder = lock.holder() or {}
                self._say(f"  waiting for {step.identity}: being built by {holder.get('owner', 'another runner')}")
                said.append(True)
            return not step.mutable and records.is_succeeded(path)

        wait_until(acquired_or_built, None, f"the build lock of {step.identity}", self.poll_seconds)
        try:
            if not step.mutable and records.is_succeeded(path):
                return self._serve(step, path)
            self._say(f"  {'rebuilding' if step.mutable else 'building'} {step.identity}")
            records.write_status(
                path, records.RUNNING, owner=lock.owner, identity=step.identity, fingerprint=step.fingerprint
            )
            try:
                ctx = StepContext.for_run(
                    step, self.prefix, load=lambda dep: dep.artifact_type.load(dep.path(self.prefix))
                )
                config = step.build_config(ctx)
                run_here = not isinstance(step.execution, StepExecution)
                value = _as_artifact(step, step.run(config) if run_here else self._run_job(step, path, config), path)
                value.check_built(config)
                records.write_record(path, self._record(step, path, config, value))
            except BaseException as exc:
                try:
                    records.write_status(
                        path,
                        records.FAILED,
                        error=failure_message(exc),
                        owner=lock.owner,
                        identity=step.identity,
                        fingerprint=step.fingerprint,
                    )
                except OSError as unwritten:  # the step's own failure stays what is told
                    if not storage.is_disk_full(unwritten):
                        raise
                    exc.add_note(
                        f"its failed status did not fit either ({unwritten.strerror} writing {unwritten.filename})"
                    )
                if isinstance(exc, Exception) and not isinstance(exc, UserError) and not storage.is_disk_full(exc):
                    self._say(_bug_report(step.identity))
                raise
            records.write_status(
                path, records.SUCCEEDED, owner=lock.owner, identity=step.identity, fingerprint=step.fingerprint
            )
            return StepOutcome(step.identity, "rebuilt" if action == "rebuild" else "built", path, value=value)
        finally:
            lock.release()

    def _run_job(self, step: ArtifactStep[A], path: str, config: Any) -> A:
        """Run `step` as a step job; its inputs are named by the identity their records carry now."""
        if self.step_jobs is None:
            raise NoStepJobsError(
                f"{step.identity} declares a StepExecution (it runs as a step job) but this runner submits no "
                "jobs; run the experiment with --run from its main"
            )
        inputs = tuple(
            StepInput(f"{dep.identity}:{(records.read_record(dep.path(self.prefix)) or {}).get('fingerprint')}",
                      dep.path(self.prefix))
            for dep in step.deps
        )  # fmt: skip
        request = StepJobRequest(
            identity=step.identity,
            name=step.name,
            version=step.version,
            fingerprint=step.fingerprint,
            output_path=path,
            prefix=self.prefix,
            function=function_path(step.run, step.name),
            config=canonical_value(config),
            inputs=inputs,
            execution=step.execution,
            code=step.code,
        )
        values = self.step_jobs.run(request, self._say)
        return step.artifact_type(path=path, **values)

    def _record(self, step: ArtifactStep[Any], path: str, config: Any, value: Artifact) -> dict[str, Any]:
        return {
            "schema": records.RECORD_SCHEMA,
            "name": step.name,
            "version": step.version,
            "fingerprint": step.fingerprint,
            "result_type": step.artifact_type.type_name(),
            "output_path": path,
            "deps": [d.identity for d in step.deps],
            "config": _materialised(config),
            "fingerprint_payload": json.loads(step.fingerprint_payload),
            "result": canonical_value(value.values(), "result"),
            "provenance": self.provenance.to_json(),
            "written_at": storage.utc_now(),
        }


def _as_artifact(step: ArtifactStep[A], result: Any, path: str) -> A:
    if result is None:
        try:
            return step.artifact_type(path=path)
        except TypeError as exc:
            raise TypeError(
                f"{step.identity}: run() returned None but {step.artifact_type.type_name()} has value fields"
            ) from exc
    if not isinstance(result, step.artifact_type):
        raise ArtifactTypeMismatchError(
            f"{step.identity}: run() returned {type(result).__qualname__}, expected {step.artifact_type.type_name()}"
        )
    return result


def failure_message(exc: BaseException) -> str:
    """A step's failure in one line: a write that did not fit (ENOSPC, EDQUOT) by its errno, path and
    next step, as the error boundary tells it; anything else by its type and message. Notes follow."""
    told = storage.disk_full_message(exc) if isinstance(exc, OSError) and storage.is_disk_full(exc) else None
    return "; ".join([told or f"{type(exc).__name__}: {exc}", *getattr(exc, "__notes__", ())])


def _bug_report(identity: str) -> str:
    """The traceback of an error nobody anticipated, saying so: a known failure (a `UserError`,
    e.g. a refused document or a failed launch) is its one-line reason alone."""
    return (
        f"  {identity} raised an error rlaunch did not anticipate; this is a bug (in the step's code or in rlaunch), "
        f"please report it with this traceback:\n{traceback.format_exc().rstrip()}"
    )


def _materialised(config: Any) -> Any:
    try:
        return canonical_value(config)
    except CanonicalizationError as exc:
        return {"__unrepresentable__": str(exc)}
