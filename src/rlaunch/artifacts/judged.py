"""What was judged of a graph, so that the coordinator trains exactly that.

`--run` judges the graph the experiment's main builds in the submitting process, then submits a
coordinator that replays the same main in its own environment. A graph that reads the environment
while it is built can build differently there (another value, another fingerprint), and the
coordinator would train a graph nobody judged. So the submitter hands the coordinator what it judged
(`to_env`): each step's identity, fingerprint and canonical payload (the text the fingerprint hashes:
enough to name the first field that differs), and the environment variables the graph read while it
was built, each with the sha256 of its value, never the value (it may be a credential). The
coordinator builds its own `Judged` and `replay_check` compares the two before anything is built.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.artifacts.fingerprint import ABSENT, canonical_json, differences
from rlaunch.artifacts.step import ArtifactStep, graph_handles
from rlaunch.errors import UserError
from rlaunch.secrets import is_secret_name, scrub

JUDGED_ENV = "RLAUNCH_JUDGED"  # what the submitter judged, from `--run` to its coordinator
SHOWN_LENGTH = 120  # a differing value is shown up to this many characters

EnvReads = Mapping[str, str | None]  # a variable's name -> the sha256 of the value read (None: unset)


class JudgedEnvError(UserError, ValueError):
    """$RLAUNCH_JUDGED is absent or damaged: the coordinator cannot know what was judged."""


@dataclass(frozen=True)
class JudgedStep:
    """One step as it was judged: enough to tell another build of it and name where it differs."""

    identity: str
    fingerprint: str
    payload: str  # the canonical JSON the fingerprint hashes


@dataclass(frozen=True)
class Judged:
    """Every step of a graph as it was built, and what its building read of the environment (the
    empty value: nothing was judged)."""

    steps: tuple[JudgedStep, ...] = ()
    env_reads: tuple[tuple[str, str | None], ...] = ()  # (name, sha256 of its value or None), by name


def value_digest(value: str | None) -> str | None:
    return None if value is None else hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


@contextlib.contextmanager
def recorded_env_reads() -> Iterator[dict[str, str | None]]:
    """Each variable looked up in `os.environ` inside the block (`get`, `[]`, `in`, `os.getenv`), with
    the digest of the value its first lookup saw. A scan of the whole environment (`items()`,
    iterating it, as the credential checks do) reads no one variable and is not recorded. The class
    is patched, not the instance: `[]` and `in` are looked up on the class, and `get`, `in` and
    `os.getenv` all go through `__getitem__`."""
    reads: dict[str, str | None] = {}
    scans = [0]  # scans of os.environ in progress: their lookups are not reads of one variable
    environ_type = type(os.environ)
    lookup, iterate = environ_type.__getitem__, environ_type.__iter__

    def recorded_lookup(self: Any, key: Any) -> Any:
        try:
            value = lookup(self, key)
        except KeyError:
            if self is os.environ and not scans[0]:
                reads.setdefault(key, None)
            raise
        if self is os.environ and not scans[0]:
            reads.setdefault(key, value_digest(value))
        return value

    def scan(self: Any) -> Iterator[Any]:
        if self is not os.environ:
            yield from iterate(self)
            return
        scans[0] += 1
        try:
            yield from iterate(self)
        finally:
            scans[0] -= 1

    setattr(environ_type, "__getitem__", recorded_lookup)  # noqa: B010 - mypy refuses assigning a method
    setattr(environ_type, "__iter__", scan)  # noqa: B010
    try:
        yield reads
    finally:
        setattr(environ_type, "__getitem__", lookup)  # noqa: B010
        setattr(environ_type, "__iter__", iterate)  # noqa: B010


def judged(handles: Iterable[ArtifactStep[Any]], env_reads: EnvReads) -> Judged:
    """What the graph `handles` end in is, as it is judged now. The fingerprints are taken before
    `env_reads` is read: a step's config is built when its fingerprint is first asked for, and what
    building it reads of the environment counts as the graph's."""
    steps = tuple(JudgedStep(s.identity, s.fingerprint, s.fingerprint_payload) for s in graph_handles(handles))
    return Judged(steps, tuple(sorted(env_reads.items())))


def to_env(value: Judged) -> dict[str, str]:
    """`value` as the coordinator's environment carries it: compressed (a variable's size is bounded)."""
    data = {"steps": [[s.identity, s.fingerprint, s.payload] for s in value.steps], "env_reads": value.env_reads}
    return {JUDGED_ENV: base64.b64encode(zlib.compress(canonical_json(data).encode(), 9)).decode("ascii")}


def from_env(environ: Mapping[str, str]) -> Judged:
    """What the submitter judged, from the coordinator's environment; refused when absent or damaged."""
    raw = environ.get(JUDGED_ENV)
    if not raw:
        raise JudgedEnvError(
            f"${JUDGED_ENV} is not set, so this coordinator cannot know which graph was judged; "
            "submit it with `python -m <experiment> ... --run`, which judges the graph first"
        )
    try:
        data = json.loads(zlib.decompress(base64.b64decode(raw, validate=True)))
        steps = tuple(JudgedStep(*map(str, step)) for step in data["steps"])
        env_reads = tuple((str(name), None if d is None else str(d)) for name, d in data["env_reads"])
    except (binascii.Error, zlib.error, ValueError, KeyError, TypeError) as exc:
        raise JudgedEnvError(
            f"${JUDGED_ENV} is damaged ({type(exc).__name__}: {exc}); submit the run again with --run"
        ) from None
    return Judged(steps, env_reads)


@dataclass(frozen=True)
class StepDifference:
    """One step the replay did not build as it was judged (a None fingerprint: no such step there)."""

    identity: str
    judged: str | None
    replayed: str | None
    field: str | None = None  # the first field of the fingerprint's payload that differs
    judged_value: str | None = None  # as shown (None with a field: a credential's, never shown)
    replayed_value: str | None = None

    def message(self) -> str:
        if self.replayed is None:
            return (
                f"{self.identity}: judged with fingerprint {self.judged}, but the coordinator's replay did not build it"
            )
        if self.judged is None:
            return f"{self.identity}: the coordinator's replay built it (fingerprint {self.replayed}), but it was never judged"
        shown = (
            f"{self.judged_value} judged, {self.replayed_value} replayed"
            if self.judged_value is not None
            else "a credential's field, its values not shown"
        )
        return (
            f"{self.identity}: judged with fingerprint {self.judged}, but the coordinator's replay built "
            f"fingerprint {self.replayed}; the first field that differs is {self.field} ({shown})"
        )


@dataclass(frozen=True)
class Replay:
    """How the coordinator's replay differs from what was judged (no step differences: it is the same)."""

    steps: tuple[StepDifference, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()  # (name, how it differs) of the variables the graph read

    def problems(self) -> list[str]:
        """Each difference, then the fix ([] when the replay is what was judged)."""
        if not self.steps:
            return []
        lines = [d.message() for d in self.steps]
        lines += [f"the graph read ${name} while it was built, and it is {how}" for name, how in self.environment]
        if self.environment:
            lines.append(
                "fix: forward each variable the graph reads to the coordinator (env_passthrough on the "
                "execution or on the runtime profile), or stop reading the environment in the graph; then --run again"
            )
        else:
            lines.append(
                "fix: no variable the graph read differs, so building it reads something else that changed "
                "(a clock, a file, a random number); make building the graph deterministic, then --run again"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        """What a run record keeps: both fingerprints and the field of each step, the variables' names."""
        return {
            "steps": [
                {"identity": d.identity, "judged": d.judged, "replayed": d.replayed, "field": d.field}
                for d in self.steps
            ],
            "environment": dict(self.environment),
        }


def replay_check(submitted: Judged, replayed: Judged, environ: Mapping[str, str]) -> Replay:
    """What differs between the graph `submitted` judged and the one the coordinator `replayed`, with
    the variables the judged graph read whose value in `environ` (the coordinator's) is not the one read."""
    now = {s.identity: s for s in replayed.steps}
    before = {s.identity for s in submitted.steps}
    steps = [_difference(s, now.get(s.identity)) for s in submitted.steps]
    steps += [StepDifference(s.identity, None, s.fingerprint) for s in replayed.steps if s.identity not in before]
    found = tuple(d for d in steps if d is not None)
    if not found:
        return Replay()
    environment = tuple(
        (name, how) for name, digest in submitted.env_reads if (how := _how(digest, value_digest(environ.get(name))))
    )
    return Replay(found, environment)


def _difference(judged_step: JudgedStep, replayed: JudgedStep | None) -> StepDifference | None:
    if replayed is None:
        return StepDifference(judged_step.identity, judged_step.fingerprint, None)
    if replayed.fingerprint == judged_step.fingerprint:
        return None
    field, old, new = next(differences(json.loads(judged_step.payload), json.loads(replayed.payload)))
    secret = is_secret_name(_leaf(field))
    return StepDifference(
        judged_step.identity,
        judged_step.fingerprint,
        replayed.fingerprint,
        field,
        None if secret else _shown(old),
        None if secret else _shown(new),
    )


def _leaf(field: str) -> str:
    """The key a dotted path ends in (`config.tokens[0]` -> `tokens`): what says it holds a credential."""
    return re.sub(r"(\[\d+\])+$", "", field).rsplit(".", 1)[-1]


def _shown(value: Any) -> str:
    text = "absent" if value is ABSENT else scrub(json.dumps(value, sort_keys=True))
    return text if len(text) <= SHOWN_LENGTH else text[: SHOWN_LENGTH - 3] + "..."


def _how(judged_digest: str | None, digest_now: str | None) -> str | None:
    """How a variable's value in the coordinator differs from the one read when judged (None: it does not)."""
    if judged_digest == digest_now:
        return None
    if digest_now is None:
        return "unset in the coordinator"
    if judged_digest is None:
        return "set in the coordinator, but was unset when the graph was judged"
    return "set to another value in the coordinator"
