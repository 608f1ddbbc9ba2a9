"""What was judged of a graph (`rlaunch.artifacts.judged`): the environment reads recorded while it
is built, the value and its trip through the coordinator's environment, and what a replay that built
another graph is told (the step, both fingerprints, the first field, the variables and the fix)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlaunch.artifacts.judged import (
    JUDGED_ENV,
    SHOWN_LENGTH,
    Judged,
    JudgedEnvError,
    JudgedStep,
    Replay,
    StepDifference,
    from_env,
    judged,
    recorded_env_reads,
    replay_check,
    to_env,
    value_digest,
)

from .helpers import make_step


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- the environment a graph reads while it is built -----------------------------------------------


def test_every_way_to_look_a_variable_up_is_recorded_with_the_digest_of_its_first_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {"A_GET": "1", "A_ITEM": "2", "A_IN": "3", "A_GETENV": "4"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("A_UNSET", raising=False)
    with recorded_env_reads() as reads:
        os.environ.get("A_GET")
        os.environ["A_ITEM"]  # noqa: B018 - the lookup is what is recorded
        assert "A_IN" in os.environ
        os.getenv("A_GETENV")
        os.environ.get("A_UNSET")
        os.environ["A_GET"] = "changed"  # the first value read is the one the graph was built from
        os.environ.get("A_GET")
    assert reads == {"A_GET": sha("1"), "A_ITEM": sha("2"), "A_IN": sha("3"), "A_GETENV": sha("4"), "A_UNSET": None}


def test_a_scan_of_the_whole_environment_reads_no_one_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("A_SCANNED", "x")
    with recorded_env_reads() as reads:
        assert ("A_SCANNED", "x") in list(os.environ.items())  # the credential checks scan it like this
        assert "x" in os.environ.values()
        assert "A_SCANNED" in list(os.environ)
        os.environ.get("A_LOOKED_UP")  # after a scan, a lookup is recorded again
    assert reads == {"A_LOOKED_UP": None}


def test_nothing_is_recorded_outside_the_block_and_os_environ_is_itself_again() -> None:
    environ_type = type(os.environ)
    lookup, iterate = environ_type.__getitem__, environ_type.__iter__
    with recorded_env_reads() as reads:
        pass
    os.environ.get("PATH")
    assert reads == {}
    assert (environ_type.__getitem__, environ_type.__iter__) == (lookup, iterate)


def test_an_error_inside_the_block_still_puts_os_environ_back() -> None:
    lookup = type(os.environ).__getitem__
    with pytest.raises(RuntimeError), recorded_env_reads():
        raise RuntimeError("the main failed")
    assert type(os.environ).__getitem__ is lookup


def test_a_value_is_never_kept_only_its_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("A_TOKEN", "hf_secretvalue")
    with recorded_env_reads() as reads:
        os.environ.get("A_TOKEN")
    encoded = to_env(Judged((), tuple(reads.items())))[JUDGED_ENV]
    assert "hf_secretvalue" not in zlib.decompress(base64.b64decode(encoded)).decode()
    assert reads == {"A_TOKEN": value_digest("hf_secretvalue")}


def test_what_building_a_steps_config_reads_counts_when_the_graph_is_judged_inside_the_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("A_LR", "0.5")
    with recorded_env_reads() as reads:
        step = make_step("lazy", build_config=lambda ctx: {"lr": os.environ["A_LR"]})  # built when fingerprinted
        assert reads == {}
        value = judged([step], reads)
    assert value.env_reads == (("A_LR", sha("0.5")),)


# -- the value and its trip to the coordinator ------------------------------------------------------


def test_judged_holds_every_step_dependencies_first_with_its_fingerprint_and_payload() -> None:
    data = make_step("data", literals={"rows": 8})
    model = make_step("model", deps=(data,), literals={"lr": 0.1})
    value = judged([model], {"B": None, "A": sha("1")})
    assert value.steps == (
        JudgedStep(data.identity, data.fingerprint, data.fingerprint_payload),
        JudgedStep(model.identity, model.fingerprint, model.fingerprint_payload),
    )
    assert value.env_reads == (("A", sha("1")), ("B", None))  # by name: one value for one graph


identities = st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8})?@20[0-9]{2}\.[01][0-9]\.[0-3][0-9]", fullmatch=True)
hexes = st.text("0123456789abcdef", min_size=64, max_size=64)
judged_values = st.builds(
    Judged,
    st.lists(st.builds(JudgedStep, identities, hexes, st.text()), max_size=4).map(tuple),
    st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True), st.none() | hexes, max_size=4).map(
        lambda reads: tuple(sorted(reads.items()))
    ),
)


@settings(max_examples=150, deadline=None)
@given(judged_values)
def test_what_was_judged_survives_the_coordinators_environment(value: Judged) -> None:
    env = to_env(value)
    assert list(env) == [JUDGED_ENV] and env[JUDGED_ENV].isascii()
    assert from_env(env) == value


def test_a_large_graph_travels_compressed_well_under_a_variables_limit() -> None:
    steps = [make_step(f"s{i}", literals={"layers": list(range(200)), "name": "x" * 1000}) for i in range(100)]
    value = judged(steps, {})
    assert sum(len(s.payload) for s in value.steps) > 128 * 1024
    assert len(to_env(value)[JUDGED_ENV]) < 128 * 1024  # Linux caps one variable at 128 KiB
    assert from_env(to_env(value)) == value


@pytest.mark.parametrize("environ", [{}, {JUDGED_ENV: ""}])
def test_a_coordinator_without_what_was_judged_is_refused(environ: dict[str, str]) -> None:
    with pytest.raises(JudgedEnvError) as refused:
        from_env(environ)
    assert str(refused.value) == (
        "$RLAUNCH_JUDGED is not set, so this coordinator cannot know which graph was judged; submit it with "
        "`python -m <experiment> ... --run`, which judges the graph first"
    )


@pytest.mark.parametrize(
    "raw",
    [
        "not base64!",
        base64.b64encode(b"not zlib").decode(),
        base64.b64encode(zlib.compress(b"[]")).decode(),
        base64.b64encode(zlib.compress(b'{"steps": [["a@1", "f"]], "env_reads": []}')).decode(),
    ],
    ids=["base64", "zlib", "shape", "step"],
)
def test_a_damaged_judgement_is_refused_naming_the_variable_and_the_fix(raw: str) -> None:
    with pytest.raises(JudgedEnvError) as refused:
        from_env({JUDGED_ENV: raw})
    message = str(refused.value)
    assert message.startswith("$RLAUNCH_JUDGED is damaged (") and message.endswith("); submit the run again with --run")


# -- what a replay that built another graph is told -------------------------------------------------


def test_the_same_graph_replayed_is_not_refused_whatever_the_environment_says() -> None:
    step = make_step("a", literals={"lr": 0.1})
    submitted = judged([step], {"A_GONE": sha("1")})
    replay = replay_check(submitted, judged([make_step("a", literals={"lr": 0.1})], {}), {})
    assert replay == Replay() and replay.problems() == []


def test_a_changed_field_names_the_step_both_fingerprints_the_field_and_the_variable() -> None:
    judged_step = make_step("a", literals={"generator": {"max_generate_length": 16}})
    replayed_step = make_step("a", literals={"generator": {"max_generate_length": 8}})
    submitted = judged([judged_step], {"TOKENS": sha("16"), "SAME": sha("s"), "NEW": None})
    replay = replay_check(submitted, judged([replayed_step], {}), {"SAME": "s", "NEW": "n"})
    assert replay.problems() == [
        f"a@2026.11.30: judged with fingerprint {judged_step.fingerprint}, but the coordinator's replay built "
        f"fingerprint {replayed_step.fingerprint}; the first field that differs is config.generator.max_generate_length "
        "(16 judged, 8 replayed)",
        "the graph read $NEW while it was built, and it is set in the coordinator, but was unset when the graph "
        "was judged",
        "the graph read $TOKENS while it was built, and it is unset in the coordinator",
        "fix: forward each variable the graph reads to the coordinator (env_passthrough on the execution or on "
        "the runtime profile), or stop reading the environment in the graph; then --run again",
    ]
    assert replay.to_json() == {
        "steps": [
            {
                "identity": "a@2026.11.30",
                "judged": judged_step.fingerprint,
                "replayed": replayed_step.fingerprint,
                "field": "config.generator.max_generate_length",
            }
        ],
        "environment": {
            "NEW": "set in the coordinator, but was unset when the graph was judged",
            "TOKENS": "unset in the coordinator",
        },
    }


def test_a_variable_set_to_another_value_is_named_and_its_value_is_not() -> None:
    submitted = judged([make_step("a", literals={"n": 1})], {"N": sha("1")})
    replay = replay_check(submitted, judged([make_step("a", literals={"n": 2})], {}), {"N": "2"})
    assert replay.environment == (("N", "set to another value in the coordinator"),)


def test_without_a_changed_variable_the_fix_is_a_deterministic_build() -> None:
    submitted = judged([make_step("a", literals={"seed": 1})], {"SAME": sha("s")})
    problems = replay_check(submitted, judged([make_step("a", literals={"seed": 2})], {}), {"SAME": "s"}).problems()
    assert problems[1:] == [
        "fix: no variable the graph read differs, so building it reads something else that changed (a clock, a "
        "file, a random number); make building the graph deterministic, then --run again"
    ]


def test_a_step_only_one_side_built_is_named_with_the_fingerprint_it_has() -> None:
    kept, dropped, added = make_step("kept"), make_step("dropped"), make_step("added")
    replay = replay_check(judged([kept, dropped], {}), judged([kept, added], {}), {})
    assert replay.steps == (
        StepDifference(dropped.identity, dropped.fingerprint, None),
        StepDifference(added.identity, None, added.fingerprint),
    )
    assert replay.problems()[:2] == [
        f"dropped@2026.11.30: judged with fingerprint {dropped.fingerprint}, but the coordinator's replay did not "
        "build it",
        f"added@2026.11.30: the coordinator's replay built it (fingerprint {added.fingerprint}), but it was never "
        "judged",
    ]


def test_a_dependency_bumped_in_the_replay_is_named_at_its_deps_field() -> None:
    before = make_step("model", deps=(make_step("data", "2026.11.30"),))
    after = make_step("model", deps=(make_step("data", "2026.12.01"),))
    replay = replay_check(judged([before], {}), judged([after], {}), {})
    assert [(d.identity, d.field) for d in replay.steps] == [
        ("data@2026.11.30", None),
        ("model@2026.11.30", "config.inputs[0]"),
        ("data@2026.12.01", None),
    ]


@pytest.mark.parametrize(
    ("field", "shown"),
    [("api_key", False), ("hf_token", False), ("max_tokens", False), ("lr", True), ("keys", True)],
)
def test_a_credentials_field_is_named_but_its_values_are_not_shown(field: str, shown: bool) -> None:
    before, after = (
        make_step("a", literals={field: ["first-value"]}),
        make_step("a", literals={field: ["second-value"]}),
    )
    (difference,) = replay_check(judged([before], {}), judged([after], {}), {}).steps
    assert difference.field == f"config.{field}[0]"
    message = difference.message()
    assert ("first-value" in message and "second-value" in message) is shown
    assert message.endswith("(\"first-value\" judged, \"second-value\" replayed)" if shown else (
        "(a credential's field, its values not shown)"
    ))  # fmt: skip


@pytest.mark.parametrize(("length", "whole"), [(SHOWN_LENGTH - 2, True), (SHOWN_LENGTH - 1, False)])
def test_a_long_value_is_cut_at_the_shown_length(length: int, whole: bool) -> None:
    before, after = make_step("a", literals={"text": "x" * length}), make_step("a", literals={"text": "y"})
    (difference,) = replay_check(judged([before], {}), judged([after], {}), {}).steps
    shown = difference.judged_value
    assert shown is not None and len(shown) == (length + 2 if whole else SHOWN_LENGTH)
    assert shown == (json.dumps("x" * length) if whole else json.dumps("x" * length)[: SHOWN_LENGTH - 3] + "...")


def test_a_field_one_side_lacks_is_shown_absent() -> None:
    before, after = make_step("a", literals={"old": 1}), make_step("a", literals={"new": 1})
    (difference,) = replay_check(judged([before], {}), judged([after], {}), {}).steps
    assert (difference.field, difference.judged_value, difference.replayed_value) == ("config.new", "absent", "1")


leaves = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
configs = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), inner, max_size=3),
    max_leaves=12,
)  # fmt: skip


def leaf_paths(value: Any, path: str) -> list[tuple[str, Any]]:
    """Each leaf of a canonical value with its dotted path (how `differences` names it)."""
    if isinstance(value, dict):
        return [p for key in sorted(value) for p in leaf_paths(value[key], f"{path}.{key}")]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in leaf_paths(item, f"{path}[{i}]")]
    return [(path, value)]


def replaced(value: Any, path: str, root: str, new: Any) -> Any:
    if path == root:
        return new
    if isinstance(value, dict):
        return {k: replaced(v, path, f"{root}.{k}", new) for k, v in value.items()}
    if isinstance(value, list):
        return [replaced(v, path, f"{root}[{i}]", new) for i, v in enumerate(value)]
    return value


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), configs, min_size=1, max_size=4).filter(
        lambda config: leaf_paths(config, "config")
    ),
    st.data(),
)
def test_the_first_differing_field_of_any_config_is_named_with_both_values(config: dict[str, Any], data: Any) -> None:
    paths = leaf_paths(config, "config")
    path, old = data.draw(st.sampled_from(paths))
    new = data.draw(leaves.filter(lambda v: v != old and not (isinstance(v, bool) or isinstance(old, bool))))
    changed = replaced(config, path, "config", new)
    before, after = make_step("a", build_config=lambda ctx: config), make_step("a", build_config=lambda ctx: changed)
    (difference,) = replay_check(judged([before], {}), judged([after], {}), {}).steps
    assert (difference.judged, difference.replayed) == (before.fingerprint, after.fingerprint)
    assert difference.field == path
    assert (difference.judged_value, difference.replayed_value) == (json.dumps(old), json.dumps(new))
