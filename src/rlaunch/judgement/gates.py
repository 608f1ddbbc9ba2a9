"""The launch gates: rules of an RL launch that hold by construction, not by memory.

Each rule reads a version's stored facts (the run record's attempts, the declared smoke's record)
and says why a launch may not go (None: it may).

    version    a version is one runtime: an attempt recorded under another runtime source digest
               refuses the launch (fix: a new version) unless that digest is declared compatible, or
               the launch starts from a pinned checkpoint (`runtime.resume_from`: its own
               checkpoints then go to a root of its runtime, fresh on a repin)
    retry      a version whose latest attempt failed or was cancelled is relaunched only with an
               authorised retry (`--retry REASON`: who, when and why go into the run record)
    smoke      a large launch (more nodes or GPUs than the thresholds; `rlaunch.judgement.judge`
               decides which) declares the smoke that rehearses it, or carries `--skip-smoke-gate REASON`
    credentials every credential the document declares (`run.credentials`) is set, and not empty,
               in the environment that submits the jobs (it is forwarded into them by name)

`rlaunch.judgement.judge` applies them, with the smoke's verdict and parity, for every caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rlaunch.launch_config.schema import GatesSection
from rlaunch.launch_config.typed import encode
from rlaunch.runs import run_record
from rlaunch.statefiles import CorruptStateError

RETRY_STATES = ("failed", "cancelled")
AUTHORISED_ENV = "RLAUNCH_AUTHORISED"  # the operator's authorisations, from the submitting process to its coordinator
GATE_OPTIONS = {"retry": "--retry", "skip_smoke_gate": "--skip-smoke-gate"}  # authorisation -> the option giving it
LOGGER_CREDENTIALS = {"wandb": "WANDB_API_KEY"}  # trainer.logger -> the credential that logger reads
QUOTED_FAILURE = 200  # at most this much of a failure's first line is quoted in a refusal
Attempt = Mapping[str, Any]


def recorded_attempts(output_path: str, *, besides: str | None = None) -> list[dict[str, Any]]:
    """The run record's attempts in launch order, without `besides` (the attempt being launched)
    and without attempts the host refused (nothing of them was submitted).

    A damaged record reads as none: its writer keeps it aside and starts a new one."""
    try:
        record = run_record.read(output_path) or {}
    except CorruptStateError:
        return []
    return [a for a in record.get("attempts", []) if a.get("attempt_id") != besides and not a.get("refused")]


def foreign_digests(attempts: Iterable[Attempt], digest: str) -> dict[str, str]:
    """Runtime digests other than `digest` that attempts ran under -> the first attempt with each."""
    found: dict[str, str] = {}
    for attempt in attempts:
        other = attempt.get("runtime_digest")
        if other and other != digest:
            found.setdefault(other, str(attempt.get("attempt_id")))
    return found


def version_problem(
    attempts: Sequence[Attempt], digest: str, compatible: Iterable[str] = (), *, pinned: bool = False
) -> str | None:
    """Why this version may not launch under runtime `digest` (None: same runtime, or declared, or
    `pinned`: it starts from a pinned checkpoint at a checkpoint root of this runtime)."""
    if pinned:
        return None
    declared = set(compatible)
    undeclared = {d: a for d, a in foreign_digests(attempts, digest).items() if d not in declared}
    if not undeclared:
        return None
    old, attempt = next(iter(undeclared.items()))
    return (
        f"attempt {attempt} of this version ran under runtime source digest {old[:16]}, and this runtime is "
        f"{digest[:16]}: a version is one runtime. Launch a new version (--version, or --override NAME=VERSION "
        f"for the RL artifact); or, once the old runtime's checkpoints are known to load, declare it with "
        f"SkyRLSpec(compatible_checkpoint_digests=({old!r},)), or start from one of them at a fresh checkpoint "
        "root: SkyRLSpec(resume_from=ResumeFrom(<checkpoint root>, <step>, <its runtime digest>))"
    )


def declared_compatible(attempts: Sequence[Attempt], digest: str, compatible: Iterable[str]) -> list[str]:
    """Other runtime digests this version ran under that are accepted only by declaration."""
    declared = set(compatible)
    return [d for d in foreign_digests(attempts, digest) if d in declared]


def retry_needed(attempts: Sequence[Attempt]) -> Attempt | None:
    """The latest attempt when it failed or was cancelled: relaunching it needs an authorised retry."""
    if attempts and attempts[-1].get("state") in RETRY_STATES:
        return attempts[-1]
    return None


def retry_problem(attempts: Sequence[Attempt], authorised: bool) -> str | None:
    """Why relaunching this version needs an authorised retry (None: it is no retry, or authorised)."""
    latest = retry_needed(attempts)
    if latest is None or authorised:
        return None
    failure = latest.get("failure") or ""
    why = f" ({quoted(str(failure))})" if failure.strip() else ""
    return (
        f"the latest attempt {latest.get('attempt_id')} {latest.get('state')}{why}; relaunching it is a retry: "
        'pass --retry "<reason>" (who, when and why are kept in the run record), or launch a new version'
    )


def quoted(failure: str) -> str:
    """A failure's first line as a refusal quotes it: whole, or cut at a word with an ellipsis, so a
    phrase is never cut in its middle unmarked."""
    line = failure.strip().splitlines()[0] if failure.strip() else ""
    if len(line) <= QUOTED_FAILURE:
        return line
    cut = line[: QUOTED_FAILURE + 1].rsplit(" ", 1)[0] if " " in line[:QUOTED_FAILURE] else line[:QUOTED_FAILURE]
    return f"{cut.rstrip(' ,;:')} ..."


def smoke_problem(large: str | None) -> str | None:
    """Why a launch that declares no smoke is refused (None: it is small)."""
    if large is None:
        return None
    return (
        f"this is a large launch ({large}) and it declares no smoke: declare the smoke that rehearses it "
        "(skyrl_step(..., smoke=<smoke step>): the same model architecture, accelerator, algorithm, "
        "token lengths, runtime, strategy, entrypoint and hand-offs, scaled down: the fields parity compares), "
        'or pass --skip-smoke-gate "<reason>" (kept in the run record)'
    )


def smoke_not_run(identity: str) -> str:
    return f"the declared smoke {identity} has not run; launch it and check it with rlaunch verify-smoke"


def smoke_runtime_problem(latest: Attempt, identity: str, digest: str) -> str | None:
    """Why the smoke's latest attempt does not rehearse this runtime (None: it ran on this one)."""
    if latest.get("runtime_digest") in (None, digest):
        return None
    return (
        f"the declared smoke {identity} ran under runtime source digest {str(latest['runtime_digest'])[:16]}, "
        f"not this runtime's {digest[:16]}: rerun the smoke on this runtime"
    )


def smoke_record_problem(smoke_attempts: Sequence[Attempt], identity: str, digest: str) -> str | None:
    """The plan's short view of a declared smoke: its latest attempt succeeded under this runtime."""
    if not smoke_attempts:
        return smoke_not_run(identity)
    latest = smoke_attempts[-1]
    if latest.get("state") != "succeeded":
        return f"the declared smoke {identity}'s latest attempt {latest.get('attempt_id')} is {latest.get('state')}"
    return smoke_runtime_problem(latest, identity, digest)


def logger_credentials(logger: Any) -> tuple[str, ...]:
    """The credentials `trainer.logger` (one name or a list) reads where the run is launched."""
    loggers = logger if isinstance(logger, (list, tuple)) else [logger]
    return tuple(LOGGER_CREDENTIALS[name] for name in loggers if isinstance(name, str) and name in LOGGER_CREDENTIALS)


def credentials_problem(declared: Sequence[str], env: Mapping[str, str], *, logger: Any = None) -> str | None:
    """A needed credential unset or empty in `env` (the submitting environment) refuses the launch:
    one the run declares, or (`logger` given) the one its logger reads."""
    missing = [f"{name} ({'set but empty' if name in env else 'not set'})" for name in declared if not env.get(name)]
    if not missing:
        return None
    where = "in the environment you launch from (it is forwarded into the jobs by name and never recorded)"
    if logger is not None:
        return (
            f"trainer.logger is {logger!r}, which needs {', '.join(missing)} here. Set it {where}, or log "
            "elsewhere (trainer.logger in the recipe)"
        )
    return (
        f"the run declares credential(s) it needs that this environment lacks: {', '.join(missing)}. Set each "
        f"{where}, or drop it from SkyRLSpec(credentials=...)"
    )


def authorisations(gates: GatesSection) -> dict[str, Any]:
    """The authorisations a launch carries, as the run record keeps them in its attempt entry."""
    found = {name: encode(value) for name in ("retry", "skip_smoke_gate") if (value := getattr(gates, name))}
    if gates.waivers:
        found["waivers"] = {gate: encode(value) for gate, value in gates.waivers.items()}
    return found
