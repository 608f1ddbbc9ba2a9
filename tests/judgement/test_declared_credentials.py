"""Declared credentials: an experiment names the variables its run needs
(`SkyRLSpec(credentials=("HF_TOKEN",))`); the launch document carries the names (never values),
readiness says whether each is set here, `--run` and the host refuse while one is unset or empty,
and the jobs get them by name, scrubbed like any credential."""

from __future__ import annotations

import pytest

from rlaunch.cluster.job_environment import job_environment
from rlaunch.host.allocate import child_job_spec
from rlaunch.judgement.gates import credentials_problem
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config import schema
from rlaunch.launch_config.typed import DocumentError
from rlaunch.secrets import FORWARD_ENV, Scrubber, secret_values
from rlaunch.skyrl import skyrl_step
from rlaunch.skyrl.views.readiness import MISSING, OK, readiness
from tests.support.host_launches import launch_edited
from tests.support.refusals import run_refusals
from tests.support.specs import iris, planned_view, spec

SANDBOX = "E2B_SANDBOX"  # a name that does not look like a credential: declaring it makes it one
VALUE = "sandbox-value-7f3a9c"


@pytest.mark.parametrize(
    ("names", "fragment"),
    [
        (
            ("hf-token",),
            "credentials[0]: a text of 8 characters with lower-case letters, with '-' (not shown) is not an",
        ),
        (("HF_TOKEN", "1ST"), "credentials[1]: a text of 3 characters starting with a digit (not shown) is not"),
        (("",), "credentials[0]: an empty text is not"),
        ((7,), "credentials[0]: a value of type int (not shown) is not"),
    ],
)
def test_a_bad_credential_name_is_refused_at_construction(names: tuple, fragment: str) -> None:
    with pytest.raises(ValueError, match="SkyRLSpec.") as raised:
        spec(credentials=names)
    assert fragment in str(raised.value) and "e.g. 'HF_TOKEN'" in str(raised.value)


def test_a_token_given_as_a_name_is_refused_without_echoing_it() -> None:
    token = "hf_" + "aB3" * 12
    with pytest.raises(ValueError, match="shaped like a credential") as raised:
        spec(credentials=(token,))
    assert token not in str(raised.value)


def test_a_single_string_is_not_read_as_its_letters() -> None:
    with pytest.raises(TypeError, match=r"must be a tuple of variable names, e.g. \('HF_TOKEN',\), not a string"):
        spec(credentials="HF_TOKEN")


def test_declared_names_are_not_part_of_the_fingerprint() -> None:
    plain, declared = (skyrl_step(spec(**kw), iris()) for kw in ({}, {"credentials": ("HF_TOKEN", SANDBOX)}))
    assert declared.fingerprint == plain.fingerprint
    assert "credentials" not in declared.fingerprint_config["launch_document"]["run"]


def test_the_document_carries_the_names_and_never_the_values(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SANDBOX, VALUE)
    document, _ = planned_view(spec(credentials=(SANDBOX, "HF_TOKEN", SANDBOX)), prefix=prefix)
    assert document.run.credentials == (SANDBOX, "HF_TOKEN")  # in order, once each
    assert VALUE not in schema.dumps(document)
    edited = document.to_dict()
    edited["run"]["credentials"] = ["ok_NAME"]  # a hand-written document is checked as the spec is
    with pytest.raises(
        DocumentError, match=r"run.credentials\[0\]: a text of 7 characters with lower-case letters \(not"
    ):
        schema.from_dict(edited)


def test_credentials_gate_tells_unset_from_set_but_empty() -> None:
    declared = ("HF_TOKEN", SANDBOX)
    assert credentials_problem(declared, {"HF_TOKEN": "x", SANDBOX: "y"}) is None
    assert credentials_problem((), {}) is None
    problem = credentials_problem(declared, {"HF_TOKEN": ""})
    assert problem is not None and "HF_TOKEN (set but empty), E2B_SANDBOX (not set)" in problem
    assert "Set each in the environment you launch from" in problem and "SkyRLSpec(credentials=...)" in problem
    assert credentials_problem(declared, {SANDBOX: "y"}) == credentials_problem(("HF_TOKEN",), {})  # only it named


def test_readiness_lists_each_declared_credential_with_whether_it_is_set(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SANDBOX, VALUE)
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.delenv("GATED_TOKEN", raising=False)
    document, facts = planned_view(spec(credentials=(SANDBOX, "HF_TOKEN", "GATED_TOKEN")), prefix=prefix)
    items = {i.value.split()[0]: i for i in readiness(PlannedLaunch.of(document), facts) if i.label == "credential"}
    assert items[SANDBOX].state == OK and items[SANDBOX].value == f"{SANDBOX} set in the submitting environment"
    assert items[SANDBOX].source == "declared: SkyRLSpec(credentials=...)"
    assert items["HF_TOKEN"].state == MISSING and "set but EMPTY" in items["HF_TOKEN"].value
    assert items["GATED_TOKEN"].state == MISSING and "NOT set" in items["GATED_TOKEN"].value
    assert all(VALUE not in i.value for i in items.values())


def test_run_refuses_a_missing_declared_credential(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SANDBOX, raising=False)
    document, _ = planned_view(spec(credentials=(SANDBOX,)), prefix=prefix)
    assert run_refusals(document, "credentials") == [f"credentials: {credentials_problem((SANDBOX,), {})}"]
    monkeypatch.setenv(SANDBOX, VALUE)
    assert run_refusals(document, "credentials") == []


@pytest.mark.usefixtures("signal_handlers")
def test_the_host_refuses_a_document_whose_credential_is_missing(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def declare(doc: dict) -> None:
        doc["run"]["credentials"] = [SANDBOX]

    monkeypatch.setenv(SANDBOX, "")
    code, result, _ = launch_edited(prefix, declare)
    assert code == 2 and f"{SANDBOX} (set but empty)" in result["failure"]
    monkeypatch.setenv(SANDBOX, VALUE)
    code, result, _ = launch_edited(prefix, declare)
    assert code == 0 and result["state"] == "prepared", result


def test_declared_credentials_reach_the_jobs_by_name_and_are_scrubbed(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SANDBOX, VALUE)
    monkeypatch.delenv(FORWARD_ENV, raising=False)
    assert SANDBOX not in job_environment() and VALUE not in secret_values()  # undeclared: stays here
    env = job_environment((SANDBOX,))
    assert env[SANDBOX] == VALUE and env[FORWARD_ENV] == SANDBOX  # the job forwards it onwards too
    assert VALUE in secret_values(env)  # the job's environment lists it, so its logs scrub it
    assert Scrubber.for_process(env).text(f"key={VALUE}") == "key=<redacted>"
    document, _ = planned_view(spec(credentials=(SANDBOX,)), prefix=prefix)
    child = child_job_spec(document, "file:///doc.yaml", working_dir=None)
    assert child.env[SANDBOX] == VALUE and SANDBOX in child.env[FORWARD_ENV].split(",")
