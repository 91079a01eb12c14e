"""Layers only point down: schemas imports nothing of ours; session and brain ignore each other."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = {"schemas", "session", "brain", "server", "clients", "voice"}
FORBIDDEN = {
    "schemas": OURS - {"schemas"},
    "session": {"brain", "server", "clients"},
    "brain": {"session", "server", "clients", "voice"},
    "voice": {"session", "server", "clients"},  # speech backends: schemas and brain's transport only
}


def imported_packages(path: pathlib.Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_lies_below_it(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules found in {package}"
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[package]) for path in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}
