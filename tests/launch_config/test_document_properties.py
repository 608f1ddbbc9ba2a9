"""Property: any launch document, however hostile, is accepted or refused with a typed `UserError`;
never a traceback, and an accepted document cannot point staging outside its root.

Documents are a valid rendered document with random edits (values of every kind at every path,
keys removed or added), serialised as YAML and then sometimes damaged as text (tabs, tags,
anchors, duplicate keys, sexagesimal and octal-looking numbers, truncation, binary bytes).
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rlaunch.errors import UserError
from rlaunch.launch_config import schema
from rlaunch.launch_config.composition import leaves
from rlaunch.paths import join_inside
from tests.support.documents import rendered_document

PREFIX = "/rlaunch-property-prefix"  # never created: loading a document touches no storage
_BASE: list[dict[str, Any]] = []


def _base() -> dict[str, Any]:
    if not _BASE:
        _BASE.append(rendered_document(PREFIX))
    return _BASE[0]


def _paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into the document: mapping keys and list indices, leaves and sections."""
    out = [prefix] if prefix else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            out += _paths(value, (*prefix, i))
    return out


HOSTILE_TEXT = st.sampled_from(
    [
        "/", "/etc", "..", "../..", "../../outside", "models/../../x", "s3://bucket/x", "gcs://b/x", "nosuch://x",
        "~", "~/x", "", " ", ".", "./x", "a//b", "\\x", "C:\\x", ".jobs", ".tmp", "x" * 300, "é", "\u202e",
        "1:30", "010", "0x10", "yes", "null", "2026-11-30", "<placement>", "local", "ray", "iris", "fsdp",
    ]
)  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**20]),
    st.floats(allow_nan=True, allow_infinity=True),
    HOSTILE_TEXT,
    st.text(max_size=40),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(HOSTILE_TEXT, inner, max_size=3)),
    max_leaves=6,
)


_PATHS: list[list[tuple[Any, ...]]] = []


def _base_paths() -> list[tuple[Any, ...]]:
    if not _PATHS:
        _PATHS.append(_paths(_base()))
    return _PATHS[0]


@st.composite
def edited_documents(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(_base())
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        *parents, last = draw(st.sampled_from(_base_paths()))
        node: Any = doc
        for part in parents:  # an earlier edit may have replaced a parent: then this edit is moot
            if isinstance(node, dict) and part in node or isinstance(node, list) and part in range(len(node)):
                node = node[part]
                continue
            break
        else:
            if not isinstance(node, (dict, list)) or (
                isinstance(node, list) and not (isinstance(last, int) and last < len(node))
            ):
                continue
            action = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
            if action == "delete" and (isinstance(node, dict) and last in node or isinstance(node, list)):
                del node[last]
            elif action == "add" and isinstance(node, dict):
                node[draw(st.one_of(HOSTILE_TEXT, st.text(min_size=1, max_size=10)))] = draw(VALUES)
            else:
                node[last] = draw(VALUES)
    return doc


DAMAGE = st.sampled_from(
    [
        ("replace", "  ", "\t"),
        ("replace", ": ", ": !!python/object/apply:os.system "),
        ("replace", ": ", ": &a "),
        ("append", "\nrun: {}\n", None),
        ("append", "\nplacement: &p {self: *p}\n", None),
        ("replace", "seed: 17", "seed: 1:30"),
        ("replace", "seed: 17", "seed: 010"),
        ("replace", "seed: 17", "seed: " + "1" * 5000),  # past Python's int-from-text digit limit
        ("replace", "cpu: 96.0", "cpu: .nan"),
        ("replace", "cpu: 96.0", "cpu: -.inf"),
        ("replace", "memory: 1600GB", "memory: '0'"),
        ("truncate", None, None),
        ("bytes", None, None),
    ]
)


def _damaged(text: str, damage: tuple[str, str | None, str | None], where: int) -> str | bytes:
    kind, old, new = damage
    if kind == "replace":
        return text.replace(old, new, 1)  # type: ignore[arg-type]
    if kind == "append":
        return text + old  # type: ignore[operator]
    if kind == "truncate":
        return text[: where % (len(text) + 1)]
    cut = where % (len(text) + 1)
    return text[:cut].encode() + b"\xff\xfe\x00" + text[cut:].encode()


@settings(
    max_examples=1000,
    deadline=None,
    database=None,
    derandomize=True,  # the same 1000 documents on every CI run; drop it locally to explore further
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(
    doc=edited_documents(),
    damage=st.one_of(st.none(), DAMAGE),
    where=st.integers(min_value=0, max_value=10**6),
)
def test_any_document_is_accepted_or_refused_with_a_user_error(
    tmp_path_factory: Any, doc: dict[str, Any], damage: Any, where: int
) -> None:
    text: str | bytes = yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), allow_unicode=True)
    if damage is not None:
        text = _damaged(text, damage, where)
    try:
        config = schema.loads(text, source="property.yaml")
    except UserError as exc:
        event("refused")
        assert str(exc) and "Traceback" not in str(exc)
        assert not os.path.exists(PREFIX)
        return
    event("accepted")
    # Accepted: every path the task would stage to stays inside its root.
    root = str(_root(tmp_path_factory))
    for source in (config.inputs.model, *config.inputs.train_data, *config.inputs.validation_data):
        target = join_inside(root, source.local_path, field="local_path")
        assert os.path.commonpath([os.path.realpath(root), target]) == os.path.realpath(root)
    for location in (config.artifacts.output_path, config.artifacts.export_root, config.artifacts.checkpoint_root):
        assert location.startswith("/") or "://" in location
    assert ".." not in config.run.attempt_id and "/" not in config.run.attempt_id
    assert len(config.cluster.job_name) <= 63 and not any(map(_hostile, config.cluster.job_name))
    assert not any(_hostile(c) and c != "/" for c in config.run.id)
    assert all(not isinstance(v, float) or math.isfinite(v) for _, v in leaves(config.skyrl))
    assert not os.path.exists(PREFIX)


_ROOT: list[Path] = []


def _root(factory: Any) -> Path:
    if not _ROOT:
        _ROOT.append(factory.mktemp("staging"))
    return _ROOT[0]


def _hostile(char: str) -> bool:
    """Whitespace, a control or invisible character, or a path separator: what no name may hold."""
    return char.isspace() or not char.isprintable() or char in "/\\"


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(
    before=st.text(alphabet="abc-.", max_size=10),
    hostile=st.one_of(
        st.sampled_from(["\t", "\n", " ", "/", "\\", "\x00", "\u200b"]), st.characters().filter(_hostile)
    ),
    after=st.text(max_size=10),
)
def test_a_job_name_holding_a_hostile_character_is_refused_naming_it(before: str, hostile: str, after: str) -> None:
    """Whatever the rest of the document, a hostile character anywhere in the job name is refused,
    naming the field, the character and where it is."""
    doc = copy.deepcopy(_base())
    doc["cluster"]["job_name"] = before + hostile + after
    try:
        schema.from_dict(doc)
    except UserError as exc:
        assert f"cluster.job_name={before + hostile + after!r} contains " in str(exc)
        assert f"{hostile!r} (U+{ord(hostile):04X}) at position {len(before)}" in str(exc)
    else:
        raise AssertionError(f"job name {before + hostile + after!r} was accepted")
