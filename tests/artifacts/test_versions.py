"""`--version` and `--override NAME=VERSION` reach builders through a build context."""

from __future__ import annotations

import pytest

from rlaunch.artifacts import (
    BuildContext,
    InvalidIdentityError,
    VersionCodex,
    build_context,
    current_build_context,
    resolve_version,
)


def _ctx(default="2026.11.30", **overrides) -> BuildContext:
    return BuildContext(VersionCodex(default, {k.replace("__", "/"): v for k, v in overrides.items()}))


def test_resolve_version_uses_the_run_default():
    with build_context(_ctx()):
        assert resolve_version("models/tiny", None) == "2026.11.30"


def test_resolve_version_uses_an_override_for_that_name():
    ctx = _ctx(data__toy="2026.11.29")
    with build_context(ctx):
        assert resolve_version("data/toy", None) == "2026.11.29"
        assert resolve_version("models/tiny", None) == "2026.11.30"
    assert ctx.versions.unused_overrides() == []


def test_an_explicit_version_in_code_wins_over_overrides_and_default():
    ctx = _ctx(data__toy="2026.11.29")
    with build_context(ctx):
        assert resolve_version("data/toy", "2025.01.01") == "2025.01.01"
        assert resolve_version("other", "alice-dev") == "alice-dev"
    assert ctx.versions.unused_overrides() == ["data/toy"]


def test_an_explicit_version_is_still_validated():
    with pytest.raises(InvalidIdentityError, match="version of data/toy"):
        resolve_version("data/toy", "v1")


def test_unconsulted_overrides_are_reported_by_name():
    ctx = _ctx(data__toy="2026.11.29", modle="dev")
    with build_context(ctx):
        resolve_version("data/toy", None)
    assert ctx.versions.unused_overrides() == ["modle"]


def test_without_a_context_a_version_must_be_given():
    assert current_build_context() is None
    with pytest.raises(ValueError, match="models/tiny"):
        resolve_version("models/tiny", None)
    assert resolve_version("models/tiny", "dev") == "dev"


@pytest.mark.parametrize(("default", "overrides"), [("v1", {}), ("2026.11.30", {"a": "llama3"})])
def test_the_codex_validates_every_version(default, overrides):
    with pytest.raises(InvalidIdentityError, match="YYYY.MM.DD"):
        VersionCodex(default, overrides)


def test_nested_contexts_restore_on_exit():
    outer, inner = _ctx("2026.11.30"), _ctx("alice-dev")
    with build_context(outer):
        with build_context(inner):
            assert current_build_context() is inner
            assert resolve_version("a", None) == "alice-dev"
        assert current_build_context() is outer
        assert resolve_version("a", None) == "2026.11.30"
    assert current_build_context() is None


def test_nested_contexts_restore_when_the_body_raises():
    outer = _ctx("2026.11.30")
    with build_context(outer):
        with pytest.raises(RuntimeError, match="builder broke"):
            with build_context(_ctx("dev")):
                raise RuntimeError("builder broke")
        assert current_build_context() is outer
    with pytest.raises(KeyError):
        with build_context(outer):
            raise KeyError("x")
    assert current_build_context() is None


def test_a_bad_run_version_names_the_option_that_set_it():
    with pytest.raises(InvalidIdentityError) as err:
        VersionCodex("v1")
    assert str(err.value).startswith("--version='v1' is not a valid version. Use YYYY.MM.DD")
    with pytest.raises(InvalidIdentityError) as err:
        VersionCodex("2026.11.30", {"data/toy": "2026.11.30", "models/tiny": "latest"})
    assert str(err.value).startswith("--override models/tiny='latest' is not a valid version. Use YYYY.MM.DD")


def test_a_bad_version_in_code_names_the_artifact():
    with pytest.raises(InvalidIdentityError) as err:
        resolve_version("data/toy", "v1")
    assert str(err.value).startswith("version of data/toy='v1' is not a valid version. Use YYYY.MM.DD")


def test_without_a_context_the_error_says_how_to_give_a_version():
    with pytest.raises(ValueError) as err:
        resolve_version("models/tiny", None)
    assert str(err.value) == (
        "no version given for 'models/tiny' and no active build context; pass version=... or build "
        "the graph inside a main decorated with @build_options / @rl_build_options"
    )


# --- a sweep declared in Python (`variants`) ------------------------------------------------------


def test_each_choice_is_built_as_its_variant_and_the_context_is_restored() -> None:
    from rlaunch.artifacts.versions import variants

    outer = BuildContext(VersionCodex("2026.12.07"))
    seen = []
    with build_context(outer):
        for choice in variants("roles", {"tp-1": 1, "tp-2": 2}):
            ctx = current_build_context()
            assert ctx is not None and ctx.variant is not None and ctx.in_code
            seen.append((choice, ctx.variant.variant, dict(ctx.variant.settings), ctx.variant_name("x/rl")))
        assert current_build_context() is outer
    assert seen == [(1, "tp-1", {"roles": "tp-1"}, "x/rl.tp-1"), (2, "tp-2", {"roles": "tp-2"}, "x/rl.tp-2")]
    assert [m.variant for m in outer.declared] == ["tp-1", "tp-2"]
    assert outer.declared[0].name.startswith("roles@2026.12.07~sweep-")


@pytest.mark.parametrize(
    ("choices", "says"),
    [
        ({"only": 1}, "needs at least two choices"),
        ({"a b": 1, "c": 2}, "label 'a b'"),
    ],
)
def test_a_grid_in_code_that_cannot_name_its_variants_is_refused(choices: dict[str, int], says: str) -> None:
    from rlaunch.artifacts.versions import variants

    with build_context(BuildContext(VersionCodex("2026.12.07"))), pytest.raises(ValueError, match=None) as caught:
        list(variants("roles", choices))
    assert says in str(caught.value)


def test_variants_do_not_nest_and_need_a_main() -> None:
    from rlaunch.artifacts.versions import variants

    with pytest.raises(ValueError, match="inside a main decorated with @rl_build_options"):
        list(variants("roles", {"a": 1, "b": 2}))
    with build_context(BuildContext(VersionCodex("2026.12.07"))):
        with pytest.raises(ValueError, match="a sweep is one grid"):
            for _ in variants("roles", {"a": 1, "b": 2}):
                list(variants("batch", {"c": 1, "d": 2}))
