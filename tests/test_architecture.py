"""The import table in ARCHITECTURE.md holds for every module under src/rlaunch.

The table is read from ARCHITECTURE.md itself (one source: a new package is one new row), and
every import is checked, top-level or inside a function, absolute or relative. A module whose
package has no row is a failure too. The checker proves itself on synthetic modules: an upward,
a sideways and a relative bad edge are flagged, and allowed edges are not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
GROUND = "ground floor"

Table = dict[str, frozenset[str]]


def import_table(text: str) -> Table:
    """{package: packages it may import} from the `| package | owns | may import |` table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.replace(" ", "") == "|package|owns|mayimport|")
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert rows, "ARCHITECTURE.md has no import table"
    ground: set[str] = set()
    parsed: list[tuple[list[str], str]] = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        packages = re.findall(r"`(rlaunch[\w.]*)`", cells[0])
        parsed.append((packages, cells[-1]))
        if cells[-1] == GROUND:
            ground.update(packages)
    table: Table = {}
    for packages, may in parsed:
        allowed = set(re.findall(r"`(rlaunch[\w.]*)`", may))
        if GROUND in may:
            allowed |= ground
        for package in packages:
            table[package] = frozenset(allowed)
    return table


def owner(module: str, table: Table) -> str | None:
    """The table row a module belongs to: the longest package name that is it or a prefix of it
    (the root `rlaunch` row covers only the root module itself)."""
    best = None
    for package in table:
        if module == package or (package != "rlaunch" and module.startswith(package + ".")):
            if best is None or len(package) > len(best):
                best = package
    return best


def imported(module: str, source: str, is_package: bool = False) -> list[str]:
    """Every rlaunch module `source` (the code of `module`) imports, anywhere in the file."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "rlaunch":  # from rlaunch import storage
                out += [f"rlaunch.{a.name}" for a in node.names]
            else:
                out.append(target)
    return [m for m in out if m == "rlaunch" or m.startswith("rlaunch.")]


def violations(module: str, source: str, table: Table, is_package: bool = False) -> list[str]:
    home = owner(module, table)
    if home is None:
        return [f"{module}: its package has no row in ARCHITECTURE.md's import table"]
    found = []
    for target in imported(module, source, is_package):
        if target == "rlaunch":
            continue  # the root package itself imports nothing: `import rlaunch` (for its __file__) is fine anywhere
        there = owner(target, table)
        if there is None and target.count(".") == 1 and not (SRC / target.replace(".", "/")).exists():
            there = "rlaunch"  # a name of the root package (`from rlaunch import __version__`)
        if there is None:
            found.append(f"{module} imports {target}, which has no row in the import table")
        elif there != home and there not in table[home]:
            found.append(f"{module} imports {target}: {home} may not import {there}")
    return found


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted((SRC / "rlaunch").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


@pytest.fixture(scope="module")
def table() -> Table:
    return import_table((REPO / "ARCHITECTURE.md").read_text(encoding="utf-8"))


def test_the_table_names_the_ground_floor_and_every_package(table):
    for name in ("rlaunch.storage", "rlaunch.launch_config", "rlaunch.cluster", "rlaunch.observe", "rlaunch.cli"):
        assert name in table, name
    assert "rlaunch.storage" in table["rlaunch.observe"] and table["rlaunch.runtimes.adapters"] == frozenset()


def test_every_import_in_src_follows_the_table(table):
    found = []
    for module, path in modules():
        found += violations(module, path.read_text(encoding="utf-8"), table, path.name == "__init__.py")
    assert found == [], "imports ARCHITECTURE.md does not allow:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("rlaunch.storage", "from rlaunch.host import launch"),  # the ground floor importing upward
        ("rlaunch.artifacts.step", "def f():\n    import rlaunch.cli.experiment\n"),  # inside a function
        ("rlaunch.cluster.local.backend", "from rlaunch.skyrl import check_plan"),  # a backend reaching up
        ("rlaunch.observe.collect", "from rlaunch.control import cancel"),  # the reader importing a writer
        ("rlaunch.task.bootstrap", "from ..host import launch"),  # relative, sideways
        ("rlaunch.runtimes.adapters.trl_cpu.rlaunch_trl_cpu.recipe", "from rlaunch import storage"),
        ("rlaunch.launch_config.schema", "from rlaunch import runtimes"),
        ("rlaunch.newpackage.mod", "import os"),  # a package without a row
    ],
)
def test_the_checker_flags_a_bad_edge(table, module, source):
    assert violations(module, source, table), f"{module}: `{source}` was not flagged"


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("rlaunch.host.launch", "from rlaunch.cluster.protocol import Backend\nfrom rlaunch import storage"),
        ("rlaunch.observe.collect", "from rlaunch.runs.layout import METRICS\nfrom . import run_jobs"),
        ("rlaunch.cluster.gang.state", "from rlaunch.storage import utc_now\nfrom ..protocol import JobNotFoundError"),
        ("rlaunch.control.cancel", "def f():\n    from rlaunch.observe import run_jobs\n"),
    ],
)
def test_the_checker_allows_a_good_edge(table, module, source):
    assert violations(module, source, table) == []


def parallel_names(text: str) -> dict[str, int]:
    """{base name: how many packages hold it} from ARCHITECTURE.md's module-names table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.replace(" ", "") == "|basename|thesamerolein|")
    out = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        name, places = (c.strip() for c in line.strip("|").split("|"))
        out[name.strip("`")] = len(re.findall(r"`[\w/]+`", places)) or 2
    return out


def test_no_two_modules_share_a_base_name_unless_listed_as_parallel_roles():
    allowed = parallel_names((REPO / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    by_name: dict[str, list[str]] = {}
    for path in (SRC / "rlaunch").rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(path.name, []).append(str(path.relative_to(SRC)))
    shared = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    unlisted = {name: paths for name, paths in shared.items() if len(paths) > allowed.get(name, 1)}
    assert unlisted == {}, "modules that share a base name; rename them after what they hold, or list the role"


MAX_MODULE_LINES = 600  # a module past it holds more than one thing: split it by what each part holds


def too_long(paths: list[Path], limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """{module: its length} for each of `paths` longer than `limit` lines."""
    lengths = {str(path): len(path.read_text(encoding="utf-8").splitlines()) for path in paths}
    return {name: n for name, n in lengths.items() if n > limit}


def test_no_module_under_src_is_longer_than_600_lines():
    assert too_long(sorted(SRC.rglob("*.py"))) == {}, "split a long module by what its parts hold"


def test_a_module_of_exactly_the_limit_is_not_too_long_and_one_more_line_is(tmp_path):
    at, over = tmp_path / "at.py", tmp_path / "over.py"
    at.write_text("x = 1\n" * MAX_MODULE_LINES, encoding="utf-8")
    over.write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    assert too_long([at, over]) == {str(over): MAX_MODULE_LINES + 1}


# The views of a planned run read the launch document and the stored facts, nothing of the spec.
DOCUMENT_VIEWS = (
    "rlaunch.skyrl.views.plan_view",
    "rlaunch.skyrl.views.readiness",
    "rlaunch.judgement.parity",
    "rlaunch.judgement.planned",
    "rlaunch.judgement.judge",
    "rlaunch.skyrl.views.resume_check",
    "rlaunch.skyrl.views.gate_checks",
)
SPEC = "rlaunch.skyrl.values.spec"


def reaches(start: str, target: str, graph: dict[str, list[str]]) -> list[str] | None:
    """An import path from `start` to `target` through rlaunch modules (None: there is none)."""
    paths: dict[str, list[str]] = {start: [start]}
    todo = [start]
    while todo:
        module = todo.pop()
        for dep in graph.get(module, ()):
            if dep not in paths:
                paths[dep] = [*paths[module], dep]
                if dep == target:
                    return paths[dep]
                todo.append(dep)
    return None


def import_graph() -> dict[str, list[str]]:
    graph = {}
    for module, path in modules():
        graph[module] = imported(module, path.read_text(encoding="utf-8"), path.name == "__init__.py")
    return graph


@pytest.mark.parametrize("view", DOCUMENT_VIEWS)
def test_the_document_views_never_import_the_spec(view):
    graph = import_graph()
    assert view in graph, f"{view} is not a module under src/ (update DOCUMENT_VIEWS)"
    assert reaches(view, SPEC, graph) is None, f"{view} imports the spec: {' -> '.join(reaches(view, SPEC, graph))}"


def test_the_spec_check_finds_an_indirect_import():
    graph = {"a": ["b"], "b": ["c", SPEC], "c": []}
    assert reaches("a", SPEC, graph) == ["a", "b", SPEC]
    assert reaches("c", SPEC, graph) is None
