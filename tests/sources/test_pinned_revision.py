"""A pinned hub revision is a full 40-hex commit: an abbreviated one names a commit today and may
name two tomorrow (the hub resolves a prefix only while it is unique), so an immutable version never
rests on one. No hub is touched: the refusal comes when the step is declared."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlaunch.sources.hub import UnpinnedRevisionError, hf_dataset_source, hf_model_source
from rlaunch.sources.inputs import pinned_commit

COMMIT = "cafe123" + "0" * 33


def test_an_abbreviated_commit_is_not_a_pinned_revision() -> None:
    with pytest.raises(UnpinnedRevisionError, match="revision='cafe123' is a branch or tag"):
        hf_model_source("models/tiny", "org/tiny", "cafe123", version="2026.11.30")
    with pytest.raises(UnpinnedRevisionError, match="revision='cafe123' is a branch or tag"):
        hf_dataset_source("data/tiny", "org/tiny", "cafe123", files=("train.jsonl",), version="2026.11.30")
    assert pinned_commit(hf_model_source("models/tiny", "org/tiny", "cafe123", version="dev")) is None


def test_the_full_commit_is_a_pinned_revision() -> None:
    step = hf_model_source("models/tiny", "org/tiny", COMMIT, version="2026.11.30")
    assert pinned_commit(step) == COMMIT


@settings(max_examples=60, deadline=None)
@given(st.text("0123456789abcdef", min_size=1, max_size=64).filter(lambda r: len(r) != 40))
def test_hex_of_any_other_length_is_refused_under_a_calendar_version(revision: str) -> None:
    with pytest.raises(UnpinnedRevisionError):
        hf_model_source("models/tiny", "org/tiny", revision, version="2026.11.30")
