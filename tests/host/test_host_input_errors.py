"""`rlaunch launch --config`: every input mistake is one line naming the file or field, the value and
the fix, exit 2, and still exactly one JSON result on stdout (never a traceback)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rlaunch.host.cli import launch
from rlaunch.launch_config import schema
from rlaunch.launch_config.loader import dump_yaml, load_yaml
from rlaunch.launch_config.typed import DocumentError
from rlaunch.names import MAX_JOB_NAME, MAX_LABEL, name_refusal
from tests.support.documents import rendered_document

# The ray backend's first refusal: without the ray extra (mypy and the fast lane need only `.[test]`), Ray's absence.
RAY_REFUSAL = (
    "the ray backend needs the cluster's address"
    if importlib.util.find_spec("ray") is not None
    else "the ray backend needs Ray, which is not installed in this environment"
)


@pytest.fixture(autouse=True)
def root(prefix: str, monkeypatch: pytest.MonkeyPatch, signal_handlers: None) -> Path:
    """The shared isolated prefix, with no local accelerators and the signal handlers restored."""
    monkeypatch.setenv("RLAUNCH_LOCAL_ACCELERATORS", "0")
    return Path(prefix)


def refused(config: str) -> tuple[dict[str, Any], str]:
    """Run the host on `config`; assert exit 2, one JSON result and one stderr line; return both."""
    done = CliRunner().invoke(launch, ["--config", config])
    assert done.exit_code == 2, (done.exit_code, done.output, done.exception)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout must be one JSON result, got {done.stdout!r}"
    result = json.loads(lines[0])
    assert result["state"] == "failed"
    assert "Traceback" not in done.stderr
    head, _, message = done.stderr.partition("rlaunch launch: ")
    assert message.strip() == result["failure"], done.stderr  # several shortfalls may take a line each
    return result, message


def write(path: Path, data: str | bytes) -> str:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("run:\n\tid: x\n", ["line 2, column 1", "tabs"]),
        ("run:\n  id: x\n   seed: 1\n", ["line 3", "fix the YAML syntax"]),
        ("run: !!python/object/apply:os.system ['true']\n", ["tag", "python/object/apply:os.system", "refused"]),
        ("placement: &p {self: *p}\n", ["alias *p", "recursive"]),
        ("a: " + "[" * 1000 + "]" * 1000 + "\n", ["nesting"]),
        ("a: " + "[" * 40 + "]" * 40 + "\n", ["nesting deeper than 32 levels"]),
        ("run: {seed: 1}\nrun: {seed: 2}\n", ["duplicate key 'run'", "line 2"]),
        ("cpu: .nan\n", [".nan refused", "finite"]),
        ("", ["<root>: expected a mapping"]),
    ],
    ids=["tab", "indentation", "python-tag", "recursive-anchor", "deep", "deeper", "duplicate", "nan", "empty"],
)
def test_a_malformed_document_is_refused_in_one_line(tmp_path: Path, text: str, fragments: list[str]) -> None:
    config = write(tmp_path / "doc.yaml", text)
    result, message = refused(config)
    assert result["config"] == config
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: write(tmp / "doc.yaml", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe"), "is not UTF-8 (a binary file?)"),
        (lambda tmp: write(tmp / "doc.yaml", "run: {id: \x00}\n"), "NUL bytes"),
        (lambda tmp: write(tmp / "doc.yaml", "x" * (2 * 1024 * 1024)), "over the 1048576-byte limit"),
        (lambda tmp: str(tmp / "missing.yaml"), "missing.yaml does not exist; check the path"),
        (lambda tmp: str(tmp), "is a directory; give the SkyRLLaunchConfig file itself"),
        (lambda tmp: "", "the document path is empty"),
        (lambda tmp: "s3://bucket/doc.yaml", "the fsspec filesystem for 's3' is not installed here"),
        (lambda tmp: "gcs://bucket/doc.yaml", "the fsspec filesystem for 'gcs' is not installed here"),
    ],
    ids=["binary", "nul", "huge", "missing", "directory", "empty-path", "s3", "gcs"],
)
def test_an_unreadable_document_is_refused_naming_the_file(
    tmp_path: Path, make: Callable[[Path], str], fragment: str
) -> None:
    _, message = refused(make(tmp_path))
    assert fragment in message


def _doc(root: Path, edit: Callable[[dict[str, Any]], None]) -> str:
    doc = rendered_document(str(root))
    edit(doc)
    path = root.parent / "doc.yaml"
    path.write_text(dump_yaml(doc))  # quotes an attempt id such as 4844e8468650 (PyYAML would not)
    return str(path)


def _local(doc: dict[str, Any], **placement: Any) -> None:
    doc["cluster"]["backend"] = "local"
    doc["cluster"]["placement"] = placement


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda d: d["runtime"].update(profile="fsdp9"), "runtime profile 'fsdp9' is not registered"),
        (
            lambda d: d["skyrl"]["generator"]["inference_engine"].update(tensor_parallel_size=0),
            "inference_engine_tensor_parallel_size=0 must be positive",
        ),
        (
            lambda d: _local(d, colour="blue"),
            "cluster.placement={'colour': 'blue'} is not accepted by the local backend",
        ),
        (lambda d: _local(d), "does not fit the local machine"),
        (lambda d: d["cluster"].update(backend="ray", placement={}), RAY_REFUSAL),
        (lambda d: d["cluster"]["allocation"].update(memory="0"), "cluster.allocation.memory='0' must be positive"),
        (lambda d: d["cluster"]["allocation"].update(cpu=float("nan")), "(cluster.allocation.cpu): .nan refused"),
        (lambda d: d["artifacts"].update(terminal_manifest_uri="s3://b/t.json"), "'s3' is not installed here"),
    ],
    ids=[
        "unknown-profile",
        "tp-zero",
        "placement-keys",
        "capacity",
        "ray",
        "memory-zero",
        "cpu-nan",
        "s3-output",
    ],
)
def test_a_document_the_environment_cannot_run_is_refused_before_submission(
    root: Path, edit: Callable[[dict[str, Any]], None], fragment: str
) -> None:
    result, message = refused(_doc(root, edit))
    assert fragment in message
    assert result.get("child_job_id") is None
    assert not list(root.glob(".jobs/*/*")), "nothing may be submitted"


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("cluster", "job_name", "rl\trun"),
        ("cluster", "job_name", "rl-run\n"),
        ("cluster", "job_name", "models/rl"),
        ("cluster", "job_name", "r" * 64),
        ("run", "id", "rl/x-2026.11.30\t"),
    ],
    ids=["job-name-tab", "job-name-trailing-newline", "job-name-slash", "job-name-one-over", "run-id-tab"],
)
def test_a_hostile_name_is_refused_before_anything_is_allocated_in_the_documents_words(
    root: Path, section: str, key: str, value: str
) -> None:
    """The host reads the document through the schema, whose refusal is the name rule's own words:
    the same message `schema.from_dict` gives, before a job is built or a directory made."""
    config = _doc(root, lambda d: d[section].update({key: value}))
    with pytest.raises(DocumentError) as schema_refusal:
        schema.from_dict(load_yaml(Path(config).read_text(), source=config))
    (problem,) = schema_refusal.value.problems
    field = f"{section}.{key}"
    assert problem in (
        name_refusal(value, field=field, max_length=MAX_JOB_NAME),
        name_refusal(value, field=field, max_length=MAX_LABEL, segments=True),
    )
    result, message = refused(config)
    assert message.strip() == f"SkyRLLaunchConfig is invalid: {config}: {problem}"
    assert result.get("child_job_id") is None
    assert not (root / ".jobs").exists() and not list(root.glob("**/attempts/*")), "nothing may be allocated"
