"""Which version of a scenario a new session plays: `PackCatalog`.

Every session creation asks the store for the newest version's number (one indexed read in Neo4j,
a dictionary look-up on disk) and keeps the validated pack of each number it has seen, so that a
version published on any node serves the next session on every node, without a restart, and a pack
is parsed once per node. Each version a session may use is registered with
`schemas.scenario.register_version`, where every part that reads the pack by name finds it.

While the store is unreachable, new sessions play the newest version this node knows (or the
shipped pack): a store outage must not stop learners from practising.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict

from schemas.scenario import SCENARIO_ID, Scenario, available_scenarios, load_scenario, pack_problems, register_version
from server.studio.store import PackStore, PackStoreError

__all__ = ["PackCatalog", "checked", "register_stored", "shipped_manifest"]

log = logging.getLogger(__name__)


def shipped_manifest(scenario: str) -> str:
    """A shipped pack's manifest as an author would write it (without the `version` the studio sets)."""
    return json.dumps(load_scenario(scenario).model_dump(mode="json", exclude={"version"}), ensure_ascii=False)


PREVIEWS = 64  # drafts being tried on this node: the studio's try-it panels, the oldest forgotten first


class PackCatalog:
    def __init__(self, store: PackStore) -> None:
        self.store = store
        self._current: dict[str, Scenario] = {}  # the newest version seen, by scenario
        self._previews: OrderedDict[str, Scenario] = OrderedDict()  # try-it copies of drafts, by their id

    def preview(self, pack: Scenario) -> str:
        """A draft, validated, made playable on this node as its own scenario `try-<digest>` (version 1),
        so that the studio's try-it panel plays it without publishing it. The id names the manifest, so
        a changed draft is a new preview, and nothing a learner plays changes."""
        digest = hashlib.sha256(pack.model_dump_json().encode()).hexdigest()[:16]
        name = f"try-{digest}"
        if name not in self._previews:
            try:
                copy = load_scenario(name, 1)
            except KeyError:
                copy = register_version(pack.model_copy(update={"scenario": name, "version": 1}))
            self._previews[name] = copy
            while len(self._previews) > PREVIEWS:
                self._previews.popitem(last=False)
        return name

    async def current(self, scenario: str) -> Scenario | None:
        """The version a new session of `scenario` plays, registered; None for no such scenario."""
        if not SCENARIO_ID.fullmatch(scenario):
            return None  # no pack has such an id, and it names no file or node to look for
        if scenario in self._previews:
            return self._previews[scenario]
        shipped = scenario in available_scenarios()
        known = self._current.get(scenario)
        try:
            latest = await self.store.latest(scenario)
            if latest == 0:
                return load_scenario(scenario) if shipped else None
            if known is not None and known.version == latest:
                return known
            found = await self.version(scenario, latest)
        except PackStoreError as exc:
            log.warning("pack store unreachable, or its newest version unusable: new sessions play the "
                        "version this node knows", extra={"scenario": scenario, "error": str(exc)})
            return known or (load_scenario(scenario) if shipped else None)
        if found is not None:
            self._current[scenario] = found
        return found

    async def version(self, scenario: str, number: int) -> Scenario | None:
        """Version `number` of `scenario`, registered (a session rebuilt after a restart needs its
        own); None when it is not stored. PackStoreError when the store cannot say."""
        try:
            return load_scenario(scenario, number)
        except KeyError:
            pass
        stored = await self.store.version(scenario, number)
        if stored is None:
            return None
        return register_stored(scenario, stored.manifest, number)


def register_stored(scenario: str, manifest: str, number: int) -> Scenario:
    """A stored version, validated and registered, unless this process has it already."""
    try:
        return load_scenario(scenario, number)
    except KeyError:
        return register_version(checked(scenario, manifest, number))


def checked(scenario: str, manifest: str, number: int) -> Scenario:
    """A stored manifest validated again as version `number` (it was when it was published)."""
    try:
        data = json.loads(manifest)
    except ValueError as exc:
        raise PackStoreError(f"stored {scenario} version {number} is not JSON: {exc}") from exc
    pack, problems = pack_problems(data, version=number)
    if pack is None or pack.scenario != scenario:
        raise PackStoreError(f"stored {scenario} version {number} no longer validates: "
                             f"{'; '.join(map(str, problems)) or 'its scenario id differs'}")
    return pack
