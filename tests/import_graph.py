"""The project's import graph, read from the source with `ast`: what tests/test_structure.py (no cycles)
and tests/test_layers.py (layers point down) both check.

An edge goes from a module to each module of ours it imports, wherever the import stands: at the top,
inside a function (a lazy import still ties the two modules together) or under `TYPE_CHECKING`;
absolute or relative; and `importlib.import_module` or `__import__` called with a literal name. A
dynamic import of a computed name cannot be followed, so it is listed as refused. An edge goes to the
module named, not to the packages above it that Python also runs first: a package's `__init__`
re-exports would otherwise tie every package to its own modules (the `__init__` is a module of its
own, with its own edges).
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Graph", "Imports", "import_graph", "imports_of", "module_name", "project_modules", "resolve"]

DYNAMIC = {"import_module", "__import__"}  # importlib.import_module, builtins.__import__


@dataclass(frozen=True)
class Imports:
    targets: frozenset[str]  # modules of ours
    computed: tuple[int, ...]  # lines of dynamic imports whose name is computed


@dataclass(frozen=True)
class Graph:
    edges: Mapping[str, frozenset[str]]  # module -> modules of ours it imports
    refused: tuple[str, ...]  # "path:line: why", for imports the graph cannot hold


def module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: pathlib.Path, packages: Iterable[str]) -> dict[str, pathlib.Path]:
    return {module_name(path, root): path for package in packages for path in sorted((root / package).rglob("*.py"))}


def resolve(name: str, modules: Mapping[str, pathlib.Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _dynamic_name(call: ast.Call) -> str | None:
    """The literal name a dynamic import asks for, "" for a computed one, None for any other call."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in DYNAMIC:
        return None
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""


def imports_of(module: str, path: pathlib.Path, modules: Mapping[str, pathlib.Path]) -> Imports:
    is_package = path.name == "__init__.py"
    names: list[str] = []
    computed: list[int] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop] if drop else anchor
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            # `from pkg import name` imports the submodule pkg.name when there is one, else pkg.
            names.extend(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and (dynamic := _dynamic_name(node)) is not None:
            if dynamic:
                names.append(dynamic)
            else:
                computed.append(node.lineno)
    targets = frozenset(r for n in names if (r := resolve(n, modules)) is not None and r != module)
    return Imports(targets, tuple(sorted(computed)))


def import_graph(root: pathlib.Path, packages: Iterable[str]) -> Graph:
    modules = project_modules(root, packages)
    edges: dict[str, frozenset[str]] = {}
    refused: list[str] = []
    for name, path in modules.items():
        found = imports_of(name, path, modules)
        edges[name] = found.targets
        refused.extend(f"{path.relative_to(root)}:{line}: dynamic import of a computed name" for line in found.computed)
    return Graph(edges, tuple(refused))
