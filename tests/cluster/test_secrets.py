"""Credentials never reach a log, a recorded argv, a record or a document.

Logs: a secret that straddles a read boundary in an overlong line is still scrubbed, and token
shapes are scrubbed even when the value is not in the environment. Command lines: a credential
given as an option value is refused, without echoing it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaunch.artifacts import records
from rlaunch.cli.admin import main as rlaunch_main
from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobSpec
from rlaunch.runs import run_record
from rlaunch.secrets import (
    Scrubber,
    SecretArgumentError,
    refuse_secret_arguments,
    refuse_secrets_in,
    scrub,
    secret_kind,
)
from tests.cli.test_build_options import experiment

from .helpers import py

ENV_SECRET = "s3cr3t-Value-from-the-env-4242"  # not token-shaped: scrubbed because HF_TOKEN holds it
SHAPED = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"  # a GitHub token shape, in no environment
TOKENS = {
    "hf": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
    "github": SHAPED,
    "github_pat": "github_pat_" + "11ABCDEFG0" * 5,
    "openai": "sk-proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0",
    "aws": "AKIAIOSFODNN7EXAMPLE",
}


def test_a_secret_across_a_read_boundary_in_a_long_line_is_scrubbed_whole(backend: LocalBackend, root: Path) -> None:
    """One 1.5 MiB line, a secret every 50 bytes: every cut of the overlong line lands near one."""
    unit = "|filler|" + ENV_SECRET + "|" + SHAPED + "|"
    repeats = 1_500_000 // len(unit)
    script = f"import sys\nsys.stdout.write({unit!r} * {repeats} + '\\n')\nsys.stdout.flush()"
    job_id = backend.submit(JobSpec(name="long-line", argv=py(script), env={"HF_TOKEN": ENV_SECRET}))
    assert backend.wait(job_id, timeout=60).state.value == "succeeded"
    for log in (root / job_id / "logs" / "job.log", root / job_id / "logs" / "rank-0.attempt-1.log"):
        text = log.read_text()
        for secret in (ENV_SECRET, SHAPED):
            assert secret[:10] not in text and secret[-10:] not in text, f"part of {secret[:6]}… in {log.name}"
        assert text.count("<redacted>") == 2 * repeats  # nothing scrubbed twice, nothing missed
        assert text.count("|filler|") == repeats  # and nothing of the line lost


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_token_shapes_are_scrubbed_without_being_in_the_environment(kind: str) -> None:
    token = TOKENS[kind]
    assert token not in scrub(f"loading with {token} now", env={})
    assert scrub(f"loading with {token} now", env={}) == "loading with <redacted> now"
    assert records.redact_argv(["prog", f"--x={token}"]) == ["prog", "--x=<redacted>"]


@pytest.mark.parametrize("prefix", ["AKIA", "ASIA"], ids=["long-lived", "temporary"])
def test_temporary_aws_keys_are_scrubbed_as_long_lived_ones(prefix: str) -> None:
    """STS hands out ASIA... key ids (a role's, an SSO session's): as secret as an IAM user's AKIA..."""
    key = prefix + "IOSFODNN7EXAMPLE"
    assert scrub(f"aws {key} ok", env={}) == "aws <redacted> ok"
    assert Scrubber(()).bytes(f"aws {key} ok".encode()) == b"aws <redacted> ok"
    assert secret_kind(key, env={}) == "an AWS access key id (AKIA...)"
    assert scrub(f"{key}X", env={}) == f"{key}X"  # 21 key characters: not an access key id


def test_wandb_keys_are_scrubbed_where_named_and_commits_are_kept() -> None:
    key, commit = "0123456789abcdef0123456789abcdef01234567", "89abcdef0123456789abcdef0123456789abcdef"
    text = scrub(f"WANDB_API_KEY={key} git commit {commit}", env={})
    assert key not in text and commit in text


def test_records_and_job_specs_are_scrubbed(backend: LocalBackend, root: Path, tmp_path: Path) -> None:
    token = TOKENS["hf"]
    out = str(tmp_path / "out")
    run_record.update_attempt(out, "demo/rl", "a1", {"argv": ["--note", token], "failure": f"bad {token}"})
    records.write_record(out, {"config": {"comment": token}})
    job_id = backend.submit(JobSpec(name="labelled", argv=py("pass"), labels={"note": token}))
    backend.wait(job_id, timeout=30)
    for path in (Path(out, "run_record.json"), Path(out, ".artifact.json"), root / job_id / "job.json"):
        assert token not in path.read_text() and "<redacted>" in path.read_text(), path


@pytest.mark.parametrize(
    "argv",
    [
        ["--version", "2026.11.30", "--override", f"exp/data={TOKENS['hf']}"],
        ["--version", TOKENS["openai"]],
        ["--version", "2026.11.30", "--lr", TOKENS["aws"]],
    ],
)
def test_a_credential_on_an_experiment_command_line_is_refused_unechoed(
    tmp_path: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["experiment", *argv])  # what a shell hands the process
    result = CliRunner().invoke(experiment, argv, env={"RLAUNCH_PREFIX": str(tmp_path)}, catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "through the environment" in result.output
    assert not any(token in result.output for token in TOKENS.values())
    assert not (tmp_path / "exp").exists()  # nothing was built or recorded


def test_a_credential_on_an_rlaunch_command_line_is_refused(tmp_path: Path) -> None:
    env = {"RLAUNCH_PREFIX": str(tmp_path), "RLAUNCH_LOCAL_ROOT": str(tmp_path / ".jobs")}
    for argv in (["cancel", "x@2026.11.30", "--reason", TOKENS["github"]], ["jobs", "list", "--backend", SHAPED]):
        result = CliRunner().invoke(rlaunch_main, argv, env=env, catch_exceptions=False)
        assert result.exit_code == 2 and "through the environment" in result.output
        assert SHAPED not in result.output and TOKENS["github"] not in result.output


def test_options_named_for_secrets_and_env_values_are_refused() -> None:
    with pytest.raises(SecretArgumentError, match=r"argument 2 \(of --hf-token\)"):
        refuse_secret_arguments(["--hf-token", "plain-looking-value"], env={})
    with pytest.raises(SecretArgumentError, match=r"the value of \$HF_TOKEN"):
        refuse_secret_arguments(["--note", f"x{ENV_SECRET}x"], env={"HF_TOKEN": ENV_SECRET})
    refuse_secret_arguments(["--max-tokens", "4096", "--tokenizer", "qwen3", "--version", "2026.11.30"], env={})


def test_a_document_carrying_a_credential_is_refused_naming_the_field() -> None:
    doc = {"skyrl": {"trainer": {"policy": {"model": {"path": "m"}}}, "hub": [{"token": TOKENS["hf"]}]}}
    with pytest.raises(SecretArgumentError, match=r"field skyrl\.hub\[0\]\.token carries a Hugging Face token") as e:
        refuse_secrets_in(doc, "the launch document")
    assert TOKENS["hf"] not in str(e.value)
    refuse_secrets_in(json.loads(json.dumps({"a": ["fine", 1, None]})), "the launch document")


def test_both_transports_cut_overlong_lines_where_no_secret_straddles() -> None:
    from rlaunch.cluster.combined_log import LineBuffer  # the local supervisor's and the Ray replica's line splitter
    from rlaunch.secrets import Scrubber

    unit = "|filler|" + ENV_SECRET + "|" + SHAPED + "|"
    data = (unit * (600_000 // len(unit))).encode()
    scrubber = Scrubber([ENV_SECRET])
    lines = LineBuffer(scrubber)
    pieces = [p for start in range(0, len(data), 65536) for p in lines.feed(data[start : start + 65536])]
    pieces += lines.close()
    assert len(pieces) > 5  # the line was cut several times
    text = "\n".join(scrubber.text(p.decode()) for p in pieces)
    assert ENV_SECRET[:10] not in text and SHAPED[:10] not in text and SHAPED[-10:] not in text
    assert text.count("<redacted>") == 2 * (600_000 // len(unit))


LAUNCHER_SECRETS = {  # in the submitting environment only: never forwarded to the job
    "MY_SERVICE_SECRET": "launcher-secret-value-1717",
    "DEPLOY_KEY": "deploy-key-value-2828",
    "DB_PASSWORD": "db-password-value-3939",
    "ORG_TOKEN": "org-token-value-4040",
}


def _print_from_file(tmp_path: Path, values: list[str]) -> list[str]:
    """A job that prints values it reads from a file (the job's environment never held them)."""
    source = tmp_path / "values.json"
    source.write_text(json.dumps(values))
    return py(f"import json\nfor v in json.load(open({str(source)!r})):\n    print('value:', v, flush=True)")


def _job_files(root: Path, job_id: str) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(errors="replace") for p in (root / job_id).rglob("*") if p.is_file()}


def test_the_launchers_own_secrets_reach_neither_log_files_nor_the_followed_output(
    backend: LocalBackend, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret-named variable of the submitting environment (forwarded or not) is scrubbed from the
    job's log files and from what a follower prints; a short value is left alone (common words)."""
    for name, value in LAUNCHER_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SHORT_TOKEN", "ab12")  # under MIN_SECRET_LENGTH: a word, not blanked
    job_id = backend.submit(
        JobSpec(name="prints-secrets", argv=_print_from_file(tmp_path, [*LAUNCHER_SECRETS.values(), "ab12"]))
    )
    assert backend.wait(job_id, timeout=60).state.value == "succeeded"
    followed = "\n".join(backend.logs(job_id, follow=True))
    files = _job_files(root, job_id)
    for value in LAUNCHER_SECRETS.values():
        assert value not in followed
        assert not [name for name, text in files.items() if value in text], value
    assert followed.count("value: <redacted>") == len(LAUNCHER_SECRETS)
    assert "value: ab12" in followed and "value: ab12" in files[f"{job_id}/logs/job.log"]
    assert not any(name in json.dumps(files) for name in ("launcher-secret", "deploy-key-value")), "no copy kept"


def test_a_reader_scrubs_its_own_secrets_even_where_the_writer_never_knew_them(
    backend: LocalBackend, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rlaunch logs` prints a log through the reader's own scrubber: a value set only in the
    reader's environment (after the job ran) is not shown, though the file still holds it."""
    value = "set-after-the-job-ran-5151"
    job_id = backend.submit(JobSpec(name="late-secret", argv=_print_from_file(tmp_path, [value])))
    assert backend.wait(job_id, timeout=60).state.value == "succeeded"
    assert value in (root / job_id / "logs" / "job.log").read_text()  # the writer did not know it
    monkeypatch.setenv("LATE_API_KEY", value)
    assert list(backend.logs(job_id)) == ["[rank 0] value: <redacted>"]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("MY_SERVICE_SECRET", True), ("DEPLOY_KEY", True), ("KEY", True), ("GPG_PASSPHRASE", True),
        ("HF_TOKEN", True), ("DB_PASSWORD", True), ("AWS_SECRET_ACCESS_KEY", True),
        ("KEYBOARD", False), ("MONKEY", False), ("KEY_LAYOUT", False), ("PATH", False), ("HOME", False),
    ],
)  # fmt: skip
def test_secret_names(name: str, secret: bool) -> None:
    from rlaunch.secrets import is_secret_name

    assert is_secret_name(name) is secret
