"""Layers only point down, on the transitive import graph: schemas imports nothing of ours; session and
brain ignore each other, however many hops apart; voice uses brain's transport and nothing else of brain.

The graph (tests/import_graph.py, the one tests/test_structure.py checks for cycles) has one node per
module of ours and an edge for every import the module can run: at the top, inside a function or under
`TYPE_CHECKING`, absolute or relative, and `importlib.import_module` or `__import__` called with a
literal name. A dynamic import of a computed name cannot be checked, so it is refused outright. An
import is an edge to the module named only: what a package's `__init__` re-exports is that package's own
dependency (its `__init__` is a node like any other module and is checked as one).

Two tables hold the architecture. `ALLOWED` lists, for each package, the packages its modules may import
directly (`ANY` module, or only the modules named). `NEVER_REACHES` lists what a package must not reach
by any path. The tables are checked against each other, so a direct edge that opens a forbidden path
(say session → voice while voice → brain) cannot be allowed by accident.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping

import pytest

from tests.import_graph import Graph, import_graph

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "session", "brain", "server", "clients", "voice", "privates")
ANY = frozenset({"*"})

# Which packages each package's modules may import directly; a set of module names narrows it.
ALLOWED: dict[str, dict[str, frozenset[str]]] = {
    "schemas": {},
    "session": {"schemas": ANY},  # the session declares what it needs from a brain as a Protocol
    "brain": {"schemas": ANY, "privates": ANY},  # the SDK's and aiohttp's internals, in one place
    # brain's transport only (its retry policy), and aiohttp's read pause for the paced speech reads
    "voice": {"schemas": ANY, "brain": frozenset({"brain.transport"}), "privates": frozenset({"privates"})},
    "clients": {"schemas": ANY, "session": ANY},  # the bots' checker reuses the pure rule tables
    "server": {"schemas": ANY, "session": ANY, "brain": ANY, "voice": ANY, "clients": ANY, "privates": ANY},
    "privates": {},  # third-party internals only: nothing of ours
}
# What a package must not reach by any path of imports.
NEVER_REACHES: dict[str, frozenset[str]] = {
    "schemas": frozenset(PACKAGES) - {"schemas"},
    "session": frozenset({"brain", "server", "clients", "voice"}),
    "brain": frozenset({"session", "server", "clients", "voice"}),
    "voice": frozenset({"session", "server", "clients"}),
    "clients": frozenset({"server", "brain", "voice"}),
    "privates": frozenset(PACKAGES) - {"privates"},
}


def reachable(graph: Graph, start: str) -> dict[str, str]:
    """Every module reachable from `start`, each with the path of imports that first reached it."""
    paths = {start: start}
    todo = [start]
    while todo:
        current = todo.pop()
        for nxt in sorted(graph.edges.get(current, ())):
            if nxt not in paths:
                paths[nxt] = f"{paths[current]} -> {nxt}"
                todo.append(nxt)
    return paths


def direct_violations(graph: Graph, allowed: Mapping[str, Mapping[str, frozenset[str]]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.edges.items()):
        package = module.split(".")[0]
        for target in sorted(targets):
            other = target.split(".")[0]
            if other == package:
                continue
            permitted = allowed.get(package, {}).get(other)
            if permitted is None or (permitted != ANY and target not in permitted):
                found.append(f"{module} -> {target}")
    return found


def transitive_violations(graph: Graph, never: Mapping[str, frozenset[str]]) -> list[str]:
    found = []
    for module in sorted(graph.edges):
        forbidden = never.get(module.split(".")[0], frozenset())
        found.extend(path for target, path in reachable(graph, module).items() if target.split(".")[0] in forbidden)
    return found


def check(graph: Graph) -> list[str]:
    return [*graph.refused, *direct_violations(graph, ALLOWED), *transitive_violations(graph, NEVER_REACHES)]


# ------------------------------------------------------------------------------ the code base


@pytest.fixture(scope="module")
def ours() -> Graph:
    return import_graph(ROOT, PACKAGES)


def test_every_package_is_in_both_tables_and_has_modules(ours: Graph) -> None:
    assert set(ALLOWED) == set(PACKAGES)
    assert set(NEVER_REACHES) <= set(PACKAGES)
    for package in PACKAGES:
        assert any(m.split(".")[0] == package for m in ours.edges), f"no modules found in {package}"


def test_the_allowed_edges_open_no_forbidden_path() -> None:
    """The closure of the allowed package edges must not reach what NEVER_REACHES forbids."""
    package_graph = Graph({p: frozenset(ALLOWED[p]) for p in PACKAGES}, ())
    for package, forbidden in NEVER_REACHES.items():
        opened = {t: path for t, path in reachable(package_graph, package).items() if t in forbidden}
        assert opened == {}, f"ALLOWED lets {package} reach {sorted(opened)}"


def test_the_code_keeps_the_layers_on_the_transitive_graph(ours: Graph) -> None:
    assert check(ours) == []


# ------------------------------------------------------------------------------ the checker can fail


def _tree(tmp_path: pathlib.Path, files: Mapping[str, str]) -> Graph:
    for name in PACKAGES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    for relative, text in files.items():
        (tmp_path / relative).write_text(text)
    return import_graph(tmp_path, PACKAGES)


def test_a_path_through_an_allowed_package_is_caught(tmp_path: pathlib.Path) -> None:
    """session -> voice -> brain: session reaches brain in two hops."""
    graph = _tree(tmp_path, {"session/actor.py": "def f():\n    import voice.speech\n",
                             "voice/speech.py": "from brain.transport import ChatTransport\n",
                             "brain/transport.py": "from ..schemas import frames\n",
                             "schemas/frames.py": ""})
    assert "session.actor -> voice.speech -> brain.transport" in transitive_violations(graph, NEVER_REACHES)
    assert direct_violations(graph, ALLOWED) == ["session.actor -> voice.speech"]


def test_voice_may_use_brain_transport_and_nothing_else_of_brain(tmp_path: pathlib.Path) -> None:
    graph = _tree(tmp_path, {"voice/speech.py": "from brain import transport\nfrom brain.rules_vendor import X\n",
                             "voice/other.py": "from brain import RuleBasedVendor\n",
                             "brain/transport.py": "", "brain/rules_vendor.py": ""})
    assert graph.edges["voice.speech"] == {"brain.transport", "brain.rules_vendor"}
    assert graph.edges["voice.other"] == {"brain"}  # a name the package re-exports: its __init__ runs
    assert direct_violations(graph, ALLOWED) == ["voice.other -> brain", "voice.speech -> brain.rules_vendor"]


def test_dynamic_imports_are_edges_or_refused(tmp_path: pathlib.Path) -> None:
    graph = _tree(tmp_path, {
        "session/late.py": "import importlib\ndef f():\n    return importlib.import_module('brain.llm')\n",
        "session/hidden.py": "def f(name):\n    return __import__(name)\n",
        "brain/llm.py": "",
    })
    assert graph.edges["session.late"] == {"brain.llm"}
    assert "session.late -> brain.llm" in transitive_violations(graph, NEVER_REACHES)
    assert [r.split(": ", 1)[1] for r in graph.refused] == ["dynamic import of a computed name"]
    assert graph.refused[0].startswith("session/hidden.py:2")
