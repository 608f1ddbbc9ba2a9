"""The credential rules in process, function by function: which names are secrets, which values
are scrubbed (and which are too short to be), what a scrubber replaces in text, bytes and records,
where a long line may be cut, and what a command line or a document may not carry."""

from __future__ import annotations

import pytest

from rlaunch.secrets import (
    FORWARD_ENV,
    MIN_SECRET_LENGTH,
    REDACTED,
    Scrubber,
    SecretArgumentError,
    credential_name_problem,
    forwarded_credentials,
    forwarded_names,
    is_secret_name,
    refuse_secret_arguments,
    refuse_secrets_in,
    scrub,
    scrub_tree,
    secret_kind,
    secret_values,
)

GH = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
WANDB = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_TOKEN", "WANDB_API_KEY", FORWARD_ENV):
        monkeypatch.delenv(name, raising=False)


def test_forwarded_names_are_the_defaults_then_the_configured_ones_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert forwarded_names() == ("HF_TOKEN", "WANDB_API_KEY")
    monkeypatch.setenv(FORWARD_ENV, " OPENAI_API_KEY, ,HF_TOKEN,MY_CRED ")
    assert forwarded_names(("EXTRA", "MY_CRED")) == ("HF_TOKEN", "WANDB_API_KEY", "OPENAI_API_KEY", "MY_CRED", "EXTRA")
    assert is_secret_name("MY_CRED") and not is_secret_name("MY_CREDO")


def test_only_forwarded_credentials_that_are_set_are_forwarded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf-value-123")
    monkeypatch.setenv("WANDB_API_KEY", "")
    monkeypatch.setenv("OTHER_TOKEN", "other-value-456")
    assert forwarded_credentials() == {"HF_TOKEN": "hf-value-123"}
    monkeypatch.setenv(FORWARD_ENV, "OTHER_TOKEN")
    assert forwarded_credentials() == {"HF_TOKEN": "hf-value-123", "OTHER_TOKEN": "other-value-456"}


def test_secret_values_are_the_long_enough_values_of_secret_names_longest_first() -> None:
    env = {
        "A_TOKEN": "abcdef",
        "B_SECRET": "abcde",
        "C_KEY": "a-much-longer-value",
        "PATH": "/usr/bin/long",
        "D_PASSWORD": "abcdef",
    }
    assert MIN_SECRET_LENGTH == 6
    assert secret_values(env) == ["a-much-longer-value", "abcdef"]


def test_a_scrubber_replaces_longest_values_first_in_text_bytes_and_records() -> None:
    scrubber = Scrubber(["secret-1", "secret-1-and-more", ""])
    assert scrubber.values == ["secret-1-and-more", "secret-1"]
    assert scrubber.text("a secret-1-and-more b secret-1") == f"a {REDACTED} b {REDACTED}"
    assert scrubber.bytes(b"a secret-1-and-more b secret-1") == f"a {REDACTED} b {REDACTED}".encode()
    assert scrubber.text(f"x {GH} y") == f"x {REDACTED} y" and scrubber.bytes(GH.encode()) == REDACTED.encode()
    assert scrubber.text(f"WANDB_API_KEY={WANDB}") == f"WANDB_API_KEY={REDACTED}"
    assert scrubber.bytes(f"wandb-key: '{WANDB}'".encode()) == f"wandb-key: '{REDACTED}'".encode()
    record = {"secret-1": ["secret-1", 3, None, ("secret-1",)], 4: {"k": "v"}}
    assert scrubber.tree(record) == {REDACTED: [REDACTED, 3, None, [REDACTED]], 4: {"k": "v"}}
    assert scrubber.overlap == 264  # the longest token shape (200) and a margin: longer than either value


def test_a_long_value_sets_the_overlap_held_back_at_a_cut() -> None:
    assert Scrubber(["v" * 500]).overlap == 500


def test_a_cut_lands_before_the_last_overlap_and_never_inside_a_secret() -> None:
    scrubber = Scrubber(["secret-value"])
    data = b"x" * 1000
    assert scrubber.safe_cut(data) == 1000 - scrubber.overlap
    assert scrubber.safe_cut(b"short") == 0
    before = b"y" * 730 + b"secret-value" + b"z" * 300  # wholly before the plain cut (778): cut there
    assert scrubber.safe_cut(before) == len(before) - scrubber.overlap
    inside = b"y" * 770 + b"secret-value" + b"z" * 260  # the plain cut 778 is inside the value at 770..782
    assert scrubber.safe_cut(inside) == 770
    shaped = b"y" * 759 + b" " + GH.encode() + b" " + b"z" * 249  # a token shape across the plain cut
    assert scrubber.safe_cut(shaped) == 760
    keyed = b"y" * 740 + f"WANDB_API_KEY={WANDB}".encode() + b"z" * 250
    assert scrubber.safe_cut(keyed) == 740  # the key name and its value stay together
    twice = b"secret-value" * 100  # every occurrence before the cut is found, not only the first
    assert scrubber.safe_cut(twice) % 12 == 0


def test_for_process_joins_its_own_environment_the_jobs_and_what_it_was_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OWN_SECRET", "own-secret-value")
    scrubber = Scrubber.for_process({"JOB_TOKEN": "job-token-value"}, {"PLAIN": "plain-value"}, known=["told-value"])
    assert {"own-secret-value", "job-token-value", "told-value"} <= set(scrubber.values)
    assert "plain-value" not in scrubber.values
    assert "own-secret-value" in Scrubber.for_process().values


def test_scrub_and_scrub_tree_use_the_given_environment() -> None:
    assert scrub("a my-api-key-value b", env={"SVC_API_KEY": "my-api-key-value"}) == f"a {REDACTED} b"
    assert scrub("a my-api-key-value b", env={}) == "a my-api-key-value b"
    assert scrub_tree({"x": "my-api-key-value"}, env={"SVC_API_KEY": "my-api-key-value"}) == {"x": REDACTED}


def test_what_kind_of_credential_a_text_carries_never_its_value() -> None:
    env = {
        "HF_TOKEN": "hf-env-value",
        "SERVICE_PASSWORD": "pw-env-value",
        "SHORT_TOKEN": "abc",
        "TOKENIZER": "qwen-tok",
    }
    assert secret_kind("x hf-env-value y", env) == "the value of $HF_TOKEN"
    assert secret_kind("x pw-env-value y", env) == "the value of $SERVICE_PASSWORD"
    assert secret_kind("abc qwen-tok", env) is None  # too short, and a name that only starts with TOKEN
    assert secret_kind(GH, {}) == "a GitHub token (ghp_...)"
    assert secret_kind("AKIAIOSFODNN7EXAMPLE", {}) == "an AWS access key id (AKIA...)"
    assert secret_kind(f"wandb_key={WANDB}", {}) == "a W&B API key"
    assert secret_kind(WANDB, {}) is None  # a bare 40-hex string is a commit as often as not


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["prog", "--hf-token", "plain-value-1"], "argument 3 (of --hf-token) carries the value of --hf-token"),
        (["prog", "--api_key=plain-value-1"], "argument 2 (of --api_key) carries the value of --api_key"),
        (["prog", "--wandb-key", "=x"], None),  # too short to be a credential
        (
            ["prog", "--db-password", "plain-value-1"],
            "argument 3 (of --db-password) carries the value of --db-password",
        ),
        (["prog", "--note", GH], "argument 3 (of --note) carries a GitHub token (ghp_...)"),
        (["prog", GH], "argument 2 carries a GitHub token (ghp_...)"),
        (["prog", "--max-tokens", "4096", "--tokenizer", "qwen3-tokenizer"], None),
        (["--secret", "plain-value-1"], "argument 2 (of --secret) carries the value of --secret"),
        (["prog", "--token-count=123456"], None),
    ],
)
def test_a_command_line_credential_is_refused_naming_where(argv: list[str], where: str | None) -> None:
    if where is None:
        refuse_secret_arguments(argv, env={})
        return
    with pytest.raises(SecretArgumentError) as refused:
        refuse_secret_arguments(argv, env={})
    message = str(refused.value)
    assert message.startswith(where + ": credentials are never taken from the command line")
    assert "plain-value-1" not in message and GH not in message
    assert f"(HF_TOKEN, WANDB_API_KEY, or a name listed in {FORWARD_ENV})" in message


def test_a_document_credential_is_refused_naming_its_field() -> None:
    doc = {"a": [{"b": "fine"}, {"c": GH}], "n": 1}
    with pytest.raises(SecretArgumentError) as refused:
        refuse_secrets_in(doc, "the launch document")
    assert str(refused.value).startswith("the launch document field a[1].c carries a GitHub token (ghp_...): ")
    with pytest.raises(SecretArgumentError, match=r"^record field \(top level\) carries"):
        refuse_secrets_in(GH, "record")
    with pytest.raises(SecretArgumentError, match=r"^doc field \[0\] carries"):
        refuse_secrets_in((GH,), "doc")
    refuse_secrets_in({"a": ["fine", 1, None, {"b": 2.5}]}, "doc")


def test_a_value_inside_a_longer_one_is_replaced_after_it() -> None:
    scrubber = Scrubber(["zzzzzz", "azzzzzzz"])  # reverse alphabetical order would put the short one first
    assert scrubber.values == ["azzzzzzz", "zzzzzz"]
    assert scrubber.text("azzzzzzz") == REDACTED and scrubber.bytes(b"azzzzzzz") == REDACTED.encode()


def test_a_wandb_key_keeps_its_name_wherever_it_stands() -> None:
    scrubber = Scrubber([])
    assert scrubber.text(f"env: WANDB_API_KEY={WANDB} ok") == f"env: WANDB_API_KEY={REDACTED} ok"
    assert scrubber.bytes(f"env: wandb_key: {WANDB}".encode()) == f"env: wandb_key: {REDACTED}".encode()


def test_cuts_at_the_edges_of_a_value() -> None:
    scrubber = Scrubber(["v" * 300])
    assert scrubber.safe_cut(b"v" * 300 + b"x" * 100) == 0  # the value starts the data and straddles the cut
    ends = Scrubber(["secret-value"])
    data = b"y" * 724 + b"secret-value" + b"z" * 264  # ends exactly at the cut (736): nothing straddles
    assert ends.safe_cut(data) == 736
    run = Scrubber(["ab" * 6])
    data = b"x" * 724 + b"ab" * 20 + b"y" * 236  # occurrences from 724 on: the first ends at the cut
    assert run.safe_cut(data) == 724
    same = Scrubber(["a" * 12])
    data = b"x" * 724 + b"a" * 13 + b"y" * 263  # two occurrences, one byte apart; only the second straddles
    assert same.safe_cut(data) == 724


def test_a_declared_credential_is_a_variable_name_and_a_token_in_its_place_is_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HF_TOKEN", "A", "_", "_1", "A1_B"):
        assert credential_name_problem(name) is None
    because = (
        " is not an environment variable name: declare the NAME of the variable the job reads (upper-case "
        "letters, digits and '_', not starting with a digit), e.g. 'HF_TOKEN'; its value stays in the environment"
    )
    for name, described in (
        ("1A", "a text of 2 characters starting with a digit (not shown)"),
        ("hf_token", "a text of 8 characters with lower-case letters (not shown)"),
        ("HF-TOKEN", "a text of 8 characters with '-' (not shown)"),
        ("HF_TOKEN ", "a text of 9 characters with whitespace (not shown)"),
        ("", "an empty text"),
        ("HF_TOKEn", "a text of 8 characters with lower-case letters (not shown)"),
    ):
        assert credential_name_problem(name) == described + because
        assert not name or name not in credential_name_problem(name).removesuffix(because)  # never echoed
    assert credential_name_problem(3) == "a value of type int (not shown)" + because
    assert credential_name_problem(None) == "a value of type NoneType (not shown)" + because
    problem = credential_name_problem(GH)
    assert problem is not None and "shaped like a credential" in problem and GH not in problem
    # only a token's shape hides a name: what the environment holds does not decide
    monkeypatch.setenv("HF_TOKEN", "lower-case-value")
    assert credential_name_problem("lower-case-value") == (
        "a text of 16 characters with lower-case letters, with '-' (not shown)" + because
    )


def test_records_keep_keys_that_are_not_text() -> None:
    assert Scrubber(["secret-1"]).tree({("secret-1",): 1, 2: "secret-1"}) == {("secret-1",): 1, 2: REDACTED}


def test_a_value_of_exactly_the_minimum_length_is_a_secret() -> None:
    assert secret_kind("x abcdef y", {"HF_TOKEN": "abcdef"}) == "the value of $HF_TOKEN"
    with pytest.raises(SecretArgumentError, match="argument 3"):
        refuse_secret_arguments(["prog", "--hf-token", "abcdef"], env={})


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (
            ["prog", "--db password", "plain-value-1"],
            "argument 3 (of --db password) carries the value of --db password",
        ),
        (["prog", "--api_key=abc=def"], "argument 2 (of --api_key) carries the value of --api_key: "),
        (["prog", "--note", GH, "--other"], "argument 3 (of --note) carries a GitHub token"),
        (["prog", "--api-key", "plain-value-1"], "argument 3 (of --api-key) carries the value of --api-key"),
    ],
)
def test_where_a_command_line_credential_is(argv: list[str], start: str) -> None:
    with pytest.raises(SecretArgumentError) as refused:
        refuse_secret_arguments(argv, env={})
    assert str(refused.value).startswith(start)
    assert "(argv is recorded in job specs and run records). Pass it through the environment instead (HF_TOKEN" in str(
        refused.value
    )


@pytest.mark.parametrize("argv", [["plain-value-1", "--token"], ["prog", "--token-", "plain-value-1"]])
def test_what_only_looks_like_a_credential_passes(argv: list[str]) -> None:
    refuse_secret_arguments(argv, env={})


def test_a_job_finds_wheels_where_its_submitter_does_and_gets_no_index_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime built inside a job needs the submitter's find-links (the CPU torch wheel lives there
    on such a machine); an index URL may carry a token, so it does not cross."""
    from rlaunch.cluster.job_environment import job_environment

    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_INDEX_URL", "https://user:index-token-789@mirror.example/simple")
    env = job_environment()
    assert env["PIP_FIND_LINKS"] == "/opt/wheels"
    assert "PIP_INDEX_URL" not in env and "index-token-789" not in "".join(env.values())
