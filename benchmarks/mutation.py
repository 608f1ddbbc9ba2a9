"""Mutation score per safety-critical area: how many small deliberate bugs the fast tests catch.

    .venv/bin/pip install 'mutmut==3.8.1'
    .venv/bin/python benchmarks/mutation.py                       # every area (long: see below)
    .venv/bin/python benchmarks/mutation.py --area observe_verdict --survivors

Each area names the modules to mutate and the fast unit tests that guard them (no end-to-end
launch, no Ray): the preflight rules, launch_config, host, task, artifacts, observe (verdict and
collect), and every module that keeps a safety promise (docs/guarantees.md, "What rlaunch guarantees"):
secrets, statefiles, paths, storage's atomic writes, resume, the runtime digest and the adapters'
checkpoint guards (imported by their own package names, as the adapter tests import them); and
the code issue 33 found weakly tested: the Slurm queue check and cancel path, export-root ownership,
damaged-record recovery, the judgement and its gates, failure classes, pinned hub sources and the
memory model (its verdicts, its sizing arithmetic, the architecture read from config.json, the
devices and what would fit); and the other guards' holders in tests/promises.py: a job's environment,
finalising an attempt whose jobs are gone, the host's last step (a full disk), readiness's
defaults, a dead supervisor's take-over, a supervisor's scrubber, a step job's path and `--run`'s
submission of the coordinator; and what issue 43 found no unit test deciding: cancel (`control`), a
step job's entrypoint (in `task`), the queue check and a held job's submission (in `slurm_queue`).
For every area the script copies the checkout's `src/`, `tests/`, `experiments/`,
`benchmarks/` and `pyproject.toml` to a scratch directory, adds a `[tool.mutmut]` section for that area, runs
`mutmut run` there (mutmut 3 writes its mutants under the scratch copy, never here) and prints
killed / survived / no-test counts and the score = killed / (killed + survived + no tests), with
timeouts counted as killed. `--survivors` lists each surviving mutant by name; `mutmut show NAME`
in the printed scratch directory (kept with `--keep`) shows its diff. Not part of the default test
command: a whole run takes a long while on two cores (observe_verdict alone: about 2.5 minutes for
381 mutants at about 3 mutants per second).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPIED = ("src", "tests", "experiments", "benchmarks", "pyproject.toml")
FAST = ["-x", "-q", "-p", "no:cacheprovider", "-m", "not e2e and not ray and not multinode and not iris and not skyrl"]


@dataclass(frozen=True)
class Area:
    name: str
    mutate: tuple[str, ...]  # globs under the repository root
    tests: tuple[str, ...]  # pytest paths: the fast tests that guard the area
    # test ids left out: tests that read the source text (which mutmut rewrites), run the
    # unmutated code in another process or import experiments/ (not importable under mutmut)
    deselect: tuple[str, ...] = ()
    # mutant names (globs) to run when only some functions of a module keep the promise; empty: all
    only: tuple[str, ...] = ()
    # adapter packages moved to the top of src/ in the scratch copy: an adapter is imported by its
    # own name (`rlaunch_trl_cpu`), which is the module name mutmut must give its mutants
    relocate: tuple[str, ...] = ()


# a whole host launch, whose clean run fails under mutmut once resume.py is mutated (the host's pin refusal
# is `pinned_problem`, tested in process beside it)
_HOST_PIN = (
    "tests/runs/test_resume_from_pin.py::test_the_host_refuses_a_pin_whose_digest_differs_and_accepts_the_right_one"
)

AREAS = (
    Area(
        "preflight",
        # the geometry and recipe rules; the memory model (memory, model_shape, fit, devices) is its own area
        (
            *(
                f"src/rlaunch/rules/{m}.py"
                for m in (
                    "__init__",
                    "batches",
                    "data_rules",
                    "defect_triggers",
                    "document_subject",
                    "megatron",
                    "recipe_rules",
                    "roles",
                    "runtime_rules",
                    "subject",
                    "topology",
                )
            ),
            "src/rlaunch/skyrl/preflight/*.py",
        ),
        (
            "tests/rules",
            *(
                f"tests/skyrl/test_{m}.py"
                for m in (
                    "preflight_batches",
                    "preflight_bounded",
                    "preflight_explicit",
                    "preflight_runtime",
                    "preflight_shapes",
                    "preflight_topology",
                    "rule_boundaries",
                    "recipe",
                    "identity",
                    "submission_checks",
                    "types",
                    "critic",
                    "preflight_inputs",
                )
            ),
            "tests/host/test_host_rules.py",
            "tests/skyrl/test_readiness.py",
        ),
        (
            "tests/host/test_host_rules.py::test_every_code_a_rule_or_the_preflight_writes_is_registered",
            "tests/host/test_host_rules.py::test_the_reproducer_through_the_real_command",
            "tests/host/test_host_rules.py::test_the_repository_experiments_render_documents_the_host_accepts",
            "tests/skyrl/test_readiness.py::test_every_rl_experiment_plan_has_the_readiness_section",
        ),
    ),
    Area(
        "launch_config",
        (
            "src/rlaunch/launch_config/geometry.py",
            "src/rlaunch/launch_config/typed.py",
            "src/rlaunch/launch_config/recipe.py",
        ),
        ("tests/launch_config",),
        # gate 7's failure classes, launches among them: the failures area runs them
        ("tests/launch_config/test_failures.py",),
    ),
    Area(
        "host",
        ("src/rlaunch/host/validate.py", "src/rlaunch/host/compose.py", "src/rlaunch/host/allocate.py"),
        # Not test_host_cli.py or test_failed_launch_trace.py: those run whole marker launches.
        tuple(f"tests/host/{m}.py" for m in ("test_host_rules", "test_host_input_errors", "test_host_units")),
    ),
    Area(
        "task",
        ("src/rlaunch/task/staging.py", "src/rlaunch/task/bootstrap.py", "src/rlaunch/task/step_entry.py"),
        ("tests/task",),
    ),
    Area(
        "artifacts",
        tuple(
            f"src/rlaunch/artifacts/{m}.py" for m in ("fingerprint", "identity", "versions", "runner", "lock", "judged")
        ),
        ("tests/artifacts",),
    ),
    Area(
        "observe_verdict",
        ("src/rlaunch/observe/verdict.py", "src/rlaunch/observe/collect.py"),
        (
            "tests/observe/test_verdict_rules.py",
            "tests/observe/test_verdict_evidence.py",
            "tests/observe/test_collect_files.py",
        ),
    ),
    Area(
        "secrets",
        ("src/rlaunch/secrets.py",),
        ("tests/ground_floor/test_secret_values.py", "tests/cluster/test_secrets.py"),
        # a 1.5 MiB line through a real job: slow, and its cut is tested in process beside it
        ("tests/cluster/test_secrets.py::test_a_secret_across_a_read_boundary_in_a_long_line_is_scrubbed_whole",),
    ),
    Area(
        "statefiles",
        ("src/rlaunch/statefiles.py",),
        ("tests/ground_floor/test_statefiles_parser.py", "tests/cluster/test_state_files.py"),
    ),
    Area(
        "paths",
        ("src/rlaunch/paths.py",),
        (
            "tests/ground_floor/test_paths_unit.py",
            "tests/launch_config/test_confinement.py",
            "tests/task/test_staging.py",
        ),
    ),
    Area(
        "storage_atomic",
        ("src/rlaunch/storage.py",),
        (
            "tests/ground_floor/test_storage_atomic.py",
            "tests/ground_floor/test_storage_local.py",
            "tests/artifacts/test_storage.py",
        ),
        only=tuple(
            f"rlaunch.storage.x_{f}__mutmut_*"
            for f in (
                "dumps",
                "_fsynced_temporary",
                "_naming",
                "write_bytes_atomic",
                "write_json_atomic",
                "write_text_atomic",
                "create_exclusive",
            )
        ),
    ),
    Area(
        "resume",
        ("src/rlaunch/runs/resume.py",),
        (
            "tests/runs/test_resume_format.py",
            "tests/runs/test_resume_identity.py",
            "tests/host/test_host_units.py",
            "tests/runs/test_resume_from_pin.py",
            "tests/runtimes/test_checkpoint_manifest.py",
        ),
        (_HOST_PIN,),
    ),
    Area(
        "runtime_digest",
        ("src/rlaunch/runtimes/registry.py",),
        ("tests/runtimes/test_shipped_digest.py",),
        # the wheel test builds and installs a wheel of the unmutated tree in a fresh venv
        ("tests/runtimes/test_shipped_digest.py::test_a_wheel_gives_every_runtime_the_editable_installs_digest",),
        only=tuple(
            f"rlaunch.runtimes.registry.x_{f}__mutmut_*" for f in ("source_digest", "shipped_files", "package_data")
        ),
    ),
    Area(
        "adapter_guards",
        ("src/rlaunch_trl_cpu/checkpoints.py", "src/rlaunch_skyrl/checkpoints.py"),
        (
            "tests/runtimes/test_checkpoint_guards.py",
            "tests/runtimes/test_checkpoint_manifest.py",
            "tests/runs/test_resume_from_pin.py",  # the pinned checkpoint's guards: `pinned`, `start_from_pin`
        ),
        relocate=(
            "src/rlaunch/runtimes/adapters/trl_cpu/rlaunch_trl_cpu",
            "src/rlaunch/runtimes/adapters/skyrl/rlaunch_skyrl",
        ),
    ),
    # The areas below cover the code issue 33 found weakly tested: the Slurm queue check and cancel
    # path, export-root ownership, damaged-record recovery, the judgement's comparisons, pinned hub
    # sources and the memory model.
    Area(
        "slurm_queue",
        (
            "src/rlaunch/cluster/slurm/commands.py",
            "src/rlaunch/cluster/slurm/backend.py",
            "src/rlaunch/cluster/slurm/queue_check.py",
        ),
        (
            "tests/cluster/test_slurm_units.py",
            "tests/cluster/test_slurm_queue.py",
            "tests/slurm/test_queue_check.py",
            "tests/slurm/test_held_submit.py",
        ),
        only=(
            *(
                f"rlaunch.cluster.slurm.commands.x_{f}__mutmut_*"
                for f in ("queue_entry", "first_entry", "accounting_entry", "job_nodes", "queued_ids")
            ),
            "rlaunch.cluster.slurm.commands.xǁQueueEntryǁ*",
            *(
                f"rlaunch.cluster.slurm.backend.xǁSlurmBackendǁ{f}__mutmut_*"
                for f in ("submit", "status", "_entry", "_supervisor_gone", "_lost_message", "_await_ended", "_stop")
            ),
            "rlaunch.cluster.slurm.queue_check.*",  # the partition as Slurm reports it and every check on it
        ),
    ),
    Area("output_roots", ("src/rlaunch/host/outputs.py",), ("tests/host/test_output_roots.py",)),
    Area(
        "readiness_defaults",
        ("src/rlaunch/skyrl/views/readiness.py",),
        ("tests/skyrl/test_readiness.py", "tests/skyrl/test_readiness_defaults.py"),
        ("tests/skyrl/test_readiness.py::test_every_rl_experiment_plan_has_the_readiness_section",),
        # the promise: every host resource left to its execution's default is marked so, per role
        only=tuple(
            f"rlaunch.skyrl.views.readiness.x_{f}__mutmut_*"
            for f in ("_host_resources", "relied_defaults", "launch_values")
        ),
    ),
    Area(
        "take_over",
        ("src/rlaunch/cluster/gang/engine.py",),
        ("tests/cluster/test_take_over.py",),
        # a dead supervisor's outcome: recorded only where it can be written, its replicas stopped
        only=("rlaunch.cluster.gang.engine.xǁGangEngineǁ_take_over__mutmut_*",),
    ),
    Area(
        "supervisor_start",
        ("src/rlaunch/cluster/gang/supervisor.py",),
        ("tests/cluster/test_supervisor_start.py",),
        # the supervisor's scrubber (the submitter's secrets too) and the gang's rules from its record
        only=("rlaunch.cluster.gang.supervisor.xǁSupervisorǁ__init____mutmut_*",),
    ),
    Area(
        "step_job",
        ("src/rlaunch/host/step_job.py",),
        ("tests/host/test_step_job_run.py",),
        # a step job's path on the coordinator: the retry gate, submission, the record, the failure's class
        only=(
            "rlaunch.host.step_job.xǁStepJobLauncherǁrun__mutmut_*",
            "rlaunch.host.step_job.xǁ_Recordǁupdate__mutmut_*",
            *(f"rlaunch.host.step_job.x_{f}__mutmut_*" for f in ("retry_refusal", "_follow", "job_document")),
        ),
    ),
    Area(
        "control",
        # an attempt whose jobs are gone closed; a cancel's jobs, its record and who cancelled first
        ("src/rlaunch/control/finalise.py", "src/rlaunch/control/cancel.py"),
        ("tests/observe/test_finalise_snapshot.py", "tests/control"),
    ),
    Area(
        "submission",
        (
            "src/rlaunch/cli/rl_options.py",
            "src/rlaunch/submission/submission.py",
            "src/rlaunch/submission/authorised.py",
        ),
        (
            "tests/submission/test_submit_coordinator.py",
            "tests/judgement/test_waivers.py",
            "tests/submission/test_replay.py",
            "tests/judgement/test_one_judgement.py",
        ),
        # `--run`'s submission: every step that launches judged, the coordinator job, its replay, following it
        only=(
            *(
                f"rlaunch.cli.rl_options.x_{f}__mutmut_*"
                for f in (
                    "submit_coordinator",
                    "given",
                    "_waivers",
                    "_reason",
                    "_replay_refused",
                    "_finalise_dead_attempts",
                    "_failed_attempts",
                    "jobs_command",
                )
            ),
            "rlaunch.cli.rl_options.xǁCoordinatorExecutorǁrun__mutmut_*",
            "rlaunch.submission.submission.*",
            "rlaunch.submission.authorised.*",
        ),
    ),
    Area(
        "host_finish",
        ("src/rlaunch/host/launch.py",),
        ("tests/host/test_finish.py",),
        # the attempt's end: manifests, a full disk named and classed, the record's refusal, phases and W&B run
        only=tuple(f"rlaunch.host.launch.x_{f}__mutmut_*" for f in ("_finish", "_manifests_did_not_fit")),
    ),
    Area(
        "job_environment",
        ("src/rlaunch/cluster/job_environment.py",),
        ("tests/cluster/test_job_environment.py",),
        # what crosses into a job, not `free_port` (a socket's answer)
        only=tuple(
            f"rlaunch.cluster.job_environment.x_{f}__mutmut_*"
            for f in ("job_environment", "base_environment", "replica_base")
        ),
    ),
    Area(
        "damaged_record",
        ("src/rlaunch/observe/recover.py", "src/rlaunch/observe/resolve.py"),
        ("tests/observe/test_recovered_record.py",),
        only=("rlaunch.observe.recover.*", "rlaunch.observe.resolve.x_at_path__mutmut_*"),
    ),
    Area(
        "judgement",
        ("src/rlaunch/judgement/judge.py", "src/rlaunch/judgement/parity.py", "src/rlaunch/judgement/gates.py"),
        (
            "tests/judgement/test_smoke_gate.py",
            "tests/judgement/test_host_gates.py",
            "tests/judgement/test_one_judgement.py",
            "tests/judgement/test_version_wording.py",
            "tests/judgement/test_declared_credentials.py",
            "tests/judgement/test_gate_words.py",
            "tests/judgement/test_shapes.py",
            "tests/runs/test_resume_from_pin.py",
        ),
        # the comparisons: what each gate and the judgement refuse, and how parity compares two runs
        only=(
            "rlaunch.judgement.judge.*",
            "rlaunch.judgement.parity.x_differences__mutmut_*",
            *(
                f"rlaunch.judgement.gates.x_{f}__mutmut_*"
                for f in (
                    "foreign_digests",
                    "version_problem",
                    "declared_compatible",
                    "retry_needed",
                    "retry_problem",
                    "smoke_problem",
                    "smoke_runtime_problem",
                    "credentials_problem",
                )
            ),
        ),
    ),
    Area(
        "parity",
        ("src/rlaunch/judgement/parity.py",),
        (
            "tests/judgement/test_shapes.py",
            "tests/judgement/test_rehearsal.py",
            "tests/judgement/test_smoke_gate_verdict.py",
            "tests/judgement/test_gate_words.py",
            "tests/judgement/test_smoke_evidence_edges.py",
        ),
        # the shipped experiments' smokes (experiments/ is not importable under mutmut)
        (
            "tests/judgement/test_shapes.py::test_cpu_smoke_rehearses_the_scaled_cpu_run",
            "tests/judgement/test_rehearsal.py::test_every_shipped_experiments_smoke_rehearses_its_launch",
        ),
    ),
    Area(
        "failures",
        ("src/rlaunch/launch_config/failures.py",),
        (
            "tests/launch_config/test_failures.py",
            "tests/launch_config/test_fault_classes.py",
            "tests/launch_config/test_failure_words.py",
            "tests/cluster/test_slurm_units.py",
        ),
        # not `_sig`: it runs only while the module is imported, before mutmut switches a mutant on
        only=(
            "rlaunch.launch_config.failures.xǁFailureClassǁ*",
            *(
                f"rlaunch.launch_config.failures.x_{f}__mutmut_*"
                for f in ("disk_full", "classify", "_found", "_under", "_signal")
            ),
        ),
    ),
    Area(
        "artifact_steps",
        ("src/rlaunch/artifacts/step.py", "src/rlaunch/artifacts/plan.py"),
        (
            "tests/artifacts/test_step.py",
            "tests/artifacts/test_step_execution.py",
            "tests/artifacts/test_fingerprint.py",
            "tests/artifacts/test_plan.py",
            "tests/submission/test_submission_path.py",
            "tests/artifacts/test_submission_words.py",
        ),
        # the promises' holders: a step's identity and fingerprint, and the submission path's refusal
        only=("rlaunch.artifacts.step.xǁArtifactStepǁ*", "rlaunch.artifacts.plan.x_refuse_foreign_steps__mutmut_*"),
    ),
    Area(
        "hub_sources",
        ("src/rlaunch/sources/hub.py",),
        ("tests/sources/test_hub_source.py", "tests/sources/test_hub_pins.py", "tests/sources/test_pinned_data.py"),
    ),
    Area(
        "memory",
        ("src/rlaunch/rules/memory/*.py", *(f"src/rlaunch/rules/{m}.py" for m in ("model_shape", "fit", "devices"))),
        # the verdicts and the table's edges, the sizing arithmetic, the architecture read from config.json
        # (exact counts: test_built_counts.py), the devices' capacities and what would fit
        tuple(
            f"tests/rules/test_{m}.py"
            for m in (
                "memory",
                "memory_edges",
                "memory_model",
                "memory_record",
                "memory_golden",
                "rollout_knobs",
                "model_shape_edges",
                "built_counts",
                "fit",
                "document_subject",
            )
        ),
    ),
)


# Surviving mutants that change no behaviour (equivalent mutants), by mutmut name, with the reason.
# They are listed by `--survivors` but excluded from the score. mutmut numbers mutants per function
# in source order, so an edit to a function can renumber them: re-check this list after one.
_UTF8 = "open() encoding 'utf-8' -> None/'UTF-8'/default: the same codec (Python runs in UTF-8 mode here)"
_ASCII = "open() encoding of the staged manifest: json.dump writes ASCII only, every codec reads it back the same"
EQUIVALENT: dict[str, str] = {
    **{f"rlaunch.task.staging.x_stage__mutmut_{n}": _ASCII for n in (26, 28, 30, 86, 89, 97)},
    **{
        f"rlaunch.task.staging.x__copy_all__mutmut_{n}": "the copy threads' name prefix: only a debugger shows it"
        for n in (24, 26, 31, 32)
    },
    **{
        f"rlaunch.task.staging.x__copy_all__mutmut_{n}": "shutdown without wait on a failure: the pool's `with` "
        "exit waits for the running copies right after, before the error leaves _copy_all"
        for n in (56, 58, 60)
    },
    "rlaunch.task.staging.x_stage__mutmut_50": "temporary directory suffix of 9 hex digits instead of 8: still unique",
    **{f"rlaunch.task.bootstrap.x_entrypoint_command__mutmut_{n}": _UTF8 for n in (10, 13, 17)},
    "rlaunch.task.bootstrap.x_wait_for_outcome__mutmut_1": "poll every 2 s instead of 1 s: the same outcome, later",
    "rlaunch.task.bootstrap.x_wait_for_outcome__mutmut_13": "the wait's name: it has no timeout, so no message shows it",
    **{
        f"rlaunch.task.bootstrap.x_wait_for_outcome__mutmut_{n}": "poll every 0.05 s instead of 1 s (no timeout, "
        "so the name is never shown): the same outcome, sooner"
        for n in (17, 18)
    },
    "rlaunch.task.bootstrap.xǁSignalledǁ__init____mutmut_5": "the previous handlers start as None instead of []: "
    "__enter__ always replaces them before __exit__ reads them",
    **{
        f"rlaunch.task.bootstrap.xǁSignalledǁ__exit____mutmut_{n}": "zip's strict flag: the previous handlers are "
        "one per signal by construction, so the lengths always match"
        for n in (3, 6, 7)
    },
    # submission (not yet measured: the 2026-12-06 equivalents named functions that moved into rlaunch.submission)
    # observe_verdict
    "rlaunch.observe.verdict.x_model_path_active__mutmut_79": "(identity or 'XXXX').partition(':')[2] is '' "
    "for a missing identity either way",
    "rlaunch.observe.collect.x__steps__mutmut_70": "len(records) >= 1 instead of > 1 beside t1 > t0: one record "
    "is both first and last, so t1 == t0 and no rate either way",
    "rlaunch.observe.collect.x_launch_document__mutmut_12": "the artifact record read under an output path that "
    "does not exist: read_json finds no file there and returns None either way",
    "rlaunch.observe.collect.x__export__mutmut_9": "terminal.uri or 'XXXX': a terminal manifest that exists was "
    "read at its uri, so the uri is never empty there",
    **{
        f"rlaunch.observe.collect.x__export__mutmut_{n}": "the export root without a document: with no document "
        "there is no checkpoint root, so no latest step, and the guess is never made"
        for n in (23, 24)
    },
    "rlaunch.observe.collect.x_collect__mutmut_207": "_export's output path None: it is read only without a "
    "document, and then there is no latest checkpoint to guess an export from",
    # launch_config
    **{
        f"rlaunch.launch_config.typed.x__describe__mutmut_{n}": "the str(tp) fallback: every type a Union option "
        "can be has a __name__ (Python 3.11+), so it is never reached"
        for n in (6, 9, 10, 11, 12, 13, 14, 15, 16)
    },
    "rlaunch.launch_config.geometry.xǁGeometryǁfrom_recipe__mutmut_126": "an absent fully-async flag read as None "
    "instead of False: not None and not False are both True",
    "rlaunch.launch_config.composition.x_compose__mutmut_8": "root prefix None instead of '': both are falsy wherever "
    "it is read",
    **{
        f"rlaunch.launch_config.composition.x__merge__mutmut_{n}": "get_close_matches n=3 or n=2 instead of 1: only the "
        "best match is read, and it comes first whatever n"
        for n in (53, 56)
    },
    # host
    "rlaunch.host.validate.xǁDocumentRefusedǁ__init____mutmut_6": "what='launch document' dropped: it is "
    "DocumentError's default",
    "rlaunch.host.validate.x_validate_planned__mutmut_11": "rendered None for the rules: check reads it only to "
    "compose, and the planned launch's composition is passed",
    **{
        f"rlaunch.host.validate.x_validate_planned__mutmut_{n}": "the planned launch's composition not passed: check "
        "composes doc.skyrl on the same profile again and derives the same geometry from it"
        for n in (12, 15)
    },
    # artifacts
    "rlaunch.artifacts.fingerprint.x_canonical_json__mutmut_8": "ensure_ascii=True dropped: it is json.dumps's default",
    "rlaunch.artifacts.fingerprint.x_fingerprint_hash__mutmut_4": "encode('UTF-8') instead of 'utf-8': the same codec",
    "rlaunch.artifacts.runner.xǁRunnerǁ__init____mutmut_2": "poll a held lock every 1.5 s instead of 0.5 s: the same outcome, later",
    "rlaunch.artifacts.runner.xǁRunnerǁ_execute__mutmut_6": (
        "pool without max_workers: the runner never has more than max_concurrent steps submitted"
    ),
    "rlaunch.artifacts.runner.xǁRunnerǁ_execute__mutmut_34": (
        "one more step submitted than max_concurrent: it waits in the pool's queue (max_workers bounds what runs)"
    ),
    "rlaunch.artifacts.runner.xǁRunnerǁ_execute__mutmut_41": (
        "break instead of continue when nothing runs: after a scan deps-first, nothing running means all are done"
    ),
    **{
        f"rlaunch.artifacts.runner.xǁRunnerǁ_build__mutmut_{n}": "the waiting line's flag appended as None or False: "
        "the list is not empty either way, so the line is said once"
        for n in (17, 18)
    },
    **{
        f"rlaunch.artifacts.runner.xǁRunnerǁ_build__mutmut_{n}": "the wait's description or poll interval dropped: "
        "it has no deadline, so the description is never said, and the default interval only changes when it looks"
        for n in (23, 27, 28)
    },
    **{
        f"rlaunch.artifacts.runner.xǁRunnerǁ_build__mutmut_{n}": (
            "no load= for the run context: StepContext falls back to the same dep.artifact_type.load(dep.path(prefix))"
        )
        for n in (56, 59)
    },
    "rlaunch.artifacts.runner.xǁRunnerǁ_run_job__mutmut_40": "the step's name not passed to function_path: it names "
    "the step only in a refusal, and the step was built (and so its function checked) before it runs",
    "rlaunch.artifacts.lock.xǁStepLockǁis_stale__mutmut_9": "a lock that never beat counts from 1 s after the epoch, not 0: stale either way",
    "rlaunch.artifacts.lock.xǁStepLockǁis_stale__mutmut_10": "stale at exactly the limit, not only past it: a float clock never lands on it",
    "rlaunch.artifacts.lock.xǁStepLockǁis_stale__mutmut_26": "missing pid read as -2 instead of -1: process_alive is False for every pid <= 0",
    "rlaunch.artifacts.lock.xǁStepLockǁtry_acquire__mutmut_13": "9 hex digits in the moved-aside lock's name instead of 8: still unique",
    "rlaunch.artifacts.lock.xǁStepLockǁtry_acquire__mutmut_23": "still_stale = None instead of False: equally falsy",
    **{
        f"rlaunch.artifacts.lock.xǁStepLockǁrelease__mutmut_{n}": (
            "a longer join timeout: a stopped heartbeat thread exits at its next wake-up, well within either"
        )
        for n in (2, 4)
    },
    # adapter_guards
    "rlaunch_trl_cpu.checkpoints.xǁCheckpointStoreǁprune__mutmut_1": "keep < 0 instead of keep <= 0: with keep 0, "
    "steps[:-0] is empty, so nothing is removed either way",
    "rlaunch_skyrl.checkpoints.x__read__mutmut_4": "decode('UTF-8') instead of 'utf-8': the same codec",
    "rlaunch_skyrl.checkpoints.x_mirror__mutmut_14": "rstrip(None) instead of rstrip('/'): fsspec's ls(detail=False) "
    "names carry neither a trailing '/' nor whitespace",
    "rlaunch_skyrl.checkpoints.x_mirror__mutmut_18": "ls(detail=None) instead of detail=False: equally falsy, names",
    "rlaunch_skyrl.checkpoints.x_mirror__mutmut_15": "lstrip('/') instead of rstrip('/'): a leading '/' never reaches "
    "basename's answer, and ls names end without one",
    "rlaunch_skyrl.checkpoints.x_mirror__mutmut_16": "rstrip('XX/XX') also strips a trailing 'X': a step directory's "
    "name ends in a digit",
    "rlaunch_skyrl.checkpoints.x__manifest__mutmut_9": "fs.open(path) without 'rb': fsspec's open defaults to mode 'rb'",
    **{
        f"rlaunch_skyrl.checkpoints.x__manifest__mutmut_{n}": "another block size for the streamed sha256 (or the whole "
        "file at once): the same digest"
        for n in (17, 19, 20)
    },
    # control
    "rlaunch.control.finalise.x_finalise_open_attempts__mutmut_30": "attempt id None for effective_state: it is "
    "compared only with a terminal manifest's, and the Terminal() passed here does not exist",
    # statefiles
    **{
        f"rlaunch.statefiles.x_fix_for__mutmut_{n}": "rsplit('/') with another maxsplit: [-1] is the same last part"
        for n in (5, 11)
    },
    **{
        f"rlaunch.statefiles.x_fix_for__mutmut_{n}": "rstrip('XX/XX') also strips a trailing 'X': no state file's "
        "name ends in X, and a generic file's fix names the source itself, not its base"
        for n in (9, 24)
    },
    "rlaunch.statefiles.x_parse_json__mutmut_4": "decode('UTF-8') instead of 'utf-8': the same codec",
    "rlaunch.statefiles.x_parse_step_marker__mutmut_4": "decode('UTF-8') instead of 'utf-8': the same codec",
    # paths
    **{
        f"rlaunch.paths.x_location_problem__mutmut_{n}": "the '..' check on the whole URL instead of the part after "
        "its scheme: a scheme ('gs:') and the empty part after it are never '..'"
        for n in (13, 23)
    },
    "rlaunch.paths.x_remove_inside__mutmut_7": "follow_last=None instead of False: equally falsy",
    # storage_atomic
    "rlaunch.storage.x_dumps__mutmut_15": "encode('UTF-8') instead of 'utf-8': the same codec",
    "rlaunch.storage.x_write_text_atomic__mutmut_7": "encode('UTF-8') instead of 'utf-8': the same codec",
    # resume
    "rlaunch.runs.resume.x_run_fingerprint__mutmut_18": "encode('UTF-8') instead of 'utf-8': the same codec",
    "rlaunch.runs.resume.x_run_fingerprint__mutmut_5": "allow_nan=None instead of False: equally falsy, NaN still "
    "refused",
    "rlaunch.runs.resume.x_fall_back__mutmut_15": "rstrip('XX/XX') also strips a trailing 'X': a skipped "
    "checkpoint's directory is global_step_<N>, whose name ends in a digit",
    # secrets
    **{
        f"rlaunch.secrets.xǁScrubberǁsafe_cut__mutmut_{n}": "searching for a value from the start: the extra spans "
        "lie wholly before the cut, and only a span around the cut moves it"
        for n in (14, 16)
    },
    "rlaunch.secrets.xǁScrubberǁsafe_cut__mutmut_28": "an occurrence starting exactly at the cut is collected too: "
    "it does not straddle the cut, so it moves nothing",
    "rlaunch.secrets.xǁScrubberǁsafe_cut__mutmut_44": "start <= cut: a span starting at the cut sets the cut to itself",
    **{
        f"rlaunch.secrets.x_refuse_secret_arguments__mutmut_{n}": "another split of the option before a value: that "
        "option holds no '=' here (an '--opt=value' naming a secret is refused at itself, one argument earlier)"
        for n in (23, 24, 27, 28)
    },
    **{
        f"rlaunch.secrets.x_refuse_secret_arguments__mutmut_{n}": "split('=') with another maxsplit: [0] is the same"
        for n in (50, 53)
    },
    **{
        f"rlaunch.secrets.x__names_a_secret__mutmut_{n}": "another split at '=': no option reaching it holds '=' "
        "(partitioned before, or refused at itself), and environment names hold none"
        for n in (14, 15, 19, 20)
    },
    **{
        f"rlaunch.secrets.x__names_a_secret__mutmut_{n}": "strips other characters at the start of the name: no "
        "secret-name pattern is anchored at the start"
        for n in (16, 18)
    },
    # slurm_queue
    "rlaunch.cluster.slurm.commands.x_queue_entry__mutmut_30": "'XXXX' instead of '' for an unknown job's queue "
    "answer: a text without '|' holds no row either, so accounting is asked the same",
    "rlaunch.cluster.slurm.commands.x_job_nodes__mutmut_36": "'' no longer a no-node answer: the output is stripped "
    "before it is split, so a first line is never blank",
    # damaged_record
    "rlaunch.observe.recover.x__documents__mutmut_21": "an absent document parsed anyway: from_dict_tolerant(None) "
    "is None, the same as skipping it",
    "rlaunch.observe.recover.x__documents__mutmut_27": "rpartition instead of partition at '@': an artifact "
    "identity holds one '@'",
    "rlaunch.observe.recover.x__documents__mutmut_29": "'XXXX' for an unknown artifact: it has no '@', so no "
    "version, and the handed-over documents are not searched either way",
    # preflight: a default of False read through `not`, given as None instead: both falsy
    **{
        name: "default False -> None under `not`: both falsy"
        for name in (
            "rlaunch.rules.megatron.x__routed_experts__mutmut_4",
            "rlaunch.rules.roles.x_role_rules__mutmut_39",
            "rlaunch.rules.roles.x_role_rules__mutmut_57",
            "rlaunch.rules.megatron.x__fp8__mutmut_55",
            "rlaunch.rules.megatron.x__fp8__mutmut_65",
            "rlaunch.rules.megatron.x__routing_replay__mutmut_5",
            "rlaunch.rules.megatron.x__routing_replay__mutmut_60",
        )
    },
    "rlaunch.rules.topology.x_topology_rules__mutmut_142": "the critic's nodes subtracted without a dedicated critic: "
    "then it has no nodes (no critic), or is colocated (this branch is not), or has no GPUs (refused as non-positive "
    "before the topology rules run)",
    "rlaunch.rules.x_fit_rules__mutmut_4": "suggest=None instead of False: falsy, no fits suggested either way",
    **{
        f"rlaunch.rules.roles.x_role_rules__mutmut_{n}": "default critic sequence parallelism None or 2 for 1: only 0 "
        "is refused, and every base config has the key"
        for n in (5, 11)
    },
    # memory: defaults of keys every base config carries with a value (a composed recipe never reads them)
    **{
        f"rlaunch.rules.memory.{function}__mutmut_{n}": "default of a key every base config carries with a value: "
        "the memory model reads composed recipes, which never lack it"
        for function, numbers in (
            ("training.x_training_rows", (17, 19, 25, 27, 30, 69, 71, 72, 133, 135, 136, 219, 221, 224)),
            ("training.x_reference_row", (44, 46, 49, 67, 69, 72)),
            ("training.x__micro_tokens", (4, 6, 9, 10)),
            ("training.x__fsdp_shard", (8,)),
            ("training.x__lora", (4, 6, 7)),
            ("rows.x_max_model_len", (19, 21, 24, 28, 30, 33)),
            ("rollout.x_engine_kv", (13, 15, 18, 19, 62, 64, 67, 71, 73, 76, 80, 82, 85, 91, 93, 96)),
        )
        for n in numbers
    },
    **{
        f"rlaunch.rules.fit.x__longest_generation__mutmut_{n}": "default of max_generate_length, which every base "
        "config carries with a value"
        for n in (7, 11, 12)
    },
    "rlaunch.rules.fit.x__offload_all__mutmut_27": "default False -> None under `not`: both falsy",
    **{
        f"rlaunch.rules.memory.table.x_estimate__mutmut_{n}": "rows = for rows += as the first rows go in: rows is empty"
        for n in (37, 78)
    },
    "rlaunch.rules.memory.table.x_estimate__mutmut_53": "cpu=None for the critic's rows: falsy, as cpu=False",
    "rlaunch.rules.memory.training.x__fsdp_shard__mutmut_13": "fsdp_size equal to the world taken as no size: the shard is "
    "the world either way",
    **{
        f"rlaunch.rules.memory.training.x_reference_row__mutmut_{n}": "the reference's token split asked for another role (or "
        "cpu=None): every role but the policy and the critic reads the reference's sequence parallelism, and None is falsy"
        for n in (75, 76, 80, 81)
    },
    **{
        f"rlaunch.rules.model_shape.xǁArchitectureǁlayer_params__mutmut_{n}": "the default of max() over the layer "
        "runs: a model has at least one layer (a count of 0 is not sized), so there is always a run"
        for n in (2, 4, 5)
    },
    "rlaunch.rules.model_shape.xǁArchitectureǁlayer_runs__mutmut_15": "an MoE layer's size without MoE layers: "
    "runs of no layers are dropped",
    **{
        f"rlaunch.rules.model_shape.xǁArchitectureǁstored_bytes__mutmut_{n}": "the experts' component misnamed where "
        "the model is unquantized (every component in the engine's dtype) or has no routed experts (0 of them)"
        for n in (37, 41, 42)
    },
    **{
        f"rlaunch.rules.memory.training.x_training_rows__mutmut_{n}": "the micro batch's key misspelt: its default, the "
        "geometry's micro batch, is the value the role plan rendered under that key"
        for n in (20, 21)
    },
    **{
        f"rlaunch.rules.memory.rollout.x_engine_kv__mutmut_{n}": "the fallback of DTYPE_BYTES.get for the engine's dtype: "
        "only an unknown dtype reads it, and every base config names a known one"
        for n in (8, 10, 20)
    },
    **{
        f"rlaunch.rules.memory.rollout.x_kv_cache_bytes__mutmut_{n}": "another default than 'auto' for kv_cache_dtype: any "
        "word that is not a dtype means the model's own, as 'auto' does"
        for n in (4, 6, 9, 10)
    },
    # memory
    **{
        f"rlaunch.rules.fit.x_nearest_fits__mutmut_{n}": "memory codes counted among the plan's known ones: only "
        "the fewest-nodes search reads them before the whole table is judged, where a refused engine row would stop it "
        "one count early; more policy nodes change no engine's per-GPU rows, and a plan is offered only if every row is ok"
        for n in (20, 21)
    },
    "rlaunch.rules.fit.x__fewest_nodes__mutmut_36": "the rollout nodes added to a colocated plan's nodes: it has none "
    "of its own (num_nodes is the policy's)",
    **{
        f"rlaunch.rules.fit.x__largest_micro_batch__mutmut_{n}": "a micro batch of 1 (or 0) searched: no divisor "
        "is smaller, the search finds nothing either way"
        for n in (2, 6)
    },
    "rlaunch.rules.fit.x__offload__mutmut_45": "default False -> None under all(): both falsy",
    "rlaunch.rules.fit.xǁChangeǁtext__mutmut_3": "str(value).lower() for every value: a change's value is a bool "
    "or an int, whose text has no capitals",
    "rlaunch.rules.fit.xǁ_Searchǁvariant__mutmut_16": "topology.* or *.num_nodes as the node count: the only "
    "topology change is num_nodes, and no recipe key ends in num_nodes",
    "rlaunch.rules.model_shape.x__quantization__mutmut_100": "group >= 0 for group > 0: a group of 0 is read as "
    "128 (group_size or 128), so the group is never 0",
    "rlaunch.rules.memory.rollout.x_kv_tokens__mutmut_2": "available < 0 instead of <= 0: 0 bytes hold 0 whole blocks either "
    "way",
    "rlaunch.rules.memory.table.x_memory_rules__mutmut_2": "no subject for the violations: only a table without a device "
    "reads it, and table_for gives such a table no rows",
    # hub_sources
    **{
        f"rlaunch.sources.hub.x__publish__mutmut_{n}": "another chunk size for the streamed sha256 (or the whole file "
        "at once): the same digest"
        for n in (46, 48, 49)
    },
    **{f"rlaunch.sources.hub.x__architecture__mutmut_{n}": _UTF8 for n in (11, 13, 15)},
    # failures
    **{
        f"rlaunch.launch_config.failures.x__signal__mutmut_{n}": "another bound of the signal arithmetic: only "
        "SIGKILL (9) and SIGTERM (15) are looked up, from exit codes -9, -15, 137 and 143, which every variant reads "
        "the same; the codes it moves (0, 1, 128, 129, 160) give no signal in SIGNALS either way"
        for n in (4, 5, 6, 9, 12, 13, 14, 15)
    },
    **{
        f"rlaunch.launch_config.failures.x_classify__mutmut_{n}": "(failure or 'XXXX') where failure is already "
        "known truthy, or read for signatures when None: 'XXXX' matches none"
        for n in (6, 52, 70)
    },
    "rlaunch.launch_config.failures.x__found__mutmut_10": "next() without a default over the groups of a place "
    "pattern that matched: each alternative's group is \\S+, so one is never empty",
    # preflight
    "rlaunch.rules.subject.x_divisors__mutmut_1": "n < 0 instead of n <= 0: for n = 0 the search (d * d <= n) never runs",
    **{
        f"rlaunch.rules.defect_triggers.x__step_wise__mutmut_{n}": "default of generator.step_wise_trajectories: every "
        "base config has the key, so the composed recipe never lacks it"
        for n in (4, 7, 10)
    },
    "rlaunch.rules.defect_triggers.x_findings__mutmut_8": "TRIGGERS.get(None) is None: a defect without a trigger has none either way",
    **{
        f"rlaunch.rules.batches.x_strategy_sizes__mutmut_{n}": "default of a Megatron size: every base config has "
        "each key, so the composed recipe never lacks one"
        for n in (10, 13, 14)
    },
    "rlaunch.rules.batches.x_strategy_sizes__mutmut_20": "break instead of continue after a null "
    "expert_tensor_parallel_size: it is the last of MEGATRON_SIZES, so both end the inner loop",
    "rlaunch.rules.recipe_rules.x_recipe_rules__mutmut_205": "turns >= 1 instead of turns > 1 before max_input < prompt: "
    "with one turn max_input != prompt already holds",
    "rlaunch.rules.recipe_rules.x_plan_disagreements__mutmut_27": "no default for a base-config value: every key the role "
    "plan renders into is in every base config",
    "rlaunch.rules.runtime_rules.x_runtime_rules__mutmut_164": "unsupported_settings on a runtime that honours every key "
    "with any value: it finds nothing, the composed recipe has only base-config keys",
    "rlaunch.rules.x_composed_rules__mutmut_6": "out = instead of out += for the first rules: out is still empty",
    **{
        name: "no geometry handed on: it is derived from the same composed recipe the given one was derived from"
        for name in (
            "rlaunch.rules.x_composed_rules__mutmut_22",
            "rlaunch.rules.x_check__mutmut_18",
            "rlaunch.rules.x_check__mutmut_22",
        )
    },
    **{
        f"rlaunch.skyrl.preflight.x_check_plan__mutmut_{n}": "the seed rendered into the recipe: no rule reads the "
        "composed trainer.seed (the seed rule compares the recipe as written)"
        for n in (28, 31)
    },
}


@dataclass(frozen=True)
class Score:
    area: str
    killed: int
    survived: int
    no_tests: int
    timeout: int
    seconds: float
    survivors: tuple[str, ...]

    @property
    def equivalent(self) -> int:
        return sum(1 for name in self.survivors if name in EQUIVALENT)

    @property
    def score(self) -> float:
        """killed / judged, equivalent mutants excluded from both."""
        caught = self.killed + self.timeout
        judged = caught + self.survived - self.equivalent + self.no_tests
        return caught / judged if judged else 1.0


def mutmut_section(area: Area) -> str:
    def toml_list(items: tuple[str, ...] | list[str]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    missing = [t for t in area.tests if not (REPO / t).exists()]
    if missing:  # a moved test file would otherwise leave its area unguarded and its score high
        raise SystemExit(f"area {area.name}: no test file {', '.join(missing)}; fix its tests in AREAS")
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"only_mutate = {toml_list(area.mutate)}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(area.tests)}\n"
        f"pytest_add_cli_args = {toml_list([*FAST[1:], *(f'--deselect={t}' for t in area.deselect)])}\n"
        'also_copy = ["experiments", "benchmarks"]\n'  # tests import the experiments and benchmark scripts
        "use_git_change_detection = false\n"
    )


def run_area(area: Area, scratch: Path, children: int) -> Score:
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, scratch / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, scratch / name)
    for package in area.relocate:
        shutil.move(scratch / package, scratch / "src" / Path(package).name)
    with open(scratch / "pyproject.toml", "a", encoding="utf-8") as handle:
        handle.write(mutmut_section(area))
    mutmut = [sys.executable, "-m", "mutmut"]
    env = {**os.environ, "PYTHONPATH": f"{scratch}{os.pathsep}{scratch / 'src'}"}
    started = time.monotonic()
    done = subprocess.run(
        [*mutmut, "run", "--max-children", str(children), *area.only],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"mutmut run failed for {area.name} ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    seconds = time.monotonic() - started
    subprocess.run([*mutmut, "export-cicd-stats"], cwd=scratch, env=env, capture_output=True, check=True)
    stats = json.loads((scratch / "mutants" / "mutmut-cicd-stats.json").read_text())
    results = subprocess.run([*mutmut, "results"], cwd=scratch, env=env, capture_output=True, text=True).stdout
    survivors = tuple(
        line.split(":")[0].strip() for line in results.splitlines() if line.strip().endswith(": survived")
    )
    return Score(area.name, stats["killed"], stats["survived"], stats["no_tests"], stats["timeout"], seconds, survivors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--area", action="append", choices=[a.name for a in AREAS], help="repeatable; default: all")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--survivors", action="store_true", help="list every surviving mutant")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories (for mutmut show)")
    args = parser.parse_args(argv)
    try:
        import mutmut  # noqa: F401
    except ImportError:
        raise SystemExit("benchmarks/mutation.py needs mutmut: .venv/bin/pip install 'mutmut==3.8.1'") from None
    chosen = [a for a in AREAS if not args.area or a.name in args.area]
    scores = []
    for area in chosen:
        scratch = Path(tempfile.mkdtemp(prefix=f"rlaunch-mutation-{area.name}-"))
        try:
            score = run_area(area, scratch, args.max_children)
        finally:
            if not args.keep:
                shutil.rmtree(scratch, ignore_errors=True)
        scores.append(score)
        where = f"  (kept: {scratch})" if args.keep else ""
        print(
            f"{score.area:<16} {score.score:6.1%}  killed {score.killed + score.timeout}, "
            f"survived {score.survived - score.equivalent} (+{score.equivalent} equivalent), "
            f"no tests {score.no_tests}  ({score.seconds:.0f}s){where}",
            flush=True,
        )
        if args.survivors:
            for name in score.survivors:
                reason = EQUIVALENT.get(name)
                print(f"    equivalent  {name}: {reason}" if reason else f"    survived    {name}")
    return 0 if all(s.score >= 0.9 for s in scores) else 1


if __name__ == "__main__":
    raise SystemExit(main())
