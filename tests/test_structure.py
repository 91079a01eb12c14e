"""The project's shape: no import cycles between its modules, no oversized modules, every folder explained.

A folder is explained when the nearest folder above it with a README.md or a package docstring names it
by its own path (`mirror/` in server's docstring, `server/mirror/` anywhere there): a mention of a
namesake elsewhere (`brain/knowledge/`) does not explain `server/knowledge/`.

Imports are read by tests/import_graph.py (the same graph tests/test_layers.py checks): wherever they
stand, dynamic ones with a literal name included, and to the module named, not the packages above it.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys
from collections.abc import Mapping, Set

import pytest

from tests import import_graph as imports

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "session", "brain", "server", "clients", "voice", "privates")
# Source files a person writes and reads; vendored, generated and data files are not modules.
SOURCE_SUFFIXES = {".py", ".js", ".cs", ".css", ".html", ".sh"}
MAX_LINES = 500
LEFT_OUT = ("clients/browser/vendor/",)


def import_graph() -> dict[str, frozenset[str]]:
    graph = imports.import_graph(ROOT, (*PACKAGES, "tests", "benchmarks"))
    assert graph.refused == (), graph.refused
    return dict(graph.edges)


def cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in graph:
                    continue
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_and_submodule_imports_are_resolved(tmp_path: pathlib.Path) -> None:
    modules = {"pkg": tmp_path / "__init__.py", "pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    (tmp_path / "a.py").write_text("from . import b\nfrom pkg.b import thing\n")
    assert imports.imports_of("pkg.a", modules["pkg.a"], modules).targets == {"pkg.b"}
    (tmp_path / "__init__.py").write_text("from .a import name\n")
    assert imports.imports_of("pkg", modules["pkg"], modules).targets == {"pkg.a"}


def test_no_module_of_the_project_is_part_of_an_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50, "the import graph looks empty: is ROOT right?"
    assert cycles(graph) == []


def test_nothing_in_server_imports_the_application_assembly() -> None:
    graph = import_graph()
    # The package re-exports create_app and the CLI runs it; nothing else in server/ may lean on it.
    importers = sorted(m for m, deps in graph.items() if "server.app" in deps and m.startswith("server"))
    assert set(importers) <= {"server", "server.cli"}, importers


def test_a_server_on_the_rule_brain_loads_no_model_sdk() -> None:
    """The model's SDK and its HTTP stack are some 20 MiB of a server's base RSS (docs/performance.md,
    by dependency); only the LLM brain's wiring loads them (server/wiring.py)."""
    probe = ("import sys, server.app; "
             "print(' '.join(m for m in ('openai', 'aiohttp', 'httpx2', 'tiktoken') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == []


def source_files() -> list[pathlib.Path]:
    files = []
    for package in (*PACKAGES, "tests", "benchmarks", "scripts"):
        for path in sorted((ROOT / package).rglob("*")):
            relative = path.relative_to(ROOT).as_posix()
            if path.suffix in SOURCE_SUFFIXES and not relative.startswith(LEFT_OUT) and "/bin/" not in relative:
                files.append(path)
    return files


def test_no_source_file_is_over_the_line_limit() -> None:
    files = source_files()
    assert len(files) > 50
    long = {
        path.relative_to(ROOT).as_posix(): n
        for path in files
        if (n := len(path.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def folders() -> list[pathlib.Path]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*")):
            if path.is_dir() and path.name not in {"__pycache__", "bin", "obj"}:
                found.append(path)
        found.append(ROOT / package)
    return sorted(set(found))


def documentation(folder: pathlib.Path) -> str:
    """What a folder says about itself: its README.md and its package docstring, if any."""
    parts = []
    if (folder / "README.md").exists():
        parts.append((folder / "README.md").read_text("utf-8"))
    if (folder / "__init__.py").exists():
        parts.append(ast.get_docstring(ast.parse((folder / "__init__.py").read_text("utf-8"))) or "")
    return "\n".join(parts)


def names_folder(text: str, path: str) -> bool:
    """Whether `text` names `path/` as a whole path: `brain/knowledge/` does not name `knowledge/`."""
    return re.search(rf"(?<![\w./-]){re.escape(path)}/", text) is not None


def explaining_folder(folder: pathlib.Path) -> pathlib.Path:
    """The nearest enclosing folder with a README.md or a package docstring (the root has a README)."""
    for parent in folder.parents:
        if documentation(parent).strip() or parent == ROOT:
            return parent
    raise AssertionError(f"{folder} is not under {ROOT}")


def explained_by_parent(folder: pathlib.Path) -> bool:
    """Whether the nearest documented folder above names `folder` by its path from there (or from the root)."""
    parent = explaining_folder(folder)
    text = documentation(parent)
    return names_folder(text, folder.relative_to(parent).as_posix()) or names_folder(
        text, folder.relative_to(ROOT).as_posix())


def test_a_folder_is_named_by_its_own_path_not_by_a_namesake() -> None:
    assert names_folder("- `knowledge/`: playbooks", "knowledge")
    assert names_folder("see server/knowledge/ for", "server/knowledge")
    assert not names_folder("`brain/knowledge/` chunks the notes", "knowledge")
    assert not names_folder("`brain/knowledge/` chunks the notes", "server/knowledge")
    assert not names_folder("the knowledge base", "knowledge")


@pytest.mark.parametrize("folder", folders(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_folder_is_named_by_its_path_where_its_parent_says_what_lives_there(folder: pathlib.Path) -> None:
    where = folder.relative_to(ROOT).as_posix()
    parent = explaining_folder(folder)
    said = (parent / "README.md") if (parent / "README.md").exists() else (parent / "__init__.py")
    assert explained_by_parent(folder), (
        f"{where}/ is not named in {said.relative_to(ROOT)}: say there what `{folder.relative_to(parent)}/` holds")
    for name in ("README.md", "VENDORED.md"):
        if (folder / name).exists():
            assert len((folder / name).read_text("utf-8").strip()) > 80, f"{where}/{name} says too little"
    init = folder / "__init__.py"
    if init.exists():
        docstring = ast.get_docstring(ast.parse(init.read_text("utf-8")))
        assert docstring and len(docstring) > 40, f"{where}/__init__.py has no docstring saying what lives there"


# Packages whose every module is named in its folder's README.md or package docstring. session/ joins
# once its README is rewritten for the session machine (issue #32).
MODULE_INDEXED = ("schemas", "session", "brain", "server", "clients", "voice")


def names_module(text: str, folder: str, module: str) -> bool:
    """Whether `text` names `module` (a module of `folder`): `module`, `module.py`, or a dotted or
    slashed path ending in it (`server.mirror.fold`, `server/mirror/fold.py`)."""
    dotted = folder.replace("/", ".")
    return re.search(rf"`{re.escape(module)}(\.py)?`|(?<![\w./-]){re.escape(module)}\.py\b"
                     rf"|{re.escape(dotted)}\.{re.escape(module)}\b|{re.escape(folder)}/{re.escape(module)}\.py",
                     text) is not None


def test_a_module_is_named_by_its_name_in_backticks_or_its_path() -> None:
    assert names_module("- `fold`: the running state", "server/mirror", "fold")
    assert names_module("see server/mirror/fold.py", "server/mirror", "fold")
    assert names_module("`server.mirror.fold` folds", "server/mirror", "fold")
    assert not names_module("folds the changes", "server/mirror", "fold")
    assert not names_module("`fold_all`: all", "server/mirror", "fold")


def indexed_modules() -> list[pathlib.Path]:
    return sorted(path for package in MODULE_INDEXED for path in (ROOT / package).rglob("*.py")
                  if path.name != "__init__.py" and "/bin/" not in path.as_posix())


@pytest.mark.parametrize("module", indexed_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_module_is_listed_where_its_package_says_what_lives_there(module: pathlib.Path) -> None:
    folder = module.parent
    where = folder.relative_to(ROOT).as_posix()
    said = "README.md or __init__.py" if (folder / "__init__.py").exists() else "README.md"
    assert names_module(documentation(folder), where, module.stem), (
        f"{module.relative_to(ROOT)} is not listed in {where}/{said}: say there what `{module.stem}` does")
