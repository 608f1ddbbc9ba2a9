"""What crosses into a job, in process: the allow-listed base of a machine (whole names and the LC_
prefix, nothing that merely contains them), a replica's layering of base, defaults and the job's
own variables, and a submitted job's settings and credentials (set ones only, declared ones
listed for the job to forward and scrub). tests/cluster/test_local_gang.py checks a real replica.
"""

from __future__ import annotations

import pytest

from rlaunch.cluster.job_environment import PLATFORM_SETTINGS, base_environment, job_environment, replica_base
from rlaunch.secrets import DEFAULT_FORWARDED, FORWARD_ENV

MACHINE = {
    "PATH": "/bin", "HOME": "/h", "USER": "u", "LOGNAME": "u", "LANG": "C.UTF-8", "LANGUAGE": "en", "TZ": "UTC",
    "TMPDIR": "/tmp", "LC_ALL": "C", "LC_TIME": "C",
    "PATHX": "no", "XLC_ALL": "no", "MY_PATH": "no", "AWS_SECRET_ACCESS_KEY": "no", "PYTHONPATH": "no",
}  # fmt: skip


def test_the_base_is_the_allow_listed_names_and_the_locale_prefix_only() -> None:
    assert base_environment(MACHINE) == {k: v for k, v in MACHINE.items() if v != "no"}


def test_a_replica_starts_from_its_machines_base_then_the_defaults_then_its_job() -> None:
    assert replica_base({"A": "1"}, MACHINE) == {**base_environment(MACHINE), "PYTHONUNBUFFERED": "1", "A": "1"}
    assert replica_base({"PYTHONUNBUFFERED": "0", "PATH": "/job"}, MACHINE)["PYTHONUNBUFFERED"] == "0"
    assert replica_base({"PATH": "/job"}, MACHINE)["PATH"] == "/job"


def test_a_job_gets_the_settings_and_credentials_that_are_set_and_lists_what_it_forwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (*DEFAULT_FORWARDED, *PLATFORM_SETTINGS, "MINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RLAUNCH_PREFIX", "/p")
    monkeypatch.setenv("RLAUNCH_REGION", "")  # set but empty: not a setting
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-listed")
    monkeypatch.setenv("MINE", "declared-value")
    assert job_environment() == {"RLAUNCH_PREFIX": "/p", "PIP_FIND_LINKS": "/wheels"}
    assert job_environment(("MINE", "UNSET")) == {
        "RLAUNCH_PREFIX": "/p", "PIP_FIND_LINKS": "/wheels", "MINE": "declared-value", FORWARD_ENV: "MINE,UNSET",
    }  # fmt: skip
    monkeypatch.setenv(FORWARD_ENV, " LISTED , MINE ,")
    monkeypatch.setenv("LISTED", "listed-value")
    env = job_environment(("MINE", "OTHER"))
    assert env[FORWARD_ENV] == "LISTED,MINE,OTHER"  # the submitter's list first, each once
    assert (env["LISTED"], env["MINE"], "OTHER" in env, "AWS_SECRET_ACCESS_KEY" in env) == (
        "listed-value",
        "declared-value",
        False,
        False,
    )
