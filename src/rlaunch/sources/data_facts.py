"""The facts a data artifact records at build, per split: rows, field names, where a field is missing.

A split is one data file of the artifact (`train.jsonl`, `test.parquet`), named by its path
relative to the artifact. For JSON lines every row is read: its field names (the union over
rows) and, for a field some rows lack, the index of the first such row. For parquet the footer
alone is read (no pyarrow here): the row count and the top-level columns, which every row has.
The preflight reads these facts to refuse data whose rows lack a field the runtime reads
(`rlaunch.rules.data_rules`), before anything is allocated.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from rlaunch import storage

DATA_SUFFIXES = (".jsonl", ".json", ".parquet")
PARQUET_MAGIC = b"PAR1"


class DataFactsError(ValueError):
    """A data file could not be read as rows (names the file, the line or the byte)."""


@dataclass(frozen=True)
class SplitFacts:
    rows: int
    fields: tuple[str, ...]
    first_missing: dict[str, int] = field(default_factory=dict)  # field -> first row index without it

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "fields": list(self.fields), "first_missing": dict(self.first_missing)}

    @classmethod
    def from_json(cls, data: Any) -> SplitFacts | None:
        if not isinstance(data, dict) or not isinstance(data.get("rows"), int):
            return None
        return cls(data["rows"], tuple(data.get("fields") or ()), dict(data.get("first_missing") or {}))

    def missing(self, name: str) -> int | None:
        """The index of a row that lacks `name` (None: every row has it)."""
        if name not in self.fields:
            return 0 if self.rows else None
        return self.first_missing.get(name)


def split_facts(root: str) -> dict[str, dict[str, Any]]:
    """{relative path: facts} for every data file under `root` (JSON-ready, for the record)."""
    fs, base = storage.filesystem(root)
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(fs.find(base)):
        relative = path[len(base.rstrip("/")) + 1 :] if path.startswith(base.rstrip("/") + "/") else path
        if not relative.endswith(DATA_SUFFIXES) or relative.startswith(".") or "/." in relative:
            continue
        with fs.open(path, "rb") as handle:
            facts = _parquet(handle, relative) if relative.endswith(".parquet") else _json_lines(handle, relative)
        found[relative] = facts.to_json()
    return found


def _rows(handle: BinaryIO, where: str) -> Iterator[dict[str, Any]]:
    text = handle.read().decode("utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):  # a .json array of rows
        rows = json.loads(stripped)
        yield from (r if isinstance(r, dict) else {} for r in rows)
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFactsError(f"{where}:{number}: not a JSON line ({exc.msg})") from None
        yield row if isinstance(row, dict) else {}


def _json_lines(handle: BinaryIO, where: str) -> SplitFacts:
    seen: dict[str, int] = {}  # field -> rows that have it
    first_missing: dict[str, int] = {}
    rows = 0
    for index, row in enumerate(_rows(handle, where)):
        for name in seen:
            if name not in row:
                first_missing.setdefault(name, index)
        for name in row:
            if name not in seen:
                seen[name] = 0
                if index:
                    first_missing[name] = 0  # earlier rows lacked it
            seen[name] += 1
        rows = index + 1
    return SplitFacts(rows, tuple(seen), first_missing)


# --- parquet footer: Thrift compact protocol, only as far as FileMetaData's schema and num_rows ---


def _parquet(handle: BinaryIO, where: str) -> SplitFacts:
    handle.seek(0, 2)
    size = handle.tell()
    if size < 12:
        raise DataFactsError(f"{where}: too short to be a parquet file ({size} bytes)")
    handle.seek(size - 8)
    tail = handle.read(8)
    if tail[4:] != PARQUET_MAGIC:
        raise DataFactsError(f"{where}: not a parquet file (no PAR1 footer)")
    (length,) = struct.unpack("<I", tail[:4])
    handle.seek(size - 8 - length)
    reader = _Compact(handle.read(length), where)
    schema, num_rows = reader.file_metadata()
    return SplitFacts(num_rows, tuple(schema))


class _Compact:
    """Just enough of the Thrift compact protocol to read FileMetaData fields 2 (schema) and 3 (num_rows)."""

    def __init__(self, data: bytes, where: str):
        self.data, self.pos, self.where = data, 0, where

    def _byte(self) -> int:
        if self.pos >= len(self.data):
            raise DataFactsError(f"{self.where}: parquet footer ends early")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def _varint(self) -> int:
        shift = result = 0
        while True:
            byte = self._byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def _zigzag(self) -> int:
        n = self._varint()
        return (n >> 1) ^ -(n & 1)

    def _binary(self) -> bytes:
        n = self._varint()
        value = self.data[self.pos : self.pos + n]
        self.pos += n
        return value

    def _fields(self) -> Iterator[tuple[int, int]]:
        """(field id, type) of each field of the struct at the cursor, until its stop byte."""
        last = 0
        while True:
            header = self._byte()
            if header == 0:
                return
            delta, kind = header >> 4, header & 0x0F
            last = last + delta if delta else self._zigzag()
            yield last, kind

    def _list_header(self) -> tuple[int, int]:
        header = self._byte()
        size = header >> 4
        return (self._varint() if size == 15 else size), header & 0x0F

    def _skip(self, kind: int) -> None:
        if kind in (1, 2):  # booleans live in the type nibble
            return
        if kind == 3:
            self.pos += 1
        elif kind in (4, 5, 6):
            self._varint()
        elif kind == 7:
            self.pos += 8
        elif kind == 8:
            self._binary()
        elif kind in (9, 10):
            size, element = self._list_header()
            for _ in range(size):
                self._skip(element)
        elif kind == 11:
            size = self._varint()
            if size:
                types = self._byte()
                for _ in range(size):
                    self._skip(types >> 4)
                    self._skip(types & 0x0F)
        elif kind == 12:
            for _, inner in self._fields():
                self._skip(inner)
        else:
            raise DataFactsError(f"{self.where}: unreadable parquet footer (Thrift type {kind})")

    def _schema_element(self) -> tuple[str, int]:
        name, children = "", 0
        for fid, kind in self._fields():
            if fid == 4 and kind == 8:
                name = self._binary().decode("utf-8")
            elif fid == 5 and kind == 5:
                children = self._zigzag()
            else:
                self._skip(kind)
        return name, children

    def file_metadata(self) -> tuple[list[str], int]:
        elements: list[tuple[str, int]] = []
        num_rows = 0
        for fid, kind in self._fields():
            if fid == 2 and kind == 9:
                size, _ = self._list_header()
                elements = [self._schema_element() for _ in range(size)]
            elif fid == 3 and kind == 6:
                num_rows = self._zigzag()
            else:
                self._skip(kind)
        return _top_level(elements), num_rows


def _top_level(elements: list[tuple[str, int]]) -> list[str]:
    """The root's direct children, skipping each child's own subtree."""
    names, index = [], 1
    for _ in range(elements[0][1] if elements else 0):
        name, _children = elements[index]
        names.append(name)
        index = _after_subtree(elements, index)
    return names


def _after_subtree(elements: list[tuple[str, int]], index: int) -> int:
    _, children = elements[index]
    index += 1
    for _ in range(children):
        index = _after_subtree(elements, index)
    return index
