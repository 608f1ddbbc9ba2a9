"""The one strict YAML reader for launch documents and recipes: plain data or a `DocumentError`.

PyYAML's safe loader follows YAML 1.1, which turns `1:30` into 90, `010` into 8, `yes` into
True and `2026-11-30` into a date, lets a duplicate key silently win, and builds recursive
structures from anchors. Launch documents and recipes are configuration written by people and
by rlaunch, so this reader accepts only what reads the same to both:

- YAML 1.2 core scalars: `null`/`~`, `true`/`false`, decimal, `0x` and `0o` integers, decimal
  floats (`1e-3` is a float); everything else is a string (`1:30`, `yes`, `2026-11-30`).
- An integer written with a leading zero (`010`) is refused, not guessed: it is 8 to YAML 1.1,
  10 to YAML 1.2 and a string to a person who meant a revision; quote it or drop the zero.
- NaN and infinity are refused wherever they appear (no numeric field means either).
- Duplicate keys, non-string keys and explicit tags (`!!python/...`, `!!str`) are refused.
- Anchors and aliases are bounded, not refused (`yaml.safe_dump` writes them for shared values):
  an alias to its own enclosing anchor (a recursive structure) is refused, and a document may
  expand to at most `MAX_NODES` nodes and `MAX_DEPTH` levels.
- At most `MAX_BYTES` of UTF-8 text (no NUL or other binary bytes).

Every problem names the source, the line and column, the value and the fix.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, CollectionStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.resolver import Resolver

from rlaunch import storage
from rlaunch.launch_config.typed import DocumentError

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 100_000  # after expanding aliases
MAX_INT_DIGITS = 100

_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")
_INT_LEADING_ZERO = re.compile(r"[-+]?0[0-9]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_OCT = re.compile(r"0o[0-7]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_NON_FINITE = re.compile(r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
_NULL = re.compile(r"null|Null|NULL|~|")
_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")

_TAG = "tag:yaml.org,2002:"


class _Refused(Exception):
    """A problem found while composing, with the node's position and key path."""

    def __init__(self, mark: Any, message: str, path: str = ""):
        self.mark = mark
        self.path = path
        super().__init__(message)


def _dotted(segments: list[str]) -> str:
    return "".join(s if s.startswith("[") or i == 0 else f".{s}" for i, s in enumerate(segments))


try:  # libyaml's parser (events) under a Python composer: five times faster, same checks
    from yaml._yaml import CParser

    class _Base(Composer, CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _Base = yaml.SafeLoader  # type: ignore[misc]


class _StrictLoader(_Base):
    """A safe loader with YAML 1.2 core resolution and the refusals above."""

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}
    yaml_constructors = dict(yaml.SafeLoader.yaml_constructors)

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._open_anchors: set[str] = set()
        self._measure: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, expanded depth)
        self._segments: list[str] = []
        self._paths: dict[int, str] = {}  # id(node) -> key path of its first occurrence

    def path_of(self, node: Node) -> str:
        return self._paths.get(id(node), "")

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        segment = index.value if isinstance(index, ScalarNode) else f"[{index}]" if isinstance(index, int) else None
        if segment is not None:
            self._segments.append(str(segment))
        try:
            node = self._compose(parent, index)
            self._paths.setdefault(id(node), _dotted(self._segments))
            return node
        except _Refused as exc:
            exc.path = exc.path or _dotted(self._segments)
            raise
        finally:
            if segment is not None:
                self._segments.pop()

    def _compose(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            if event.anchor in self._open_anchors:
                raise _Refused(
                    event.start_mark,
                    f"alias *{event.anchor} refers to its own anchor (a recursive structure) and is refused; "
                    "write the value out",
                )
            return super().compose_node(parent, index)
        tag = getattr(event, "tag", None)
        if tag is not None and tag != "!":
            raise _Refused(event.start_mark, f"tag {tag} refused: tags are not allowed; write plain YAML values")
        if not isinstance(event, CollectionStartEvent):
            node = super().compose_node(parent, index)
            self._measure[id(node)] = (1, 0)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(event.start_mark, f"nesting deeper than {MAX_DEPTH} levels refused; flatten the document")
        anchor = event.anchor
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open_anchors.discard(anchor)
        children = [c for pair in node.value for c in pair] if isinstance(node, MappingNode) else node.value
        measures = [self._measure[id(c)] for c in children]
        size = 1 + sum(m[0] for m in measures)
        depth = 1 + max((m[1] for m in measures), default=0)
        if size > MAX_NODES or depth > MAX_DEPTH:
            raise _Refused(
                event.start_mark,
                f"this value expands (through aliases) to {size} nodes and {depth} levels, over the limits of "
                f"{MAX_NODES} nodes and {MAX_DEPTH} levels; write it out plainly",
            )
        self._measure[id(node)] = (size, depth)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, Any] = {}
        where = self.path_of(node)
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode):
                raise _Refused(
                    key_node.start_mark, "a sequence or mapping as a key refused: keys must be strings", where
                )
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                raise _Refused(key_node.start_mark, f"key {key!r} refused: keys must be strings; quote it", where)
            if key in seen:
                raise _Refused(
                    key_node.start_mark,
                    f"duplicate key {key!r} (first at line {seen[key].line + 1}); keep one of them",
                    f"{where}.{key}" if where else key,
                )
            seen[key] = key_node.start_mark
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def _construct_int(loader: _StrictLoader, node: ScalarNode) -> int:
    text = node.value
    if len(text) > MAX_INT_DIGITS:
        raise _Refused(
            node.start_mark,
            f"an integer of {len(text)} digits refused (at most {MAX_INT_DIGITS})",
            loader.path_of(node),
        )
    if _HEX.fullmatch(text):
        return int(text, 16)
    if _OCT.fullmatch(text):
        return int(text[2:], 8)
    return int(text)


def _construct_float(loader: _StrictLoader, node: ScalarNode) -> float:
    value = float(node.value)
    if not math.isfinite(value):
        raise _Refused(node.start_mark, f"{node.value} refused: numbers must be finite", loader.path_of(node))
    return value


def _refuse_non_finite(loader: _StrictLoader, node: ScalarNode) -> float:
    raise _Refused(
        node.start_mark,
        f"{node.value} refused: NaN and infinity are not allowed; write a finite number",
        loader.path_of(node),
    )


def _refuse_leading_zero(loader: _StrictLoader, node: ScalarNode) -> int:
    digits = node.value.lstrip("+-").lstrip("0") or "0"
    raise _Refused(
        node.start_mark,
        f"{node.value} refused: an integer with a leading zero is ambiguous (8 in YAML 1.1, 10 in YAML 1.2); "
        f"write {node.value[0] if node.value[0] in '+-' else ''}{digits}, or quote it if a string was meant",
        loader.path_of(node),
    )


_NON_FINITE_TAG = "tag:rlaunch,2026:non-finite"
_LEADING_ZERO_TAG = "tag:rlaunch,2026:leading-zero"

# Order matters only where patterns overlap (an int also matches the float pattern).
for _tag, _pattern, _first in (
    (_TAG + "null", _NULL, ["~", "n", "N", ""]),
    (_TAG + "bool", _BOOL, list("tTfF")),
    (_LEADING_ZERO_TAG, _INT_LEADING_ZERO, list("-+0")),
    (_TAG + "int", re.compile(f"{_INT.pattern}|{_HEX.pattern}|{_OCT.pattern}"), list("-+0123456789")),
    (_TAG + "float", _FLOAT, list("-+.0123456789")),
    (_NON_FINITE_TAG, _NON_FINITE, list("-+.")),
):
    _StrictLoader.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern.pattern})$"), _first)
_StrictLoader.add_constructor(_TAG + "int", _construct_int)
_StrictLoader.add_constructor(_TAG + "float", _construct_float)
_StrictLoader.add_constructor(_NON_FINITE_TAG, _refuse_non_finite)
_StrictLoader.add_constructor(_LEADING_ZERO_TAG, _refuse_leading_zero)


def _where(source: str, mark: Any, path: str = "") -> str:
    where = f"{source} line {mark.line + 1}, column {mark.column + 1}" if mark is not None else source
    return f"{where} ({path})" if path else where


def load_yaml(text: str | bytes, *, source: str, what: str = "launch document") -> Any:
    """The plain data of one YAML document, read strictly (see the module docstring)."""
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise DocumentError([f"{source}: over the {MAX_BYTES}-byte limit; is this the right file?"], what)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(
                [f"{source}: byte {exc.start} is not UTF-8 (a binary file?); save the document as UTF-8 text"], what
            ) from None
    if len(text) > MAX_BYTES:
        raise DocumentError([f"{source}: over the {MAX_BYTES}-character limit; is this the right file?"], what)
    if "\x00" in text:
        raise DocumentError([f"{source}: contains NUL bytes (a binary file?); give a YAML text document"], what)
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise DocumentError([f"{_where(source, exc.mark, exc.path)}: {exc}"], what) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = text.splitlines()[mark.line] if mark is not None and mark.line < len(text.splitlines()) else ""
        hint = "; YAML indents with spaces, never tabs" if "\t" in line else ""
        raise DocumentError(
            [f"{_where(source, mark)}: {exc.problem or ' '.join(str(exc).split())}{hint}; fix the YAML syntax"], what
        ) from None
    except yaml.YAMLError as exc:
        detail = str(exc).split("\n", 1)[0]  # e.g. a control character; the position follows on later lines
        raise DocumentError([f"{source}: not valid YAML ({detail}); fix the YAML syntax"], what) from None
    finally:
        loader.dispose()


def read_document(url: str, *, what: str = "launch document") -> bytes:
    """The bytes of the document at `url` (at most `MAX_BYTES` + 1), or a DocumentError saying why not."""
    if not isinstance(url, str) or not url.strip():
        raise DocumentError([f"the document path is empty ({url!r}); give the path or URL of a {what}"], what)
    if storage.is_local(url):  # the common case reads without importing fsspec
        path, is_dir, opener = storage.local_path(url), os.path.isdir, open
    else:
        fs, path = storage.filesystem(url)
        is_dir, opener = fs.isdir, fs.open
    try:
        if is_dir(path):
            raise DocumentError([f"{url} is a directory; give the {what} file itself"], what)
        with opener(path, "rb") as handle:
            return handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise DocumentError([f"{url} does not exist; check the path"], what) from None
    except PermissionError:
        raise DocumentError([f"{url} cannot be read (permission denied); check its permissions"], what) from None
    except OSError as exc:
        raise DocumentError([f"{url} cannot be read ({exc.strerror or exc}); check the path"], what) from None


class _PlainDumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML is untyped here: its classes are Any
    """Writes every value out, never as an anchor and aliases: what is written reads back plainly."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


# A string is written plain only when neither reader takes it for something else: the strict loader
# (YAML 1.2 core: `413257706e23` is a float there) and PyYAML's YAML 1.1 `safe_load`, which the
# runtime adapters use (`yes`, `1:30`). Anything either would resolve is quoted.
_PlainDumper.yaml_implicit_resolvers = {
    first: [
        *yaml.SafeDumper.yaml_implicit_resolvers.get(first, []),
        *_StrictLoader.yaml_implicit_resolvers.get(first, []),
    ]
    for first in {*yaml.SafeDumper.yaml_implicit_resolvers, *_StrictLoader.yaml_implicit_resolvers}
}


def dump_yaml(data: Any) -> str:
    """Plain data as block YAML, in the key order given, that `load_yaml` reads back unchanged."""
    text: str = yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False)
    return text
