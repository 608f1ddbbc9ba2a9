"""The safety promises rlaunch makes, each with its guards and the tests that fail without them.

docs/guarantees.md's "What rlaunch guarantees" table is this table (tests/test_promises.py holds the
two together). A guard is named by the source file it lives in, the function or class that holds it
(`where`: "Class.method", "function", or a module-level name), and a weakening of it: the edit a real
bug would make (a deleted check, a widened pattern, absent read as fine, a prefix compare). Each edit
is located inside its holder, found by `ast`, and matched there with whitespace ignored, so
reformatting, moving or renaming code elsewhere in the file does not lose it. Applied to a copy of
the checkout, the weakening must make each of the guard's tests fail: that is the proof that the
promise's test notices when its guard is gone (tests/test_promises.py runs it).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Guard:
    path: str  # the source file, relative to the repository root
    edits: tuple[tuple[str, str], ...]  # (text, weakened text): each text occurs exactly once in the holder
    tests: tuple[str, ...]  # pytest node ids (parametrized ids included) that must fail weakened
    weakening: str  # what the edit does, in words
    where: str = ""  # the holder: "Class.method", "function" or a module-level name; "" the whole file (not Python)


@dataclass(frozen=True)
class Promise:
    text: str  # as the guarantees table states it
    guards: tuple[Guard, ...]

    @property
    def tests(self) -> tuple[str, ...]:
        return tuple(t for g in self.guards for t in g.tests)


def _one(path: str, old: str, new: str, weakening: str, *tests: str) -> Guard:
    """`path` is "file::holder" (the holder as in `Guard.where`), or a file alone for a non-Python file."""
    file, _, where = path.partition("::")
    return Guard(file, ((old, new),), tests, weakening, where)


class GuardNotFound(LookupError):
    """A guard's holder or guarded text is not (or not exactly once) where the table says."""


def holder_span(source: str, where: str) -> tuple[int, int]:
    """The character span of `where` in `source`: a (nested) function or class, or a module-level assignment."""
    if not where:
        return 0, len(source)
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    scope: list[ast.stmt] = ast.parse(source).body
    node: ast.stmt | None = None
    for name in where.split("."):
        node = next((n for n in scope if _defines(n, name)), None)
        if node is None:
            raise GuardNotFound(f"no {name!r} of {where!r} in the source")
        scope = getattr(node, "body", [])
    assert node is not None and node.end_lineno is not None and node.end_col_offset is not None
    first = getattr(node, "decorator_list", None) or [node]
    return starts[first[0].lineno - 1] + first[0].col_offset, starts[node.end_lineno - 1] + node.end_col_offset


def _defines(node: ast.stmt, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)


def _pattern(text: str) -> re.Pattern[str]:
    """`text` with any run of whitespace matching any run (or none, beside punctuation)."""
    parts = re.split(r"(\s+)", text.strip())
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(re.escape(part))
        else:
            between_words = parts[i - 1][-1:].isalnum() and parts[i + 1][:1].isalnum()
            out.append(r"\s+" if between_words else r"\s*")
    return re.compile("".join(out))


def locate(source: str, where: str, old: str) -> tuple[int, int]:
    """The span of the one occurrence of `old` inside the holder `where`; GuardNotFound otherwise."""
    lo, hi = holder_span(source, where)
    found = [(lo + m.start(), lo + m.end()) for m in _pattern(old).finditer(source[lo:hi])]
    if len(found) != 1:
        raise GuardNotFound(f"{old.strip()!r} occurs {len(found)} times in {where or 'the file'}")
    return found[0]


def weaken(source: str, guard: Guard) -> str:
    """`source` with the guard's edits applied, each where `locate` finds it."""
    for old, new in guard.edits:
        start, end = locate(source, guard.where, old)
        source = source[:start] + new.strip() + source[end:]
    return source


_STAGING = "tests/task/test_staging.py"
_RESUME = "tests/runs/test_resume_identity.py"
_GUARDS = "tests/runtimes/test_checkpoint_guards.py"
_SECRETS = "tests/cluster/test_secrets.py"
_STATE = "tests/cluster/test_state_files.py"
_DAMAGED = "tests/observe/test_damaged_record.py"
_VERDICT = "tests/observe/test_verdict_rules.py"
_STORAGE = "tests/artifacts/test_storage.py"
_DIGEST = "tests/runtimes/test_shipped_digest.py"
_TRL = "src/rlaunch/runtimes/adapters/trl_cpu/rlaunch_trl_cpu/checkpoints.py"
_SKYRL = "src/rlaunch/runtimes/adapters/skyrl/rlaunch_skyrl/checkpoints.py"

_GATES = "src/rlaunch/judgement/gates.py"
_HOST_GATES = "tests/judgement/test_host_gates.py"
_JUDGE = "src/rlaunch/judgement/judge.py"
_JUDGE_TABLE = "tests/judgement/test_one_judgement.py::test_the_dry_run_run_and_the_host_find_the_same_words"
_PINNED = "tests/sources/test_pinned_data.py"
_FAILURES = "tests/launch_config/test_failures.py"
_STEP_JOBS = "tests/cluster/test_step_jobs.py"
_CREDENTIALS = "tests/judgement/test_declared_credentials.py"
_PIN = "tests/runs/test_resume_from_pin.py"
_READ_ONLY = "tests/launch/test_read_only_prefix.py"
_OBSERVED = "tests/observe/test_observed_failure_class.py"

PROMISES = (
    Promise(
        "Nothing is staged that fails its checksum",
        (
            _one(
                "src/rlaunch/task/staging.py::_copy_all",
                "if rel in expected and digest != expected[rel]:",
                "if False:",
                "the sha256 check deleted",
                f"{_STAGING}::test_a_corrupted_file_is_refused_and_nothing_is_staged",
                f"{_STAGING}::test_a_corrupted_file_among_many_in_flight_is_refused_and_nothing_is_left",
            ),
        ),
    ),
    Promise(
        "No resume across runtimes",
        (
            _one(
                "src/rlaunch/runs/resume.py::accepts",
                "return info.runtime_digest in (digest, *accepted) and info.fingerprint in (fingerprint, *accepted)",
                "return info.fingerprint in (fingerprint, *accepted)",
                "the plan's and host's runtime digest compare deleted",
                f"{_RESUME}::test_both_digests_must_match",
            ),
            _one(
                f"{_TRL}::check_digest",
                "if written == current or written in compatible:",
                "if True:",
                "the trl-cpu adapter's digest compare deleted",
                f"{_GUARDS}::test_trl_cpu_resumes_only_the_same_runtime_and_run",
            ),
            _one(
                f"{_SKYRL}::guard",
                'if resume_mode == "latest" and has_checkpoint and previous not in (None, digest, *compatible):',
                "if False:",
                "the SkyRL adapter's digest guard deleted",
                f"{_GUARDS}::test_skyrl_guard_refuses_another_runtime_and_names_both",
            ),
        ),
    ),
    Promise(
        "No resume across runs (another recipe, plan or input)",
        (
            _one(
                "src/rlaunch/runs/resume.py::accepts",
                "return info.runtime_digest in (digest, *accepted) and info.fingerprint in (fingerprint, *accepted)",
                "return info.runtime_digest in (digest, *accepted)",
                "the plan's and host's fingerprint compare deleted",
                f"{_RESUME}::test_a_checkpoint_of_another_recipe_is_refused_naming_both_fingerprints",
            ),
            _one(
                "src/rlaunch/runs/resume.py::accepts",
                "and info.fingerprint in (fingerprint, *accepted)",
                "and info.fingerprint in (None, fingerprint, *accepted)",
                "a checkpoint without a fingerprint read as fine",
                f"{_RESUME}::test_a_checkpoint_without_a_fingerprint_is_refused",
            ),
            _one(
                f"{_TRL}::check_digest",
                "if fingerprint and written_run != fingerprint and written_run not in compatible:",
                "if fingerprint and written_run not in (None, fingerprint) and written_run not in compatible:",
                "the trl-cpu adapter reads a checkpoint without a fingerprint as fine",
                f"{_GUARDS}::test_trl_cpu_a_checkpoint_without_identity_is_not_resumed",
            ),
            _one(
                f"{_SKYRL}::guard",
                'and previous_run not in (None, "", fingerprint, *compatible)',
                "and False",
                "the SkyRL adapter's fingerprint guard deleted",
                f"{_GUARDS}::test_skyrl_guard_refuses_another_run_and_names_both",
            ),
        ),
    ),
    Promise(
        "No credential outside the allow-list reaches a job",
        (
            _one(
                "src/rlaunch/cluster/job_environment.py::base_environment",
                "return {k: v for k, v in source.items() if k in BASE_VARIABLES or k.startswith(BASE_PREFIXES)}",
                "return dict(source)",
                "the allow-list widened to the whole environment",
                "tests/cluster/test_local_gang.py::test_replica_environment_is_allow_listed_plus_spec_env",
            ),
        ),
    ),
    Promise(
        "No secret value in any log, record or printed error (forwarded credentials, token shapes, and every "
        "secret-named variable of the process that writes or prints)",
        (
            Guard(
                "src/rlaunch/secrets.py",
                (
                    ("text = text.replace(value, REDACTED)", "pass"),
                    ("data = data.replace(value, REDACTED.encode())", "pass"),
                ),
                (f"{_SECRETS}::test_the_launchers_own_secrets_reach_neither_log_files_nor_the_followed_output",),
                "secret values no longer replaced",
                where="Scrubber",
            ),
            _one(
                "src/rlaunch/secrets.py::_SHAPES",
                "for _, pattern in TOKEN_SHAPES))",
                "for _, pattern in TOKEN_SHAPES[:1]))",
                "every token shape but the first dropped from the pattern",
                f"{_SECRETS}::test_token_shapes_are_scrubbed_without_being_in_the_environment",
            ),
            _one(
                "src/rlaunch/secrets.py::_SECRET_NAME",
                "|CREDENTIAL|(?:^|_)KEY$)",
                "|CREDENTIAL)",
                "names ending in _KEY no longer secret",
                f"{_SECRETS}::test_secret_names",
            ),
            _one(
                "src/rlaunch/cluster/gang/supervisor.py::Supervisor.__init__",
                "Scrubber.for_process(env, known=known or ())",
                "Scrubber.for_process(env)",
                "the supervisor forgets the submitter's secrets",
                f"{_SECRETS}::test_the_launchers_own_secrets_reach_neither_log_files_nor_the_followed_output",
            ),
            _one(
                "src/rlaunch/secrets.py::refuse_secrets_in",
                "    elif isinstance(value, str):\n        kind = secret_kind(value)",
                "    elif False:\n        kind = secret_kind(value)",
                "a credential in a document no longer refused",
                f"{_SECRETS}::test_a_document_carrying_a_credential_is_refused_naming_the_field",
            ),
            _one(
                "src/rlaunch/secrets.py::TOKEN_SHAPES",
                "(?:AKIA|ASIA)[0-9A-Z]{16}",
                "AKIA[0-9A-Z]{16}",
                "temporary AWS key ids (ASIA...) no longer a token shape",
                f"{_SECRETS}::test_temporary_aws_keys_are_scrubbed_as_long_lived_ones",
            ),
        ),
    ),
    Promise(
        "Damaged state is never read as absent",
        (
            _one(
                "src/rlaunch/statefiles.py::parse_json",
                '        problem = "empty file" if not data.strip() else f"not valid JSON: {exc}"\n'
                "        raise CorruptStateError(source, problem) from None",
                "        return None",
                "a file that does not parse read as missing",
                f"{_STATE}::test_a_damaged_step_status_names_its_file",
                f"{_STATE}::test_jobs_list_reports_a_damaged_job_and_lists_the_rest",
            ),
            _one(
                "src/rlaunch/statefiles.py::parse_step_marker",
                "if not value.isdigit() or not value.isascii():",
                "if False:",
                "a checkpoint marker's step number unchecked",
                f"{_STATE}::test_a_non_integer_latest_marker_names_the_file_and_the_fix",
            ),
            _one(
                "src/rlaunch/observe/collect.py::collect",
                "if ref.damage and not attempt:",
                "if False:",
                "a damaged record with nothing else to say shown as pending",
                f"{_STATE}::test_a_damaged_record_that_nothing_else_explains_is_damaged_not_pending",
            ),
        ),
    ),
    Promise(
        "A damaged run record still reports what the other durable state says",
        (
            _one(
                "src/rlaunch/observe/resolve.py::at_path",
                "record = recovered_record(output_path, artifact, prefix)",
                "record = None",
                "nothing rebuilt from the terminal manifest and the attempt manifests",
                f"{_DAMAGED}::test_status_shows_the_damage_and_what_the_other_state_says",
            ),
        ),
    ),
    Promise(
        "A smoke passes only when every criterion holds",
        (
            _one(
                "src/rlaunch/observe/verdict.py::run_succeeded",
                'if s.state == "succeeded":',
                'if s.state in ("succeeded", "running"):',
                "a running run counted as succeeded",
                f"{_VERDICT}::test_running_is_never_a_success_even_with_everything_else_in_place",
            ),
            _one(
                "src/rlaunch/observe/verdict.py::run_succeeded",
                "if s.damage:  #",
                "if False:  #",
                "a damaged record's rebuilt attempt counted as a success",
                f"{_DAMAGED}::test_status_json_carries_the_damage_and_the_smoke_verdict_fails",
            ),
            _one(
                "src/rlaunch/observe/verdict.py::tasks_joined",
                "elif t.missing_trainers:",
                "elif False:",
                "missing trainer processes ignored",
                f"{_VERDICT}::test_a_missing_trainer_process_fails_the_join_criterion",
            ),
            _one(
                "src/rlaunch/observe/verdict.py::model_path_active",
                "if not m.configured_path or not is_staged_copy(m.configured_path, m.configured, s.attempt_id):",
                "if not m.configured_path:",
                "any configured path accepted as the attempt's staged copy",
                f"{_VERDICT}::test_a_model_staged_for_another_attempt_is_not_the_configured_path",
            ),
            _one(
                "src/rlaunch/observe/verdict.py::steps_advance",
                "if st.count < 2:",
                "if st.count < 1:",
                "one recorded step counted as advancing",
                f"{_VERDICT}::test_a_single_step_or_steps_going_backwards_do_not_advance",
            ),
            _one(
                "src/rlaunch/observe/verdict.py::terminal_metadata",
                "elif s.attempt_id and t.attempt_id != s.attempt_id:",
                "elif False:",
                "another attempt's terminal manifest accepted",
                f"{_VERDICT}::test_a_checkpoint_from_another_runtime_or_before_the_last_step_is_not_terminal",
            ),
            _one(
                "src/rlaunch/observe/verdict.py::terminal_metadata",
                "    elif not t.attempt_id:",
                "    elif False:",
                "a terminal manifest naming no attempt accepted as the attempt's",
                f"{_VERDICT}::test_a_terminal_manifest_naming_no_attempt_is_no_attempts",
            ),
            _one(
                "src/rlaunch/observe/collect.py::effective_state",
                "and attempt_id and terminal.attempt_id == attempt_id:",
                "and terminal.attempt_id in (None, attempt_id):",
                "a terminal manifest naming no attempt makes any attempt succeeded",
                f"{_VERDICT}::test_a_terminal_manifest_naming_no_attempt_never_makes_an_attempt_succeeded",
            ),
        ),
    ),
    Promise(
        "Identities and digests are compared in full",
        (
            _one(
                "src/rlaunch/observe/verdict.py::model_path_active",
                "if m.identity != m.expected_identity:",
                'if (m.identity or "")[:10] != (m.expected_identity or "")[:10]:',
                "the loaded model's identity compared by a prefix",
                f"{_VERDICT}::test_an_identity_differing_only_in_its_last_character_fails",
            ),
            _one(
                "src/rlaunch/rules/runtime_rules.py::source_digest",
                "if s.source_digest == installed:",
                "if s.source_digest[:16] == installed[:16]:",
                "the runtime digest compared by the 16 characters a plan prints",
                "tests/host/test_host_units.py::test_a_source_digest_differing_only_past_its_printed_part_is_refused",
            ),
            _one(
                "src/rlaunch/task/staging.py::verify_identity",
                '(fingerprint and record.get("fingerprint") != fingerprint)',
                '(fingerprint and str(record.get("fingerprint"))[:12] != fingerprint[:12])',
                "a staged input's fingerprint compared by the 12 characters its message prints",
                f"{_STAGING}::test_a_fingerprint_differing_only_past_its_printed_part_is_refused",
                "tests/task/test_step_entry.py::"
                "test_an_input_whose_fingerprint_differs_in_its_last_character_is_refused_before_anything_is_staged",
            ),
            _one(
                "src/rlaunch/sources/inputs.py::COMMIT",
                'COMMIT = re.compile(r"^[0-9a-f]{40}$")',
                'COMMIT = re.compile(r"^[0-9a-f]{7,40}$")',
                "an abbreviated commit accepted as a pinned hub revision",
                "tests/sources/test_pinned_revision.py::test_an_abbreviated_commit_is_not_a_pinned_revision",
                "tests/sources/test_pinned_revision.py::test_hex_of_any_other_length_is_refused_under_a_calendar_version",
            ),
        ),
    ),
    Promise(
        "Nothing is deleted outside its own root",
        (
            _one(
                "src/rlaunch/paths.py::inside",
                "if real == real_root or os.path.commonpath([real_root, real]) != real_root:",
                "if real == real_root:",
                "the confinement check reduced to 'not the root itself'",
                "tests/launch_config/test_confinement.py::test_staging_never_deletes_outside_its_root",
                "tests/launch_config/test_confinement.py::test_cleanup_refuses_a_symlink_that_leads_outside",
            ),
        ),
    ),
    Promise(
        "Nothing is written over what rlaunch does not own",
        (
            _one(
                "src/rlaunch/host/outputs.py::foreign_entries",
                'return [n for n in storage.list_names(url) if not (own(_ASIDE.sub("", n)) or _TEMPORARY.fullmatch(n))]',
                "return []",
                "every output root read as rlaunch's own",
                "tests/host/test_output_roots.py::test_the_host_refuses_before_writing_anything",
            ),
            _one(
                "src/rlaunch/host/outputs.py::_OWN",
                '"export_root": lambda n: bool(_STEP.fullmatch(n)),',
                '"export_root": lambda n: bool(_STEP.match(n)),',
                "an export root's step directory judged by its name's start (global_step_3_final read as rlaunch's)",
                "tests/host/test_output_roots.py::test_a_step_directory_of_someone_elses_naming_is_foreign",
            ),
        ),
    ),
    Promise(
        "A record is replaced whole or not at all, and an exclusive create never overwrites",
        (
            _one(
                "src/rlaunch/storage.py::write_bytes_atomic",
                "        tmp = _fsynced_temporary(path, data)\n        try:\n            os.replace(tmp, path)",
                '        with open(path, "wb") as handle:\n            handle.write(data)\n'
                "            os.fsync(handle.fileno())\n        tmp = path\n        try:\n            pass",
                "the record written in place",
                f"{_STORAGE}::test_an_atomic_write_interrupted_mid_way_leaves_the_old_file",
                f"{_STORAGE}::test_an_atomic_write_never_exposes_a_partial_file",
            ),
            _one(
                "src/rlaunch/storage.py::create_exclusive",
                "        try:\n            os.link(tmp, path)\n            return True",
                "        try:\n            os.replace(tmp, path)\n            os.link(path, tmp)\n            return True",
                "the exclusive create replaced by an overwrite",
                f"{_STORAGE}::test_create_exclusive_creates_once",
            ),
        ),
    ),
    Promise(
        "One source, one runtime digest (a wheel and a checkout agree)",
        (
            _one(
                "src/rlaunch/runtimes/registry.py::SHIPPED_PROFILE_FILES",
                'SHIPPED_PROFILE_FILES = ("*.yaml", "*.txt", "*.in", "*.toml")',
                'SHIPPED_PROFILE_FILES = ("*.yaml", "*.txt", "*.toml")',
                "requirements.in dropped from the digest's list",
                f"{_DIGEST}::test_no_file_of_a_runtime_is_left_out_of_the_shipped_list",
            ),
            _one(
                "pyproject.toml",
                '"runtimes/*/*.in", ',
                "",
                "requirements.in no longer shipped (main before this fix)",
                f"{_DIGEST}::test_package_data_is_the_declared_shipped_list",
                f"{_DIGEST}::test_a_wheel_gives_every_runtime_the_editable_installs_digest",
            ),
        ),
    ),
    Promise(
        "An RL step is launched only by the coordinator @rl_build_options submits",
        (
            _one(
                "src/rlaunch/artifacts/plan.py::refuse_foreign_steps",
                "    if foreign:\n",
                "    if False:\n",
                "any runner may build an RL step",
                # the dry run's case: without the guard the `--run` case and the runner's train the smoke (90 s)
                "tests/submission/test_submission_path.py::test_a_build_options_main_refuses_an_rl_step_before_building_anything[plan]",
            ),
        ),
    ),
    Promise(
        "A version is one runtime: an attempt under another runtime digest refuses the launch",
        (
            _one(
                f"{_GATES}::version_problem",
                "    if not undeclared:\n        return None",
                "    if True:\n        return None",
                "attempts under another runtime digest ignored",
                f"{_HOST_GATES}::test_an_attempt_under_another_runtime_refuses_the_version",
                "tests/judgement/test_version_wording.py::test_without_the_declaration_the_version_is_refused",
            ),
        ),
    ),
    Promise(
        "A failed or cancelled version is relaunched only with an authorised retry",
        (
            _one(
                f"{_GATES}::retry_problem",
                "if latest is None or authorised:",
                "if True:",
                "a retry needs no authorisation",
                f"{_HOST_GATES}::test_a_failed_version_needs_the_retry_authorisation_in_the_document",
            ),
            _one(
                "src/rlaunch/host/step_job.py::StepJobLauncher.run",
                "if refusal and self.retry is None:",
                "if False:",
                "a step job's retry needs no authorisation",
                f"{_STEP_JOBS}::test_a_failed_step_job_is_classified_and_relaunched_only_with_retry",
            ),
        ),
    ),
    Promise(
        "Where a step runs never changes its identity",
        (
            _one(
                "src/rlaunch/artifacts/step.py::ArtifactStep.fingerprint_payload",
                '"deps": sorted({dep.identity for dep in self.deps}),',
                '"deps": sorted({dep.identity for dep in self.deps}), "execution": repr(self.execution),',
                "the step's execution hashed into its fingerprint",
                "tests/artifacts/test_step_execution.py::test_placement_never_enters_the_fingerprint",
            ),
        ),
    ),
    Promise(
        "A large launch declares its smoke or carries a recorded reason",
        (
            _one(
                f"{_GATES}::smoke_problem",
                "    if large is None:\n        return None",
                "    if True:\n        return None",
                "a large launch without a smoke let through",
                f"{_HOST_GATES}::test_a_large_document_without_a_smoke_or_a_skip_is_refused",
                f"{_JUDGE_TABLE}[no-smoke]",
            ),
        ),
    ),
    Promise(
        "The dry run, --run and the launch host refuse with one judgement: a declared smoke must pass verify-smoke and have parity",
        (
            _one(
                f"{_JUDGE}::smoke_problems",
                'found += [f"smoke {declared.identity} does not pass verify-smoke: {c}" for c in smoke.failed]',
                "found += []",
                "a smoke that fails verify-smoke opens the gate",
                f"{_JUDGE_TABLE}[smoke-fails-verify-smoke]",
            ),
            _one(
                f"{_JUDGE}::smoke_problems",
                "found += smoke_parity(planned, declared.identity, smoke.attempts, smoke.document).problems()",
                "found += []",
                "a smoke of another shape opens the gate",
                f"{_JUDGE_TABLE}[smoke-differs-in-parity]",
            ),
        ),
    ),
    Promise(
        "Large is more nodes or GPUs than the thresholds, whatever the accelerator, or than the declared smoke that "
        "rehearses it; a declared smoke is never large",
        (
            _one(
                f"{_JUDGE}::_larger_than",
                "    if smoke is not None and smoke.gpus and allocated > smoke.gpus:",
                "    if False:",
                "a launch on more GPUs than its smoke judged small",
                "tests/judgement/test_gate_words.py::test_a_launch_bigger_than_its_smoke_is_large_and_one_its_size_is_not",
            ),
            _one(
                f"{_JUDGE}::_larger_than",
                "    if smoke is not None and smoke.num_nodes and alloc.num_nodes > smoke.num_nodes:",
                "    if False:",
                "a launch on more nodes than its smoke judged small",
                f"{_JUDGE_TABLE}[bigger-than-its-smoke]",
                "tests/judgement/test_gate_words.py::test_a_launch_bigger_than_its_smoke_is_large_and_one_its_size_is_not",
            ),
            _one(
                f"{_JUDGE}::_larger_than",
                "    if planned.gpus > gates.smoke_gate_gpus:",
                "    if False:",
                "the GPU threshold ignored",
                f"{_HOST_GATES}::test_large_is_more_nodes_or_gpus_than_the_thresholds_and_never_a_declared_smoke",
                "tests/judgement/test_smoke_gate.py::test_large_is_the_users_thresholds_whatever_the_accelerator",
            ),
            _one(
                f"{_JUDGE}::large",
                "    if planned.document.gates.is_smoke or planned.profile.rehearsal:",
                "    if planned.profile.rehearsal:",
                "a declared smoke judged large",
                f"{_HOST_GATES}::test_large_is_more_nodes_or_gpus_than_the_thresholds_and_never_a_declared_smoke",
                "tests/judgement/test_smoke_gate.py::test_large_is_the_users_thresholds_whatever_the_accelerator",
            ),
        ),
    ),
    Promise(
        "A large launch uses a calendar version",
        (
            _one(
                f"{_JUDGE}::judge",
                "    if why_large and is_mutable(version_name(document)):",
                "    if False:",
                "a large launch under a mutable version let through",
                f"{_JUDGE_TABLE}[mutable-version]",
            ),
        ),
    ),
    Promise(
        "A large launch names its terminal stage",
        (
            _one(
                f"{_JUDGE}::judge",
                "    if why_large and authorisations.default_stage:",
                "    if False:",
                "a large launch on a defaulted --stage let through",
                "tests/judgement/test_one_judgement.py::test_a_large_launch_whose_terminal_stage_came_from_its_default_is_refused[large-default-stage]",
            ),
        ),
    ),
    Promise(
        "Only what launches is judged: a served RL step gates nothing downstream",
        (
            _one(
                "src/rlaunch/submission/submission.py::judgement",
                "        if any(step is p for p in pending):",
                "        if True:",
                "a served step's resume check refuses the graph",
                "tests/judgement/test_served_step.py::test_a_served_rl_step_is_not_resumed_and_gates_nothing_downstream",
            ),
        ),
    ),
    Promise(
        "A launch declared small (a smoke, or thresholds raised) that the default thresholds call large says why",
        (
            _one(
                f"{_JUDGE}::judge",
                "    if small:",
                "    if False:",
                "a launch declared small let through without a reason",
                f"{_JUDGE_TABLE}[declared-small]",
                f"{_HOST_GATES}::test_large_is_more_nodes_or_gpus_than_the_thresholds_and_never_a_declared_smoke",
            ),
        ),
    ),
    Promise(
        "Every refusal of --run is a finding of the one judgement: the logger's credential and the resume pin too",
        (
            _one(
                f"{_JUDGE}::judge",
                "    missing = credentials_problem(logger_credentials(logger), evidence.credentials, logger=logger)",
                "    missing = None",
                "a logger's credential left to fail inside the job",
                f"{_JUDGE_TABLE}[logger-credential]",
            ),
            _one(
                f"{_JUDGE}::judge",
                '    found += [Finding("resume", evidence.resume)] if evidence.resume else []',
                "    found += []",
                "a checkpoint another run wrote, or a wrong pin, left to the host",
                f"{_JUDGE_TABLE}[resume-pin]",
                "tests/runs/test_resume_identity.py::test_the_host_refuses_a_foreign_checkpoint_before_submitting",
            ),
        ),
    ),
    Promise(
        "A launch is refused while a credential it declares is unset or empty, and the jobs get it by name, scrubbed",
        (
            _one(
                f"{_GATES}::credentials_problem",
                "    if not missing:\n        return None",
                "    if True:\n        return None",
                "--run and the host let a missing declared credential through",
                f"{_CREDENTIALS}::test_run_refuses_a_missing_declared_credential",
                f"{_CREDENTIALS}::test_the_host_refuses_a_document_whose_credential_is_missing",
            ),
            _one(
                f"{_GATES}::credentials_problem",
                "for name in declared if not env.get(name)]",
                "for name in declared if name not in env]",
                "a set-but-empty credential read as set",
                f"{_CREDENTIALS}::test_credentials_gate_tells_unset_from_set_but_empty",
                f"{_CREDENTIALS}::test_the_host_refuses_a_document_whose_credential_is_missing",
            ),
            _one(
                "src/rlaunch/secrets.py::secret_values",
                "if (is_secret_name(k) or k in listed) and",
                "if is_secret_name(k) and",
                "a declared credential's value no longer scrubbed in the job",
                f"{_CREDENTIALS}::test_declared_credentials_reach_the_jobs_by_name_and_are_scrubbed",
            ),
        ),
    ),
    Promise(
        "A pinned checkpoint (resume_from) is resumed only when its recorded runtime digest is the pinned one",
        (
            _one(
                "src/rlaunch/runs/resume.py::pinned_problem",
                "    if written != digest:",
                "    if False:",
                "the plan's, --run's and host's check of the pinned digest deleted",
                f"{_PIN}::test_a_digest_mismatch_in_the_pinned_root_is_refused_everywhere",
                f"{_PIN}::test_the_plan_and_run_refuse_a_pin_whose_digest_differs",
                f"{_PIN}::test_the_host_refuses_a_pin_whose_digest_differs_and_accepts_the_right_one",
            ),
            _one(
                f"{_SKYRL}::pinned_resume_path",
                "    if written != runtime_digest:",
                "    if False:",
                "the SkyRL adapter's pinned-digest check deleted",
                f"{_PIN}::test_a_digest_mismatch_in_the_pinned_root_is_refused_everywhere",
            ),
            _one(
                f"{_TRL}::pinned",
                "    if written != runtime_digest:",
                "    if False:",
                "the trl-cpu adapter's pinned-digest check deleted",
                f"{_PIN}::test_a_digest_mismatch_in_the_pinned_root_is_refused_everywhere",
            ),
        ),
    ),
    Promise(
        "A host resource the experiment did not state is shown as a default",
        (
            _one(
                "src/rlaunch/skyrl/views/readiness.py::_host_resources.value",
                'return f"{text} [default]" if name in defaults else text',
                "return text",
                "defaults shown like stated values",
                "tests/skyrl/test_readiness.py::test_host_resources_mark_every_default_for_every_role_and_the_coordinator",
            ),
        ),
    ),
    Promise(
        "Data rows carry the fields the runtime reads, checked before allocation",
        (
            _one(
                "src/rlaunch/rules/data_rules.py::data_rules",
                "                if row is None:\n",
                "                if True:\n",
                "rows lacking a field read as fine",
                f"{_PINNED}::test_a_dataset_missing_a_field_the_runtime_reads_is_refused_at_plan_time",
                f"{_PINNED}::test_the_rl_step_checks_data_built_in_the_same_run_before_the_host_allocates",
            ),
        ),
    ),
    Promise(
        "A failed attempt says whether its inputs or the machinery failed",
        (
            _one(
                "src/rlaunch/launch_config/failures.py::_found",
                "    for signature in SIGNATURES:",
                "    for signature in ():",
                "log signatures ignored",
                f"{_FAILURES}::test_a_failed_trainer_is_classified_in_the_record_and_in_status",
                f"{_FAILURES}::test_the_line_nearest_the_end_decides_and_a_refusal_names_its_rule",
            ),
            _one(
                "src/rlaunch/observe/collect.py::observed_failure_class",
                ", *(job.message for job in failed if job.message)])",
                "])",
                "the failed jobs' own word (Slurm's NODE_FAIL under the coordinator) ignored",
                f"{_OBSERVED}::test_a_node_set_down_under_the_coordinator_is_its_nodes_failure_not_an_interrupted_host",
            ),
        ),
    ),
    Promise(
        "The run record holds the W&B run the trainer used",
        (
            _one(
                "src/rlaunch/host/launch.py::_finish",
                'extra["wandb"] = wandb  # the run the trainer actually logged to',
                "pass",
                "the trainer's W&B evidence not recorded",
                "tests/judgement/test_wandb_run.py::test_the_wandb_run_the_trainer_used_is_in_the_run_record_and_status",
            ),
        ),
    ),
    Promise(
        "A cancelled run's status keeps every phase it reached, with the cancel",
        (
            _one(
                "src/rlaunch/observe/collect.py::_phases",
                "found = marker_phases(directory)",
                "found = {}",
                "the phases the record lacks not read from the attempt directory",
                "tests/observe/test_collect_files.py::test_phases_the_record_lacks_are_read_from_the_attempt_directory_and_the_cancel",
            ),
            _one(
                "src/rlaunch/observe/collect.py::_phases",
                'found["cancelled"] = cancelled.at',
                "pass",
                "the cancel not among the phases",
                "tests/control/test_cancel.py::test_a_cancel_keeps_every_phase_recorded_before_it_and_status_shows_the_cancel_among_them",
            ),
            _one(
                "src/rlaunch/task/bootstrap.py::_run_task",
                "_record_stop(doc, code, signalled.signum, phases)",
                "pass",
                "a stopped trainer's start and exit not kept",
                "tests/task/test_bootstrap.py::test_a_signal_while_the_trainer_runs_is_the_trainers_and_the_task_leaves_with_it_recording_no_outcome",
            ),
        ),
    ),
    Promise(
        "Read-only views tell the truth on a prefix they cannot write, and write nothing",
        (
            _one(
                "src/rlaunch/control/finalise.py::finalise_snapshot",
                "        if not cannot_write(exc):\n            raise\n        closed = False",
                "        raise\n        closed = False",
                "a read-only prefix's refusal raised from status",
                f"{_READ_ONLY}::test_a_dead_run_on_a_read_only_prefix_is_reported_failed_and_nothing_is_written",
            ),
            _one(
                "src/rlaunch/cluster/gang/engine.py::GangEngine._take_over",
                "            if not cannot_write(exc):\n                raise\n            return state",
                "            raise\n            return state",
                "a dead supervisor's outcome reconciled only when it can be written",
                f"{_READ_ONLY}::test_a_dead_run_on_a_read_only_prefix_is_reported_failed_and_nothing_is_written",
            ),
        ),
    ),
    Promise(
        "A checkpoint that fails its manifest (sizes, sha256) is never resumed",
        (
            _one(
                "src/rlaunch/runs/resume.py::verified_resume",
                "        problem = checkpoint_problem(path)\n",
                "        problem = None\n",
                "checkpoints resumed unverified",
                "tests/runtimes/test_checkpoint_manifest.py::test_resume_falls_back_to_the_newest_checkpoint_that_verifies",
                "tests/launch/test_damaged_checkpoint.py::"
                "test_a_truncated_latest_checkpoint_is_skipped_and_the_retry_resumes_the_previous_good_one",
            ),
        ),
    ),
    Promise(
        "A full disk is named with its path and the next step in the record, status and the submitter",
        (
            _one(
                "src/rlaunch/host/launch.py::_finish",
                "        if not storage.is_disk_full(exc):\n            raise\n        _manifests_did_not_fit",
                "        raise\n        _manifests_did_not_fit",
                "the attempt left unrecorded when its manifests do not fit",
                "tests/launch/test_disk_full.py::"
                "test_a_full_scratch_disk_is_named_in_the_record_status_and_the_submitters_last_line",
            ),
            _one(
                "src/rlaunch/artifacts/runner.py::Runner._build",
                "                    if not storage.is_disk_full(unwritten):\n                        raise\n",
                "                    raise\n",
                "a failed status that does not fit told instead of the step's failure (a raw OSError)",
                "tests/artifacts/test_runner_disk_full.py::"
                "test_a_step_failing_on_a_full_prefix_is_told_as_a_full_disk_and_not_as_its_unwritten_status",
            ),
            _one(
                "src/rlaunch/observe/collect.py::observed_failure_class",
                "    logged = classify(said, status.failed_jobs_log, codes) if status.failed_jobs_log else None",
                "    logged = None",
                "a never-finalised attempt's failed jobs' logs never read: a full prefix left unclassified",
                f"{_OBSERVED}::test_status_classifies_a_never_finalised_attempt_by_its_coordinators_log",
                f"{_OBSERVED}::test_a_full_disk_the_log_names_explains_the_supervisor_it_left_lost",
            ),
        ),
    ),
    Promise(
        "The coordinator trains exactly the graph that was judged: a replay that builds another is refused "
        "before anything is built",
        (
            _one(
                "src/rlaunch/cli/rl_options.py::CoordinatorExecutor.run",
                "            if _replay_refused(handles, invocation, planning):",
                "            if False:",
                "the coordinator's replay check deleted",
                "tests/submission/test_replay.py::"
                "test_a_coordinator_whose_replay_built_another_graph_refuses_before_building_anything",
                "tests/launch/test_replay_refused.py::"
                "test_a_graph_built_from_an_unforwarded_variable_is_refused_by_its_coordinator",
            ),
            _one(
                "src/rlaunch/artifacts/judged.py::_difference",
                "    if replayed is None:\n        return StepDifference(judged_step.identity, judged_step.fingerprint, None)",
                "    if replayed is None:\n        return None",
                "a judged step the replay did not build read as the same",
                "tests/artifacts/test_judged.py::test_a_step_only_one_side_built_is_named_with_the_fingerprint_it_has",
            ),
        ),
    ),
)


def guarantees_table() -> list[str]:
    """The lines of the guarantees table (tests/test_promises.py checks docs/guarantees.md carries exactly these)."""
    lines = ["| promise | guards (weakening) | tests that fail without it |", "|---|---|---|"]
    for p in PROMISES:
        guards = "; ".join(f"`{g.path.removeprefix('src/rlaunch/')}` ({g.weakening})" for g in p.guards)
        tests = ", ".join(f"`{t}`" for t in dict.fromkeys(p.tests))
        lines.append(f"| {p.text} | {guards} | {tests} |")
    return lines
