"""Where studio packs are kept: the `PackStore` protocol and its disk implementation.

A scenario has at most one draft (the manifest an author is editing) and any number of published
versions, numbered 1, 2, 3... in the order they were published; the newest is the one new sessions
play. A shipped pack is version 1 and lives in the package, read-only: the store's first version of
a shipped scenario is 2 (`floor`). A rollback publishes a copy of an older version as a new one,
so the numbers only rise and a session's version always names the same manifest.

On disk, under `KNOWLEDGE_DIR/studio/<scenario>/`: `draft.json` and `v<N>.json`. A version file is
created with `os.link` from a complete temporary file, which fails if the number is taken: two
publishes cannot both get it. One process owns the folder (without Neo4j the server runs alone).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio

__all__ = ["DiskPackStore", "PackConflict", "PackNotFound", "PackStore", "PackStoreError", "StoredDraft",
           "StoredVersion"]


class PackStoreError(Exception):
    """The store could not answer (Neo4j unreachable, a disk error): nothing was changed."""


class PackConflict(Exception):
    """The stored state forbids the request (the scenario exists already, a version number was taken)."""


class PackNotFound(Exception):
    """No such scenario, draft or version."""


@dataclass(frozen=True, slots=True)
class StoredVersion:
    scenario: str
    version: int
    manifest: str  # the manifest's JSON text, as validated when it was published
    published_at: float
    from_version: int | None = None  # a rollback's source


@dataclass(frozen=True, slots=True)
class StoredDraft:
    scenario: str
    manifest: str
    updated_at: float


class PackStore(Protocol):
    """The studio's storage; every method changes all or nothing."""

    async def latest(self, scenario: str) -> int:
        """The newest published version's number, 0 when none is stored. Called at every session
        creation: it must be cheap."""
        ...

    async def version(self, scenario: str, number: int) -> StoredVersion | None: ...

    async def versions(self, scenario: str) -> list[StoredVersion]:
        """Every stored version, oldest first."""
        ...

    async def draft(self, scenario: str) -> StoredDraft | None: ...

    async def scenarios(self) -> list[str]:
        """Every scenario with a draft or a version stored, sorted."""
        ...

    async def save_draft(self, scenario: str, manifest: str, now: float, *, create: bool) -> None:
        """Store the draft; `create` refuses (PackConflict) when the scenario has a draft or a version."""
        ...

    async def publish(self, scenario: str, now: float, *, floor: int) -> StoredVersion:
        """The draft as the next version (above `floor` and every stored one); the draft is gone after.
        PackNotFound without a draft."""
        ...

    async def republish(self, scenario: str, number: int, now: float, *, floor: int,
                        manifest: str | None = None) -> StoredVersion:
        """Version `number` (or `manifest`, the shipped one's text) published again as the next version."""
        ...


_VERSION_FILE = "v{:04d}.json"


def _names_a_folder(scenario: str) -> bool:
    """Whether `scenario` can be a folder under the store's root: printable, no separator, not `.`/`..`."""
    return scenario not in ("", ".", "..") and scenario.isprintable() and not any(c in scenario for c in "/\\")


class DiskPackStore:
    """Packs in files under `root/studio/`. Blocking file work runs in a worker thread."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root) / "studio"
        self._lock = threading.Lock()  # one publish at a time in this process
        self._latest: dict[str, int] = {}  # written through: this process is the folder's only writer

    def _folder(self, scenario: str) -> Path:
        if not _names_a_folder(scenario):
            raise PackNotFound(f"{scenario[:64]!r} names no folder")  # never one outside `root`, nor one the OS refuses
        return self.root / scenario

    async def latest(self, scenario: str) -> int:
        if not _names_a_folder(scenario):
            return 0  # nothing is stored under a name no folder has
        known = self._latest.get(scenario)
        if known is None:
            known = self._latest[scenario] = await anyio.to_thread.run_sync(self._scan_latest, scenario)
        return known

    def _scan_latest(self, scenario: str) -> int:
        folder = self._folder(scenario)
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise PackStoreError(f"cannot read {folder}: {exc}") from exc
        numbers = [int(n[1:-5]) for n in names if n.startswith("v") and n.endswith(".json") and n[1:-5].isdigit()]
        return max(numbers, default=0)

    async def version(self, scenario: str, number: int) -> StoredVersion | None:
        if not _names_a_folder(scenario):
            return None
        return await anyio.to_thread.run_sync(self._read_version, scenario, number)

    def _read_version(self, scenario: str, number: int) -> StoredVersion | None:
        path = self._folder(scenario) / _VERSION_FILE.format(number)
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise PackStoreError(f"cannot read {path}: {exc}") from exc
        return StoredVersion(scenario=scenario, version=number, manifest=data["manifest"],
                             published_at=float(data["published_at"]), from_version=data.get("from_version"))

    async def versions(self, scenario: str) -> list[StoredVersion]:
        if not _names_a_folder(scenario):
            return []

        def read() -> list[StoredVersion]:
            found = (self._read_version(scenario, n) for n in range(1, self._scan_latest(scenario) + 1))
            return [v for v in found if v is not None]

        return await anyio.to_thread.run_sync(read)

    async def draft(self, scenario: str) -> StoredDraft | None:
        if not _names_a_folder(scenario):
            return None
        return await anyio.to_thread.run_sync(self._read_draft, scenario)

    def _read_draft(self, scenario: str) -> StoredDraft | None:
        path = self._folder(scenario) / "draft.json"
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise PackStoreError(f"cannot read {path}: {exc}") from exc
        return StoredDraft(scenario=scenario, manifest=data["manifest"], updated_at=float(data["updated_at"]))

    async def scenarios(self) -> list[str]:
        try:
            return sorted(p.name for p in self.root.iterdir() if p.is_dir())
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise PackStoreError(f"cannot read {self.root}: {exc}") from exc

    def _write_new(self, path: Path, data: dict[str, object], *, exclusive: bool) -> None:
        """Write `data` to `path` whole: a temporary file, then a link (exclusive) or a rename."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out)
            if exclusive:
                os.link(tmp, path)
            else:
                os.replace(tmp, path)
        except FileExistsError:
            raise PackConflict(f"{path.name} exists already") from None
        except OSError as exc:
            raise PackStoreError(f"cannot write {path}: {exc}") from exc
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    async def save_draft(self, scenario: str, manifest: str, now: float, *, create: bool) -> None:
        def save() -> None:
            with self._lock:
                if create and (self._read_draft(scenario) is not None or self._scan_latest(scenario)):
                    raise PackConflict(f"{scenario!r} exists already")
                self._write_new(self._folder(scenario) / "draft.json",
                                {"manifest": manifest, "updated_at": now}, exclusive=False)

        await anyio.to_thread.run_sync(save)

    async def publish(self, scenario: str, now: float, *, floor: int) -> StoredVersion:
        def publish() -> StoredVersion:
            with self._lock:
                draft = self._read_draft(scenario)
                if draft is None:
                    raise PackNotFound(f"{scenario!r} has no draft to publish")
                stored = self._add(scenario, draft.manifest, now, floor, None)
                (self._folder(scenario) / "draft.json").unlink()
                return stored

        return await anyio.to_thread.run_sync(publish)

    async def republish(self, scenario: str, number: int, now: float, *, floor: int,
                        manifest: str | None = None) -> StoredVersion:
        def republish() -> StoredVersion:
            with self._lock:
                text = manifest
                if text is None:
                    old = self._read_version(scenario, number)
                    if old is None:
                        raise PackNotFound(f"{scenario!r} has no version {number}")
                    text = old.manifest
                return self._add(scenario, text, now, floor, number)

        return await anyio.to_thread.run_sync(republish)

    def _add(self, scenario: str, manifest: str, now: float, floor: int, from_version: int | None) -> StoredVersion:
        number = max(self._scan_latest(scenario), floor) + 1
        self._write_new(self._folder(scenario) / _VERSION_FILE.format(number),
                        {"manifest": manifest, "published_at": now, "from_version": from_version}, exclusive=True)
        self._latest[scenario] = number
        return StoredVersion(scenario=scenario, version=number, manifest=manifest, published_at=now,
                             from_version=from_version)
