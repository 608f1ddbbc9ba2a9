"""MkDocs hooks: pages generated from the code, so they cannot drift from it.

`reference/violations.md` carries a marker that is replaced, at every build, by one entry per code
the rule set can emit (`rlaunch.rules.CODES` and the literal codes the rules and the experiment
side raise), each with the fields it names, its message and its fix as the source states them
(read with `ast` from the call that raises it; `{...}` stands for a value filled in at run time).
tests/test_docs.py compares the page's entries with the rule set.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src" / "rlaunch"
VIOLATIONS_MARKER = "<!-- generated: violation codes -->"
RAISERS = ("violation", "PreflightError")  # the calls whose first argument is a code


@dataclass(frozen=True)
class Site:
    """One place that emits a code: its fields, message and fix as written there."""

    where: str  # module path under src/rlaunch and the function
    fields: tuple[str, ...]
    message: str
    fix: str
    context: str = ""  # the raising function's docstring, first line: what a run-time message is about


def _text(node: ast.expr, names: dict[str, ast.expr]) -> str:
    """A string expression as text, run-time values shown as `{expression}`; names bound in the table it reads are filled in."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v, names) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        inner = node.value
        if isinstance(inner, ast.Name) and inner.id in names:
            return _text(names[inner.id], {})
        return "{" + ast.unparse(inner) + "}"
    if isinstance(node, ast.IfExp):
        return f"{_text(node.body, names)}; otherwise {_text(node.orelse, names)}"
    if isinstance(node, ast.Name) and node.id in names:
        return _text(names[node.id], {})
    return "{" + ast.unparse(node) + "}"


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, (ast.JoinedStr, ast.IfExp, ast.Name)) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _site(call: ast.Call, code_at: int, where: str, row: dict[str, ast.expr], assigned: dict[str, ast.expr]) -> Site:
    """`violation(code, fields, message, fix)` by position; another constructor (`RecipeProblem(code,
    path, value, message, fix)`) by its last two texts. `row`: names bound by the table the rule
    reads (filled in everywhere); `assigned`: the function's assignments (filled in for an argument
    that is a bare name, such as a fix computed before the call)."""
    rest = call.args[code_at + 1 :]
    fields = next((a for a in rest if isinstance(a, ast.List)), None)
    if (
        getattr(call.func, "id", None) or getattr(call.func, "attr", None)
    ) in RAISERS and code_at == 0:  # rules.violation too
        texts = rest[1:3]
    else:
        texts = [a for a in rest if _is_text(a) and not (isinstance(a, ast.Name) and a.id not in assigned)][-2:]

    def text(node: ast.expr) -> str:
        if isinstance(node, ast.Name) and node.id not in row and node.id in assigned:
            return _text(assigned[node.id], row)
        return _text(node, row)

    message, fix = (text(t) for t in [*texts, ast.Constant(""), ast.Constant("")][:2])
    return Site(where, tuple(text(f) for f in fields.elts) if fields else (), message, fix)


def _assignments(function: ast.AST) -> dict[str, ast.expr]:
    return {
        t.id: node.value
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def _tables(module: ast.Module) -> dict[str, ast.Dict]:
    """Module-level dict literals: a rule may choose its code from one (`EXPLICIT_KEYS`)."""
    return {
        t.id: node.value
        for node in module.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def _table_rows(comp: ast.comprehension, tables: dict[str, ast.Dict]) -> Iterator[dict[str, ast.expr]]:
    """For `for key, (code, what) in TABLE.items()`: each row's names bound to its expressions."""
    it = comp.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items"):
        return
    table = tables.get(getattr(it.func.value, "id", ""))
    if table is None or not isinstance(comp.target, ast.Tuple) or len(comp.target.elts) != 2:
        return
    key_target, value_target = comp.target.elts
    for key, value in zip(table.keys, table.values, strict=True):
        if key is None:
            continue
        row: dict[str, ast.expr] = {}
        if isinstance(key_target, ast.Name):
            row[key_target.id] = key
        if isinstance(value_target, ast.Tuple) and isinstance(value, ast.Tuple):
            row.update(
                {t.id: v for t, v in zip(value_target.elts, value.elts, strict=False) if isinstance(t, ast.Name)}
            )
        elif isinstance(value_target, ast.Name):
            row[value_target.id] = value
        yield row


def _functions(module: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node


def sites(src: Path = SRC) -> dict[str, list[Site]]:
    """Every code written at a call in rlaunch (adapters aside), with what each call says of it."""
    out: dict[str, list[Site]] = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith("runtimes/adapters/"):
            continue
        module = ast.parse(path.read_text(encoding="utf-8"))
        tables = _tables(module)
        for name, function in _functions(module):
            names = _assignments(function)
            doc = (ast.get_docstring(function) or "").split("\n", 1)[0]
            for node in ast.walk(function):
                if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and isinstance(node.elt, ast.Call):
                    call = node.elt
                    first = call.args[0] if call.args else None
                    if getattr(call.func, "id", None) in RAISERS and isinstance(first, ast.Name):
                        for row in _table_rows(node.generators[0], tables):
                            code = row.get(first.id)
                            if isinstance(code, ast.Constant) and isinstance(code.value, str):
                                out.setdefault(code.value, []).append(_site(call, 0, f"{rel} ({name})", row, {}))
                if not isinstance(node, ast.Call):
                    continue
                first = node.args[0] if node.args else None
                if getattr(node.func, "id", None) in RAISERS and isinstance(first, ast.JoinedStr):
                    # f"{kind}.too_large": one call for a family of codes, kept under its template
                    out.setdefault(_text(first, {}), []).append(_site(node, 0, f"{rel} ({name})", {}, names))
                    continue
                for i, arg in enumerate(node.args):
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _looks_like_code(arg.value):
                        if i == 0 or getattr(node.func, "id", None) not in RAISERS:
                            site = _site(node, i, f"{rel} ({name})", {}, names)
                            if site.message:
                                out.setdefault(arg.value, []).append(dataclasses.replace(site, context=doc))
                        break
    return out


def _looks_like_code(text: str) -> bool:
    return re.fullmatch(r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*", text) is not None


def emitted_codes(src: Path = SRC) -> list[str]:
    """The codes the rule set can emit: the registry's, then those the rules and the experiment side raise
    literally (`PreflightError.combine` raises through `cls`)."""
    from rlaunch import rules

    literal: list[str] = []
    for path in [*sorted((src / "rules").glob("*.py")), *sorted((src / "skyrl").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (*RAISERS, "cls"):
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    literal.append(first.value)
    return list(dict.fromkeys([*rules.CODES, *sorted(literal)]))


def _templated(found: dict[str, list[Site]], code: str) -> list[Site]:
    """The sites whose code is a template (`{kind}.too_large`) that `code` fits."""
    return [
        site
        for key, sites in found.items()
        if "{" in key and re.fullmatch(re.sub(r"\\\{[^}]*\\\}", "[a-z_]+", re.escape(key)), code)
        for site in sites
    ]


def _md(text: str) -> str:
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", html.escape(text, quote=False))


def violations_markdown(src: Path = SRC) -> str:
    """One entry per emitted code, grouped by the code's family (the part before the dot)."""
    found = sites(src)
    lines: list[str] = []
    family = None
    for code in sorted(emitted_codes(src)):
        if code.split(".")[0] != family:
            family = code.split(".")[0]
            lines += [f"## {family}", ""]
        lines += [f"### `{code}`", ""]
        entries = list(dict.fromkeys(found.get(code) or _templated(found, code)))
        for site in entries:
            lines.append(f"- **where**: `{site.where}`")
            if site.fields:
                lines.append("- **fields**: " + ", ".join(f"`{f}`" for f in site.fields))
            lines.append(f"- **meaning**: {_md(site.message)}")
            if site.context and re.fullmatch(r"(\{[^}]*\}\W*)+", site.message):  # the message is all run-time values
                lines.append(f"- **context**: {_md(site.context)}")
            lines.append(f"- **fix**: {_md(site.fix)}")
            lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: fill the generated sections of a page."""
    if VIOLATIONS_MARKER in markdown:
        return markdown.replace(VIOLATIONS_MARKER, violations_markdown())
    return markdown
