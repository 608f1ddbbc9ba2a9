"""The reference pages, generated from the code and committed, so the Markdown reads on its own
(in the repository as on the site) and cannot drift from the code. Run from the repository root:

    python -m scripts.reference            # rewrite the generated regions of the pages
    python -m scripts.reference --check    # exit 1 naming each stale page (tests/test_docs.py checks this)

A page is hand-written prose around regions, each between `<!-- generated: NAME ... -->` and
`<!-- end generated: NAME -->`; only the regions are rewritten, each by its entry in `REGIONS`:

- `violation codes` (docs/reference/violations.md): one entry per code the rule set can emit
  (`rlaunch.rules.CODES` and the literal codes the rules and the experiment side raise), each with
  the fields it names, its message and its fix as the source states them (read with `ast` from the
  call that raises it; `{...}` stands for a value filled in at run time).
- `rlaunch`, `experiment options` (docs/reference/cli.md): the Click commands' help in the layout of
  mkdocs-click's plain style, which the site used before (usage and options as `--help` prints them
  at 78 columns; a group lists each subcommand with its first sentence); a heading is the command's
  path, so its anchor is the one mkdocs-click gave it.

Pure Python over the standard library and Click: no Markdown, MkDocs or third-party renderer.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import html
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "rlaunch"
PAGES = (REPO / "docs" / "reference" / "violations.md", REPO / "docs" / "reference" / "cli.md")
COMMAND = "python -m scripts.reference"
RAISERS = ("violation", "PreflightError")  # the calls whose first argument is a code
WIDTH = 78  # click's help width on a terminal of 80 columns or more (mkdocs-click's, in a build)


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
        return "{" + ast.unparse(_RecipeKeys().visit(inner)) + "}"
    if isinstance(node, ast.IfExp):
        return f"{_text(node.body, names)}; otherwise {_text(node.orelse, names)}"
    if isinstance(node, ast.Name) and node.id in names:
        return _text(names[node.id], {})
    key = _recipe_key(node)
    if key is not None:
        return key
    return "{" + ast.unparse(_RecipeKeys().visit(node)) + "}"


def _recipe_key(node: ast.AST) -> str | None:
    """The key a recipe key constant names (`TRAINER.RESUME_MODE`: "trainer.resume_mode"): the
    page shows the key a rule reports, not the constant's name."""
    from rlaunch.launch_config import recipe_keys

    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    namespace = next((ns for ns in recipe_keys.NAMESPACES if ns.__name__ == node.value.id), None)
    return recipe_keys.namespace_keys(namespace).get(node.attr) if namespace else None


class _RecipeKeys(ast.NodeTransformer):
    """Each recipe key constant inside an expression written as its key (`g('trainer.resume_mode')`)."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        key = _recipe_key(node)
        return ast.Constant(key) if key is not None else node


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


# A code is a literal somewhere in the module that raises it, but for a family's template (`f"{kind}.too_large"`).
_MAY_RAISE = re.compile(rf"""["'][a-z][a-z0-9_]*\.[a-z][a-z0-9_]*["']|\b(?:{"|".join(RAISERS)})\(\s*f["']""")


def sites(src: Path = SRC) -> dict[str, list[Site]]:
    """Every code written at a call in rlaunch (adapters aside), with what each call says of it."""
    out: dict[str, list[Site]] = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith("runtimes/adapters/"):
            continue
        text = path.read_text(encoding="utf-8")
        if not _MAY_RAISE.search(text):  # most modules: parsing and walking them is most of the time
            continue
        module = ast.parse(text)
        tables = _tables(module)
        for name, function in _functions(module):
            names = functools.cache(functools.partial(_assignments, function))  # read only at a raise
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
                    out.setdefault(_text(first, {}), []).append(_site(node, 0, f"{rel} ({name})", {}, names()))
                    continue
                for i, arg in enumerate(node.args):
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _looks_like_code(arg.value):
                        if i == 0 or getattr(node.func, "id", None) not in RAISERS:
                            site = _site(node, i, f"{rel} ({name})", {}, names())
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


def _slug(text: str) -> str:
    """The anchor Python-Markdown's toc (and so mkdocs-click) gives a heading."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def summary(command: click.Command) -> str:
    """Its short help, else the first sentence of its help: whole, where a first line can stop mid-sentence."""
    if command.short_help:
        return command.short_help
    paragraph = " ".join(inspect.cleandoc(command.help or "").split("\n\n", 1)[0].split())
    return re.split(r"(?<=[.?!])\s", paragraph, maxsplit=1)[0]


def _help_lines(ctx: click.Context, depth: int, list_subcommands: bool) -> Iterator[str]:
    """One command's section, then its subcommands' (sorted by name), each a level deeper."""
    command = ctx.command
    if command.hidden:
        return
    yield from (f"{'#' * (depth + 1)} {ctx.command_path}", "")
    description = command.help or command.short_help
    if description:
        yield from (*inspect.cleandoc(description).splitlines(), "")
    formatter = ctx.make_formatter()
    formatter.write_usage(ctx.command_path, " ".join(command.collect_usage_pieces(ctx)), prefix="")
    yield from ("**Usage:**", "", "```text", formatter.getvalue().strip(), "```", "")
    formatter = ctx.make_formatter()
    click.Command.format_options(command, ctx, formatter)
    options = formatter.getvalue().splitlines()[1:]  # the first line is the heading "Options:"
    if options:
        yield from ("**Options:**", "", "```text", *options, "```", "")
    contexts: list[click.Context] = []
    if isinstance(command, click.Group):  # `rlaunch`'s subcommands load lazily: get_command imports each
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None:
                contexts.append(sub.context_class(sub, info_name=name, parent=ctx, **sub.context_settings))
    if list_subcommands and contexts:
        yield from ("**Subcommands**", "")
        for sub in (c for c in contexts if not c.command.hidden):
            what = summary(sub.command) or "*No description was provided with this command.*"
            yield f"- *[{sub.info_name}](#{_slug(sub.command_path)})*: {what}"
        yield ""
    for sub in contexts:
        yield from _help_lines(sub, depth + 1, list_subcommands)


def command_markdown(command: click.Command, prog_name: str, depth: int = 2, list_subcommands: bool = False) -> str:
    """The help of `command`, called `prog_name`, and its subcommands' (headings from level `depth` + 1)."""
    ctx = command.context_class(command, info_name=prog_name, terminal_width=WIDTH, **command.context_settings)
    return "\n".join(line for line in _help_lines(ctx, depth, list_subcommands) if line.strip() != "\b")


def _command(target: str) -> click.Command:
    """The Click command at `module:attribute`."""
    module, _, attribute = target.partition(":")
    command: click.Command = getattr(importlib.import_module(module), attribute)
    return command


REGIONS: dict[str, Callable[[], str]] = {
    "violation codes": violations_markdown,
    "rlaunch": lambda: command_markdown(_command("rlaunch.cli.admin:main"), "rlaunch", list_subcommands=True),
    "experiment options": lambda: command_markdown(_command("experiments.smoke:main"), "python -m experiments.smoke"),
}
_REGION = re.compile(
    r"(?P<begin><!-- generated: (?P<name>[^;>]+?)(?:;[^>]*)? -->\n)(?s:.*?)(?P<end>^<!-- end generated: (?P=name) -->)",
    re.M,
)


def regions(page: str) -> list[str]:
    """The names of the generated regions of a page, in order."""
    return [m["name"] for m in _REGION.finditer(page)]


def generated(page: str) -> str:
    """`page` with each generated region rewritten by its generator."""

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in REGIONS:
            raise SystemExit(
                f"generated region {name!r} has no generator: name one of {sorted(REGIONS)} in its markers, "
                "or add its generator to REGIONS in scripts/reference.py"
            )
        return f"{match['begin']}\n{REGIONS[name]().strip()}\n\n{match['end']}"

    return _REGION.sub(fill, page)


def stale() -> dict[Path, str]:
    """Each page whose committed text differs from what the generators write now, with that text."""
    pages = {page: page.read_text(encoding="utf-8") for page in PAGES}
    fresh = {page: generated(text) for page, text in pages.items()}
    return {page: text for page, text in fresh.items() if text != pages[page]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is stale")
    check = parser.parse_args(argv).check
    pages = stale()
    for page, text in pages.items():
        if check:
            print(f"{page.relative_to(REPO)} is stale: regenerate it with `{COMMAND}`")
        else:
            page.write_text(text, encoding="utf-8")
            print(f"{page.relative_to(REPO)} written")
    return 1 if check and pages else 0


if __name__ == "__main__":
    sys.exit(main())
