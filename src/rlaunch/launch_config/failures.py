"""Why an attempt failed, in the two kinds that decide what to do next.

    deterministic  the inputs made it fail and will again: the trainer refused its config, a
                   geometry or batch assertion, a runtime import error, a data-format error.
                   Fix the inputs (and, where it was knowable before allocation, add a
                   construction-time check with a regression test); the rule code is named when
                   a preflight rule covers it.
    operational    the machinery failed: a node lost, a kill for memory, a preemption, a timeout,
                   an unreachable service, a collective-communication failure. Resubmit with
                   `--retry "<reason>"`.
    environment    where it was launched from lacks something, found before allocation: a needed
                   credential unset, storage that cannot be written, the scheduler unreachable.
                   Fix that environment and launch again; the inputs are fine.
    numerical      training diverged: the loss became NaN or inf, at the step the log names.
    gate           a launch gate refused it before allocation (retry, version, smoke, large,
                   calendar version, stage, resume, memory): its remedy is the gate's own.

Each class carries the cause, the evidence, where it happened (a path or a node, when known) and
the next step (`advice`: the kind's, or the cause's own where it says more, as a full disk does).
A permission error is the machinery's only on the run's own storage (`storage_roots`): the
prefix was writable when the launch began, so a refusal there is a remount or a changed ACL; on
any other path it may be the inputs', and stays unclassified.

`classify` reads, in order, a refusal before allocation (its rule codes), the log lines nearest the end
(known signatures), the exit codes and signals of the trainer and the gang, then the failure
message; it keeps the line that decided as evidence. Nothing matched: `unclassified`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

DETERMINISTIC, OPERATIONAL, UNCLASSIFIED = "deterministic", "operational", "unclassified"
ENVIRONMENT, NUMERICAL, GATE = "environment", "numerical", "gate"
ADVICE = {
    DETERMINISTIC: "fix the inputs (recipe, role plan, data, runtime); a relaunch of the same inputs fails again",
    OPERATIONAL: 'resubmit with --retry "<reason>"',
    UNCLASSIFIED: "read the logs (rlaunch logs) to tell a broken input from a broken machine",
    ENVIRONMENT: "fix the environment the launch is submitted from (what the evidence names), then launch again; "
    "the inputs are fine",
    NUMERICAL: "training diverged: lower the learning rate or clip gradients, check the data and rewards near that "
    'step, and relaunch (--retry "<reason>" to resume the last good checkpoint)',
    GATE: "do what the refusal says (each gate names its remedy)",
}


@dataclass(frozen=True)
class Signature:
    kind: str
    cause: str
    pattern: re.Pattern[str]
    rule: str | None = None
    where: re.Pattern[str] | None = None  # its first group: the path or node the line names
    on_run_storage: bool = False  # it counts only when `where` lies under one of the run's storage roots


def _sig(
    kind: str,
    cause: str,
    pattern: str,
    rule: str | None = None,
    where: str | None = None,
    *,
    on_run_storage: bool = False,
) -> Signature:
    return Signature(
        kind, cause, re.compile(pattern, re.IGNORECASE), rule, re.compile(where) if where else None, on_run_storage
    )


DISK_FULL = "disk full"
READ_ONLY = "read-only storage"
LOST_BY_SCHEDULER = "job lost by the scheduler"
# What to do when the cause says more than its kind (`FailureClass.advice`).
NEXT_STEPS = {
    DISK_FULL: "free space on the full filesystem (or point the prefix or $RLAUNCH_TEMP_PREFIX at a larger one), "
    'then resubmit with --retry "disk full"',
    "node failure": 'resubmit with --retry "node failure" (the scheduler keeps the node out until it is repaired: '
    "`sinfo -R` says why)",
    "cancelled by the scheduler": "see why the scheduler ended the job (`sacct -j <job>`, `scontrol ping`), "
    'then resubmit with --retry "<reason>"',
    READ_ONLY: "make the path writable again (a remount read-only after a storage fault, a changed ACL or "
    "owner), or point the prefix or $RLAUNCH_TEMP_PREFIX at a writable location, then resubmit with "
    '--retry "read-only storage"',
    LOST_BY_SCHEDULER: "slurmctld restarted or purged the job: check it answers (`scontrol ping`) and what "
    'it recorded (`sacct -j <job>`), then resubmit with --retry "job lost by the scheduler"',
    "lost supervisor": "the process that supervised the job died with its machine or was killed (see its "
    'supervisor.log); resubmit with --retry "lost supervisor"',
    # A gate's remedy, followed verbatim, lets the gate go (`rlaunch.judgement.judge`).
    "retry": 'relaunch with --retry "<reason>" (kept in the run record), or launch a new version',
    "version": "launch a new version (--version), or declare the old runtime's checkpoints compatible",
    "smoke": 'run the declared smoke until verify-smoke passes with parity, or pass --skip-smoke-gate "<reason>"',
    "large": 'pass --waive large="<reason>", or shrink the launch to the default thresholds',
    "memory": 'shrink what the row holds (rlaunch fit), or pass --waive memory="<reason>"',
    "calendar version": "give it a calendar version (--version YYYY.MM.DD)",
    "stage": "choose the terminal stage on the command line (--stage)",
    "resume": "use a fresh RL artifact version, or declare the checkpoint's digests compatible",
}
# A refusal before allocation names its gate first (`Finding.line`): gate -> the kind it is.
REFUSING_GATES = {
    "credentials": ENVIRONMENT,
    "storage": ENVIRONMENT,
    "backend": ENVIRONMENT,
    "capacity": ENVIRONMENT,
    **{gate: GATE for gate in ("retry", "version", "smoke", "large", "memory", "calendar version", "stage", "resume")},
}
_NODES = r"on node\(s\) (\S+)"  # how the Slurm backend names the nodes of a job it ended (`_lost_message`)
_PATH = r"(?:writing |')(/[^\s':]+)"  # the file an OSError (or `storage.disk_full_message`) names

# Most specific first: a collective timeout is a timeout line too, an OOM traceback a traceback.
_FULL = _sig(
    OPERATIONAL,
    DISK_FULL,
    r"No space left on device|\bENOSPC\b|\[?Errno 28\b|Disk quota exceeded|\bEDQUOT\b|\[?Errno 122\b",
    where=_PATH,
)
SIGNATURES: tuple[Signature, ...] = (
    _FULL,
    _sig(OPERATIONAL, READ_ONLY, r"Read-only file system|\bEROFS\b|\bErrno 30\b", where=_PATH),
    _sig(
        OPERATIONAL,
        READ_ONLY,
        r"Permission denied|\bEACCES\b|\bErrno 13\b|Operation not permitted|\bEPERM\b|\bErrno 1\b",
        where=_PATH,
        on_run_storage=True,
    ),
    _sig(OPERATIONAL, LOST_BY_SCHEDULER, r"\bslurmctld no longer knows\b", where=_NODES),
    _sig(OPERATIONAL, "node failure", r"\b(NODE_FAIL|BOOT_FAIL)\b|\bNodeDown\b", where=_NODES),
    _sig(
        OPERATIONAL,
        "cancelled by the scheduler",
        r"supervisor received SIG(TERM|HUP|INT)\b|Slurm job ended \((CANCELLED|REVOKED|DEADLINE)\b",
        where=r"cancelled by [^@\s]+@(\S+) \(pid|" + _NODES,
    ),
    _sig(OPERATIONAL, "lost supervisor", r"\bsupervisor lost\b", where=r"supervisor lost on (\S+?):"),
    _sig(
        OPERATIONAL,
        "collective-communication failure",
        r"\bNCCL\b|ProcessGroupNCCL|collective operation timeout|gloo.*(connection|closed)",
    ),
    _sig(
        OPERATIONAL,
        "killed for memory",
        r"out of memory|OutOfMemoryError|\bOOM\b|oom[-_ ]kill|Killed process \d+|\bOUT_OF_MEMORY\b",
        where=_NODES,
    ),
    _sig(
        OPERATIONAL,
        "preempted",
        r"\bpreempt(ed|ion|ing)?\b",
        where=_NODES + r"|\bnode ([\w.\-\[\]]+) (?:was |is )?preempted|\bpreempted on (?:node )?([\w.\-\[\]]+)",
    ),
    _sig(
        OPERATIONAL,
        "node lost",
        r"node .*(lost|dead|died)|worker (died|lost)|ActorDiedError|RayletDied|heartbeat (timeout|missed)|lost (the )?node",
    ),
    _sig(
        OPERATIONAL,
        "service unreachable",
        r"Connection refused|ConnectionError|Max retries exceeded|Temporary failure in name resolution|(service|host|controller) unreachable|\b50[23]\b.*(Bad Gateway|Service Unavailable)",
    ),
    _sig(OPERATIONAL, "timed out", r"timed out|deadline exceeded|TimeoutError"),
    _sig(
        NUMERICAL,
        "non-finite loss",
        r"\b(loss|grad[_ ]norm)\b\W{0,4}(is|became|=|:)?\W{0,4}[-+]?(nan|inf)\b|non-finite (loss|gradient)|"
        r"\bloss is not finite\b",
        where=r"\b(?:global_)?(step[ =:_]+\d+)",
    ),
    _sig(DETERMINISTIC, "runtime import error", r"(ModuleNotFoundError|ImportError): "),
    _sig(
        DETERMINISTIC,
        "geometry or batch assertion",
        r"must be divisible by|divisible by (policy_)?mini_batch",
        "batch.train_mini",
    ),
    _sig(
        DETERMINISTIC,
        "geometry or batch assertion",
        r"AssertionError.*(batch|world_size|dp_size|tensor_parallel|mini|micro)",
    ),
    _sig(
        DETERMINISTIC,
        "data-format error",
        r"data[- ]format|missing (field|column|key)|KeyError: '(prompt|reward_spec|env_class|data_source|answer|question)'|ArrowInvalid",
    ),
    _sig(
        DETERMINISTIC,
        "the trainer refused its config",
        r"validate_cfg|ConfigKeyError|ConfigAttributeError|ValidationError|invalid config|refused (its|the) config|unsupported setting",
    ),
)
SIGNALS = {
    9: ("node lost or killed for memory (SIGKILL)", "killed for memory"),
    15: ("terminated (SIGTERM)", "preempted"),
}


@dataclass(frozen=True)
class FailureClass:
    kind: str
    cause: str
    evidence: str
    rule: str | None = None
    where: str | None = None  # the path or node the fault happened at, when known

    @property
    def advice(self) -> str:
        return NEXT_STEPS.get(self.cause) or ADVICE[self.kind]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "advice": self.advice}

    def summary(self) -> str:
        """One line for a person: the kind and cause, where, the evidence and the next step."""
        where = f" at {self.where}" if self.where else ""
        return f"{self.kind} failure, {self.cause}{where}: {self.evidence or '-'}; next: {self.advice}"

    @classmethod
    def from_json(cls, data: Any) -> FailureClass | None:
        if not isinstance(data, dict) or data.get("kind") not in ADVICE:
            return None
        where = data.get("where")
        return cls(
            str(data["kind"]),
            str(data.get("cause", "")),
            str(data.get("evidence", "")),
            data.get("rule"),
            str(where) if where else None,
        )


def told(found: FailureClass) -> str:
    """A full disk as a failure text tells it: the evidence from the words that name it (a log
    line's prefix dropped), and where, when those words do not name it."""
    match = _FULL.pattern.search(found.evidence)
    words = found.evidence[match.start() :] if match else found.evidence
    return words if not found.where or found.where in words else f"{words} (at {found.where})"


def disk_full(evidence: str, where: str | None) -> FailureClass:
    """A write that did not fit (ENOSPC, EDQUOT) at `where`: operational, whatever else failed before."""
    return FailureClass(OPERATIONAL, DISK_FULL, evidence[-300:], where=where)


def classify(
    failure: str | None,
    log_lines: Sequence[str] = (),
    exit_codes: Iterable[int | None] = (),
    *,
    refused: bool = False,
    rule_codes: Sequence[str] = (),
    storage_roots: Sequence[str] = (),
) -> FailureClass:
    """The kind and cause of a failed attempt, with the evidence that decided. `refused`: the
    launcher refused it before allocation (its inputs), naming the first rule code it broke.
    `storage_roots`: the run's local storage directories, under which a permission error is the
    machinery's (read-only storage)."""
    if refused:
        evidence = (failure or "").splitlines()[0][:300] if failure else ""
        gate = evidence.partition(": ")[0]
        if not rule_codes and gate in REFUSING_GATES:  # a gate's finding (`Finding.line`): its own remedy
            cause = gate if REFUSING_GATES[gate] == GATE else f"refused before allocation: {gate}"
            return FailureClass(REFUSING_GATES[gate], cause, evidence)
        return FailureClass(DETERMINISTIC, "refused before allocation", evidence, rule_codes[0] if rule_codes else None)
    roots = tuple(r.rstrip("/") for r in storage_roots if r.strip("/"))
    lines = [ln.rstrip() for ln in log_lines if ln.strip()]
    for line in reversed(lines):
        found = _found(line, roots)
        if found and found.cause == DISK_FULL:  # what follows a full disk fails on it too: the first named write
            return next((f for ln in lines if (f := _found(ln, roots)) and f.cause == DISK_FULL and f.where), found)
        if found:
            return found
    for code in exit_codes:
        signal = _signal(code)
        if signal in SIGNALS:
            what, cause = SIGNALS[signal]
            return FailureClass(OPERATIONAL, cause, f"exit code {code}: {what}")
        if code == 124:
            return FailureClass(OPERATIONAL, "timed out", f"exit code {code}: the time limit ended it")
    for line in (failure or "").splitlines():
        found = _found(line, roots)
        if found:
            return found
    return FailureClass(UNCLASSIFIED, "no known signature", (failure or "").splitlines()[0][:300] if failure else "")


def _found(line: str, roots: tuple[str, ...]) -> FailureClass | None:
    """The class of the first signature `line` matches, with the place it names."""
    for signature in SIGNATURES:
        if not signature.pattern.search(line):
            continue
        named = signature.where.search(line) if signature.where else None
        where = next((g for g in named.groups() if g), None) if named else None
        if signature.on_run_storage and not _under(where, roots):
            continue
        return FailureClass(signature.kind, signature.cause, line[-300:], signature.rule, where)
    return None


def _under(path: str | None, roots: tuple[str, ...]) -> bool:
    """Whether `path` is one of `roots` or inside one, by whole path components."""
    return path is not None and any(path == root or path.startswith(root + "/") for root in roots)


def _signal(code: int | None) -> int | None:
    """The signal behind an exit code: -N from a Python parent, 128+N from a shell."""
    if code is None or code == 0:
        return None
    if code < 0:
        return -code
    return code - 128 if 128 < code < 160 else None
