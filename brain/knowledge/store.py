"""Where uploaded playbooks live when there is no Neo4j: JSON files on disk.

One folder per scenario under the store's root (`KNOWLEDGE_DIR`, default `var/knowledge`):

    <root>/<scenario>/v1.json, v2.json, ...   every version ever uploaded, chunks included
    <root>/<scenario>/active                  the name of the active version

Seed 004 §3.3: one active playbook per scenario. `add()` refuses a second one unless asked to
replace it; replacing activates the new version and keeps the old file, so a report that cited
an old chunk can still show it (`chunk()` looks in every version). Files are written to a
temporary name and renamed, so a crash leaves the old state or the new one, never half a file.

`PlaybookStore` is the protocol; `server/playbooks.py` implements it on Neo4j. Both are called
from a worker thread: the methods block.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Protocol

from schemas.knowledge import Chunk, Playbook

__all__ = ["DiskPlaybookStore", "MemoryPlaybookStore", "PlaybookConflict", "PlaybookStore"]

_SCENARIO = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


class PlaybookConflict(Exception):
    """The scenario already has an active playbook and the upload did not ask to replace it."""

    def __init__(self, active: Playbook) -> None:
        super().__init__(f"scenario {active.scenario!r} already has playbook {active.version}")
        self.active = active


class PlaybookStore(Protocol):
    def active(self, scenario: str) -> Playbook | None: ...

    def next_version(self, scenario: str) -> str: ...

    def add(self, playbook: Playbook, *, replace: bool) -> None: ...

    def chunk(self, scenario: str, chunk_id: str) -> Chunk | None: ...

    def scenarios(self) -> list[str]: ...

    def close(self) -> None:
        """Let go of what the store holds open (a no-op for the stores here)."""
        ...


class MemoryPlaybookStore:
    """Playbooks in a dict: for a brain used as a library, and for tests. Lost on exit."""

    def __init__(self) -> None:
        self._versions: dict[str, list[Playbook]] = {}

    def active(self, scenario: str) -> Playbook | None:
        versions = self._versions.get(scenario)
        return versions[-1] if versions else None

    def next_version(self, scenario: str) -> str:
        return f"v{len(self._versions.get(scenario, ())) + 1}"

    def add(self, playbook: Playbook, *, replace: bool) -> None:
        current = self.active(playbook.scenario)
        if current is not None and not replace:
            raise PlaybookConflict(current)
        self._versions.setdefault(playbook.scenario, []).append(playbook)

    def chunk(self, scenario: str, chunk_id: str) -> Chunk | None:
        for playbook in reversed(self._versions.get(scenario, ())):
            for chunk in playbook.chunks:
                if chunk.chunk_id == chunk_id:
                    return chunk
        return None

    def scenarios(self) -> list[str]:
        return sorted(self._versions)

    def close(self) -> None:
        """Nothing to close."""


class DiskPlaybookStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Nothing to close: each call opens and closes its own files."""

    def _folder(self, scenario: str) -> Path:
        if not _SCENARIO.match(scenario):
            raise ValueError(f"not a scenario id: {scenario!r}")
        return self.root / scenario

    def _versions(self, scenario: str) -> list[Path]:
        folder = self._folder(scenario)
        if not folder.is_dir():
            return []
        files = [p for p in folder.glob("v*.json") if p.stem[1:].isdigit()]
        return sorted(files, key=lambda p: int(p.stem[1:]))

    def _read(self, path: Path) -> Playbook:
        return Playbook.model_validate_json(path.read_bytes())

    def active(self, scenario: str) -> Playbook | None:
        pointer = self._folder(scenario) / "active"
        if not pointer.is_file():
            return None
        return self._read(self._folder(scenario) / f"{pointer.read_text('utf-8').strip()}.json")

    def next_version(self, scenario: str) -> str:
        versions = self._versions(scenario)
        return f"v{int(versions[-1].stem[1:]) + 1 if versions else 1}"

    def add(self, playbook: Playbook, *, replace: bool) -> None:
        with self._lock:
            current = self.active(playbook.scenario)
            if current is not None and not replace:
                raise PlaybookConflict(current)
            folder = self._folder(playbook.scenario)
            folder.mkdir(parents=True, exist_ok=True)
            _write(folder / f"{playbook.version}.json", playbook.model_dump_json().encode())
            _write(folder / "active", playbook.version.encode())

    def chunk(self, scenario: str, chunk_id: str) -> Chunk | None:
        for path in reversed(self._versions(scenario)):
            for chunk in self._read(path).chunks:
                if chunk.chunk_id == chunk_id:
                    return chunk
        return None

    def scenarios(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "active").is_file())


def _write(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
